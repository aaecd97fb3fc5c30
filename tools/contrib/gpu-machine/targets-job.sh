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
# export_cache.tgz) and probe_logs.tgz (the graph probes, the int4 candidates' timings and stream_read.json, the
# roofline's streaming read).
# Environment: BUDGET (BC's stage deadline, default 700 s), LONG_EXPORTS, LONG_EXPORT_FLAGS, PACK (default
# .carry/llmjob/aoti), and device-llm.sh's EXPORT_PARALLEL, EXPORT_TIMELINE and EXPORT_COMPILE_THREADS;
# INT4_VARIANTS=0 leaves out the int4 kernel's candidates; CHAIN_POSITIONS (e.g. 128,320,500) runs the fused linear
# bench's decode chain at each position and `aoti_cuda_read_bw --per-call` on bf16's projections on the quiet GPU;
# AB_SETTING (default AOTI_CUDA_INT4_FUSED_WARPS=8; `none` leaves the step out) is the setting that `generate` runs
# with, alternating with the default, on each fused-form export after BC; PROBES=0 leaves out the decode graphs'
# probes; REF_EXPORT=0 leaves out the stock export and RUN_SUITE=0 the GPU suite (an A/B that needs neither).
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
  [[ ${INT4_VARIANTS:-1} == 0 ]] && break
  early=(); [[ $pdl == on ]] && early=(--weights-early)
  timeout 120 "$PACK/bench/aoti_cuda_int4_bench" --variants --dependent-launch "$pdl" "${early[@]}" --m 1,4 \
    --shapes 3072x2048,2048x2048,11264x2048,2048x5632,32000x2048 > "$probes/int4_variants_$pdl.log" 2>&1
  echo "int4 variants, dependent launch $pdl: status $?"
done
# The roofline's streaming read (2 GiB read once, the figure each export's % of the roofline divides by), first on
# the quiet GPU; seconds.
timeout 60 "$PACK/bench/aoti_cuda_read_bw" --gib 2 > "$probes/stream_read.json" 2>&1
echo "streaming read: status $?"
# The decode chain at a few positions and bf16's per-call floors (seconds each), also on the quiet GPU.
if [[ -n ${CHAIN_POSITIONS:-} ]]; then
  for position in ${CHAIN_POSITIONS//,/ }; do
    timeout 120 "$PACK/bench/aoti_cuda_fused_linear_bench" --chain --position "$position"
  done > "$probes/chain_positions.log" 2>&1
  echo "chain at $CHAIN_POSITIONS: status $?"
  timeout 60 "$PACK/bench/aoti_cuda_read_bw" --per-call 12.58,8.39,46.14,23.07,131.07 > "$probes/read_bw.log" 2>&1
  echo "read_bw: status $?"
fi
tar -czf "$OUT/probe_logs.tgz" -C "$probes" .  # now, in case the machine goes back before the end

BUDGET=${BUDGET:-700} RUN_SUITE=${RUN_SUITE:-1} REF_EXPORT=${REF_EXPORT:-1} PDL_MEASURE=0 \
  LONG_EXPORTS=${LONG_EXPORTS:-bf16dopqf,int4dopqf} LONG_EXPORT_FLAGS=${LONG_EXPORT_FLAGS:---autotune off} \
  bash tools/contrib/gpu-machine/device-llm.sh "$OUT" "$PACK" BC
echo "stage BC: status $?"

# AB_SETTING against the default on each fused-form export, alternating, each run checked against eager's tokens
# (default: the fused int4 kernels in blocks of at most 8 warps, the whole-model side of the candidates above).
ab_setting=${AB_SETTING:-AOTI_CUDA_INT4_FUSED_WARPS=8}
for pte in /tmp/llm_bench/long_*_4096/llm.pte; do
  [[ $ab_setting == none || ! -f "$pte" ]] && continue
  name=$(basename "$(dirname "$pte")")
  read -r -a expect <<< "$(python3 tools/contrib/gpu-machine/llm_job.py expect-args "${pte%/llm.pte}/manifest.json")"
  for run in default_a setting_a default_b setting_b; do
    setting=(); [[ $run == setting_* ]] && setting=("$ab_setting")
    env "${setting[@]}" timeout 120 "$PACK/examples/generate/generate" "$pte" --prompt-lens 128 --new-tokens 256 \
      --reps 3 "${expect[@]}" --json "$probes/ab_${name}_$run.json" > "$probes/ab_${name}_$run.log" 2>&1
    echo "$name $run (${setting[*]:-default}): status $?"
  done
done

# Each export's decode graph, probed: the stock one (its kernels fixed inside the .so) and ours.
for pte in /tmp/llm_bench/bf16/llm.pte /tmp/llm_bench/long_*_4096/llm.pte; do
  [[ ${PROBES:-1} == 0 || ! -f "$pte" ]] && continue
  name=$(basename "$(dirname "$pte")")
  AOTI_CUDA_GRAPH_PROBE=on timeout 120 "$PACK/examples/generate/generate" "$pte" --prompt-lens 128 --new-tokens 16 \
    --reps 1 > "$probes/probe_$name.log" 2>&1
  echo "probe $name: status $?"
done
tar -czf "$OUT/probe_logs.tgz" -C "$probes" .
