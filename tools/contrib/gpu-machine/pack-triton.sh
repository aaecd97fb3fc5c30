#!/usr/bin/env bash
# Packs what tools/contrib/gpu-machine/device-triton.sh needs on the GPU machine:
#   tritonserver.tar.xz   the server of the nvidia-pytriton 0.7.0 wheel, shrunk: the
#                         tritonserver binary and only the bundled libraries it loads
#                         (its ldd closure: libtritonserver.so, libcudart 12.6, dcgm,
#                         curl, ssl, xml2, icu, ...; no Python backend, no libpython),
#                         xz -9: 102 MB -> about 25 MB (the wheel's server: 144 MB)
#   pack/                 libtriton_aoti_cuda.so + libaoti_cuda.so.0 (stripped), the
#                         in-process reference tool, the fake CPU "affine" program
#   serving_bench.py, device-triton.sh
#
#   tools/contrib/gpu-machine/pack-triton.sh BUILD_DIR DEST_DIR [TRITON_VENV]
# BUILD_DIR: configured with -DAOTI_CUDA_BUILD_TRITON=ON -DAOTI_CUDA_BUILD_TESTS=ON and
# built (targets triton_aoti_cuda aoti_cuda_serving_reference aoti_cuda_fake_programs).
# TRITON_VENV: made by scripts/setup-triton.sh (default BUILD_DIR/triton-venv).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
BUILD="$(cd "$1" && pwd)"
mkdir -p "$2"; DEST="$(cd "$2" && pwd)"
VENV="${3:-$BUILD/triton-venv}"
SERVER="$("$VENV/bin/python" -c 'import importlib.util as u, pathlib as p; print(p.Path(list(u.find_spec("pytriton").submodule_search_locations)[0]) / "tritonserver/bin/tritonserver")')"
if [[ ! -f "$DEST/tritonserver.tar.xz" ]]; then
  tmp="$(mktemp -d)"
  mkdir -p "$tmp/tritonserver/bin" "$tmp/tritonserver/lib"
  cp "$SERVER" "$tmp/tritonserver/bin/"
  # The binary's RPATH has $ORIGIN/../lib: the bundled libraries go there.
  ldd "$SERVER" | awk '/nvidia_pytriton.libs/ {print $3}' | xargs -I{} cp {} "$tmp/tritonserver/lib/"
  tar -C "$tmp" -cf - tritonserver | xz -9 -T2 >"$DEST/tritonserver.tar.xz"
  rm -rf "$tmp"
fi
rm -rf "$DEST/pack"
mkdir -p "$DEST/pack/backends/aoti_cuda" "$DEST/pack/bin" "$DEST/pack/fake"
strip -o "$DEST/pack/backends/aoti_cuda/libtriton_aoti_cuda.so" "$BUILD/triton/backends/aoti_cuda/libtriton_aoti_cuda.so"
strip -o "$DEST/pack/backends/aoti_cuda/libaoti_cuda.so.0" "$(readlink -f "$BUILD/libaoti_cuda.so.0")"
strip -o "$DEST/pack/bin/aoti_cuda_serving_reference" "$BUILD/triton/aoti_cuda_serving_reference"
"$BUILD/tests/aoti_cuda_fake_programs" "$DEST/pack/fake" >/dev/null
cp "$ROOT/integrations/triton/tools/serving_bench.py" "$ROOT/tools/contrib/gpu-machine/device-triton.sh" "$DEST/"
du -sh "$DEST"
