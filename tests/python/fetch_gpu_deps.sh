#!/usr/bin/env bash
# Run where PyPI and Debian's archive are reachable (a development machine):
# puts into DEST (default <repo>/.whl, git-ignored) what tests/python/run_gpu.sh
# needs to build the Python package on the GPU machine, which has no internet:
#   - the nanobind and scikit-build-core wheels (pure Python; pathspec beside them),
#     the versions installed here when there are any;
#   - DEST/deb: the Debian packages of flatc, the flatbuffers headers and the
#     DLPack header (unpacked there into a temporary prefix only when missing).
# Carry DEST to the GPU machine (the device tool's `carry`), then run
# tests/python/run_gpu.sh there.
#
#   tests/python/fetch_gpu_deps.sh [DEST]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DEST="${1:-$ROOT/.whl}"
mkdir -p "$DEST/deb"
pinned() {  # NAME -> NAME==<installed version>, or NAME
  local v
  v="$(python3 -c "import importlib.metadata as m; print(m.version('$1'))" 2>/dev/null || true)"
  if [[ -n "$v" ]]; then echo "$1==$v"; else echo "$1"; fi
}
python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: -d "$DEST" \
  "$(pinned nanobind)" "$(pinned scikit-build-core)" "$(pinned pathspec)"
if ! apt-cache show flatbuffers-compiler >/dev/null 2>&1; then apt-get update -qq; fi
(cd "$DEST/deb" && apt-get download flatbuffers-compiler libflatbuffers-dev libdlpack-dev >/dev/null)
ls -l "$DEST" "$DEST/deb"
