#!/usr/bin/env bash
# Everything the GPU machine checks, in one command within a time budget:
# the LLM + per-call benchmark (bench/llm, in the background: exports first,
# then measurements one at a time) and, meanwhile, the GPU test suite, the
# CLI runs over every fixture, the GPU CLI cases and the examples
# (tools/contrib/gpu-machine/device-suite.sh without its benchmarks). Results are packed into
# OUT/results.tgz (the device tool returns at most 8 files).
#
#   tools/contrib/gpu-machine/device-all.sh BUILD OUT [BUDGET_S]      (BUILD from tools/contrib/gpu-machine/device-pack.sh; carry .whl too)
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/../../.." && pwd)"
BUILD="$(cd "$1" && pwd)"; OUT="$2"; BUDGET="${3:-360}"
RES=/tmp/device-all; rm -rf "$RES"; mkdir -p "$RES/llm" "$RES/suite" "$OUT"
t0=$SECONDS
LLM_BENCH_EXTRA="${LLM_BENCH_EXTRA:---export-timeout 200 --reps 3 --fixture-models add,mlp,conv,block,embed}" \
  bash "$ROOT/bench/llm/run_on_device.sh" "$RES/llm" "$BUILD" 1b "${LLM_PARTS:-llm,int4,fixtures}" "$((BUDGET - 15))" \
  > "$RES/llm_console.log" 2>&1 &
llm_pid=$!
DEVICE_SUITE_NO_BENCH=1 timeout 200 bash "$ROOT/tools/contrib/gpu-machine/device-suite.sh" "$BUILD" "$RES/suite" > "$RES/suite_console.log" 2>&1
echo "device-suite exit $? after $((SECONDS - t0)) s"
grep -E "test cases|assertions|SKIPPED|FAILED|ERROR" "$RES/suite/gpu_tests.log" | tail -15
grep -cE "PASS|ok" "$RES/suite/cli_run.log"; grep -iE "fail" "$RES/suite/cli_run.log" "$RES/suite/cli_examples.log" | head -10
wait "$llm_pid"; echo "llm bench exit $? after $((SECONDS - t0)) s"
tail -40 "$RES/llm/bench.log" 2>/dev/null
cp "$RES/suite/gpu_tests.log" "$OUT/" 2>/dev/null
cp "$RES/llm/llm_results.json" "$RES/llm/calls_results.json" "$OUT/" 2>/dev/null
tar czf "$OUT/results.tgz" -C "$RES" . && ls -la "$OUT"
