#!/usr/bin/env bash
# Makes the environment the Triton backend's server tests (tests/triton) run in:
# a virtual environment (default: <repo>/build/triton-venv; argument 1
# overrides) with tritonclient[http,grpc], numpy and pytest, and Triton
# Inference Server itself from the nvidia-pytriton 0.7.0 wheel (Triton 2.51:
# the tritonserver binary and libtritonserver.so with the libraries they need,
# manylinux_2_35). That wheel is installed with --no-deps: only its bundled
# server is used, not PyTriton's Python code. Prints the environment's python
# on the last line.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${1:-$ROOT/build/triton-venv}"
source "$ROOT/scripts/venv-lib.sh"
ensure_venv "$VENV"
ensure_packages setup-triton 'import tritonclient.http, tritonclient.grpc, numpy, pytest' \
  "tritonclient[http,grpc]" numpy pytest
server="$("$PY" -c 'import importlib.util as u, pathlib as p; s = u.find_spec("pytriton"); print(p.Path(list(s.submodule_search_locations)[0]) / "tritonserver/bin/tritonserver" if s else "")')"
if [[ -z "$server" || ! -x "$server" ]]; then
  echo "[setup-triton] installing nvidia-pytriton==0.7.0 (--no-deps: its tritonserver only) into $VENV" >&2
  "$PY" -m pip install -q --disable-pip-version-check --no-deps "nvidia-pytriton==0.7.0" >&2
fi
echo "$PY"
