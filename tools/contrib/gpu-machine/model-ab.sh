#!/usr/bin/env bash
# Two settings of the library in the 1.1 B model, in one device call: the fused-form exports (int4dopqf, bf16dopqf,
# `--autotune off`, a LONG_CTX-position cache) made on the machine with device-llm.sh's stage X, then examples/generate
# on each export once per entry of AB_SETTINGS, in that order (by default the int4 kernels' scale-after form on, off,
# on, off), each run checked against eager's tokens. One line per run in OUT/ab.txt, written as each run ends.
#
#   model-ab.sh OUT [PACK]           on the GPU machine, from the repository root (PACK default .carry/llmab)
#   model-ab.sh --dry-run [PACK]     here, without GPU or torch: every binary, script, flag, wheel, variable and the
#                                    export command lines, then the measurement loop on stub exports with a stub
#                                    generate; exits 1 on any mismatch
#   model-ab.sh --prepare BUILD [PACK]   here: PACK from a build folder (libaoti_cuda.so.0 and examples/generate,
#                                    stripped; the five wheels from .whl or WHL_SRC), then the dry run
#
# The device call (carry [".carry/llmab"], timeout_s 600):
#   bash tools/contrib/gpu-machine/model-ab.sh "$OUT"
#
# OUT gets: ab.txt (the machine, then one line per run: export, run, setting, decode tokens/s over NEW_TOKENS tokens
# -- the median of the PROMPT_LENS prompts' decodes in that process, each listed --, teacher-forced and free-running
# agreement with eager's reference tokens, and at the end each setting's median per export), ab_logs.tgz (every
# generate's log and JSON, the export stage's log; rewritten after every run), nvidia-smi.txt, and stage X's files
# (X_results.json, X_logs.tgz: the exports' logs with their timelines, export_cache.tgz).
#
# Environment: BUDGET (the whole job's seconds, default 540), MEASURE_S (kept for the runs after the exports,
# default 90: the exports are cut at BUDGET - MEASURE_S - set-up), EXPORTS (bench_llm.EXPORTS names, default
# int4dopqf,bf16dopqf: int4 measured first), EXPORT_FLAGS (added to each export, default `--autotune off`), LONG_CTX
# (default 4096, as stage BC's exports), AB_SETTINGS (space-separated runs; each run is VAR=VALUE[,VAR=VALUE...] or
# `default` for none), PROMPT_LENS (default 128,128,128: three 128-token prompts per process, each followed by
# NEW_TOKENS decode steps; the first is checked against eager), NEW_TOKENS (256), RUN_TIMEOUT_S (90), WORK
# (/tmp/llm_bench: an export a call before on this warm machine finished with the same flags is reused).
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../../.." && pwd)"
cd "$ROOT"

MODE=run
case "${1:-}" in
  --dry-run) MODE=dry; shift ;;
  --prepare) MODE=prepare; shift ;;
esac

EXPORTS=${EXPORTS:-int4dopqf,bf16dopqf}
EXPORT_FLAGS=${EXPORT_FLAGS---autotune off}
LONG_CTX=${LONG_CTX:-4096}
AB_SETTINGS=${AB_SETTINGS:-AOTI_CUDA_INT4_SCALE_AFTER=1 AOTI_CUDA_INT4_SCALE_AFTER=0 AOTI_CUDA_INT4_SCALE_AFTER=1 AOTI_CUDA_INT4_SCALE_AFTER=0}
PROMPT_LENS=${PROMPT_LENS:-128,128,128}
NEW_TOKENS=${NEW_TOKENS:-256}
BUDGET=${BUDGET:-540}
MEASURE_S=${MEASURE_S:-90}
RUN_TIMEOUT_S=${RUN_TIMEOUT_S:-90}
WORK=${WORK:-/tmp/llm_bench}
GEN_REL=examples/generate/generate
LIB_REL=libaoti_cuda.so.0
# generate's flags this job passes (the dry run finds each in `generate --help`)
GENERATE_FLAGS="--prompt-lens --new-tokens --reps --expect-tokens --expect-top --json"
# the shims the fused-form exports import (the dry run finds each among the packed library's symbols)
SHIMS="aoti_torch_cuda_aoti_cuda_fused_linear aoti_torch_cuda_aoti_cuda_fused_linear_int4
aoti_torch_cuda_aoti_cuda_decode_attention_qkv aoti_torch_cuda_aoti_cuda_argmax"

