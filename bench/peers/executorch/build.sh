#!/usr/bin/env bash
# Builds ExecuTorch v1.2.0's runtime with its CUDA backend, and et_runner, as a benchmark peer.
#   bench/peers/executorch/build.sh [BUILD_DIR]   (default: build-etpeer in the repo root)
# Needs: the `fetch` mirror of github:pytorch/executorch (ET_MIRROR, default /work/.mirror/pytorch+executorch/repo),
# cmake >= 3.24, ninja, the CUDA toolkit, Debian's flatbuffers-compiler + libflatbuffers-dev. See README.md for
# every failure met and the workaround kept here.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../../.." && pwd)"
BUILD="${1:-$ROOT/build-etpeer}"
ET_MIRROR="${ET_MIRROR:-/work/.mirror/pytorch+executorch/repo}"
ET_TAG="${ET_TAG:-v1.2.0}"
JOBS="${JOBS:-2}"
# ExecuTorch's CMake refuses a source tree whose folder is not named exactly `executorch`.
SRC="$BUILD/et/executorch"
mkdir -p "$BUILD"

command -v flatc >/dev/null || { echo "flatc missing: apt-get install flatbuffers-compiler libflatbuffers-dev" >&2; exit 1; }
[[ -f /usr/include/flatbuffers/flatbuffers.h ]] || { echo "flatbuffers headers missing: apt-get install libflatbuffers-dev" >&2; exit 1; }
for d in /usr/local/cuda /usr/local/cuda-13.0; do
  if [[ -x "$d/bin/nvcc" ]] && ! command -v nvcc >/dev/null 2>&1; then export PATH="$d/bin:$PATH"; fi
done

# 1. The tag's tree. The mirror lacks a few large blobs (LFS-like files under examples/), and `git archive` stops at
#    the first missing blob, so examples/, docs/ and website/ (none of them built) stay out.
if [[ ! -f "$SRC/.et_tag" || "$(cat "$SRC/.et_tag")" != "$ET_TAG" ]]; then
  rm -rf "$SRC"; mkdir -p "$SRC"
  git --git-dir="$ET_MIRROR" archive "$ET_TAG" -- . ':!examples' ':!docs' ':!website' | tar -x -C "$SRC"
  [[ -f "$SRC/runtime/executor/method.cpp" ]] || { echo "git archive of $ET_TAG from $ET_MIRROR is incomplete" >&2; exit 1; }
  # 2. Patches (README.md says why each one).
  cp "$HERE/third_party_stub.cmake" "$SRC/third-party/CMakeLists.txt"
  # backends/cuda asks for CMake 3.29 but uses nothing newer than the top level's 3.24 (Debian 12 has 3.25).
  sed -i 's/cmake_minimum_required(VERSION 3.29)/cmake_minimum_required(VERSION 3.24)/' "$SRC/backends/cuda/CMakeLists.txt"
  if [[ "$ET_TAG" != v1.2.0 ]]; then
    # v1.3+ checks that every delegate input/output tensor is marked device_type=CUDA in the program, metadata its
    # exporter writes and 1.2's does not; nothing else in the backend reads it. To run the 1.2 files (the only ones
    # this project exports) with 1.3's runtime, the check is made to pass; README.md records it.
    f="$SRC/backends/cuda/runtime/cuda_backend.cpp"
    needle='device_type == executorch::runtime::etensor::DeviceType::CUDA,'
    grep -qF "$needle" "$f" || { echo "build.sh: the device-type check to relax is not in $f ($ET_TAG)" >&2; exit 1; }
    sed -i "s/$needle/true || $needle/" "$f"
  fi
  echo "$ET_TAG" > "$SRC/.et_tag"
fi

# 3. Configure and build only the runner (and so only the libraries it links).
# (Re)configured every time: cheap, and a changed ET_TAG or option reaches the cache.
cmake -S "$HERE" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DET_SRC="$SRC" -DET_TAG="$ET_TAG" \
  -DCMAKE_PROJECT_INCLUDE="$HERE/torch_stub.cmake" \
  -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90}" -DPYTHON_EXECUTABLE="$(command -v python3)" \
  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache
nice -n 10 cmake --build "$BUILD" --target et_runner -j "$JOBS"
# The shims library is a shared object the runner loads at start; keep it beside the runner.
cp -f "$(find "$BUILD/executorch/backends/cuda" -name 'libaoti_cuda_shims.so' | head -1)" "$BUILD/"
# What the GPU machine needs, stripped (under 1 MB): carry BUILD/pack and pass it as run_on_device.sh's BUILD_ET.
mkdir -p "$BUILD/pack"
strip -o "$BUILD/pack/et_runner" "$BUILD/et_runner"
strip -o "$BUILD/pack/libaoti_cuda_shims.so" "$BUILD/libaoti_cuda_shims.so"
echo "built: $BUILD/et_runner (packed for the GPU machine: $BUILD/pack)"
