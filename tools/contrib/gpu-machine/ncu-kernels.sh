#!/usr/bin/env bash
# Nsight Compute on the decode kernels that docs/benchmarks/llm.md finds bound by latency or by fixed costs, run
# from the benches of a packed build (no export needed): duration, throughput, occupancy and where the warps stall.
#
#   ncu-kernels.sh BUILD [all|attention|fused_linear]
#
# Kernels are chosen by their demangled names as ncu prints them (template arguments as `(bool)0`, `(int)128`), the
# first launches of each:
#   attention:    the decode attention's two kernels at position 128, qkv form (bf16, head_dim 128, 4 query heads a block),
#                 10 us a layer in the 19:11 trace for about 0.25 MB of K and V;
#   fused_linear: the bf16 and int4 RMSNorm + q/k/v projections (the bench's first rows of each), whose norm
#                 prologue costs +0.45 and +1.3 us over the plain GEMV.
# ncu flushes the caches before each profiled launch (its default), so weights and the KV cache come from DRAM, as
# in a decode step; the clocks are left alone.
set -uo pipefail
BUILD=$1
WHAT=${2:-all}
NCU=${NCU_BIN:-$(command -v ncu || echo /usr/local/cuda/bin/ncu)}
if [[ ! -x $NCU ]]; then
  echo "ncu-kernels: ncu not found (PATH, /usr/local/cuda/bin, NCU_BIN): nothing profiled"
  exit 3
fi
SECTIONS=(--section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats
          --section SchedulerStats --section MemoryWorkloadAnalysis)
status=0
profile() {  # profile NAME_REGEX LAUNCHES CMD...
  local regex=$1 count=$2
  shift 2
  echo "== ncu: the first $count launches matching '$regex' of: $*"
  "$NCU" --clock-control none --kernel-name-base demangled -k "regex:$regex" --launch-count "$count" \
    "${SECTIONS[@]}" "$@" || status=1
}
if [[ $WHAT == all || $WHAT == attention ]]; then
  attention=("$BUILD/bench/aoti_cuda_attention_bench" --decode --qkv-only --positions 128)
  profile 'chunk_kernel<\(bool\)0, \(int\)128, \(int\)4>' 2 "${attention[@]}"
  profile 'combine_kernel<\(bool\)0, \(int\)128>' 2 "${attention[@]}"
fi
if [[ $WHAT == all || $WHAT == fused_linear ]]; then
  fused=("$BUILD/bench/aoti_cuda_fused_linear_bench" --reps 1)
  profile 'fused_linear_kernel<\(bool\)0, \(bool\)0, \(bool\)1>' 2 "${fused[@]}"
  profile 'int4_fused_linear_kernel<\(int\)8, \(int\)1, \(int\)1, \(int\)1>' 2 "${fused[@]}"
fi
exit $status
