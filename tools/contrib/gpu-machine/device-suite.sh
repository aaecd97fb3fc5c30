#!/usr/bin/env bash
# Runs the GPU work on a GPU machine from a build folder made elsewhere
# (see scripts/test.sh for the build): GPU test suites, the example program
# through the CLI, and the benchmarks. Writes logs to OUT_DIR.
#
#   tools/contrib/gpu-machine/device-suite.sh BUILD_DIR OUT_DIR
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/../../.." && pwd)"
BUILD="$(cd "$1" && pwd)"
OUT_DIR="$2"
mkdir -p "$OUT_DIR"
# Binaries carry the source path they were configured in; make it resolve here.
CONFIGURED_ROOT="$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$BUILD/CMakeCache.txt")"
if [[ -n "$CONFIGURED_ROOT" && "$CONFIGURED_ROOT" != "$ROOT" && ! -e "$CONFIGURED_ROOT" ]]; then
  mkdir -p "$(dirname "$CONFIGURED_ROOT")" && ln -s "$ROOT" "$CONFIGURED_ROOT"
fi
CONFIGURED_BUILD="$(sed -n 's/^CMAKE_CACHEFILE_DIR:INTERNAL=//p' "$BUILD/CMakeCache.txt")"
if [[ -n "$CONFIGURED_BUILD" && "$CONFIGURED_BUILD" != "$BUILD" && ! -e "$CONFIGURED_BUILD" ]]; then
  ln -s "$BUILD" "$CONFIGURED_BUILD"
fi
cmake -P "$ROOT/cmake/unpack_fixtures.cmake"  # the fixture binaries travel compressed
export LD_LIBRARY_PATH="$BUILD:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export AOTI_CUDA_QUIET=1

{
  date -u
  nvidia-smi -L
  "$BUILD/aoti_cuda" devices
} 2>&1 | tee "$OUT_DIR/env.log"

status=0
echo "== GPU test suite" | tee "$OUT_DIR/gpu_tests.log"
stdbuf -oL -eL "$BUILD/tests/aoti_cuda_gpu_tests" -s=false --duration=true 2>&1 | tee -a "$OUT_DIR/gpu_tests.log" || status=1

# The CPU suites run in CI; a pack without them (device-llm.sh --prepare with SUITE=1 leaves them out to fit the
# transfer) says so instead of failing the suite. packed BINARY LOG: whether the pack has BINARY (else LOG says not).
packed() { [[ -x "$1" ]] || { echo "not in this pack (a CPU suite: CI runs it)" | tee -a "$2"; return 1; }; }
echo "== CPU test suite on the GPU machine" | tee "$OUT_DIR/unit_tests.log"
if packed "$BUILD/tests/aoti_cuda_unit_tests" "$OUT_DIR/unit_tests.log"; then
  "$BUILD/tests/aoti_cuda_unit_tests" 2>&1 | tail -5 | tee -a "$OUT_DIR/unit_tests.log" || status=1
fi

echo "== heap allocations per call (tests/alloc)" | tee "$OUT_DIR/alloc_tests.log"
if packed "$BUILD/tests/aoti_cuda_alloc_tests" "$OUT_DIR/alloc_tests.log"; then
  "$BUILD/tests/aoti_cuda_alloc_tests" 2>&1 | tee -a "$OUT_DIR/alloc_tests.log" || status=1
fi

{
  echo "== aoti_cuda run (every fixture, reference inputs, --expect)"
  for dir in "$ROOT"/tests/fixtures/*/; do
    name="$(basename "$dir")"
    python3 - "$dir" "$BUILD/aoti_cuda" <<'PY' || status=1
import json, subprocess, sys, os
d, cli = sys.argv[1], sys.argv[2]
m = json.load(open(os.path.join(d, "manifest.json")))
if m.get("expect_not_runnable"):
    r = subprocess.run([cli, "run", os.path.join(d, m["pte"]), "--random"], capture_output=True, text=True)
    print(f"{m['name']}: expected refusal -> rc={r.returncode} {r.stderr.strip()[:300]}")
    sys.exit(0 if r.returncode != 0 else 1)
rc = 0
for meth, spec in m["methods"].items():
    cmd = [cli, "run", os.path.join(d, m["pte"]), "--method", meth]
    for i in spec["inputs"]:
        cmd += ["--input", os.path.join(d, i["file"]) + "@" + ",".join(str(x) for x in i["shape"])]
    for o in spec["outputs"]:
        cmd += ["--expect", os.path.join(d, o["file"])]
    tol = spec["outputs"][0]
    cmd += ["--atol", str(tol.get("atol", 1e-3)), "--rtol", str(tol.get("rtol", 1e-3))]
    r = subprocess.run(cmd, capture_output=True, text=True)
    print(r.stdout.strip() or r.stderr.strip())
    if r.returncode != 0:
        print("  FAILED:", r.stderr.strip()[:500]); rc = 1
sys.exit(rc)
PY
  done
} 2>&1 | tee "$OUT_DIR/cli_run.log"

{
  echo "== CLI cases that need a GPU (tests/cli/gpu_cases.sh)"
  sh "$ROOT/tests/cli/gpu_cases.sh" "$BUILD/aoti_cuda" "$ROOT/tests/fixtures" "$OUT_DIR/cli_gpu_out" || status=1
  echo "== examples (exit 0 each)"
  fx="$ROOT/tests/fixtures"
  ex="$BUILD/examples"
  if [[ -x "$ex/minimal/minimal" ]]; then
    "$ex/minimal/minimal" "$fx/mlp/mlp.pte" "$fx/mlp/forward.in0.bin" || status=1
    "$ex/device_io/device_io" "$fx/mlp/mlp.pte" "$fx/mlp/forward.in0.bin" "$fx/mlp/forward.out0.bin" || status=1
    "$ex/encoder_decoder/encoder_decoder" "$fx/encdec/encdec.pte" "$fx/encdec/encode.in0.bin" "$fx/encdec/encode.out0.bin" || status=1
    if [[ -f "$ex/dlpack_torch/libaoti_cuda_torch_bridge.so" ]]; then
      python3 "$ROOT/examples/dlpack_torch/run_with_torch.py" "$ex/dlpack_torch/libaoti_cuda_torch_bridge.so" \
        "$fx/mlp/mlp.pte" "$fx/mlp/forward.in0.bin" "$fx/mlp/forward.out0.bin" || status=1
    fi
  else
    echo "(examples not built in $BUILD)"
  fi
} 2>&1 | tee "$OUT_DIR/cli_examples.log"

if [[ -n "${DEVICE_SUITE_NO_BENCH:-}" ]]; then exit $status; fi  # benchmarks run elsewhere in this job
echo "== benchmarks" | tee "$OUT_DIR/bench.log"
"$BUILD/bench/aoti_cuda_bench" --runs 200 --loads 5 --json "$OUT_DIR/bench.json" "$ROOT/tests/fixtures" 2>&1 | tee -a "$OUT_DIR/bench.log"
"$BUILD/aoti_cuda" bench "$ROOT/tests/fixtures/mlp/mlp.pte" --runs 500 --profile 2>&1 | tee -a "$OUT_DIR/bench.log"
exit $status
