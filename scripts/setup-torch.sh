#!/usr/bin/env bash
# Makes the environment the exporter's torch tests run in (tools/export/llm/test_model.py and
# test_decode_op_codegen.py; no GPU needed): a virtual environment (default: <repo>/build/torch-venv; argument 1
# overrides) with the PyTorch and torchao the GPU machine exports with (2.11.0 and 0.17.0), from PyPI. The codegen
# test is the one that catches a lowering that never ends (export_llm.register_operator_fallbacks), so it runs in
# CI rather than only where torch happens to be installed. Prints the environment's python on the last line.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${1:-$ROOT/build/torch-venv}"
source "$ROOT/scripts/venv-lib.sh"
ensure_venv "$VENV"
# A few GB, a few minutes the first time.
ensure_packages setup-torch 'import torch, torchao; assert torch.__version__.startswith("2.11.")' \
  "torch==2.11.0" "torchao==0.17.0"
echo "$PY"
