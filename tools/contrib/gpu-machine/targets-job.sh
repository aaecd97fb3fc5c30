#!/usr/bin/env bash
# Issue 32's targets from one job longer than a device call: the int4 kernel's candidates, then stage BC (the two
# fused-form exports with --argmax aten, the stock bf16 export beside them, the GPU suite, then every decode
# measurement) with BUDGET seconds, beside it a diagnosis of the argmax operator's exports, then AOTI_CUDA_GRAPH_PROBE
# on the `block` fixture and on each export's decode graph. Run it detached (detach.sh: the call that starts it
# returns, the job goes on), from the repository root on the device machine:
#
#   bash tools/contrib/gpu-machine/detach.sh start t32 -- env BUDGET=700 bash tools/contrib/gpu-machine/targets-job.sh
#   bash tools/contrib/gpu-machine/detach.sh wait t32 560 "$OUT"      # again at once while it answers 3
#
# Files (into DETACHED_OUT, which `wait` copies to $OUT): BC's (BC_results.json, BC_generate_*.json, BC_logs.tgz,
# export_cache.tgz) and probe_logs.tgz (the graph probes, the int4 candidates' timings, the argmax diagnosis).
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

# Beside BC, once its wheels are installed: what may have stopped every fused-form export since 2026-12-05 00:20.
# The last ones that finished (2026-12-04) were made before aoti_cuda::aoti_cuda_argmax became those exports'
# default (--argmax op, commit 8a42dd4); no export with it has finished, and its AOTInductor codegen test
# (test_decode_op_codegen.py, needs torch) has never run. So BC's exports use --argmax aten, and here (a) that test
# runs, and (b) the int4 export with --argmax op is made alone, its timeline saying where it goes.
diag_budget=$(( ${BUDGET:-700} - 110 ))  # over before BC's measurements (its exports get BUDGET - 80 s)
export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"  # where device-llm.sh installs the wheels
(
  for _ in $(seq 120); do python3 -c 'import executorch.exir' >/dev/null 2>&1 && break; sleep 2; done
  export FLATC_EXECUTABLE=/tmp/site/executorch/data/bin/flatc AOTI_EXPORT_TIMELINE=30 TORCHINDUCTOR_COMPILE_THREADS=4
  { timeout 300 python3 tools/export/llm/test_decode_op_codegen.py; echo "exit $?"; } \
    > "$probes/decode_op_codegen.log" 2>&1 &
  { TORCHINDUCTOR_CACHE_DIR=/tmp/llm_bench/cache/inductor_diag timeout "$diag_budget" python3 \
      tools/export/llm/export_llm.py --out /tmp/llm_bench/diag_int4dopqf_argmax_op --config 1b --max-ctx 4096 \
      --quant int4 --gemm cublas --sdpa decode-op-fused --autotune off --argmax op; echo "exit $?"; } \
    > "$probes/export_argmax_op.log" 2>&1
  wait
) &
diag_pid=$!

BUDGET=${BUDGET:-700} RUN_SUITE=1 REF_EXPORT=1 PDL_MEASURE=0 LONG_EXPORTS=${LONG_EXPORTS:-bf16dopqf,int4dopqf} \
  LONG_EXPORT_FLAGS=${LONG_EXPORT_FLAGS:---autotune off --argmax aten} \
  bash tools/contrib/gpu-machine/device-llm.sh "$OUT" "$PACK" BC
echo "stage BC: status $?"
wait "$diag_pid"
tail -n 2 "$probes/decode_op_codegen.log" "$probes/export_argmax_op.log"

# The int4 export with the fused int4 kernels in blocks of at most 8 warps (AOTI_CUDA_INT4_FUSED_WARPS=8) against
# the default, alternating, each checked against eager's tokens: the whole-model side of the candidates above.
int4_pte=/tmp/llm_bench/long_int4dopqf_4096/llm.pte
if [[ -f "$int4_pte" ]]; then
  expect=$(python3 -c "import json,sys; r=json.load(open(sys.argv[1])).get('reference') or {}
print(','.join(map(str, r.get('tokens') or [])) if r.get('prompt_len') == 128 else '')" "${int4_pte%/llm.pte}/manifest.json")
  for run in 16a 8a 16b 8b; do
    AOTI_CUDA_INT4_FUSED_WARPS=${run%?} timeout 120 "$PACK/examples/generate/generate" "$int4_pte" --prompt-lens 128 \
      --new-tokens 256 --reps 3 ${expect:+--expect-tokens "$expect"} --json "$probes/int4_warps_$run.json" \
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
