#!/usr/bin/env bash
# The int4 work on the GPU machine, in one call: export the int4 fixture models (background),
# torch test vectors + the GPU int4 tests, then (GPU otherwise idle) our benchmark and torch's,
# then the conformance suite over the fresh exports (and the checked-in fixtures).
#
#   bash tools/int4/run_on_device.sh BIN_DIR SRC_DIR OUT_DIR [STEPS]
#
#   BIN_DIR   libaoti_cuda.so*, aoti_cuda_gpu_tests, aoti_cuda_int4_bench, aoti_cuda_read_bw (built elsewhere),
#             side by side or as in a build folder packed by tools/contrib/gpu-machine/device-pack.sh
#             (tests/, bench/)
#   SRC_DIR   a checkout with this branch's tools/ (the exporter runs from there; its .whl/
#             wheels are taken from the current directory's .whl/ when SRC_DIR has none)
#   STEPS     comma list of export,vectors,variants,bench,readbw,conformance,ncu   [export,vectors,bench,conformance]
#   INT4_FIXTURES env: extra fixture roots for the conformance step (default: the fresh exports)
#   BUILD_ROOT  env: the source path the test binaries were configured with (fixtures are
#               looked up there; it is symlinked to the current directory when missing)
set -uo pipefail
BIN=$(cd "$1" && pwd); SRC=$(cd "$2" && pwd); OUT=$3; STEPS=${4:-export,vectors,bench,conformance}
mkdir -p "$OUT"
has() { [[ ",$STEPS," == *",$1,"* ]]; }
# A binary of BIN_DIR, flat or in a build folder's layout.
bin() { for d in "$BIN" "$BIN/tests" "$BIN/bench"; do [[ -x "$d/$1" ]] && { echo "$d/$1"; return; }; done; echo "$BIN/$1"; }
export LD_LIBRARY_PATH="$BIN:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
if [[ -n "${BUILD_ROOT:-}" && ! -e "$BUILD_ROOT" ]]; then mkdir -p "$(dirname "$BUILD_ROOT")"; ln -s "$PWD" "$BUILD_ROOT"; fi
[[ -e "$SRC/.whl" ]] || ln -s "$PWD/.whl" "$SRC/.whl"
LOG="$OUT/main.log"
exec > >(tee -a "$LOG") 2>&1
date -u; nvidia-smi -L
t0=$(date +%s)
export_pid=
if has export; then
  AOTI_EXPORT_WORK=/tmp/int4_export bash "$SRC/tools/export/run_on_device.sh" "$OUT/export" mlp_int4,lm_int4 2 230 \
    > /tmp/int4_export.log 2>&1 &
  export_pid=$!
fi
if has vectors; then
  echo "== vectors ($(($(date +%s) - t0)) s)"
  timeout 120 python3 "$SRC/tools/int4/gen_vectors.py" /tmp/int4_vectors || echo "gen_vectors FAILED"
  echo "== GPU int4 tests ($(($(date +%s) - t0)) s)"
  AOTI_CUDA_INT4_VECTORS=/tmp/int4_vectors timeout 150 "$(bin aoti_cuda_gpu_tests)" -tc='int4pack*' > "$OUT/gpu_tests.log" 2>&1
  echo "gpu tests exit $?"; grep -E "SKIPPED|cases run|PyTorch cases|ERROR|error|FAILED|test cases|assertions" "$OUT/gpu_tests.log" | head -30
fi
if [[ -n "$export_pid" ]]; then
  echo "== waiting for the export ($(($(date +%s) - t0)) s)"
  wait "$export_pid"; echo "export exit $?"; tail -12 /tmp/int4_export.log
fi
if has variants; then
  echo "== tuning variants ($(($(date +%s) - t0)) s)"
  timeout 120 "$(bin aoti_cuda_int4_bench)" --variants --iters 15 --m 1,4,8,16 \
    --shapes 3072x2048,2048x2048,11264x2048,2048x5632,32000x2048
fi
if has bench; then
  echo "== our kernel ($(($(date +%s) - t0)) s)"
  timeout 150 "$(bin aoti_cuda_int4_bench)" --json "$OUT/ours.json"
  echo "== torch ($(($(date +%s) - t0)) s)"
  timeout 150 python3 "$SRC/tools/int4/bench_torch.py" "$OUT/torch.json"
  python3 "$SRC/tools/int4/report.py" "$OUT/ours.json" "$OUT/torch.json" "$OUT/int4.json" > "$OUT/int4_tables.md" &&
    cat "$OUT/int4_tables.md"
fi
if has readbw && [[ -x "$(bin aoti_cuda_read_bw)" ]]; then
  echo "== streaming read ($(($(date +%s) - t0)) s)"
  timeout 30 "$(bin aoti_cuda_read_bw)"
fi
if has ncu; then
  # M = 1, one shape per run: launches 0-2 are the warm-ups, launch 3 the timed shim call (--iters 1).
  # ncu flushes the caches before the profiled launch (its default cache control), so the weights
  # come from DRAM; the clocks are left alone.
  for shape in ${INT4_NCU_SHAPES:-2048x2048 11264x2048 32000x2048 4096x4096}; do
    echo "== ncu, M=1 $shape ($(($(date +%s) - t0)) s)"
    timeout 60 ncu --clock-control none -k regex:int4_gemv --launch-skip 3 --launch-count 1 \
      --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_read.sum.per_second,sm__throughput.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread,launch__grid_size,launch__block_size,sm__warps_active.avg.pct_of_peak_sustained_active \
      "$(bin aoti_cuda_int4_bench)" --iters 1 --no-stream --shapes "$shape" --m 1 2>&1 |
      grep -E "int4_gemv|duration|dram__|sm__|launch__" | head -14
  done
fi
if has conformance; then
  echo "== conformance ($(($(date +%s) - t0)) s)"
  AOTI_CUDA_FIXTURE_DIRS=${INT4_FIXTURES:-/tmp/int4_export/models} timeout 150 "$(bin aoti_cuda_gpu_tests)" \
    -tc='gpu conformance: every fixture*' -s 2>&1 | grep -E "PASS|FAIL|SKIP|ERROR|error|test cases|assertions" | head -60
fi
echo "== done ($(($(date +%s) - t0)) s)"
