#!/usr/bin/env bash
# The LLM + per-call benchmark in one GPU-machine command (see bench/llm/bench_llm.py).
#
#   bash bench/llm/run_on_device.sh OUT BUILD [CONFIG] [PARTS] [BUDGET_S] [LAYERS]
#
#   OUT      where results go ("$OUT" on the lent machine; at most 8 files come back)
#   BUILD    this repository's build folder, packed by tools/contrib/gpu-machine/device-pack.sh and carried
#            (needs examples/generate/generate and the aoti_cuda CLI)
#   CONFIG   model config of tools/export/llm/model.py: 1b (default), small, tiny
#   PARTS    comma list of llm,int4,cublas,compile,fixtures (default: llm,int4,compile,fixtures;
#            cublas = a third aoti_cuda export, bf16 with cuBLAS GEMMs: export_llm.py --gemm cublas)
#   BUDGET_S seconds for everything, 540 by default (the call limit is 600; the rest is set-up)
#   LAYERS   optional n_layers override
#
# LLM_BENCH_EXTRA (environment): more bench_llm.py flags, e.g. "--stage prepare" (exports, packages and
# builds only) then, right after on the still-warm machine, "--stage measure" (reuses /tmp/llm_bench);
# "--fixture-models mlp,encdec"; "--export-timeout 400"; "--exports bf16cublas" (only that export).
#
# Needs the wheels in <repo>/.whl (carry ".whl": executorch 1.2.0, torchao 0.17, flatbuffers,
# ruamel.yaml, tabulate). Writes OUT/llm_results.json, OUT/calls_results.json, OUT/bench_steps.log,
# OUT/bench.log. Turn them into docs/benchmarks/ with: python3 bench/report.py OUT
set -uo pipefail
OUT=${1:?usage: run_on_device.sh OUT BUILD [CONFIG] [PARTS] [BUDGET_S] [LAYERS]}
BUILD=${2:?usage: run_on_device.sh OUT BUILD [CONFIG] [PARTS] [BUDGET_S] [LAYERS]}
CONFIG=${3:-1b}
PARTS=${4:-llm,int4,compile,fixtures}
BUDGET=${5:-540}
LAYERS=${6:-}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SITE=${AOTI_EXPORT_SITE:-/tmp/site}
WORK=${LLM_BENCH_WORK:-/tmp/llm_bench}
mkdir -p "$OUT" "$WORK"
cd "$REPO"

main() {
  local t0=$SECONDS
  export PYTHONUNBUFFERED=1
  export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
  if ! python3 -c 'import executorch.exir, torchao' >/dev/null 2>&1; then
    echo "installing wheels from $REPO/.whl into $SITE"
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target "$SITE" "$REPO"/.whl/*.whl || { echo "error: wheel install failed (carry .whl)"; return 3; }
  fi
  export FLATC_EXECUTABLE="$SITE/executorch/data/bin/flatc"
  chmod +x "$FLATC_EXECUTABLE" 2>/dev/null || true
  # Inductor/Triton caches in WORK: a second command on the same warm machine reuses them.
  export TORCHINDUCTOR_CACHE_DIR="$WORK/cache/inductor" TRITON_CACHE_DIR="$WORK/cache/triton"
  mkdir -p "$TORCHINDUCTOR_CACHE_DIR" "$TRITON_CACHE_DIR"
  # The carried build lost its executable bits? (device-pack keeps them; be safe)
  chmod +x "$BUILD"/examples/generate/generate "$BUILD"/aoti_cuda "$BUILD"/bench/aoti_cuda_read_bw 2>/dev/null || true
  export LD_LIBRARY_PATH="$BUILD${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  date -u; nvidia-smi -L 2>/dev/null
  echo "set-up took $((SECONDS - t0))s"
  local rest=$((BUDGET - (SECONDS - t0)))
  python3 bench/llm/bench_llm.py --out "$OUT" --build "$BUILD" --config "$CONFIG" --parts "$PARTS" ${LLM_BENCH_EXTRA:-} \
      --budget "$rest" --work "$WORK" ${LAYERS:+--layers "$LAYERS"}
  local rc=$?
  date -u
  return $rc
}

main 2>&1 | tee "$OUT/bench.log"
exit "${PIPESTATUS[0]}"
