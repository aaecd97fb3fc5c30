#!/usr/bin/env bash
# A library setting A/B at long positions, after int4-job.sh / model-ab.sh made the fused-form exports on this
# machine (same call, or a warm machine's next one), from the repository root:
#
#   bash tools/contrib/gpu-machine/positions-ab.sh OUT VAR=A VAR=B
#
# For each export under WORK (default /tmp/llm_bench, long_<name>_4096) and ROUNDS times (default 2) each setting in
# turn: examples/generate with --decode-at POSITIONS (default 1024,4000) and --decode-window 64, one line per run and
# position in OUT/positions.txt; then the packed fused linear bench's decode chain at those positions
# (OUT/chain-positions.log): its rows for the exports' kernels, with the merge one column a thread at every position,
# without the merge kernel and without the attention.
# Stops starting runs DEADLINE_S (default 140) seconds after it starts.
set -uo pipefail
OUT=${1:?OUT}
A=${2:?VAR=A}
B=${3:?VAR=B}
P=${PACK:-.carry/llmab}
WORK=${WORK:-/tmp/llm_bench}
POSITIONS=${POSITIONS:-1024,4000}
export LD_LIBRARY_PATH="$P/aoti:/usr/local/cuda/lib64:/usr/local/cuda/lib"
end=$((SECONDS + ${DEADLINE_S:-140}))
gen="$P/aoti/examples/generate/generate"
for name in ${EXPORTS:-int4dopqf bf16dopqf}; do
  pte="$WORK/long_${name}_4096/llm.pte"
  [[ -f $pte ]] || { echo "$name: no export at $pte" >> "$OUT/positions.txt"; continue; }
  for round in $(seq "${ROUNDS:-2}"); do
    for setting in "$A" "$B"; do
      (( SECONDS < end )) || { echo "$name $setting: deadline" >> "$OUT/positions.txt"; continue; }
      env "$setting" timeout 60 "$gen" "$pte" --prompt-lens 128 --new-tokens 16 --reps 1 --decode-at "$POSITIONS" \
        --decode-window 64 --max-ctx 4096 > "$OUT/gen.log" 2>&1
      echo "status $?" >> "$OUT/gen.log"
      grep -E "^decode at|^status" "$OUT/gen.log" | sed "s|^|$name round$round $setting  |" >> "$OUT/positions.txt"
    done
  done
done
rm -f "$OUT/gen.log"
for pos in ${POSITIONS//,/ }; do
  (( SECONDS < end )) || break
  timeout 60 "$P/bench/aoti_cuda_fused_linear_bench" --chain --position "$pos" 2>&1 |
    grep -E "decode position|launch, weights early|merge one column|without its merge|early, no att" \
      >> "$OUT/chain-positions.log"
done
cat "$OUT/positions.txt"
