#!/usr/bin/env bash
# Nsight Compute on the fused linear kernels, one launch of each projection's configuration, as
# aoti_cuda_fused_linear_bench runs them (its second launch of each: the first loads the module). What it is for:
# the int4 kernels reach 30-45 % of the streaming bandwidth in a decode chain and are barely faster on an H200 than
# on an H100 (docs/benchmarks/int4.md), so they are bound on the SM; the warp-state metrics say what their warps
# wait on. The bf16 gate/up kernel is profiled beside them for comparison. Run on the device machine from the
# repository root:
#
#   bash tools/contrib/gpu-machine/ncu-fused.sh BENCH OUT_FILE
#
# BENCH: an aoti_cuda_fused_linear_bench binary; OUT_FILE: where the report text goes (gzip'd).
# Kernels are picked by their mangled names (-k matches the demangled name otherwise, where template arguments
# print as casts); each report ends with the stall reasons as warp cycles per issued instruction.
set -uo pipefail
BENCH=${1:?BENCH}
OUT_FILE=${2:?OUT_FILE}
tmp=$(mktemp)
stalls='regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio'
# Template arguments <innerKTiles, U, NP, fuse> of int4_fused_linear_kernel per projection (launch_fused_default):
# q/k/v <8,1,1,1> (o has the same; q/k/v runs first), gate/up with SwiGLU <8,1,2,2>, down <8,4,1,1>, head <8,1,2,1>.
for kernel in int4_qkv:int4_fused_linear_kernelILi8ELi1ELi1ELi1E int4_gate_up:int4_fused_linear_kernelILi8ELi1ELi2ELi2E \
              int4_down:int4_fused_linear_kernelILi8ELi4ELi1ELi1E int4_head:int4_fused_linear_kernelILi8ELi1ELi2ELi1E \
              bf16_first:fused_linear_kernel; do
  name=${kernel%%:*}
  echo "== $name (${kernel#*:})" >> "$tmp"
  timeout 120 ncu --clock-control none --kernel-name-base mangled -k "regex:${kernel#*:}" --launch-skip 1 \
    --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
    --section LaunchStats --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis \
    --section InstructionStats --section SourceCounters --metrics "$stalls" \
    "$BENCH" --reps 1 >> "$tmp" 2>&1
  echo "ncu $name: status $?"
done
# Per SASS instruction (executed instructions, stall samples) for the q/k/v and gate/up kernels: where the issue
# slots and the stalls go inside the kernel.
for kernel in int4_qkv:int4_fused_linear_kernelILi8ELi1ELi1ELi1E int4_gate_up:int4_fused_linear_kernelILi8ELi1ELi2ELi2E; do
  name=${kernel%%:*}
  rep=$(mktemp -u).ncu-rep
  timeout 120 ncu --clock-control none --kernel-name-base mangled -k "regex:${kernel#*:}" --launch-skip 1 \
    --launch-count 1 --section SourceCounters --section WarpStateStats -o "${rep%.ncu-rep}" \
    "$BENCH" --reps 1 > /dev/null 2>&1
  echo "== $name source (SASS)" >> "$tmp"
  ncu --import "$rep" --page source --csv --print-source sass >> "$tmp" 2>&1
  echo "ncu $name source: status $?"
  rm -f "$rep"
done
gzip -c "$tmp" > "$OUT_FILE"
rm -f "$tmp"
