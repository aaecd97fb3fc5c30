#!/usr/bin/env bash
# Fills the example repository with the bundled fixtures (tests/fixtures, unpacked
# when CMake configures): mlp -> model_repository/mlp, lm -> model_repository/llm.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
FX="${1:-$HERE/../../tests/fixtures}"
cp "$FX/mlp/mlp.pte" "$HERE/model_repository/mlp/1/model.pte"
cp "$FX/mlp/aoti_cuda_blob.ptd" "$HERE/model_repository/mlp/1/"
cp "$FX/lm/lm.pte" "$HERE/model_repository/llm/1/model.pte"
cp "$FX/lm/aoti_cuda_blob.ptd" "$HERE/model_repository/llm/1/"
echo "ready: tritonserver --model-repository=$HERE/model_repository --backend-directory=<build>/triton/backends"
