#!/usr/bin/env bash
# One GPU-machine command for the per-call work: the GPU suite, the graph and
# conformance cases again with small copies on the copy engine
# (AOTI_CUDA_SMALL_COPY=dma), then the per-call benchmark over every fixture
# in both small-copy modes, alternated (kernel, dma, kernel, dma: the machine
# drifts), and eager PyTorch with its CUDA-graph replay. Results in OUT/results.tgz,
# the call benchmark's JSON files also beside it.
#
#   tools/contrib/gpu-machine/device-calls-ab.sh BUILD OUT   (BUILD from tools/contrib/gpu-machine/device-pack.sh)
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/../../.." && pwd)"
BUILD="$(cd "$1" && pwd)"; OUT="$2"
RES=/tmp/calls-ab; rm -rf "$RES"; mkdir -p "$RES/suite" "$OUT"
cd "$ROOT"
export LD_LIBRARY_PATH="$BUILD:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
DEVICE_SUITE_NO_BENCH=1 timeout -k 5 200 bash tools/contrib/gpu-machine/device-suite.sh "$BUILD" "$RES/suite" > "$RES/suite.log" 2>&1
echo "device-suite exit $? at ${SECONDS}s"
AOTI_CUDA_SMALL_COPY=dma timeout -k 5 120 "$BUILD/tests/aoti_cuda_gpu_tests" -tc="graphs*,gpu conformance*" \
  > "$RES/gpu_tests_dma.log" 2>&1
echo "graph + conformance cases with AOTI_CUDA_SMALL_COPY=dma exit $? at ${SECONDS}s"
for round in 1 2; do
  for mode in kernel dma; do
    AOTI_CUDA_SMALL_COPY=$mode timeout -k 5 120 "$BUILD/bench/aoti_cuda_call_bench" --runs 300 \
      --json "$RES/calls_${mode}_${round}.json" tests/fixtures > "$RES/calls_${mode}_${round}.txt" 2>&1
    echo "call bench ($mode, round $round) exit $? at ${SECONDS}s"
  done
done
timeout -k 5 200 python3 bench/peers/call_peers.py measure --runs 200 --json "$RES/calls_eager.json" \
  > "$RES/calls_eager.txt" 2>&1
echo "eager peers exit $? at ${SECONDS}s"
cp "$RES"/calls_*.json "$OUT/" 2>/dev/null
tar czf "$OUT/results.tgz" -C "$RES" . 2>/dev/null
ls -la "$OUT"
