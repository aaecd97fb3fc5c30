#!/usr/bin/env bash
# Load time on the GPU machine, in one device call: the GPU suite (the loader changed), where each fixture
# library's load time goes (AOTI_CUDA_TRACE_LOAD=1 aoti_cuda run, 3 fresh processes each), and the ExecuTorch
# peers on the fixtures (bench/peers/executorch: per-call p50, loads, cold starts, RSS; PARTS fixtures,agreement,cold).
#
#   device-load.sh OUT BUILD ET12 [ET13]    BUILD: a device pack (device-pack.sh); ET12/ET13: the peers' packs
# Writes OUT/gpu_tests.log, OUT/load_trace.log, OUT/executorch_results.json and OUT/load_logs.tgz.
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../../.." && pwd)"
OUT=${1:?usage: device-load.sh OUT BUILD ET12 [ET13]}
BUILD="$(cd "${2:?BUILD}" && pwd)"; ET12="$(cd "${3:?ET12}" && pwd)"; ET13=${4:+$(cd "$4" && pwd)}
RES=/tmp/device-load; rm -rf "$RES"; mkdir -p "$RES" "$OUT"
chmod +x "$BUILD"/aoti_cuda "$BUILD"/bench/* "$BUILD"/tests/aoti_cuda_gpu_tests "$BUILD"/examples/*/* 2>/dev/null
DEVICE_SUITE_NO_BENCH=1 timeout 200 bash "$HERE/device-suite.sh" "$BUILD" "$RES/suite" > "$RES/suite_console.log" 2>&1
echo "device-suite exit $?"
grep -E "test cases|assertions" "$RES/suite/gpu_tests.log" | tail -2
grep -c "(ok)" "$RES/suite/cli_run.log"; grep -E "FAILED" "$RES/suite/cli_run.log" | head -5
export LD_LIBRARY_PATH="$BUILD:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for name in add mlp lm cnn mlp_int4 sdpa_bf16_dynamic; do
  for i in 1 2 3; do
    AOTI_CUDA_TRACE_LOAD=1 "$BUILD/aoti_cuda" run "$ROOT/tests/fixtures/$name/$name.pte" --random 2>&1 |
      grep -E "library loaded in|ran; load" | sed "s|^|$name $i: |"
  done
done > "$RES/load_trace.log" 2>&1
cat "$RES/load_trace.log"
BUDGET=150 PARTS=fixtures,agreement,cold BUILD_ET13="$ET13" timeout 200 \
  bash "$ROOT/bench/peers/executorch/run_on_device.sh" "$RES/et" "$BUILD" "$ET12" > "$RES/et_console.log" 2>&1
echo "executorch peers exit $?"; tail -25 "$RES/et/executorch.md" 2>/dev/null
cp "$RES/suite/gpu_tests.log" "$RES/load_trace.log" "$OUT/" 2>/dev/null
cp "$RES/et/executorch_results.json" "$OUT/" 2>/dev/null
tar -czf "$OUT/load_logs.tgz" -C "$RES" . && ls -la "$OUT"
