#!/usr/bin/env bash
# Runs every test: the CPU suites (reader, shim, Module through a fake model
# library), the GPU suites (skipped with a visible message when no GPU is
# present), the same CPU suites under AddressSanitizer + UndefinedBehaviorSanitizer,
# and an install + find_package(aoti_cuda) consumer build.
set -euo pipefail
source "$(dirname "$0")/env.sh"
"$ROOT/scripts/setup-deps.sh"

status=0

echo "== [1/2] build + test (${BUILD_TYPE:-RelWithDebInfo})"
BUILD="$ROOT/build"
configure "$BUILD"
cmake --build "$BUILD" -j "$JOBS"
(cd "$BUILD" && ctest --output-on-failure) || status=1

echo
echo "== [2/2] build + CPU tests under ASan + UBSan"
ASAN_BUILD="$ROOT/build-asan"
BUILD_TYPE=Debug configure "$ASAN_BUILD" -DAOTI_CUDA_SANITIZE=ON -DAOTI_CUDA_BUILD_BENCH=OFF
cmake --build "$ASAN_BUILD" -j "$JOBS" --target aoti_cuda_unit_tests
(cd "$ASAN_BUILD" && ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
   ctest --output-on-failure -R '^unit$') || status=1

echo
echo "== exporter self-test (fixture manifests and imports re-derived from the programs)"
python3 "$ROOT/tools/export/export_models.py" --self-test "$ROOT/tests/fixtures" || status=1

exit $status
