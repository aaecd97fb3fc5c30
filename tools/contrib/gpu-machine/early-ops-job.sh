#!/usr/bin/env bash
# The int4 kernels' early operands (AOTI_CUDA_INT4_EARLY_OPS, weight_int4pack_gemv.cu's kEarlyOps) on the GPU
# machine in one call, from the repository root, carry [".carry/llmjob"] (SUITE=1 device-llm.sh --prepare):
#
#   bash tools/contrib/gpu-machine/early-ops-job.sh     # then `detach.sh wait t32 560 "$OUT"` at once if it says 3
#
# On an H200: targets-job.sh as issue 32's plan has it (all three exports, the GPU suite, the roofline), with the
# early operands as its A/B setting in the model. On another GPU: first the int4 fused cases of the GPU suite
# (they hold 1 and 2 early words to the float64 reference), the decode chain at position 128 and the single fused
# projections with 0, 1 and 2 early words in turn, then targets-job.sh with int4dopqf alone (LONG_EXPORTS; no stock
# export, no suite) and the same A/B. Files in $OUT: early_ops.log and targets-job.sh's.
set -uo pipefail
OUT=${OUT:?run me on the GPU machine, with OUT set}
P=.carry/llmjob/aoti
export LD_LIBRARY_PATH="$PWD/$P${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "GPU: $gpu"
ab=AOTI_CUDA_INT4_EARLY_OPS=1
if [[ $gpu == *H200* ]]; then
  job=(env BUDGET=800 INT4_VARIANTS=0 CHAIN_POSITIONS=128,320,500 AB_SETTING=$ab PROBES=0)
else
  {
    echo "GPU: $gpu"
    timeout 180 "$P/tests/aoti_cuda_gpu_tests" -tc='*int4 fused*'
    echo "int4 fused cases: status $?"
    for words in 0 1 2; do  # the chain bench runs each form twice (two rounds)
      echo "== AOTI_CUDA_INT4_EARLY_OPS=$words"
      AOTI_CUDA_INT4_EARLY_OPS=$words timeout 90 "$P/bench/aoti_cuda_fused_linear_bench" --chain --position 128 |
        grep -E '^chain int4 (dependent launch, weights early|dep\. launch, early, no attention|clusters of 8, dep)'
      AOTI_CUDA_INT4_EARLY_OPS=$words timeout 60 "$P/bench/aoti_cuda_fused_linear_bench" | grep -E '^int4'
    done
  } > "$OUT/early_ops.log" 2>&1
  job=(env BUDGET=600 INT4_VARIANTS=0 REF_EXPORT=0 RUN_SUITE=0 LONG_EXPORTS=${LONG_EXPORTS:-int4dopqf}
       AB_SETTING=$ab PROBES=0)
fi
# LIMIT: the seconds this call may run (the device's limit_s, less a margin); wait for the job until then.
bash tools/contrib/gpu-machine/detach.sh start t32 -- "${job[@]}" bash tools/contrib/gpu-machine/targets-job.sh &&
  bash tools/contrib/gpu-machine/detach.sh wait t32 $((${LIMIT:-560} - SECONDS)) "$OUT"
