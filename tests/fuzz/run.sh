#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (libFuzzer + ASan + UBSan, LeakSanitizer
# on) and runs each one in turn, starting from the kept corpus
# (tests/fuzz/corpus/<target>) plus fresh seeds, then merges what it found back
# into that corpus (minimized: only inputs that add coverage).
#   tests/fuzz/run.sh [seconds-per-target] [target...]     (default 60; pte ptd elf)
# Every run appends one line per target to tests/fuzz/executions.tsv:
#   date  target  seconds (wall)  executions  exec/s  result(ok|crash|leak|timeout|oom)
# scripts/reliability-report.sh sums them. Anything but ok (libFuzzer exits
# non-zero on a crash, a sanitizer report, a leak, a -timeout or the RSS limit)
# stops the script with exit 1 and the reproducer in build-fuzz/crashes/ (turn
# it into a regression test).
# Runs at nice 19: the fuzzer shares the machine.
#
# AOTI_CUDA_FUZZ_CHECK=1 (what scripts/test.sh sets): the same runs, but the
# tracked tree is left alone: the fuzzer starts from a copy of the corpus in a
# temporary folder (removed on exit) where its new inputs go, nothing is merged
# into the corpus and executions.tsv is not appended to (the run's line goes to
# build-fuzz/logs/executions.tsv). A crash, leak or timeout still fails it.
set -euo pipefail
CHECK="${AOTI_CUDA_FUZZ_CHECK:-0}"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
SECONDS_PER_TARGET="${1:-60}"
shift || true
TARGETS=("$@")
[[ ${#TARGETS[@]} -gt 0 ]] || TARGETS=(pte ptd elf)
B="${AOTI_CUDA_FUZZ_BUILD:-$ROOT/build-fuzz}"
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/aoti_cuda-ccache}"
cmake -S "$ROOT" -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang-14 \
  -DCMAKE_CXX_COMPILER=clang++-14 -DAOTI_CUDA_BUILD_TESTS=OFF -DAOTI_CUDA_BUILD_TOOLS=OFF \
  -DAOTI_CUDA_BUILD_BENCH=OFF -DAOTI_CUDA_BUILD_EXAMPLES=OFF -DAOTI_CUDA_BUILD_FUZZ=ON >/dev/null
nice -n 19 cmake --build "$B" -j "${JOBS:-2}" --target aoti_cuda_fuzz_make_seeds \
  $(printf 'aoti_cuda_fuzz_%s ' "${TARGETS[@]}")
rm -rf "$B/seeds" && "$B/tests/fuzz/aoti_cuda_fuzz_make_seeds" "$B/seeds"
mkdir -p "$B/crashes" "$B/logs"
LOG="$ROOT/tests/fuzz/executions.tsv"
[[ "$CHECK" == 1 ]] && LOG="$B/logs/executions.tsv"
if [[ "$CHECK" == 1 ]]; then
  SCRATCH="$(mktemp -d "${TMPDIR:-/tmp}/aoti_cuda_fuzz.XXXXXX")"
  trap 'rm -rf "$SCRATCH"' EXIT
fi
[[ -f "$LOG" ]] || printf 'date\ttarget\tseconds\texecutions\texec_per_s\tresult\n' >"$LOG"

for t in "${TARGETS[@]}"; do
  case "$t" in
    pte | ptd) dict="$ROOT/tests/fuzz/dict/program.dict" ;;
    elf) dict="$ROOT/tests/fuzz/dict/elf.dict" ;;
    *) echo "unknown target $t (pte, ptd, elf)"; exit 2 ;;
  esac
  fuzzer="$B/tests/fuzz/aoti_cuda_fuzz_$t"
  kept="$ROOT/tests/fuzz/corpus/$t"
  work="$B/corpus/$t"
  [[ "$CHECK" == 1 ]] && work="$SCRATCH/$t"
  mkdir -p "$kept" && rm -rf "$work" && mkdir -p "$work"
  cp "$kept"/* "$B/seeds/$t"/* "$work"/ 2>/dev/null || true
  out="$B/logs/$t.log"
  echo "== $t: ${SECONDS_PER_TARGET}s from $(ls "$work" | wc -l) inputs"
  result=ok
  started=$SECONDS
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    nice -n 19 "$fuzzer" -max_total_time="$SECONDS_PER_TARGET" -max_len=8192 -timeout=5 -rss_limit_mb=2048 \
    -dict="$dict" -print_final_stats=1 -artifact_prefix="$B/crashes/$t-" "$work" >"$out" 2>&1 || result=crash
  if [[ $result != ok ]]; then
    if grep -q 'ERROR: LeakSanitizer' "$out"; then result=leak
    elif grep -q 'ERROR: libFuzzer: timeout' "$out"; then result=timeout
    elif grep -q 'ERROR: libFuzzer: out-of-memory' "$out"; then result=oom
    fi
  fi
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$out" | tail -1)"
  rate="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$out" | tail -1)"
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u +%FT%TZ)" "$t" "$((SECONDS - started))" "${execs:-0}" "${rate:-0}" \
    "$result" >>"$LOG"
  echo "   executions ${execs:-?}, ${rate:-?}/s, $result"
  if [[ $result != ok ]]; then
    tail -40 "$out"
    echo "reproducer(s): $(ls "$B/crashes" | sed "s|^|$B/crashes/|" | tr '\n' ' ')"
    exit 1
  fi
  [[ "$CHECK" == 1 ]] && continue  # check mode: the kept corpus stays as it is
  # Keep only inputs that add coverage.
  rm -rf "$kept.new" && mkdir -p "$kept.new"
  nice -n 19 "$fuzzer" -merge=1 -max_len=8192 -timeout=5 "$kept.new" "$work" >>"$out" 2>&1
  rm -rf "$kept" && mv "$kept.new" "$kept"
  echo "   corpus: $(ls "$kept" | wc -l) files, $(du -sk "$kept" | cut -f1) KB"
done
