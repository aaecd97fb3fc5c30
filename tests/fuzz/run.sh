#!/usr/bin/env bash
# Builds the reader fuzzer with clang (libFuzzer + ASan + UBSan) and runs it.
#   tests/fuzz/run.sh [seconds]      (default 120)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
SECONDS_TO_RUN="${1:-120}"
B="$ROOT/build-fuzz"
cmake -S "$ROOT" -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DAOTI_CUDA_BUILD_TESTS=OFF -DAOTI_CUDA_BUILD_TOOLS=OFF -DAOTI_CUDA_BUILD_BENCH=OFF -DAOTI_CUDA_BUILD_FUZZ=ON >/dev/null
cmake --build "$B" --target aoti_cuda_fuzz_program
CORPUS="$B/corpus"
mkdir -p "$CORPUS"
# Seeds: every fixture program with its data file (truncated .so segments keep runs fast).
python3 - "$ROOT/tests/fixtures" "$CORPUS" <<'PY'
import os, struct, sys
src, out = sys.argv[1], sys.argv[2]
for name in sorted(os.listdir(src)):
    d = os.path.join(src, name)
    pte, ptd = os.path.join(d, name + ".pte"), os.path.join(d, "aoti_cuda_blob.ptd")
    if not os.path.exists(pte):
        continue
    p = open(pte, "rb").read()
    q = open(ptd, "rb").read() if os.path.exists(ptd) else b""
    open(os.path.join(out, name), "wb").write(struct.pack("<I", len(p)) + p + q)
PY
"$B/tests/fuzz/aoti_cuda_fuzz_program" -max_total_time="$SECONDS_TO_RUN" -max_len=4000000 -rss_limit_mb=4096 \
  -print_final_stats=1 "$CORPUS"
