#!/usr/bin/env bash
# An int4 kernel change checked and measured in one device call (260-560 s), from the repository root:
#
#   bash tools/contrib/gpu-machine/int4-job.sh OUT          # carry [".carry/llmab"]
#
# .carry/llmab is model-ab.sh's pack plus extra.tar.xz, which holds old/libaoti_cuda.so.0 (the baseline's library;
# optionally more baselines, each a folder NAME/libaoti_cuda.so.0), tests/aoti_cuda_gpu_tests and bench/
# (aoti_cuda_int4_bench and aoti_cuda_fused_linear_bench of this tree, and any baseline's as *_NAME). In order:
#   1. in the background: PyTorch's int4 vectors (tools/int4/gen_vectors.py), then the GPU suite's int4 and fused
#      linear cases with them (tests.log; TEST_CASES, doctest's -tc filter, names other cases);
#   2. model-ab.sh: both fused-form exports, then generate alternating this library (default), the baselines'
#      (LD_LIBRARY_PATH, in the order of BASELINES, default `old`) and AOTI_CUDA_INT4_SCALE_AFTER=0, twice; JOB_SETTINGS
#      replaces the extra setting (`none`: no extra) (ab.txt and the files model-ab.sh writes);
#      AB_BUDGET (default 470 s) and AB_MEASURE_S (140) are model-ab.sh's BUDGET and MEASURE_S: the exports get about
#      330 s (233-239 s on an H100 on 2026-12-06 09:17; cut at 260 s at 09:02);
#   3. with the GPU idle: every aoti_cuda_int4_bench* (its first line is the streaming-read bandwidth) and, when one
#      is packed, torch's kernel (tools/int4/bench_torch.py) at M = 1..16 on the model's shapes, then every fused
#      linear bench's single projections and decode chain (and the chain at each of CHAIN_POSITIONS), bf16's per-call
#      floors (aoti_cuda_read_bw --per-call, if packed), every aoti_cuda_attention_bench*'s --decode (if packed),
#      and the ablation build's chain (aoti_cuda_fused_linear_ablation, if packed) with each part left out
#      (benches.tgz).
set -uo pipefail
shopt -s nullglob  # a bench not packed is skipped, not run under its pattern's name
OUT=${1:?OUT}
P=.carry/llmab
tar -xJf "$P/extra.tar.xz" -C "$P" || exit 1
cmake -P cmake/unpack_fixtures.cmake > /dev/null 2>&1  # the fixture binaries travel compressed (graph tests read them)
CUDA_LIBS=/usr/local/cuda/lib64:/usr/local/cuda/lib
B=$(mktemp -d)
( timeout 150 python3 tools/int4/gen_vectors.py /tmp/int4_vectors > "$B/gen_vectors.log" 2>&1
  echo "gen_vectors: status $?" >> "$B/gen_vectors.log"
  AOTI_CUDA_INT4_VECTORS=/tmp/int4_vectors timeout 300 "$P/tests/aoti_cuda_gpu_tests" \
    -tc="${TEST_CASES:-*int4*,*fused*}" -tce='*int4_dequant_min_m*' > "$OUT/tests.log" 2>&1
  echo "gpu tests: status $?" >> "$OUT/tests.log" ) &
tests=$!
settings=default
for b in ${BASELINES:-old}; do settings+=" LD_LIBRARY_PATH=$P/$b:$CUDA_LIBS"; done
extra=${JOB_SETTINGS:-AOTI_CUDA_INT4_SCALE_AFTER=0}
[[ $extra == none ]] || settings+=" $extra"
BUDGET=${AB_BUDGET:-470} MEASURE_S=${AB_MEASURE_S:-140} PROMPT_LENS=128 AB_SETTINGS="$settings $settings" \
  bash tools/contrib/gpu-machine/model-ab.sh "$OUT"
wait "$tests"
export LD_LIBRARY_PATH="$P/aoti:$CUDA_LIBS"
shapes=3072x2048,2048x2048,11264x2048,2048x5632,32000x2048
int4_benches=("$P"/bench/aoti_cuda_int4_bench*)
for bin in "${int4_benches[@]}"; do
  v=${bin##*/aoti_cuda_int4_bench}
  timeout 90 "$bin" --m 1,2,4,8,16 --shapes "$shapes" --weights-early \
    --json "$B/int4_bench$v.json" > "$B/int4_bench$v.log" 2>&1
  echo "int4_bench$v: status $?"
done
if (( ${#int4_benches[@]} )); then  # torch's kernel only beside ours (20-40 s of device time)
  timeout 120 python3 tools/int4/bench_torch.py "$B/torch.json" --m 1,2,4,8,16 --shapes "$shapes" > "$B/torch.log" 2>&1
  echo "bench_torch: status $?"
fi
for bin in "$P"/bench/aoti_cuda_fused_linear_bench*; do
  v=${bin##*/aoti_cuda_fused_linear_bench}
  { timeout 90 "$bin"; timeout 90 "$bin" --chain; } > "$B/fused_linear$v.log" 2>&1
  echo "fused_linear$v: status $?"
done
positions=${CHAIN_POSITIONS:-}  # the chain at more positions (e.g. 320,500)
for position in ${positions//,/ }; do
  timeout 90 "$P/bench/aoti_cuda_fused_linear_bench" --chain --position "$position"
done > "$B/chain_positions.log" 2>&1
if [[ -x "$P/bench/aoti_cuda_read_bw" ]]; then  # bf16's projections' per-call floors: q/k/v, o, gate/up, down, head
  timeout 60 "$P/bench/aoti_cuda_read_bw" --per-call 12.58,8.39,46.14,23.07,131.07 > "$B/read_bw.log" 2>&1
  echo "read_bw: status $?"
fi
for bin in "$P"/bench/aoti_cuda_attention_bench*; do  # the decode attention, when packed
  v=${bin##*/aoti_cuda_attention_bench}
  timeout 90 "$bin" --decode > "$B/attention$v.log" 2>&1
  echo "attention$v: status $?"
done
if [[ -x "$P/bench/aoti_cuda_fused_linear_ablation" ]]; then
  for a in 0 1 2 4 8 15; do
    echo "== AOTI_CUDA_INT4_ABLATE=$a"
    AOTI_CUDA_INT4_ABLATE=$a timeout 60 "$P/bench/aoti_cuda_fused_linear_ablation" --chain
  done > "$B/ablation.log" 2>&1
  echo "ablation: status $?"
fi
tar -czf "$OUT/benches.tgz" -C "$B" .
tail -3 "$OUT/tests.log"
ls -la "$OUT"
