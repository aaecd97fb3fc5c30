#!/usr/bin/env bash
# Main job: build aoti_cuda and run the bundled example program
# (tests/fixtures/mlp: an MLP exported by ExecuTorch 1.2.0's CUDA backend).
# Without a GPU it inspects the program instead and says why it cannot run.
set -euo pipefail
source "$(dirname "$0")/env.sh"
"$ROOT/scripts/setup-deps.sh"

BUILD="$ROOT/build"
configure "$BUILD" -DAOTI_CUDA_BUILD_TESTS=OFF
cmake --build "$BUILD" -j "$JOBS" --target aoti_cuda_cli

MODEL="$ROOT/tests/fixtures/mlp/mlp.pte"
INPUT="$ROOT/tests/fixtures/mlp/forward.in0.bin"
CLI="$BUILD/aoti_cuda"

echo
echo "== aoti_cuda inspect $MODEL"
# Exit status 3 = valid but not runnable on this machine; the checks printed say why.
inspect_rc=0
"$CLI" inspect "$MODEL" || inspect_rc=$?
if [[ $inspect_rc -ne 0 && $inspect_rc -ne 3 ]]; then exit "$inspect_rc"; fi
echo
if "$CLI" devices >/dev/null 2>&1; then
  echo "== aoti_cuda run $MODEL"
  "$CLI" run "$MODEL" --input "$INPUT" --expect "$ROOT/tests/fixtures/mlp/forward.out0.bin"
  echo
  echo "== aoti_cuda bench $MODEL"
  "$CLI" bench "$MODEL" --runs 200
else
  echo "== cannot run $MODEL here:"
  "$CLI" devices || true
  echo "   The program was parsed and validated above, and 'checks against this machine' say what"
  echo "   is missing here: running it needs an NVIDIA GPU (the embedded kernels target sm_90) with"
  echo "   driver support for CUDA 13, and glibc >= 2.38 (what the exporting machine had)."
fi