# ---------------------------------------------------------------------------------------------------------------
# --prepare BUILD [PACK]: the two binaries, stripped, and the wheels; BUILT_FROM says what they were built from.
if [[ $MODE == prepare ]]; then
  B=${1:?usage: model-ab.sh --prepare BUILD [PACK]}
  DEST=${2:-$ROOT/.carry/llmab}
  for f in $LIB_REL $GEN_REL; do  # ninja targets: libaoti_cuda.so, generate
    [[ -e "$B/$f" ]] || { echo "prepare: $B/$f is missing (cd $B && nice ninja -j2 libaoti_cuda.so generate)"; exit 1; }
  done
  lib=$(readlink -f "$B/$LIB_REL")
  stale=$(find src include -newer "$lib" -type f 2>/dev/null | head -5)
  [[ -z "$stale" ]] || echo "prepare: WARNING: newer than $lib (rebuild the library first?): $stale"
  rm -rf "$DEST"; mkdir -p "$DEST/aoti/$(dirname "$GEN_REL")" "$DEST/whl"
  strip -o "$DEST/aoti/$LIB_REL" "$lib" || exit 1
  strip -o "$DEST/aoti/$GEN_REL" "$(readlink -f "$B/$GEN_REL")" || exit 1
  for w in executorch torchao flatbuffers ruamel_yaml tabulate; do cp "${WHL_SRC:-$ROOT/.whl}"/$w-*.whl "$DEST/whl/" || exit 1; done
  { echo "prepared $(date -u +%FT%TZ) from $(basename "$B")"
    echo "library $(stat -c '%y' "$lib") $(sha256sum "$DEST/aoti/$LIB_REL" | cut -c1-16)"
    git -C "$ROOT" log -1 --format='commit %h %s' 2>/dev/null | cut -c1-160
    git -C "$ROOT" status --short -- src include 2>/dev/null | sed 's/^/uncommitted /'
  } > "$DEST/aoti/BUILT_FROM"
  cat "$DEST/aoti/BUILT_FROM"
  du -sh "$DEST"/aoti "$DEST"/whl "$DEST"
  exec bash "$HERE/model-ab.sh" --dry-run "$DEST"
fi

problems=0
problem() { echo "MISMATCH: $*"; problems=$((problems + 1)); }

