#!/usr/bin/env bash
# CPU test of the LLM device job (ctest llmjob_dry_run; no GPU, no torch):
#   1. llm_job.py's helpers (test_llm_job.py);
#   2. device-llm.sh --dry-run over a pack made of this build's binaries, stub ExecuTorch runners and empty wheel
#      files: must pass;
#   3. the same with five things broken (a runner flag, a generate flag, a second torchao wheel, a missing library,
#      a carry over the size limit): it must fail, naming each; then, put back, pass again;
#   4. the real step machinery (STAGE selftest): a step that passes, times out, fails, is cut to the stage's
#      deadline, is skipped; the results file and the logs' archive.
#
#   tools/contrib/gpu-machine/test_device_llm.sh BUILD_DIR
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BUILD="$(cd "${1:?usage: test_device_llm.sh BUILD_DIR}" && pwd)"
T="$(mktemp -d)"; trap 'rm -rf "$T"' EXIT
passed=0; failed=0
ok() { echo "ok   $1"; passed=$((passed + 1)); }
bad() { echo "FAIL $1"; failed=$((failed + 1)); }

if python3 "$HERE/test_llm_job.py" > "$T/helpers.log" 2>&1; then ok "llm_job.py helpers"; else cat "$T/helpers.log"; bad "llm_job.py helpers"; fi

# The carry folder device-llm.sh --prepare makes, from links to this build (same layout, nothing copied).
C="$T/carry"
for f in aoti_cuda libaoti_cuda.so.0 examples/generate/generate bench/aoti_cuda_read_bw bench/aoti_cuda_bench \
         tests/aoti_cuda_load_order_tests tests/libaoti_cuda_load_order_cases.so bench/libaoti_cuda_graph_trace.so \
         CMakeCache.txt; do
  mkdir -p "$C/aoti/$(dirname "$f")"; ln -s "$BUILD/$f" "$C/aoti/$f"
done
stub_runner() {  # the strings et_runner's generate parses (the dry run greps the binary for them)
  mkdir -p "$1"
  printf '#!/bin/sh\n# stub et_runner: generate --data --prompt-lens --new-tokens --reps --expect-tokens --weight-sharing --cuda-graph\nexit 3\n' > "$1/et_runner"
  chmod +x "$1/et_runner"; : > "$1/libaoti_cuda_shims.so"
}
stub_runner "$C/et12"; stub_runner "$C/et13"
mkdir -p "$C/whl"
for w in executorch-1.2.0-cp312-cp312-manylinux_2_28_x86_64.whl torchao-0.17.0-cp310-abi3-manylinux_2_28_x86_64.whl \
         flatbuffers-25.12.19-py2.py3-none-any.whl ruamel_yaml-0.19.1-py3-none-any.whl tabulate-0.10.0-py3-none-any.whl; do
  : > "$C/whl/$w"
done

dry() { CARRY="$C" bash "$HERE/device-llm.sh" --dry-run "$T/out" "$C/aoti" all > "$T/dry.log" 2>&1; }
expect_pass() {
  if dry; then ok "$1"; else cat "$T/dry.log"; bad "$1"; fi
}

expect_pass "dry run over this build: every stage's binaries, scripts, flags, wheels and sizes"

# Five things broken at once (one dry run, ~2 s each): each must be named.
sed -i 's/--weight-sharing //' "$C/et13/et_runner"
rm "$C/aoti/examples/generate/generate"
printf '#!/bin/sh\necho "usage: generate llm.pte [--prompt-lens 1] [--new-tokens 2] [--reps 3] [--expect-tokens x] [--no-graphs] [--profile-kernels] [--json OUT]"\n' \
  > "$C/aoti/examples/generate/generate"
chmod +x "$C/aoti/examples/generate/generate"
: > "$C/whl/torchao-0.16.0-cp310-abi3-manylinux_2_28_x86_64.whl"
rm "$C/aoti/tests/libaoti_cuda_load_order_cases.so"
truncate -s 61M "$C/big.bin"  # sparse: no disk used here, but 61 MiB would travel
if dry; then cat "$T/dry.log"; bad "five broken things: the dry run passed"; else
  for case in "an ExecuTorch runner without --weight-sharing|et13/et_runner does not know --weight-sharing" \
              "a generate without --decode-at|generate --help does not list --decode-at" \
              "two torchao wheels|2 torchao wheels" \
              "the load-order cases library left out of the pack|libaoti_cuda_load_order_cases.so is missing" \
              "a carry that takes the call over the size limit|reach 60 MiB"; do
    if grep -qF -- "${case#*|}" "$T/dry.log"; then ok "${case%%|*}"; else bad "${case%%|*}: no line says '${case#*|}'"; fi
  done
