#!/usr/bin/env bash
# Runs every test: the CPU suites (reader, shim, Module through a fake model
# library, CLI), the GPU suites (skipped with a visible message when no GPU is
# present), the Python package (pip install + pytest tests/python, its GPU
# tests skipped likewise), the Triton backend behind the real tritonserver
# (tests/triton, CPU only), an install + find_package(aoti_cuda) consumer build, the CPU suites
# again under AddressSanitizer + UndefinedBehaviorSanitizer + LeakSanitizer,
# the CPU suites again under ThreadSanitizer (zero reports: any report fails
# the run), the three libFuzzer targets for 30 s each, and the exporter's
# pure-Python self-test over the fixtures.
set -euo pipefail
source "$(dirname "$0")/env.sh"
"$ROOT/scripts/setup-deps.sh"

passed=0
failed=0
# run_ctest <build-dir> [ctest args...]: runs ctest and adds its counts to the totals.
run_ctest() {
  local dir="$1"; shift
  local log
  log="$(mktemp)"
  (cd "$dir" && ctest --output-on-failure "$@") 2>&1 | tee "$log" || true
  local line total bad
  line="$(grep -E '[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -1)"
  if [[ -z "$line" ]]; then
    echo "ctest in $dir did not report a summary"; failed=$((failed + 1))
  else
    total="$(sed -E 's/.* out of ([0-9]+).*/\1/' <<<"$line")"
    bad="$(sed -E 's/.*, ([0-9]+) tests? failed.*/\1/' <<<"$line")"
    passed=$((passed + total - bad)); failed=$((failed + bad))
  fi
  rm -f "$log"
}

# run_pytest <python> <build-dir>: installs the Python package with pip, reusing
# the CMake build <build-dir> (only the extension is relinked), runs tests/python
# against the installed package and adds pytest's counts to the totals.
run_pytest() {
  local py="$1" build="$2" log
  log="$(mktemp)"
  ( "$py" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps --force-reinstall \
        -Cbuild-dir="$build" -Ccmake.build-type="${BUILD_TYPE:-RelWithDebInfo}" "$ROOT" &&
    cd "$ROOT/tests/python" &&
    AOTI_CUDA_TEST_BUILD="$build" "$py" -m pytest -q -rs -p no:cacheprovider ) 2>&1 | tee "$log" || true
  add_pytest_counts "$log"
  rm -f "$log"
}

# add_pytest_counts <log>: adds the counts of pytest's summary line in <log> to the totals.
add_pytest_counts() {
  local line
  line="$(grep -E '[0-9]+ (passed|failed|skipped|errors?)( |,|$)' "$1" | grep -E ' in [0-9.]+s' | tail -1)"
  if [[ -z "$line" ]]; then
    echo "pytest did not report a summary"; failed=$((failed + 1))
  else
    passed=$((passed + $(grep -oE '[0-9]+ passed' <<<"$line" | grep -oE '[0-9]+' || echo 0)))
    failed=$((failed + $(grep -oE '[0-9]+ failed' <<<"$line" | grep -oE '[0-9]+' || echo 0)))
    failed=$((failed + $(grep -oE '[0-9]+ errors?' <<<"$line" | grep -oE '[0-9]+' || echo 0)))
  fi
}

# check <title> <command...>: a self-checking script, counted once: passed when it exits 0.
check() {
  local title="$1"; shift
  echo
  echo "== $title"
  if "$@"; then passed=$((passed + 1)); else echo "FAILED: $title"; failed=$((failed + 1)); fi
}

echo "== [1/4] build + test (${BUILD_TYPE:-RelWithDebInfo})"
BUILD="$ROOT/build"
# The Python package is built in this build too (a virtual environment with its
# build and test requirements: scripts/setup-python.sh).
PY="$("$ROOT/scripts/setup-python.sh" "$BUILD/pyvenv" | tail -1)"
configure "$BUILD" -DAOTI_CUDA_BUILD_TESTS=ON -DAOTI_CUDA_BUILD_TOOLS=ON -DAOTI_CUDA_BUILD_BENCH=ON \
  -DAOTI_CUDA_BUILD_PYTHON=ON -DPython_EXECUTABLE="$PY" -DAOTI_CUDA_BUILD_TRITON=ON
cmake --build "$BUILD" -j "$JOBS"
run_ctest "$BUILD"

echo
echo "== Python package: pip install . (reusing the build above) + pytest tests/python (GPU tests skip without a GPU)"
run_pytest "$PY" "$BUILD"

# ---- Triton Inference Server backend (integrations/triton) -------------------
echo
echo "== Triton backend: the real tritonserver (nvidia-pytriton 0.7.0) with libtriton_aoti_cuda.so from the build"
echo "   above, serving the fake CPU programs over HTTP and gRPC (tests/triton; needs no GPU)"
if TRITON_PY="$("$ROOT/scripts/setup-triton.sh" "$BUILD/triton-venv" | tail -1)"; then
  triton_log="$(mktemp)"
  ( cd "$ROOT/tests/triton" &&
    AOTI_CUDA_TEST_BUILD="$BUILD" timeout 600 "$TRITON_PY" -m pytest -q -rs -p no:cacheprovider ) 2>&1 | tee "$triton_log" || true
  add_pytest_counts "$triton_log"
  rm -f "$triton_log"