# One process per entry of AB_SETTINGS on each export that finished; RES holds the logs, OUT/ab.txt the lines.
# measure GEN: GEN is the generate binary (the dry run passes a stub).
measure() {
  local gen=$1 name dir i setting t log
  for name in ${EXPORTS//,/ }; do
    dir="$WORK/long_${name}_$LONG_CTX"
    if [[ ! -f "$dir/llm.pte" || ! -f "$dir/manifest.json" || ! -f "$dir/export.flags" ]]; then
      echo "$name  export missing: not finished (X_logs.tgz: export_$name.log)" | tee -a "$OUT/ab.txt"; continue
    fi
    local expect=()
    read -r -a expect <<< "$(python3 "$HERE/llm_job.py" expect-args "$dir/manifest.json")"
    (( ${#expect[@]} )) || echo "# $name: the manifest has no 128-token reference: no agreement figures" >> "$OUT/ab.txt"
    i=0
    for setting in $AB_SETTINGS; do
      i=$((i + 1))
      t=$((DEADLINE - SECONDS - 10)); (( t > RUN_TIMEOUT_S )) && t=$RUN_TIMEOUT_S
      if (( t < 15 )); then
        echo "$name  run$i  $setting  skipped: budget spent" | tee -a "$OUT/ab.txt"; continue
      fi
      local envs=(); [[ $setting == default ]] || IFS=, read -r -a envs <<< "$setting"
      log="$RES/generate_${name}_run$i.log"
      local t0=$SECONDS rc
      { echo "\$ env ${envs[*]} $gen $dir/llm.pte --prompt-lens $PROMPT_LENS --new-tokens $NEW_TOKENS --reps 3 --expect-tokens ..."
        env "${envs[@]}" timeout -k 5 "$t" "$gen" "$dir/llm.pte" --prompt-lens "$PROMPT_LENS" --new-tokens "$NEW_TOKENS" \
          --reps 3 "${expect[@]}" --json "$RES/generate_${name}_run$i.json"; } > "$log" 2>&1
      rc=$?
      python3 - "$log" "$RES/generate_${name}_run$i.json" "$name" "run$i" "$setting" "$rc" "$((SECONDS - t0))" \
        >> "$OUT/ab.txt" <<'PY'
import json, re, statistics, sys
log, js, name, run, setting, rc, secs = sys.argv[1:8]
text = open(log, errors="replace").read()
rates = [float(m.group(1)) for m in re.finditer(r"^prompt +\d+ tokens: .* = ([\d.]+) tokens/s$", text, re.M)]
try:
    d = json.load(open(js))
except (OSError, ValueError):
    d = {}
def frac(a, b):
    return "-" if d.get(a) is None else "%d/%d" % (d[a], d.get(b, 0))
tok = "%.1f" % statistics.median(rates) if rates else "-"
graphs = re.search(r"^decode CUDA graphs: (.*)$", text, re.M)
print("%-10s %-5s %-32s tok/s %-7s (%s)  forced %s (near ties %s, clear %s)  free %s  graphs: %s  rc %s  %s s" % (
    name, run, setting, tok, " ".join("%.1f" % r for r in rates), frac("forced_match", "forced_count"),
    "%d" % d["forced_near_ties"] if "forced_near_ties" in d else "-",
    "%d" % d["forced_clear_misses"] if "forced_clear_misses" in d else "-",
    frac("expect_match", "expect_count"), graphs.group(1) if graphs else "-", rc, secs))
PY
      tail -1 "$OUT/ab.txt"
      save_logs
    done
  done
}

# Per export, each setting's runs: their tokens/s and median, and each setting's median over the first one's.
summary() {
  python3 - "$OUT/ab.txt" >> "$OUT/ab.txt" <<'PY'
import re, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    m = re.match(r"(\S+) +run\d+ +(\S+) +tok/s (\S+)", line)
    if m and m.group(3) != "-":
        runs.setdefault(m.group(1), {}).setdefault(m.group(2), []).append(float(m.group(3)))
print("# summary: each setting's runs (tokens/s), their median, and that median over the first setting's")
for name, settings in runs.items():
    base = None
    for s, rates in settings.items():
        med = statistics.median(rates)
        base = base or med
        print("# %-10s %-32s %-24s median %.1f  x%.4f" % (name, s, " ".join("%.1f" % r for r in rates), med, med / base))
PY
}
save_logs() { tar -czf "$OUT/ab_logs.tgz" -C "$RES" . 2>/dev/null; }

# ---------------------------------------------------------------------------------------------------------------
if [[ $MODE == dry ]]; then
  PACK=${1:-.carry/llmab}
  A="$PACK/aoti"
  [[ -f "$A/$LIB_REL" ]] || problem "$A/$LIB_REL is missing (model-ab.sh --prepare BUILD)"
  [[ -x "$A/$GEN_REL" ]] || problem "$A/$GEN_REL is missing or not executable"
  if [[ -f "$A/$LIB_REL" ]]; then
    syms=$(nm -D --defined-only "$A/$LIB_REL" 2>/dev/null)
    for s in $SHIMS; do grep -qw "$s" <<<"$syms" || problem "$A/$LIB_REL does not define $s"; done
  fi
  if [[ -x "$A/$GEN_REL" ]]; then
    readelf -d "$A/$GEN_REL" | grep -q "NEEDED.*\[$LIB_REL\]" || problem "$GEN_REL does not link $LIB_REL"
    help=$(LD_LIBRARY_PATH="$A:/usr/local/cuda/lib64:/usr/local/cuda/lib" "$A/$GEN_REL" --help 2>&1)
    for f in $GENERATE_FLAGS; do grep -q -- "$f" <<<"$help" || problem "generate --help does not list $f"; done
    grep -q -- "--prompt-lens" <<<"$help" && echo "generate --help: runs, lists $GENERATE_FLAGS"
  fi
  # Each setting is VAR=VALUE[,...] (or default), and the library reads each variable named.
  for setting in $AB_SETTINGS; do
    [[ $setting == default ]] && continue
    IFS=, read -r -a envs <<< "$setting"
    for e in "${envs[@]}"; do
      [[ $e =~ ^[A-Z_][A-Z0-9_]*=[^[:space:]]*$ ]] || { problem "AB_SETTINGS: '$e' is not VAR=VALUE"; continue; }
      grep -aq "${e%%=*}" "$A/$LIB_REL" 2>/dev/null || problem "$A/$LIB_REL never names ${e%%=*} (AB_SETTINGS)"
    done
  done
  python3 "$HERE/llm_job.py" wheels "$PACK/whl" || problem "the wheels in $PACK/whl"
  # The export command lines: bench_llm's flags for each name, EXPORT_FLAGS and the cache length, through
  # export_llm.py's own parser; then stage X's dry run, which must compose the same commands.
  for name in ${EXPORTS//,/ }; do
    flags=$(python3 -c "import sys; sys.path.insert(0, 'bench/llm'); import bench_llm; print(' '.join(bench_llm.EXPORTS[sys.argv[1]][1]))" "$name" 2>/dev/null) ||
      { problem "EXPORTS: no export $name in bench_llm.EXPORTS"; continue; }
    python3 -c "import sys; sys.path.insert(0, 'tools/export/llm'); from export_llm import parse_args
a = parse_args(sys.argv[1:]); print('export_llm.py parses:', ' '.join(sys.argv[1:]), '->', a.quant, a.gemm, a.sdpa, 'autotune', a.autotune, 'max_ctx', a.max_ctx)" \
      --out x --config 1b --max-ctx "$LONG_CTX" $flags $EXPORT_FLAGS || problem "export_llm.py refuses the flags of $name: $flags $EXPORT_FLAGS"
  done
  xdry=$(DRY_RUN=1 CARRY= BUDGET=$((BUDGET - MEASURE_S)) REF_EXPORT=0 RUN_SUITE=0 LONG_EXPORTS="$EXPORTS" LONG_EXPORT_FLAGS="$EXPORT_FLAGS" \
    LONG_CTX="$LONG_CTX" WORK="$WORK" bash "$HERE/device-llm.sh" /tmp/modelab-xdry "$A" X 2>&1)
  for name in ${EXPORTS//,/ }; do
    line=$(grep -F "[dry-run] export_$name " <<<"$xdry")
    echo "${line:-device-llm.sh X (dry run) composes no export_$name}"
    [[ $line == *"--out $WORK/long_${name}_$LONG_CTX --config 1b --max-ctx $LONG_CTX "*"$EXPORT_FLAGS"* ]] ||
      problem "device-llm.sh X would not run export_$name as expected"
  done
  grep -q '^  X) stage_X ;;' "$HERE/device-llm.sh" || problem "device-llm.sh has no stage X"
  for f in "$HERE/model-ab.sh" "$HERE/device-llm.sh"; do bash -n "$f" || problem "$f: bash syntax"; done
  (( BUDGET <= 560 && MEASURE_S < BUDGET - 200 )) || problem "BUDGET $BUDGET / MEASURE_S $MEASURE_S: the call is 600 s"
  # The measurement loop on stub exports, with a stub generate that prints what examples/generate prints.
  stub=$(mktemp -d); WORK_REAL=$WORK; WORK="$stub/work"; OUT="$stub/out"; RES="$stub/res"; mkdir -p "$OUT" "$RES"
  for name in ${EXPORTS//,/ }; do
    d="$WORK/long_${name}_$LONG_CTX"; mkdir -p "$d"; : > "$d/llm.pte"; echo x > "$d/export.flags"
    python3 -c "import json; json.dump({'reference': {'prompt_len': 128, 'tokens': list(range(5, 37)),
      'top': [[[t, 12.5], [t + 1, 12.25]] for t in range(5, 37)]}}, open('$d/manifest.json', 'w'))"
  done
  cat > "$stub/generate" <<'SH'
#!/usr/bin/env bash
json=""; while (( $# )); do [[ $1 == --json ]] && json=$2; shift; done
r=$((RANDOM % 50 + 1100))
for i in 1 2 3; do echo "prompt  128 tokens: time to first token 3.10 ms (first call 9.00 ms; queuing the call took 0.20 ms), decode 256 tokens in 230.1 ms = $r.$i tokens/s"; done
echo "decode CUDA graphs: captured 1, replays 1030 (stub, AOTI_CUDA_INT4_SCALE_AFTER=${AOTI_CUDA_INT4_SCALE_AFTER-unset})"
echo '{"peer": "aoti_cuda", "expect_match": 32, "expect_count": 32, "forced_match": 31, "forced_count": 32, "forced_near_ties": 1, "forced_clear_misses": 0}' > "$json"
SH
  chmod +x "$stub/generate"
  DEADLINE=$((SECONDS + 300))
  measure "$stub/generate" > /dev/null; summary
  echo "--- the stub walk's ab.txt:"; cat "$OUT/ab.txt"
  n=$(grep -c ' tok/s 11[0-9][0-9]\.[123] ' "$OUT/ab.txt"); runs=$(wc -w <<<"$AB_SETTINGS")
  (( n == runs * $(tr , ' ' <<<"$EXPORTS" | wc -w) )) || problem "the stub walk wrote $n run lines"
  grep -q 'forced 31/32 (near ties 1, clear 0)  free 32/32' "$OUT/ab.txt" || problem "the stub walk's agreement figures"
  [[ -f "$OUT/ab_logs.tgz" ]] || problem "the stub walk left no ab_logs.tgz"
  rm -rf "$stub"; WORK=$WORK_REAL
  # What travels: the tree (tracked + untracked-not-ignored) and PACK, under the tool's 64 MiB.
  if git -C "$ROOT" rev-parse >/dev/null 2>&1; then
    git -C "$ROOT" check-ignore -q "$PACK" || problem "$PACK is not ignored by git: it would travel twice"
    mapfile -d '' tree < <(git -C "$ROOT" ls-files -z --cached --others --exclude-standard)
    sizes=$(python3 "$HERE/llm_job.py" carry-size "${tree[@]}" "$PACK")
    echo "travels (tree + $PACK): $sizes"
    python3 -c "import json,sys; sys.exit(0 if json.loads(sys.argv[1])['block_mib'] < 60 else 1)" "$sizes" ||
      problem "tree + carry reach 60 MiB in 4 KiB blocks (the limit is 64 MiB)"
  fi
  [[ -f "$A/BUILT_FROM" ]] && { echo "--- $A/BUILT_FROM:"; cat "$A/BUILT_FROM"; }
  if (( problems > 0 )); then echo "dry run: $problems mismatch(es)"; exit 1; fi
  echo "dry run: binaries, shims, flags, settings, wheels, export command lines, the measurement loop and sizes check out"
  exit 0
fi

# ---------------------------------------------------------------------------------------------------------------
OUT=${1:?usage: model-ab.sh OUT [PACK]}
PACK=${2:-.carry/llmab}
mkdir -p "$OUT"; OUT="$(cd "$OUT" && pwd)"
PACK="$(cd "$PACK" 2>/dev/null && pwd)" || { echo "error: no pack ${2:-.carry/llmab}"; exit 2; }
DEADLINE=$((SECONDS + BUDGET))
RES=/tmp/modelab; rm -rf "$RES"; mkdir -p "$RES"
export LD_LIBRARY_PATH="$PACK/aoti:/usr/local/cuda/lib64:/usr/local/cuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
chmod +x "$PACK/aoti/$GEN_REL" 2>/dev/null
trap 'summary; save_logs; exit 143' TERM
nvidia-smi -L > "$OUT/nvidia-smi.txt" 2>&1
{ echo "# model-ab $(date -u +%FT%TZ); budget $BUDGET s; exports $EXPORTS ($EXPORT_FLAGS, cache $LONG_CTX); prompts $PROMPT_LENS, $NEW_TOKENS new tokens, CUDA graphs"
  sed 's/^/# /' "$OUT/nvidia-smi.txt"; sed 's/^/# pack: /' "$PACK/aoti/BUILT_FROM" 2>/dev/null; } > "$OUT/ab.txt"
cat "$OUT/ab.txt"

# The exports: device-llm.sh's stage X (wheels into /tmp/site, the exports side by side with a timeout each, their
# timelines, export_cache.tgz), cut so that MEASURE_S is left after it.
xb=$((DEADLINE - SECONDS - MEASURE_S))
echo "[$(date -u +%T)] exports (stage X, budget $xb s)"
env BUDGET=$xb REF_EXPORT=0 RUN_SUITE=0 LONG_EXPORTS="$EXPORTS" LONG_EXPORT_FLAGS="$EXPORT_FLAGS" LONG_CTX="$LONG_CTX" \
  WORK="$WORK" bash "$HERE/device-llm.sh" "$OUT" "$PACK/aoti" X > "$RES/stage_X.log" 2>&1
echo "[$(date -u +%T)] stage X: status $? after $SECONDS s"; grep -E '^\[|export_' "$RES/stage_X.log" | tail -8
grep -H 'EXPORT_TIME' /tmp/llmjob-X/export_*.log 2>/dev/null | head -4  # device-llm.sh's step logs
save_logs

measure "$PACK/aoti/$GEN_REL"
summary; save_logs
echo "[$(date -u +%T)] done after $SECONDS s"
cat "$OUT/ab.txt"; ls -la "$OUT"