fi
stub_runner "$C/et13"
rm "$C/aoti/examples/generate/generate"; ln -s "$BUILD/examples/generate/generate" "$C/aoti/examples/generate/generate"
rm "$C/whl/torchao-0.16.0-cp310-abi3-manylinux_2_28_x86_64.whl" "$C/big.bin"
ln -s "$BUILD/tests/libaoti_cuda_load_order_cases.so" "$C/aoti/tests/libaoti_cuda_load_order_cases.so"

expect_pass "dry run passes again once everything is put back"

# LLM_PARTS=int4: A measures the int4 export alone (no bf16 upload check, ExecuTorch on int4 only); a bad value stops.
if LLM_PARTS=int4 CARRY="$C" bash "$HERE/device-llm.sh" --dry-run "$T/out" "$C/aoti" A2 > "$T/int4.log" 2>&1 &&
   grep -q 'run_on_device.sh .* 1b int4 225' "$T/int4.log" && grep -q 'LLM_EXPORTS=int4 ' "$T/int4.log" &&
   ! grep -q 'upload_cpp' "$T/int4.log"; then ok "LLM_PARTS=int4: A2 measures the int4 export alone"
else cat "$T/int4.log"; bad "LLM_PARTS=int4: A2 measures the int4 export alone"; fi
if LLM_PARTS=fp8 bash "$HERE/device-llm.sh" --dry-run "$T/out" "$C/aoti" A2 > "$T/bad_parts.log" 2>&1; then
  bad "LLM_PARTS=fp8 was accepted"
elif grep -q "LLM_PARTS must name llm and/or int4" "$T/bad_parts.log"; then ok "LLM_PARTS=fp8 is refused, saying why"
else cat "$T/bad_parts.log"; bad "LLM_PARTS=fp8: no reason given"; fi

# LONG_EXPORT_FLAGS reaches every long export (not the stock one), and a flag export_llm.py does not know stops the
# dry run.
if LONG_EXPORT_FLAGS="--autotune off" LONG_EXPORTS=bf16dopqf,int4dopqf REF_EXPORT=1 CARRY="$C" \
     bash "$HERE/device-llm.sh" --dry-run "$T/out" "$C/aoti" BC > "$T/flags.log" 2>&1 &&
   [[ $(grep -c 'export_.*dopqf.*--sdpa decode-op-fused --autotune off$' "$T/flags.log") == 2 ]] &&
   grep 'export_ref' "$T/flags.log" | grep -q -v -- '--autotune'; then
  ok "LONG_EXPORT_FLAGS: added to both long exports, not to the stock one"
else cat "$T/flags.log"; bad "LONG_EXPORT_FLAGS: added to both long exports, not to the stock one"; fi
if LONG_EXPORT_FLAGS="--autotune fast" LONG_EXPORTS=bf16dopqf CARRY="$C" \
     bash "$HERE/device-llm.sh" --dry-run "$T/out" "$C/aoti" BC > "$T/bad_flags.log" 2>&1; then
  bad "LONG_EXPORT_FLAGS=--autotune fast was accepted"
else ok "LONG_EXPORT_FLAGS with a value export_llm.py refuses stops the dry run"; fi

# The reference flags generate gets from an export's manifest: the tokens, and eager's highest logits when recorded;
# generate must parse what they become (it then stops for want of the program or a GPU, not at its options: not 2).
source <(sed -n '/^expect_tokens() {/,/^}/p' "$HERE/device-llm.sh")
echo '{"reference": {"prompt_len": 128, "tokens": [5, 9], "top": [[[5, 12.5], [9, 12.4375]], [[9, 3.0], [1, -2.5]]]}}' \
  > "$T/with_top.json"
