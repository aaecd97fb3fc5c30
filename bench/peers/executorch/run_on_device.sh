#!/usr/bin/env bash
# aoti_cuda and ExecuTorch's own CUDA runtime on the same programs, in one GPU-machine command.
#
#   bash bench/peers/executorch/run_on_device.sh OUT BUILD_AOTI BUILD_ET
#
#   OUT         where results go ("$OUT" on the lent machine)
#   BUILD_AOTI  this repository's build, packed by tools/contrib/gpu-machine/device-pack.sh (aoti_cuda,
#               bench/aoti_cuda_bench, and examples/generate/generate for the LLM part)
#   BUILD_ET    the peer's build from bench/peers/executorch/build.sh, packed the same way (et_runner and
#               libaoti_cuda_shims.so side by side)
# Environment:
#   FIXTURES    fixture folder (default: <repo>/tests/fixtures, unpacked from tests/fixtures.tar.xz when needed)
#   LLM_WORK    bench/llm's work folder; its exports WORK/<name>/llm.pte (+ aoti_cuda_blob.ptd) are measured when
#               present (default /tmp/llm_bench; make them first with bench/llm/run_on_device.sh ... --stage prepare)
#   LLM_EXPORTS which exports (default bf16,int4)
#   BUDGET      seconds for everything (default 280)
#   PARTS       fixtures,agreement,cold,llm (default: all)
#   BUILD_ET13  optional second peer build, ExecuTorch v1.3.0 (ET_TAG=v1.3.0 build.sh), packed likewise: its per-call
#               p50 on the fixtures, and the LLM with weight_sharing_across_methods + decode in a CUDA graph
# Writes OUT/executorch_results.json, OUT/executorch.md + .json (bench/peers/executorch/report.py),
# OUT/executorch_run.log and OUT/executorch_logs.tgz (every step's command line and output).
set -uo pipefail
OUT=${1:?usage: run_on_device.sh OUT BUILD_AOTI BUILD_ET}
BUILD_AOTI=$(cd "${2:?usage: run_on_device.sh OUT BUILD_AOTI BUILD_ET}" && pwd)
BUILD_ET=$(cd "${3:?usage: run_on_device.sh OUT BUILD_AOTI BUILD_ET}" && pwd)
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
FIXTURES=${FIXTURES:-$REPO/tests/fixtures}
mkdir -p "$OUT"
main() {
  if [[ ! -f "$FIXTURES/add/add.pte" && -f "$REPO/cmake/unpack_fixtures.cmake" ]]; then
    (cd "$REPO" && cmake -P cmake/unpack_fixtures.cmake)
  fi
  [[ -f "$FIXTURES/add/add.pte" ]] || { echo "error: no unpacked fixtures in $FIXTURES"; return 3; }
  chmod +x "$BUILD_ET/et_runner" "$BUILD_AOTI/aoti_cuda" "$BUILD_AOTI/bench/aoti_cuda_bench" \
    "$BUILD_AOTI/examples/generate/generate" 2>/dev/null || true
  # The packed aoti_cuda build finds libaoti_cuda.so.0 beside its programs only through the loader path.
  export LD_LIBRARY_PATH="$BUILD_AOTI${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  date -u; nvidia-smi -L 2>/dev/null
  python3 "$HERE/device_run.py" --out "$OUT" --aoti "$BUILD_AOTI" --et "$BUILD_ET" --fixtures "$FIXTURES" \
    --llm-work "${LLM_WORK:-/tmp/llm_bench}" --llm-exports "${LLM_EXPORTS:-bf16,int4}" \
    --budget "${BUDGET:-280}" --parts "${PARTS:-fixtures,agreement,cold,llm}" ${BUILD_ET13:+--et13 "$BUILD_ET13"}
  local rc=$?
  python3 "$HERE/report.py" "$OUT/executorch_results.json" --out "$OUT" || rc=1
  # The device tool brings back at most 8 files: the per-step logs travel as one archive.
  mv "$OUT"/aoti_fixtures.json "$OUT/logs/" 2>/dev/null
  tar -czf "$OUT/executorch_logs.tgz" -C "$OUT" logs && rm -rf "$OUT/logs"
  date -u
  return $rc
}
main 2>&1 | tee "$OUT/executorch_run.log"
exit "${PIPESTATUS[0]}"
