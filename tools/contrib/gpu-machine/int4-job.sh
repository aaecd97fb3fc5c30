#!/usr/bin/env bash
# An int4 kernel change checked and measured in one device call (about 450 s), from the repository root:
#
#   bash tools/contrib/gpu-machine/int4-job.sh OUT          # carry [".carry/llmab"]
#
# .carry/llmab is model-ab.sh's pack plus extra.tar.xz, which holds old/libaoti_cuda.so.0 (the baseline's library),
# tests/aoti_cuda_gpu_tests and bench/ (aoti_cuda_int4_bench and aoti_cuda_fused_linear_bench of this tree, each
# also as *_old, the baseline's). In order:
#   1. in the background: PyTorch's int4 vectors (tools/int4/gen_vectors.py), then the GPU suite's int4 and fused
#      linear cases with them (tests.log);
#   2. model-ab.sh: both fused-form exports, then generate alternating this library (default), the baseline's
#      (LD_LIBRARY_PATH) and AOTI_CUDA_INT4_SCALE_AFTER=0 (ab.txt and the files model-ab.sh writes);
#   3. with the GPU idle: aoti_cuda_int4_bench (new, old: its first line is the streaming-read bandwidth) and
#      torch's kernel (tools/int4/bench_torch.py) at M = 1..16 on the model's shapes, then the fused linear bench's
#      single projections and decode chain, new and old (benches.tgz).
set -uo pipefail
OUT=${1:?OUT}
P=.carry/llmab
tar -xJf "$P/extra.tar.xz" -C "$P" || exit 1
CUDA_LIBS=/usr/local/cuda/lib64:/usr/local/cuda/lib
B=$(mktemp -d)
( timeout 150 python3 tools/int4/gen_vectors.py /tmp/int4_vectors > "$B/gen_vectors.log" 2>&1
  echo "gen_vectors: status $?" >> "$B/gen_vectors.log"
  AOTI_CUDA_INT4_VECTORS=/tmp/int4_vectors timeout 300 "$P/tests/aoti_cuda_gpu_tests" -tc='*int4*,*fused*' \
    -tce='*int4_dequant_min_m*' > "$OUT/tests.log" 2>&1
  echo "gpu tests: status $?" >> "$OUT/tests.log" ) &
tests=$!
BUDGET=${AB_BUDGET:-420} MEASURE_S=150 PROMPT_LENS=128 \
  AB_SETTINGS="default LD_LIBRARY_PATH=$P/old:$CUDA_LIBS AOTI_CUDA_INT4_SCALE_AFTER=0 default LD_LIBRARY_PATH=$P/old:$CUDA_LIBS AOTI_CUDA_INT4_SCALE_AFTER=0" \
  bash tools/contrib/gpu-machine/model-ab.sh "$OUT"
wait "$tests"
export LD_LIBRARY_PATH="$P/aoti:$CUDA_LIBS"
shapes=3072x2048,2048x2048,11264x2048,2048x5632,32000x2048
for v in "" _old; do
  timeout 90 "$P/bench/aoti_cuda_int4_bench$v" --m 1,2,4,8,16 --shapes "$shapes" --weights-early \
    --json "$B/int4_bench$v.json" > "$B/int4_bench$v.log" 2>&1
  echo "int4_bench$v: status $?"
done
timeout 120 python3 tools/int4/bench_torch.py "$B/torch.json" --m 1,2,4,8,16 --shapes "$shapes" > "$B/torch.log" 2>&1
echo "bench_torch: status $?"
for v in "" _old; do
  { timeout 90 "$P/bench/aoti_cuda_fused_linear_bench$v"; timeout 90 "$P/bench/aoti_cuda_fused_linear_bench$v" --chain; } \
    > "$B/fused_linear$v.log" 2>&1
  echo "fused_linear$v: status $?"
done
tar -czf "$OUT/benches.tgz" -C "$B" .
tail -3 "$OUT/tests.log"
ls -la "$OUT"
