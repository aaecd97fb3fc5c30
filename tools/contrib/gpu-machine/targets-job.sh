#!/usr/bin/env bash
# Issue 32's targets from one job longer than a device call: stage BC (the two fused-form exports with
# --split-lowering, the stock bf16 export beside them, the GPU suite, then every decode measurement) with BUDGET
# seconds, then AOTI_CUDA_GRAPH_PROBE on the `block` fixture and on the stock export's decode graph. Run it detached
# (detach.sh: the call that starts it returns, the job goes on), from the repository root on the device machine:
#
#   bash tools/contrib/gpu-machine/detach.sh start t32 -- env BUDGET=700 bash tools/contrib/gpu-machine/targets-job.sh
#   bash tools/contrib/gpu-machine/detach.sh wait t32 560 "$OUT"      # again at once while it answers 3
#
# Files (into DETACHED_OUT, which `wait` copies to $OUT): BC's (BC_results.json, BC_generate_*.json, BC_logs.tgz,
# export_cache.tgz) and probe_logs.tgz. Environment: BUDGET (BC's stage deadline, default 700 s), LONG_EXPORTS,
# LONG_EXPORT_FLAGS, PACK (default .carry/llmjob/aoti), and device-llm.sh's EXPORT_PARALLEL and EXPORT_TIMELINE.
set -uo pipefail
OUT=${DETACHED_OUT:?run me through detach.sh, or set DETACHED_OUT}
PACK=${PACK:-.carry/llmjob/aoti}
export LD_LIBRARY_PATH="$PWD/$PACK${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
probes=/tmp/targets-job-probes; rm -rf "$probes"; mkdir -p "$probes"

# The fixture probe first: seconds, and it tells at once whether the probe works on this driver.
mkdir -p /tmp/fx && tar -xJf tests/fixtures.tar.xz -C /tmp/fx
AOTI_CUDA_GRAPH_PROBE=on timeout 60 "$PACK/aoti_cuda" bench --graphs --runs 3 --loads 1 \
  /tmp/fx/tests/fixtures/block/block.pte > "$probes/probe_block.log" 2>&1
echo "probe block: status $?"

BUDGET=${BUDGET:-700} RUN_SUITE=1 REF_EXPORT=1 PDL_MEASURE=0 LONG_EXPORTS=${LONG_EXPORTS:-bf16dopqf,int4dopqf} \
  LONG_EXPORT_FLAGS=${LONG_EXPORT_FLAGS:---autotune off --split-lowering} \
  bash tools/contrib/gpu-machine/device-llm.sh "$OUT" "$PACK" BC
echo "stage BC: status $?"

# Each export's decode graph, probed: the stock one (its kernels fixed inside the .so) and ours.
for pte in /tmp/llm_bench/bf16/llm.pte /tmp/llm_bench/long_*_4096/llm.pte; do
  [[ -f "$pte" ]] || continue
  name=$(basename "$(dirname "$pte")")
  AOTI_CUDA_GRAPH_PROBE=on timeout 120 "$PACK/examples/generate/generate" "$pte" --prompt-lens 128 --new-tokens 16 \
    --reps 1 > "$probes/probe_$name.log" 2>&1
  echo "probe $name: status $?"
done
tar -czf "$OUT/probe_logs.tgz" -C "$probes" .
