#!/usr/bin/env bash
# Issue 32's targets from one job longer than a device call: the int4 kernel's candidates, then stage BC (the two
# fused-form exports, the stock bf16 export beside them, the GPU suite, then every decode measurement) with BUDGET
# seconds, then AOTI_CUDA_GRAPH_PROBE on the `block` fixture and on each export's decode graph. Run it detached
# (detach.sh: the call that starts it returns, the job goes on), from the repository root on the device machine:
#
#   bash tools/contrib/gpu-machine/detach.sh start t32 -- env BUDGET=700 bash tools/contrib/gpu-machine/targets-job.sh
#   bash tools/contrib/gpu-machine/detach.sh wait t32 560 "$OUT"      # again at once while it answers 3
#
# Files (into DETACHED_OUT, which `wait` copies to $OUT): BC's (BC_results.json, BC_generate_*.json, BC_logs.tgz,
# export_cache.tgz) and probe_logs.tgz (the graph probes and the int4 candidates' timings).
# Environment: BUDGET (BC's stage deadline, default 700 s), LONG_EXPORTS, LONG_EXPORT_FLAGS, PACK (default
# .carry/llmjob/aoti), and device-llm.sh's EXPORT_PARALLEL, EXPORT_TIMELINE and EXPORT_COMPILE_THREADS.
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

# The int4 kernel's tuning candidates back to back, with dependent launch and the weights early, and without: its
# dispatch was chosen before dependent launch existed, and the next call's blocks start early only where the running
# call's leave room on an SM; the new 8- and 4-warp candidates leave it in finer steps. Seconds each, on the quiet
# GPU, before the exports and the suite start.
for pdl in on off; do
  early=(); [[ $pdl == on ]] && early=(--weights-early)
  timeout 120 "$PACK/bench/aoti_cuda_int4_bench" --variants --dependent-launch "$pdl" "${early[@]}" --m 1,4 \
    --shapes 3072x2048,2048x2048,11264x2048,2048x5632,32000x2048 > "$probes/int4_variants_$pdl.log" 2>&1
  echo "int4 variants, dependent launch $pdl: status $?"
done
tar -czf "$OUT/probe_logs.tgz" -C "$probes" .  # now, in case the machine goes back before the end

BUDGET=${BUDGET:-700} RUN_SUITE=1 REF_EXPORT=1 PDL_MEASURE=0 LONG_EXPORTS=${LONG_EXPORTS:-bf16dopqf,int4dopqf} \
  LONG_EXPORT_FLAGS=${LONG_EXPORT_FLAGS:---autotune off} \
  bash tools/contrib/gpu-machine/device-llm.sh "$OUT" "$PACK" BC
echo "stage BC: status $?"

# The int4 export with the fused int4 kernels in blocks of at most 8 warps (AOTI_CUDA_INT4_FUSED_WARPS=8) against
# the default, alternating, each checked against eager's tokens: the whole-model side of the candidates above.
int4_pte=/tmp/llm_bench/long_int4dopqf_4096/llm.pte
if [[ -f "$int4_pte" ]]; then
  read -r -a expect <<< "$(python3 tools/contrib/gpu-machine/llm_job.py expect-args "${int4_pte%/llm.pte}/manifest.json")"
  for run in 16a 8a 16b 8b; do
    AOTI_CUDA_INT4_FUSED_WARPS=${run%?} timeout 120 "$PACK/examples/generate/generate" "$int4_pte" --prompt-lens 128 \
      --new-tokens 256 --reps 3 "${expect[@]}" --json "$probes/int4_warps_$run.json" \
      > "$probes/int4_warps_$run.log" 2>&1
    echo "int4 fused warps ${run%?} ($run): status $?"
  done
fi

# Each export's decode graph, probed: the stock one (its kernels fixed inside the .so) and ours.
for pte in /tmp/llm_bench/bf16/llm.pte /tmp/llm_bench/long_*_4096/llm.pte; do
  [[ -f "$pte" ]] || continue
  name=$(basename "$(dirname "$pte")")
  AOTI_CUDA_GRAPH_PROBE=on timeout 120 "$PACK/examples/generate/generate" "$pte" --prompt-lens 128 --new-tokens 16 \
    --reps 1 > "$probes/probe_$name.log" 2>&1
  echo "probe $name: status $?"
done
tar -czf "$OUT/probe_logs.tgz" -C "$probes" .
