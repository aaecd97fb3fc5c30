#!/usr/bin/env bash
# One device call for an int4 kernel change, no export: the fused linear bench's single projections and its decode
# chain for every bench binary in PACK/bench (aoti_cuda_fused_linear_bench = this tree's kernels,
# aoti_cuda_fused_linear_bench_old = the baseline's), alternating, then Nsight Compute on the new binary's kernels
# (ncu-fused.sh). Run on the device machine from the repository root:
#
#   bash tools/contrib/gpu-machine/int4-probe.sh OUT [PACK]       # PACK default .carry/k
#
# PACK holds libaoti_cuda.so.0 (the benches link it; each bench carries its own copy of the kernels) and bench/.
# NCU=0 leaves the profile out; ROUNDS (default 2) sets how many times each binary runs.
set -uo pipefail
OUT=${1:?OUT}
PACK=${2:-.carry/k}
export LD_LIBRARY_PATH="$PWD/$PACK${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,uuid,clocks.max.sm,memory.total --format=csv,noheader > "$OUT/gpu.txt" 2>&1
benches=()
for b in "$PACK"/bench/aoti_cuda_fused_linear_bench "$PACK"/bench/aoti_cuda_fused_linear_bench_old; do
  [[ -x $b ]] && benches+=("$b")
done
for round in $(seq 1 "${ROUNDS:-2}"); do
  for b in "${benches[@]}"; do
    tag=$(basename "$b"); tag=${tag#aoti_cuda_fused_linear_bench}; tag=${tag:-_new}
    { echo "== round $round ${tag#_} single"; timeout 120 "$b"; echo "status $?"; } >> "$OUT/single.log" 2>&1
    { echo "== round $round ${tag#_} chain"; timeout 120 "$b" --chain; echo "status $?"; } >> "$OUT/chain.log" 2>&1
  done
done
if [[ ${NCU:-1} == 1 && -x $PACK/bench/aoti_cuda_fused_linear_bench ]]; then
  bash tools/contrib/gpu-machine/ncu-fused.sh "$PACK/bench/aoti_cuda_fused_linear_bench" "$OUT/ncu_fused.txt.gz"
fi
ls -la "$OUT"