else
  echo "scripts/setup-triton.sh FAILED: the Triton backend's tests did not run"; failed=$((failed + 1))
fi
# ---- end of the Triton backend stage ------------------------------------------

echo
echo "== [2/4] build + CPU tests under ASan + UBSan + LSan"
ASAN_BUILD="$ROOT/build-asan"
BUILD_TYPE=Debug configure "$ASAN_BUILD" -DAOTI_CUDA_SANITIZE=ON -DAOTI_CUDA_BUILD_TESTS=ON -DAOTI_CUDA_BUILD_BENCH=OFF
cmake --build "$ASAN_BUILD" -j "$JOBS" --target aoti_cuda_unit_tests aoti_cuda_alloc_tests
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 run_ctest "$ASAN_BUILD" -R '^(unit|call_allocations)$'

echo
echo "== [3/4] build + CPU tests under ThreadSanitizer"
TSAN_BUILD="$ROOT/build-tsan"
BUILD_TYPE=RelWithDebInfo configure "$TSAN_BUILD" -DAOTI_CUDA_SANITIZE_THREAD=ON -DAOTI_CUDA_BUILD_TESTS=ON \
  -DAOTI_CUDA_BUILD_TOOLS=OFF -DAOTI_CUDA_BUILD_BENCH=OFF -DAOTI_CUDA_BUILD_EXAMPLES=OFF
cmake --build "$TSAN_BUILD" -j "$JOBS" --target aoti_cuda_unit_tests
# halt_on_error: the first report fails the suite; suppressions (each with its
# reason) live in tests/tsan.supp.
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$ROOT/tests/tsan.supp" run_ctest "$TSAN_BUILD" -R '^unit$'

echo
echo "== fuzzing: each libFuzzer target ${AOTI_CUDA_FUZZ_SECONDS:-30} s from the kept corpus (tests/fuzz; a crash, leak or timeout fails it)"
# Check mode: new inputs go to a temporary folder; the tracked corpus and
# tests/fuzz/executions.tsv stay untouched. Each target counts once in the totals.
for t in pte ptd elf; do
  if AOTI_CUDA_FUZZ_CHECK=1 AOTI_CUDA_FUZZ_BUILD="$ROOT/build-fuzz" \
    bash "$ROOT/tests/fuzz/run.sh" "${AOTI_CUDA_FUZZ_SECONDS:-30}" "$t"; then
    passed=$((passed + 1))
  else
    echo "fuzz target $t FAILED"; failed=$((failed + 1))
  fi
done

check "[4/4] exporter self-test (fixture manifests and imports re-derived from the programs)" \
  python3 "$ROOT/tools/export/export_models.py" --self-test "$ROOT/tests/fixtures"

check "exporter --gemm cublas, --fusion and --autotune patches (tools/export/test_gemm_backend.py; no torch needed)" \
  python3 "$ROOT/tools/export/test_gemm_backend.py"

check "exporter --sdpa flash and decode-op patches (tools/export/test_sdpa_backend.py; no torch needed)" \
  python3 "$ROOT/tools/export/test_sdpa_backend.py"

check "exporter --split-lowering (tools/export/test_split_lowering.py; no torch needed)" \
  python3 "$ROOT/tools/export/test_split_lowering.py"

check "the export timeline (tools/export/test_timeline.py; no torch needed)" \
  python3 "$ROOT/tools/export/test_timeline.py"

check "jobs longer than a device call (tools/contrib/gpu-machine/test_detach.sh)" \
  bash "$ROOT/tools/contrib/gpu-machine/test_detach.sh"

check "the GPU machine's LLM job summaries (tools/contrib/gpu-machine/test_llm_job.py; no torch needed)" \
  python3 "$ROOT/tools/contrib/gpu-machine/test_llm_job.py"

check "benchmark report (bench/test_report.py; no torch needed)" python3 "$ROOT/bench/test_report.py"
check "ExecuTorch peer report (bench/peers/executorch/test_report.py; no torch needed)" \
  python3 "$ROOT/bench/peers/executorch/test_report.py"

check "LLM exporter's lowering options (tools/export/llm/test_export_options.py; no torch needed)" \
  python3 "$ROOT/tools/export/llm/test_export_options.py"

echo
echo "== the exporter's torch tests (tools/export/llm: the benchmark model, its operators through AOTInductor)"
echo "   in PyTorch 2.11 + torchao 0.17 from PyPI (scripts/setup-torch.sh; CPU only)"
if TORCH_PY="$("$ROOT/scripts/setup-torch.sh" "$BUILD/torch-venv" | tail -1)"; then
  for t in test_model.py test_decode_op_codegen.py; do
    if "$TORCH_PY" "$ROOT/tools/export/llm/$t"; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
  done
else
  echo "scripts/setup-torch.sh FAILED: the exporter's torch tests did not run"; failed=$((failed + 1))
fi

echo
echo "aoti_cuda: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