echo '{"reference": {"prompt_len": 128, "tokens": [5, 9]}}' > "$T/tokens_only.json"
echo '{"reference": {"prompt_len": 512, "tokens": [5, 9], "top": [[[5, 1.0]], [[9, 1.0]]]}}' > "$T/other_prompt.json"
flags="$(expect_tokens "$T/with_top.json")"
"$BUILD/examples/generate/generate" "$T/none.pte" $flags > "$T/gen_flags.log" 2>&1; rc=$?
if [[ "$flags" == "--expect-tokens 5,9 --expect-top 5:12.5,9:12.4375;9:3,1:-2.5" && $rc != 2 &&
      "$(expect_tokens "$T/tokens_only.json")" == "--expect-tokens 5,9" && -z "$(expect_tokens "$T/other_prompt.json")" ]]
then ok "reference flags: tokens, eager's highest logits when recorded, and generate parses them"
else echo "flags: '$flags' (generate exit $rc)"; cat "$T/gen_flags.log"; bad "reference flags from the manifest"; fi

# The exports' tuning results (export_cache_save / export_cache_restore): only the tuners' choices travel, with their
# paths; a fresh WORK gets them back where Inductor looks.
source <(sed -n '/^export_cache_restore() {/,/^}/p;/^export_cache_save() {/,/^}/p' "$HERE/device-llm.sh")
DRY=0 WORK="$T/w1" OUT="$T/cache_out"; mkdir -p "$OUT" "$WORK/cache/inductor_int4/ab" "$WORK/cache/inductor_int4/cache" \
  "$WORK/cache/triton/XYZ"
echo '{"XBLOCK": 64, "found_by_coordesc": true}' > "$WORK/cache/inductor_int4/ab/cabc.best_config"
echo 'kernel source' > "$WORK/cache/inductor_int4/ab/cabc.py"
echo '{"mm": {}}' > "$WORK/cache/inductor_int4/cache/0123"
echo 'cubin' > "$WORK/cache/triton/XYZ/k.cubin"
export_cache_save > "$T/cache_save.log" 2>&1
saved=$(tar -tzf "$OUT/export_cache.tgz" 2>/dev/null | sort | paste -sd' ')
WORK="$T/w2" EXPORT_CACHE="$OUT/export_cache.tgz"; export_cache_restore > "$T/cache_restore.log" 2>&1
if [[ "$saved" == "./inductor_int4/ab/cabc.best_config ./inductor_int4/cache/0123" &&
      "$(cat "$T/w2/cache/inductor_int4/ab/cabc.best_config" 2>/dev/null)" == '{"XBLOCK": 64, "found_by_coordesc": true}' &&
      -f "$T/w2/cache/inductor_int4/cache/0123" && ! -e "$T/w2/cache/triton" ]] && grep -q '2 tuning results restored' "$T/cache_restore.log"
then ok "export cache: the tuners' results alone, saved and restored in place"
else echo "saved: $saved"; cat "$T/cache_save.log" "$T/cache_restore.log"; bad "export cache: save and restore"; fi
EXPORT_CACHE="$T/none.tgz"; WORK="$T/w3"
if export_cache_restore && [[ ! -e "$T/w3" ]]; then ok "export cache: none carried, nothing restored"
else bad "export cache: a missing archive"; fi

# The real step machinery (not the dry run): timeouts, failures, the stage deadline, results after every step.
MIN_STEP_S=1 STEP_MARGIN_S=1 BUDGET=8 bash "$HERE/device-llm.sh" "$T/self" "$C/aoti" selftest > "$T/self.log" 2>&1
if python3 - "$T/self/selftest_results.json" <<'PY' 2>&1
import json, sys
s = json.load(open(sys.argv[1]))["steps"]
want = {"passes": "ok", "outlives_timeout": "timeout", "fails": "failed (exit 1)", "cut_to_budget": "timeout",
        "skipped": "skipped (stage budget spent)"}
got = {k: v["status"] for k, v in s.items()}
print(got)
sys.exit(0 if got == want and s["outlives_timeout"]["seconds"] <= 3 else 1)
PY
then ok "steps: ok, timeout, failure, cut to the stage's deadline, skipped; results written"
else cat "$T/self.log"; bad "steps: statuses in selftest_results.json"; fi
if tar -tzf "$T/self/selftest_logs.tgz" | grep -q 'outlives_timeout.log'; then ok "steps: the logs' archive"
else bad "steps: the logs' archive"; fi
echo "device-llm dry run: $passed passed, $failed failed"
(( failed == 0 ))
