#!/usr/bin/env bash
# On the GPU machine (PyTorch, CMake, nvcc; no internet), from the repository
# root: builds and installs the Python package from this checkout, then runs
# the Python GPU tests, the overhead benchmark and the example.
#
#   bash tests/python/run_gpu.sh OUT_DIR [WHEEL_DIR]
#
# WHEEL_DIR (default <repo>/.whl, from tests/python/fetch_gpu_deps.sh): wheels of
# nanobind / scikit-build-core installed first when present, and deb/*.deb
# (flatc, the flatbuffers and DLPack headers) unpacked into a temporary prefix
# when this machine lacks them. Writes into OUT_DIR: build.log, pytest.log,
# pytest.xml, bench.log, bench.json, bench-plain.json, example.log, summary.txt.
# Exit status: 0 when the build and every test passed, 1 otherwise (the
# benchmark's targets are reported in bench.log, not enforced).
# Environment: PYTHON (default python3); AOTI_CUDA_TEST_BUILD (a CMake build
# with tests, to run the CPU tests too); AOTI_CUDA_KERNEL_ARCHITECTURES
# (default 90-real: the H100/H200 only, a quicker build).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
if [[ $# -lt 1 ]]; then
  echo "usage: $0 OUT_DIR [WHEEL_DIR]" >&2
  exit 2
fi
mkdir -p "$1"
OUT="$(cd "$1" && pwd)"
WHL="${2:-$ROOT/.whl}"
PY="${PYTHON:-python3}"
if [[ "$PY" == */* ]]; then PY="$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")"; fi
export PYTHONUNBUFFERED=1
for d in /usr/local/cuda/bin /usr/local/cuda-13.0/bin; do
  if [[ -x "$d/nvcc" ]] && ! command -v nvcc >/dev/null 2>&1; then export PATH="$d:$PATH"; fi
done
summary() { echo "$*" | tee -a "$OUT/summary.txt"; }
: >"$OUT/summary.txt"

# 1. Build requirements that travelled as files.
{
  shopt -s nullglob
  wheels=("$WHL"/nanobind-*.whl "$WHL"/scikit_build_core-*.whl "$WHL"/pathspec-*.whl)
  if ((${#wheels[@]})); then
    "$PY" -m pip install -q --no-index --no-deps --disable-pip-version-check "${wheels[@]}"
  fi
  if ! command -v flatc >/dev/null 2>&1 || [[ ! -e /usr/include/dlpack/dlpack.h ]]; then
    debs=("$WHL"/deb/*.deb)
    if ((${#debs[@]})); then
      DEPS=/tmp/aoti_cuda_deps
      mkdir -p "$DEPS"
      for f in "${debs[@]}"; do dpkg-deb -x "$f" "$DEPS"; done
      export PATH="$DEPS/usr/bin:$PATH" CMAKE_PREFIX_PATH="$DEPS/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
      echo "unpacked ${#debs[@]} Debian packages into $DEPS"
    fi
  fi
  "$PY" -c 'import sys, torch, nanobind, scikit_build_core; print(sys.version.split()[0], "torch", torch.__version__, "nanobind", nanobind.__version__, "scikit-build-core", scikit_build_core.__version__)'
} >"$OUT/build.log" 2>&1

# 2. pip install . (no index, no isolation: everything comes from this machine and WHEEL_DIR).
start=$(date +%s)
CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" "$PY" -m pip install -v --no-index --find-links "$WHL" --no-build-isolation \
  --no-deps --force-reinstall --disable-pip-version-check -Cbuild-dir="$ROOT/build/python-gpu" \
  -Ccmake.define.AOTI_CUDA_KERNEL_ARCHITECTURES="${AOTI_CUDA_KERNEL_ARCHITECTURES:-90-real}" "$ROOT" >>"$OUT/build.log" 2>&1
rc=$?
summary "build + install: $([[ $rc -eq 0 ]] && echo ok || echo "FAILED ($rc), see build.log") in $(($(date +%s) - start)) s"
if [[ $rc -ne 0 ]]; then
  tail -30 "$OUT/build.log"
  exit 1
fi

# 3. The tests (from tests/python: the installed package, not the source folder).
(cd "$ROOT/tests/python" && "$PY" -m pytest -v -rs -p no:cacheprovider --junitxml="$OUT/pytest.xml") >"$OUT/pytest.log" 2>&1
test_rc=$?
summary "pytest: $(grep -E ' in [0-9.]+s' "$OUT/pytest.log" | tail -1 | tr -d '=')"

# 4. The overhead benchmark (graphs, then plain calls), and the example.
"$PY" "$ROOT/bench/python_overhead.py" --json "$OUT/bench.json" >"$OUT/bench.log" 2>&1
"$PY" "$ROOT/bench/python_overhead.py" --no-graphs --json "$OUT/bench-plain.json" >>"$OUT/bench.log" 2>&1
summary "bench: $(grep -E 'm\.forward' "$OUT/bench.log" | tr -s ' ' | paste -sd ';' -)"
"$PY" "$ROOT/examples/python/check_export.py" >"$OUT/example.log" 2>&1
example_rc=$?
summary "example check_export.py: exit $example_rc"
[[ $test_rc -eq 0 && $example_rc -eq 0 ]]
