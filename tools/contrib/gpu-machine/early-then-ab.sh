#!/usr/bin/env bash
# One device call, the most needed figures first (each lands in OUT/early.log at once): the decode chain at 128, 320
# and 500 (clusters of 8 against two kernels with at most 8 chunks), bf16's per-call floors, the decode attention and
# tuning GPU cases, int4 M=1 against torch; then both fused-form exports with a 512-position cache and generate with
# the attention_cluster default (auto: clusters) against AOTI_CUDA_ATTENTION_CLUSTER=0, alternating (model-ab.sh's
# files).
# Run 2026-12-07 13:18 (H100; bench/results/h100-2026-12-07/1318-cluster-auto-*), where the fixtures were not
# unpacked and the five tuning cases that load them failed.
OUT=${1:?OUT}; P=.carry/llmab; E=$OUT/early.log   # carry [".carry/llmab"] (int4-pack.sh); CALL_S: the call's seconds
tar -xJf "$P/extra.tar.xz" -C "$P" || exit 1
cmake -P cmake/unpack_fixtures.cmake > /dev/null 2>&1  # the tuning cases load the fixtures (absent in the 13:18 call)
export LD_LIBRARY_PATH="$P/aoti:/usr/local/cuda/lib64:/usr/local/cuda/lib"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader > "$E"
for p in 128 320 500; do timeout 60 "$P/bench/aoti_cuda_fused_linear_bench" --chain --position $p >> "$E" 2>&1; done
grep -E 'position|early|clusters' "$E" | head -40
timeout 30 "$P/bench/aoti_cuda_read_bw" --per-call 12.58,8.39,46.14,23.07,131.07 >> "$E" 2>&1; tail -2 "$E"
timeout 90 "$P/tests/aoti_cuda_gpu_tests" -tc='*decode attention*,*tuning*' > /tmp/tests.log 2>&1
tail -4 /tmp/tests.log | tee -a "$E"; grep -B2 -A8 'ERROR' /tmp/tests.log | head -60 >> "$E"
s=3072x2048,2048x2048,11264x2048,2048x5632,32000x2048
{ timeout 40 "$P/bench/aoti_cuda_int4_bench" --m 1 --shapes $s --weights-early
  timeout 60 python3 tools/int4/bench_torch.py /tmp/torch.json --m 1 --shapes $s; } >> "$E" 2>&1
B=$((${CALL_S:-420} - SECONDS))
echo "model-ab budget $B s (at ${SECONDS} s)" | tee -a "$E"
LONG_CTX=512 BUDGET=$B MEASURE_S=90 PROMPT_LENS=128 \
  AB_SETTINGS="default AOTI_CUDA_ATTENTION_CLUSTER=0 default AOTI_CUDA_ATTENTION_CLUSTER=0" \
  bash tools/contrib/gpu-machine/model-ab.sh "$OUT" 2>&1 | tail -15
