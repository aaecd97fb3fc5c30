#!/usr/bin/env bash
# The CUDA-hook checks on the GPU machine (docs/cuda-hooks.md): the load-order
# cases (tests/load_order) in a plain C++ process with libcudart first, and the
# same cases inside a PyTorch process that made its CUDA context first
# (tests/load_order/torch_first.py), with CYCLES load/run/unload cycles per
# bundled program. STAGES picks what runs: "cpp", "torch" or both (default).
# With EXPORT_LARGE=1 it first exports the exporter's mlp_wide model (80 MiB of
# weights; needs the wheels in .whl) for the pinned-staging case; or point
# AOTI_CUDA_LARGE_PROGRAM at any large program.
#
#   tools/contrib/gpu-machine/device-order.sh BUILD OUT [CYCLES]
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/../../.." && pwd)"
BUILD="$(cd "$1" && pwd)"; OUT="$2"; CYCLES="${3:-1000}"
STAGES="${STAGES:-cpp torch}"
mkdir -p "$OUT"
cmake -P "$ROOT/cmake/unpack_fixtures.cmake"
# The test binaries name the fake model libraries by the build path they were configured in.
CONFIGURED_BUILD="$(sed -n 's/^CMAKE_CACHEFILE_DIR:INTERNAL=//p' "$BUILD/CMakeCache.txt")"
if [[ -n "$CONFIGURED_BUILD" && ! -e "$CONFIGURED_BUILD" ]]; then
  mkdir -p "$(dirname "$CONFIGURED_BUILD")" && ln -s "$BUILD" "$CONFIGURED_BUILD"
fi
export LD_LIBRARY_PATH="$BUILD:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export AOTI_CUDA_FIXTURES="$ROOT/tests/fixtures" AOTI_CUDA_ORDER_CYCLES="$CYCLES"
if [[ "${EXPORT_LARGE:-0}" == 1 && -z "${AOTI_CUDA_LARGE_PROGRAM:-}" ]]; then
  AOTI_EXPORT_WORK=/tmp/order-export bash "$ROOT/tools/export/run_on_device.sh" /tmp/order-export-out mlp_wide 1 300 \
    > "$OUT/export.log" 2>&1
  large=/tmp/order-export/models/mlp_wide/mlp_wide.pte
  if [[ -f "$large" ]]; then export AOTI_CUDA_LARGE_PROGRAM="$large"; else echo "mlp_wide export failed" >> "$OUT/export.log"; fi
fi
status=0
if [[ " $STAGES " == *" cpp "* ]]; then
  "$BUILD/tests/aoti_cuda_load_order_tests" -s=false > "$OUT/order-cpp.log" 2>&1
  rc=$?; echo "exit status $rc" >> "$OUT/order-cpp.log"; [[ $rc -eq 0 ]] || status=1
fi
if [[ " $STAGES " == *" torch "* ]]; then
  python3 "$ROOT/tests/load_order/torch_first.py" "$BUILD" -s=false > "$OUT/order-torch.log" 2>&1
  rc=$?; echo "exit status $rc" >> "$OUT/order-torch.log"; [[ $rc -eq 0 ]] || status=1
fi
exit $status
