#!/usr/bin/env bash
# One device call for an int4 kernel change, no export. Run on the device machine from the repository root:
#
#   bash tools/contrib/gpu-machine/int4-probe.sh OUT [PACK]       # PACK default .carry/k
#
# PACK holds libaoti_cuda.so.0 (the benches link it; each bench carries its own copy of the kernels) and bench/,
# optionally tests/aoti_cuda_gpu_tests. In order, each step's output in OUT:
#   tests.log   the GPU suite's int4 and fused linear cases (TESTS=0: none), when the pack has the suite;
#   single.log, chain.log   the fused linear bench's single projections and decode chain, ROUNDS times (default 2)
#               alternating: bench/aoti_cuda_fused_linear_bench (this tree), its run with each setting in
#               NEW_ENVS (space-separated VAR=VALUE, e.g. AOTI_CUDA_INT4_SCALE_AFTER=0), and
#               bench/aoti_cuda_fused_linear_bench_old (the baseline's build) when present;
#   ablation.log  the chain of bench/aoti_cuda_fused_linear_ablation with each AOTI_CUDA_INT4_ABLATE value in
#               ABLATE (default "0 1 3 4 8 15"), when present;
#   ncu_fused.txt.gz  Nsight Compute on the new bench's kernels (ncu-fused.sh; NCU=0: none).
set -uo pipefail
OUT=${1:?OUT}
PACK=${2:-.carry/k}
export LD_LIBRARY_PATH="$PWD/$PACK${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,uuid,clocks.max.sm,memory.total --format=csv,noheader > "$OUT/gpu.txt" 2>&1
if [[ ${TESTS:-1} == 1 && -x $PACK/tests/aoti_cuda_gpu_tests ]]; then
  timeout 300 "$PACK/tests/aoti_cuda_gpu_tests" -tc='*int4*,*fused*' > "$OUT/tests.log" 2>&1
  echo "gpu tests: status $?" | tee -a "$OUT/tests.log"
fi
new=$PACK/bench/aoti_cuda_fused_linear_bench
old=$PACK/bench/aoti_cuda_fused_linear_bench_old
runs=("new|")
for e in ${NEW_ENVS:-}; do runs+=("new $e|$e"); done
[[ -x $old ]] && runs+=("old|")
for round in $(seq 1 "${ROUNDS:-2}"); do
  for r in "${runs[@]}"; do
    tag=${r%%|*}; envs=${r#*|}
    bin=$new; [[ $tag == old ]] && bin=$old
    { echo "== round $round $tag single"; timeout 120 env $envs "$bin"; echo "status $?"; } >> "$OUT/single.log" 2>&1
    { echo "== round $round $tag chain"; timeout 120 env $envs "$bin" --chain; echo "status $?"; } >> "$OUT/chain.log" 2>&1
  done
done
abl=$PACK/bench/aoti_cuda_fused_linear_ablation
if [[ -x $abl ]]; then
  for a in ${ABLATE:-0 1 3 4 8 15}; do
    { echo "== ablate $a"; timeout 120 env AOTI_CUDA_INT4_ABLATE="$a" "$abl" --chain | grep "int4"; echo "status $?"; } \
      >> "$OUT/ablation.log" 2>&1
  done
fi
if [[ ${NCU:-1} == 1 && -x $new ]]; then
  bash tools/contrib/gpu-machine/ncu-fused.sh "$new" "$OUT/ncu_fused.txt.gz"
fi
ls -la "$OUT"
