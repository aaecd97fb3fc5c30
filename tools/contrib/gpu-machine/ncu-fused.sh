#!/usr/bin/env bash
# Nsight Compute on the int4 fused linear kernels, one launch of each projection's configuration, as
# aoti_cuda_fused_linear_bench runs them (its second launch of each: the first loads the module). The first run
# (2026-12-05 22:34) matched nothing: -k matches the demangled name unless --kernel-name-base mangled, added since and
# not yet run. What it is for: the
# kernels reach 30-45 % of the streaming bandwidth in a decode chain (docs/benchmarks/int4.md), and the warp-state
# section says what their warps wait on. Run on the device machine from the repository root:
#
#   bash tools/contrib/gpu-machine/ncu-fused.sh PACK OUT_FILE
#
# PACK: the job's pack (default .carry/llmjob/aoti); OUT_FILE: where the report text goes (gzip'd).
set -uo pipefail
PACK=${1:-.carry/llmjob/aoti}
OUT_FILE=${2:?OUT_FILE}
tmp=$(mktemp)
# Template arguments <innerKTiles, U, NP, fuse> of int4_fused_linear_kernel per projection (launch_fused_default):
# q/k/v <8,1,1,1> (o has the same; q/k/v runs first), gate/up with SwiGLU <8,1,2,2>, down <8,4,1,1>, head <8,1,2,1>.
for kernel in qkv:ILi8ELi1ELi1ELi1E gate_up:ILi8ELi1ELi2ELi2E down:ILi8ELi4ELi1ELi1E head:ILi8ELi1ELi2ELi1E; do
  name=${kernel%%:*}
  echo "== $name (${kernel#*:})" >> "$tmp"
  timeout 90 ncu --clock-control none --kernel-name-base mangled -k "regex:int4_fused_linear_kernel${kernel#*:}" --launch-skip 1 \
    --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
    --section LaunchStats --section WarpStateStats --section SchedulerStats \
    "$PACK/bench/aoti_cuda_fused_linear_bench" --reps 1 >> "$tmp" 2>&1
  echo "ncu $name: status $?"
done
gzip -c "$tmp" > "$OUT_FILE"
rm -f "$tmp"
