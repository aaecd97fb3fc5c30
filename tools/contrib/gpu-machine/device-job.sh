#!/usr/bin/env bash
# One GPU-machine command that produces every figure the open issues need, within
# the 600 s call limit, in this order:
#   1. in the background: the 1.12 B LLM exports (bf16 and int4; CPU-bound, a few
#      minutes) and the eager peers' weights file;
#   2. meanwhile: the GPU test suite, CLI runs over the fixtures, the GPU CLI cases and
#      the examples (tools/contrib/gpu-machine/device-suite.sh without benchmarks), then the opt-in
#      page-locked upload case alone under a timeout (it can stall: see weights_io);
#   3. once the exports are done: the LLM measurements one at a time (aoti_cuda bf16
#      and int4 through examples/generate, eager and eager with a CUDA-graph decode);
#   4. if time is left: the per-call benchmark over the fixtures (aoti_cuda plain /
#      graphs / bound outputs, eager PyTorch and its CUDA-graph replay).
# Everything lands in OUT/results.tgz, plus the JSON files bench/report.py reads.
#
#   tools/contrib/gpu-machine/device-job.sh BUILD OUT [BUDGET_S]   (BUILD from tools/contrib/gpu-machine/device-pack.sh; carry .whl)
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/../../.." && pwd)"
BUILD="$(cd "$1" && pwd)"; OUT="$2"; BUDGET="${3:-570}"
RES=/tmp/device-job; rm -rf "$RES"; mkdir -p "$RES/suite" "$OUT"
cd "$ROOT"
left() { echo $((BUDGET - SECONDS)); }

LLM_BENCH_EXTRA="--stage prepare --export-timeout $((BUDGET - 200)) --peers eager" \
  bash bench/llm/run_on_device.sh "$RES/llm_prepare" "$BUILD" 1b llm,int4 $((BUDGET - 180)) \
  > "$RES/llm_prepare.log" 2>&1 &
prep=$!

DEVICE_SUITE_NO_BENCH=1 timeout -k 5 240 bash tools/contrib/gpu-machine/device-suite.sh "$BUILD" "$RES/suite" > "$RES/suite.log" 2>&1
echo "device-suite exit $? at ${SECONDS}s"
AOTI_CUDA_PAGE_LOCK_WEIGHTS=1 timeout -k 5 60 "$BUILD/tests/aoti_cuda_gpu_tests" -tc="gpu weights: upload rate*" \
  > "$RES/page_lock.log" 2>&1
echo "page-locked upload case exit $? at ${SECONDS}s (124: did not finish in 60 s)"

wait "$prep"; echo "LLM prepare exit $? at ${SECONDS}s"
LLM_BENCH_EXTRA="--stage measure --peers eager" \
  bash bench/llm/run_on_device.sh "$RES/llm" "$BUILD" 1b llm,int4 $(( $(left) - 100 )) > "$RES/llm_measure.log" 2>&1
echo "LLM measure exit $? at ${SECONDS}s"

if (( $(left) > 80 )); then
  LLM_BENCH_EXTRA="--stage all --peers eager" \
    bash bench/llm/run_on_device.sh "$RES/calls" "$BUILD" 1b fixtures $(( $(left) - 15 )) > "$RES/calls.log" 2>&1
  echo "fixture calls exit $? at ${SECONDS}s"
fi

cp "$RES/suite/gpu_tests.log" "$OUT/" 2>/dev/null
cp "$RES/llm/llm_results.json" "$OUT/" 2>/dev/null
cp "$RES/calls/calls_results.json" "$OUT/" 2>/dev/null
tar czf "$OUT/results.tgz" -C "$RES" . 2>/dev/null
ls -la "$OUT"
