#!/usr/bin/env bash
# Makes the Python environment the Python package is built and tested in: a
# virtual environment (default: <repo>/build/pyvenv; argument 1 overrides)
# that also sees the system's packages (torch, where installed), with the
# build and test requirements installed from PyPI when missing: scikit-build-core,
# nanobind, pytest, numpy. Prints the environment's python on the last line.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${1:-$ROOT/build/pyvenv}"
if [[ ! -x "$VENV/bin/python" ]]; then
  mkdir -p "$(dirname "$VENV")"
  python3 -m venv --system-site-packages "$VENV" >&2
fi
PY="$VENV/bin/python"
if ! "$PY" -c 'import scikit_build_core, nanobind, pytest, numpy' >/dev/null 2>&1; then
  echo "[setup-python] installing scikit-build-core, nanobind, pytest, numpy into $VENV" >&2
  "$PY" -m pip install -q --disable-pip-version-check "scikit-build-core>=0.10" "nanobind>=2.4" pytest numpy >&2
fi
echo "$PY"
