#!/usr/bin/env bash
# The LLM measurements of issues 31 and 32 (and issue 30's LLM upload target) on the GPU machine, in stages that
# each fit one device call (README.md beside this, "The LLM job", has the exact calls and the local preparation).
#
#   device-llm.sh OUT BUILD STAGE         on the GPU machine; STAGE is A1, A2 or B
#   device-llm.sh --dry-run OUT BUILD [STAGE|all]   here, without GPU or torch: walks the stages with stub commands
#                                         and checks every binary, script, flag, wheel and size they rely on
#                                         (DRY_RUN=1 does the same); exits 1 on any mismatch
#   device-llm.sh --prepare BUILD_DIR ET12_PACK|none [ET13_PACK]   here: assembles .carry/llmjob (the packed binaries,
#                                         the ExecuTorch peers, the five wheels), then the dry run over it; with
#                                         SUITE=1 the whole build is packed and A1 runs the GPU suite too
#   device-llm.sh --print-calls           the command of each stage's device call (README.md quotes them)
#   device-llm.sh OUT BUILD selftest      the step machinery alone (timeouts, deadline, results), on the CPU
#
#   A1  (~560 s) the 1.1 B model's stock exports, bf16 and int4 (torchao Int4WeightOnlyConfig tile_packed_to_4d,
#       group 128: export_llm.py --quant int4), concurrently, with the libtorch runner's packages, its build and
#       the eager peers' weights (bench/llm --stage prepare); they stay in WORK (/tmp/llm_bench) on the machine.
#   A2  (~330 s; right after A1, while the machine is warm: it reads A1's WORK) bench/llm --stage measure
#       --graph-ab (aoti_cuda with and without decode graphs, the libtorch runner plain and with its decode in a
#       CUDA graph, eager, eager + CUDA graph, eager int4, the read_bw roofline step); the upload of the bf16 LLM in
#       a C++ process and in a PyTorch process that made its CUDA context first (tests/load_order, twice each,
#       alternated); ExecuTorch 1.2 (and 1.3 when carried) `et_runner generate` on the same files
#       (bench/peers/executorch, PARTS=llm).
#   B   (~420 s; stands alone) the best bf16 export (LONG_EXPORTS, default bf16mix) with a 4096-position cache
#       (export_llm.py --max-ctx), then `generate --decode-at 128,1024,4000 --decode-window 64 --profile-kernels`:
#       decode tokens/s at those positions and each profiled step's attention share (llm_job.py long-summary);
#       when A's stock bf16 export is still in WORK, the same at 128 and 896 on it (1024-position cache); then one
#       short generate of each export (and of the stock bf16) with bench/graph_trace.cpp preloaded: one decode graph
#       replay kernel by kernel, against the untraced step time (issue 32's "the runtime adds nothing").
#   C   (~480 s; stands alone) what programmatic dependent launch buys (TuningOptions::dependent_launch): the
#       LONG_EXPORTS exports as in B, then `generate` of each with AOTI_CUDA_DEPENDENT_LAUNCH on, off, on again
#       (same process settings otherwise), and the int4 bench's back-to-back calls on the model's shapes with the
#       overlap on and off; the GPU suite beside the exports when the pack has it (llm_job.py pdl-summary).
#
#   X   (~560 s; then BC at once, on the warm machine) the exports of BC alone (LONG_EXPORTS and, unless
#       REF_EXPORT=0, the stock bf16 one), with the whole call, and the GPU suite beside them; BC then reuses
#       them (RUN_SUITE=0 in front of BC leaves the suite out of it).
#
# Every step is a child process with a timeout (capped by the stage's deadline, BUDGET, default 560 s) and a log;
# OUT/<stage>_results.json is rewritten after every step, so a stage cut short still returns what finished.
# OUT gets at most 5 files per stage: <stage>_results.json, <stage>_logs.tgz, the raw JSON of the tools it ran, and
# export_cache.tgz from a stage that exports (the tuners' results: see export_cache_save).
# Environment: WORK, BUDGET, ET12, ET13, WHL (default: beside BUILD: et12, et13, whl), LLM_PARTS (A's parts:
# llm,int4 by default; int4 alone for the int4 rows), LONG_EXPORTS, LONG_CTX,
# LONG_POSITIONS, LONG_WINDOW, LONG_EXPORT_FLAGS (export_llm.py flags added to every LONG_EXPORTS export, e.g.
# `--autotune off`), CARRY (dry run: the carried paths to size, default .carry/llmjob), EXPORT_CACHE
# (default beside BUILD: export_cache.tgz, an earlier stage's OUT/export_cache.tgz), EXPORT_PARALLEL (0: the exports
# one after another), EXPORT_TIMELINE (seconds between the exports' timeline entries, default 30; 0: none),
# EXPORT_COMPILE_THREADS (Inductor's compile workers per exporter, default 4).
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../../.." && pwd)"
cd "$ROOT"

DRY=${DRY_RUN:-0}
MODE=run
case "${1:-}" in
  --dry-run) DRY=1; shift ;;
  --prepare) MODE=prepare; shift ;;
  --print-calls) MODE=calls; shift ;;
esac

# The device calls, one per stage: the `run` tool's command (at most 2000 characters), carry [".carry/llmjob"],
# timeout_s 600. README.md quotes them; the dry run checks that it still does.
CALL_PREFIX='bash tools/contrib/gpu-machine/device-llm.sh "$OUT" .carry/llmjob/aoti'
if [[ $MODE == calls ]]; then
  for s in A1 A2 B C BC X; do echo "$CALL_PREFIX $s"; done
  exit 0
fi

WORK=${WORK:-/tmp/llm_bench}
SITE=${AOTI_EXPORT_SITE:-/tmp/site}
LONG_EXPORTS=${LONG_EXPORTS:-bf16mix}
LONG_CTX=${LONG_CTX:-4096}
LONG_POSITIONS=${LONG_POSITIONS:-128,1024,4000}
LONG_WINDOW=${LONG_WINDOW:-64}
# A's parts (bench/llm): llm = the stock bf16 export and its peers, int4 = the stock int4 export and eager int4.
# LLM_PARTS=int4 in front of A1 and A2 makes the int4 rows alone (the int4 export is A1's long pole).
LLM_PARTS=${LLM_PARTS:-llm,int4}
case ",$LLM_PARTS," in *,llm,*|*,int4,*) ;; *) echo "LLM_PARTS must name llm and/or int4, got '$LLM_PARTS'"; exit 2 ;; esac
# The exports those parts make, as bench/llm names their folders in WORK.
A_EXPORTS=$(for part in ${LLM_PARTS//,/ }; do case $part in llm) echo bf16 ;; int4) echo int4 ;; esac; done | paste -sd, -)
# The binaries the job runs from BUILD (examples/generate, the read_bw roofline, the CLI that bench/llm and the
# ExecuTorch peer's script make executable, the load-order program and its cases library, B's graph tracer).
PACK_FILES="aoti_cuda libaoti_cuda.so.0 examples/generate/generate bench/aoti_cuda_read_bw bench/aoti_cuda_bench
tests/aoti_cuda_load_order_tests tests/libaoti_cuda_load_order_cases.so bench/libaoti_cuda_graph_trace.so"
# The flags each stage passes to generate; the dry run finds every one in `generate --help`.
GENERATE_FLAGS="--prompt-lens --new-tokens --reps --profile-kernels --expect-tokens --expect-top --no-graphs --json
--decode-at --decode-window --max-ctx"
ORDER_FILTER='-tc=*pinned staging*'  # tests/load_order/gpu_cases.cpp: the large-program upload case alone

# ---------------------------------------------------------------------------------------------------------------
# --prepare: .carry/llmjob from a build folder (only the files above, stripped, no links), the peers' packs and
# the wheels the exports need (executorch, torchao, flatbuffers, ruamel.yaml, tabulate from .whl).
if [[ $MODE == prepare ]]; then
  B=${1:?usage: device-llm.sh --prepare BUILD_DIR ET12_PACK [ET13_PACK]}
  E12=${2:?usage: device-llm.sh --prepare BUILD_DIR ET12_PACK [ET13_PACK]}
  E13=${3:-}
  DEST="$ROOT/.carry/llmjob"
  rm -rf "$DEST"; mkdir -p "$DEST/aoti" "$DEST/et12" "$DEST/whl"
  # SUITE=1: the whole build, stripped (device-pack.sh), so that A1 also runs the GPU suite beside the exports.
  # The CPU suites (run in CI) and the GEMV bench stay here: the whole pack is over the transfer limit with them.
  if [[ ${SUITE:-0} == 1 ]]; then
    bash "$HERE/device-pack.sh" "$B" "$DEST/aoti" || exit 1
    (cd "$DEST/aoti" && rm -f tests/aoti_cuda_unit_tests tests/aoti_cuda_alloc_tests bench/aoti_cuda_gemv_bench)
  fi
  for f in $PACK_FILES; do
    src="$B/$f"; [[ -e "$src" ]] || { echo "prepare: $src is missing (build it: see README.md, The LLM job)"; exit 1; }
    [[ -e "$DEST/aoti/$f" ]] && continue  # packed above (a link resolving inside the pack is kept)
    mkdir -p "$DEST/aoti/$(dirname "$f")"
    rm -f "$DEST/aoti/$f"; strip -o "$DEST/aoti/$f" "$(readlink -f "$src")" || exit 1
  done
  cp "$B/CMakeCache.txt" "$DEST/aoti/"
  # ET12_PACK `none`: no ExecuTorch peer (stages X, BC, K and targets-job.sh do not use it; A2's ExecuTorch rows
  # are then left out).
  if [[ $E12 == none ]]; then
    echo "no ExecuTorch peer packed (A2's ExecuTorch rows will be left out)" > "$DEST/et12/NONE"
  else
    cp -L "$E12/et_runner" "$E12/libaoti_cuda_shims.so" "$DEST/et12/" || exit 1
  fi
  if [[ -n "$E13" ]]; then mkdir -p "$DEST/et13" && cp -L "$E13/et_runner" "$E13/libaoti_cuda_shims.so" "$DEST/et13/" || exit 1; fi
  # WHL_SRC: where tools/export/fetch_wheels.sh put them (default .whl of this checkout)
  for w in executorch torchao flatbuffers ruamel_yaml tabulate; do cp "${WHL_SRC:-$ROOT/.whl}"/$w-*.whl "$DEST/whl/" || exit 1; done
  du -sh "$DEST"/*
  exec bash "$HERE/device-llm.sh" --dry-run /tmp/llmjob-dry .carry/llmjob/aoti all
fi

OUT=${1:?usage: device-llm.sh [--dry-run] OUT BUILD STAGE (A1, A2, B)}
BUILD_ARG=${2:?usage: device-llm.sh [--dry-run] OUT BUILD STAGE}
STAGE=${3:-$([[ $DRY == 1 ]] && echo all)}
[[ -n "$STAGE" ]] || { echo "usage: device-llm.sh OUT BUILD STAGE (A1, A2, B)"; exit 2; }
BUILD="$(cd "$BUILD_ARG" 2>/dev/null && pwd)" || { echo "error: BUILD $BUILD_ARG does not exist"; exit 2; }
PARENT="$(dirname "$BUILD")"
ET12=${ET12:-$PARENT/et12}
ET13=${ET13:-$PARENT/et13}
WHL=${WHL:-$PARENT/whl}
[[ -x "$ET13/et_runner" ]] || ET13=""   # the 1.3 peer is optional
BUDGET=${BUDGET:-560}
MIN_STEP_S=${MIN_STEP_S:-10}      # a step with less time than this left is skipped, not started
STEP_MARGIN_S=${STEP_MARGIN_S:-15}  # kept after the last step: results, the logs' archive
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$BUILD:/usr/local/cuda/lib64:/usr/local/cuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONUNBUFFERED=1

problems=0
problem() { echo "MISMATCH: $*"; problems=$((problems + 1)); }

# ---- steps: a timeout each, capped by the stage's deadline; one line each in RES/steps.tsv --------------------
RES=""
DEADLINE=$((SECONDS + BUDGET))
start_stage() {
  RES="/tmp/llmjob-$1"; rm -rf "$RES"; mkdir -p "$RES"; : > "$RES/steps.tsv"
  DEADLINE=$((SECONDS + BUDGET))
}
# dry run: what a step would start must exist (an executable, or the script bash/python3 would read)
check_cmd() {
  local args=("$@") i=0
  [[ ${args[0]} == env ]] && { i=1; while [[ ${args[$i]} == *=* ]]; do i=$((i + 1)); done; }
  local prog=${args[$i]}
  if [[ $prog == bash || $prog == python3 ]]; then
    [[ -f ${args[$((i + 1))]} ]] || problem "script ${args[$((i + 1))]} is missing"
  elif [[ $prog == */* ]]; then
    [[ -x $prog ]] || problem "$prog is missing or not executable"
  else
    command -v "$prog" >/dev/null || problem "$prog is not on PATH"
  fi
}
step() {  # step NAME TIMEOUT_S CMD...
  local name=$1 t=$2; shift 2
  local left=$((DEADLINE - SECONDS - STEP_MARGIN_S))
  (( t > left )) && t=$left
  if [[ $DRY == 1 ]]; then
    check_cmd "$@"
    echo "[dry-run] $name (timeout ${t}s): $*"
    printf '%s\tdry-run\t0\n' "$name" >> "$RES/steps.tsv"
    return 0
  fi
  if (( t < MIN_STEP_S )); then
    printf '%s\tskipped (stage budget spent)\t0\n' "$name" >> "$RES/steps.tsv"; write_results; return 1
  fi
  echo "[$(date -u +%T)] start $name (timeout ${t}s)"
  local t0=$SECONDS rc
  { echo "\$ $*"; timeout -k 10 "$t" "$@"; } > "$RES/$name.log" 2>&1
  rc=$?
  local status=ok; (( rc == 124 || rc == 137 )) && status=timeout; (( rc != 0 && rc != 124 && rc != 137 )) && status="failed (exit $rc)"
  printf '%s\t%s\t%s\n' "$name" "$status" "$((SECONDS - t0))" >> "$RES/steps.tsv"
  echo "[$(date -u +%T)] $name: $status after $((SECONDS - t0)) s"; tail -3 "$RES/$name.log"
  write_results
  return $rc
}
# OUT/<stage>_results.json: every step's status and seconds, plus the stage's summaries (JSON files in RES named
# summary_*.json), rewritten after every step.
write_results() {
  [[ $DRY == 1 ]] && return 0
  python3 - "$RES" "$OUT/${STAGE}_results.json" "$STAGE" "$BUDGET" "$SECONDS" <<'PY'
import glob, json, os, sys, time
res, out, stage, budget, elapsed = sys.argv[1:6]
steps = {}
for line in open(os.path.join(res, "steps.tsv")):
    name, status, secs = line.rstrip("\n").split("\t")
    steps[name] = {"status": status, "seconds": int(secs)}
doc = {"stage": stage, "budget_s": int(budget), "elapsed_s": int(elapsed), "steps": steps,
       "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
for f in sorted(glob.glob(os.path.join(res, "summary_*.json"))):
    try:
        doc[os.path.basename(f)[8:-5]] = json.load(open(f))
    except ValueError:
        doc[os.path.basename(f)[8:-5]] = {"error": "unreadable"}
json.dump(doc, open(out, "w"), indent=1)
PY
}
finish_stage() {  # the logs as one archive (the device tool returns at most 8 files), then the last results
  [[ $DRY == 1 ]] && return 0
  write_results
  tar -czf "$OUT/${STAGE}_logs.tgz" -C "$RES" . 2>/dev/null
  ls -la "$OUT"
}
trap '[[ -n "$RES" && $DRY != 1 ]] && finish_stage' TERM

# The wheels (executorch 1.2.0, torchao 0.17, ...) into SITE, unless a warm machine has them already.
setup_python() {
  export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
  if [[ $DRY == 1 ]]; then
    python3 "$HERE/llm_job.py" wheels "$WHL" || problem "the wheels in $WHL"
    return 0
  fi
  if ! python3 -c 'import executorch.exir, torchao' >/dev/null 2>&1; then
    step wheels 120 python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target "$SITE" "$WHL"/*.whl
  fi
  export FLATC_EXECUTABLE="$SITE/executorch/data/bin/flatc"
  chmod +x "$FLATC_EXECUTABLE" 2>/dev/null || true
  chmod +x "$BUILD"/aoti_cuda "$BUILD"/examples/generate/generate "$BUILD"/bench/* "$BUILD"/tests/aoti_cuda_load_order_tests \
    "$ET12"/et_runner ${ET13:+"$ET13"/et_runner} 2>/dev/null || true
  date -u; nvidia-smi -L 2>/dev/null
}

# The flags export_llm.py gets for one of bench/llm's exports (bench_llm.EXPORTS, stdlib-only at import).
export_flags() {
  python3 -c "import sys; sys.path.insert(0, 'bench/llm'); import bench_llm; print(' '.join(bench_llm.EXPORTS[sys.argv[1]][1]))" "$1"
}
# The eager reference tokens an export recorded for its 128-token prompt ("" when none), and eager's highest logits
# at each of those steps when the export recorded them (generate tells its teacher-forced misses apart with them).
expect_tokens() {
  python3 "$HERE/llm_job.py" expect-args "$1" 2>/dev/null
}

# ---- stages ----------------------------------------------------------------------------------------------------
# The GPU suite (tests, CLI over every fixture, examples) and the 1.3/1.4 operator checks against PyTorch, in the
# background beside a stage's exports (CPU-bound), when BUILD is a whole device pack (--prepare with SUITE=1);
# SUITE_PID is then the job to wait for.
SUITE_PID=""
start_suite() {  # RUN_SUITE=0: not in this call (X ran it beside the exports of the same pack)
  SUITE_PID=""
  [[ ${RUN_SUITE:-1} == 1 && -x "$BUILD/tests/aoti_cuda_gpu_tests" ]] || return 0
  { step gpu_suite 300 env DEVICE_SUITE_NO_BENCH=1 bash "$HERE/device-suite.sh" "$BUILD" "$RES/suite"
    step gpu_et_ops 120 python3 tests/gpu/et_ops_reference.py "$BUILD/libaoti_cuda.so.0"
    [[ $DRY == 1 ]] || python3 "$HERE/llm_job.py" suite-summary "$RES/suite" "$RES/gpu_et_ops.log" \
      --out "$RES/summary_suite.json" > /dev/null; } &
  SUITE_PID=$!
}

stage_A1() {
  start_stage A1; setup_python
  start_suite
  local suite_pid=$SUITE_PID
  # bench_llm's prepare phase runs the exports, the runner build, its packages and the weights concurrently;
  # int4 beside bf16 took 432 s on 2026-12-03 (bf16 344 s), hence the export timeout.
  step llm_prepare $((BUDGET - 25)) env LLM_BENCH_WORK="$WORK" LLM_BENCH_EXTRA="--stage prepare --export-timeout $((BUDGET - 70))" \
    bash bench/llm/run_on_device.sh "$RES/llm_prepare" "$BUILD" 1b "$LLM_PARTS" $((BUDGET - 40))
  [[ $DRY == 1 ]] || cp "$RES/llm_prepare/llm_results.json" "$OUT/A1_llm_prepare.json" 2>/dev/null
  [[ -n "$suite_pid" ]] && wait "$suite_pid"
  finish_stage
}

stage_A2() {
  start_stage A2
  # Whatever A1 finished is measured; an export it did not finish is named in the results.
  local present=() name
  for name in ${A_EXPORTS//,/ }; do
    if [[ $DRY == 1 || -f "$WORK/$name/manifest.json" ]]; then present+=("$name")
    else printf '%s_export_present\tfailed (A1 did not finish it: its rows are missing)\t0\n' "$name" >> "$RES/steps.tsv"; fi
  done
  if (( ${#present[@]} == 0 )); then
    echo "error: $WORK has none of the exports $A_EXPORTS: the machine was not warm from stage A1 (A2 must follow A1 within ~30 s)"
    printf 'exports_present\tfailed (no A1 exports in %s: run A1 then A2 back to back)\t0\n' "$WORK" >> "$RES/steps.tsv"
    finish_stage; return 4
  fi
  local present_csv; present_csv=$(IFS=,; echo "${present[*]}")
  setup_python
  step llm_measure 240 env LLM_BENCH_WORK="$WORK" LLM_BENCH_EXTRA="--stage measure --graph-ab" \
    bash bench/llm/run_on_device.sh "$RES/llm" "$BUILD" 1b "$LLM_PARTS" 225
  [[ $DRY == 1 ]] || cp "$RES/llm/llm_results.json" "$OUT/A2_llm_results.json" 2>/dev/null
  # Issue 30: the bf16 LLM's upload, C++ process (libcudart first, SDK RTLD_LOCAL) then PyTorch process, twice.
  if [[ ,$present_csv, == *,bf16,* ]]; then
    local order_env=(env AOTI_CUDA_LARGE_PROGRAM="$WORK/bf16/llm.pte" AOTI_CUDA_FIXTURES="$ROOT/tests/fixtures")
    for round in 1 2; do
      step "upload_cpp_$round" 60 "${order_env[@]}" "$BUILD/tests/aoti_cuda_load_order_tests" "$ORDER_FILTER"
      step "upload_torch_$round" 90 "${order_env[@]}" python3 tests/load_order/torch_first.py "$BUILD" "$ORDER_FILTER"
    done
    [[ $DRY == 1 ]] || python3 "$HERE/llm_job.py" upload-check --cpp "$RES"/upload_cpp_*.log --torch "$RES"/upload_torch_*.log \
      --llm-results "$RES/llm/llm_results.json" --out "$RES/summary_upload.json" > /dev/null
    write_results
  fi
  # Issue 31: ExecuTorch's own runtime on the same two files (its script unpacks the fixtures it checks for).
  [[ -f "$ET12/NONE" ]] && echo "executorch_llm: skipped, $(cat "$ET12/NONE")" || \
  step executorch_llm 220 env PARTS=llm LLM_EXPORTS="$present_csv" LLM_WORK="$WORK" BUDGET=200 BUILD_ET13="$ET13" \
    bash bench/peers/executorch/run_on_device.sh "$RES/et" "$BUILD" "$ET12"
  [[ $DRY == 1 ]] || cp "$RES/et/executorch_results.json" "$OUT/A2_executorch_results.json" 2>/dev/null
  # Issue 32: the decode kernels alone (their logs are in the archive), when the pack has the benches.
  kernel_benches
  finish_stage
}

# The exports' autotuning results: what Inductor's tuners chose for each kernel (a .best_config beside each kernel's
# source) and for each GEMM template (the cache/ file of each Inductor cache): small JSON files, one per tuned kernel.
# They are what makes an export long: on 2026-12-05 a host 1.7x slower than 12-04's spent its whole 390 s in the
# coordinate-descent tuner of two exports (export-probe.sh's stacks). Each stage that exports returns them in
# OUT/export_cache.tgz, even when an export was cut short (a result is written as each kernel is tuned); carried
# back as .carry/llmjob/export_cache.tgz (EXPORT_CACHE), they are restored before the next exports, so that a fresh
# machine skips the tuning already done and makes the same choices.
EXPORT_CACHE=${EXPORT_CACHE:-$PARENT/export_cache.tgz}
export_cache_restore() {
  [[ $DRY == 1 || ! -f "$EXPORT_CACHE" ]] && return 0
  mkdir -p "$WORK/cache" && tar -xzf "$EXPORT_CACHE" -C "$WORK/cache" &&
    echo "export cache: $(tar -tzf "$EXPORT_CACHE" | grep -c -v '/$') tuning results restored from $EXPORT_CACHE"
}
export_cache_save() {
  [[ $DRY == 1 || ! -d "$WORK/cache" ]] && return 0
  (cd "$WORK/cache" && find . -type f \( -name '*.best_config' -o -path './inductor*/cache/*' \) -size -1048576c -print0 |
    tar -czf "$OUT/export_cache.tgz" --null -T -) &&
    echo "export cache: $(tar -tzf "$OUT/export_cache.tgz" | wc -l) tuning results in $OUT/export_cache.tgz"
  # What the warm machine's caches hold, by kind (fxgraph, aotautograd, triton, ...): the exports finished only on
  # machines warmed by an earlier call, so the next question is whether the part that made them fast could travel.
  (cd "$WORK/cache" && du -s --block-size=1K ./*/* 2>/dev/null | sort -rn | head -n 30) > "$RES/export_cache_sizes.txt"
}

# The LONG_EXPORTS exports with a LONG_CTX-position cache into WORK/long_<name>_<ctx>, concurrently when several are
# asked for (one took 260-300 s on 2026-12-03); TIMEOUT_S each. With REF_EXPORT=1 the stock bf16 export (1024-position
# cache, as stage A1 makes it) joins them in WORK/bf16, for the same-job comparison and its trace. An export that a
# call before on this machine finished with the same flags is reused (export.flags beside its manifest, which
# export_llm.py writes last), so a stage cut short by its exports can be called again at once and go on.
long_exports() {
  local timeout_s=$1 name flags dir stamp pids=()
  export TORCHINDUCTOR_CACHE_DIR="$WORK/cache/inductor" TRITON_CACHE_DIR="$WORK/cache/triton"
  # Each export's log says every EXPORT_TIMELINE s where it is and which compilers it runs (tools/export/timeline.py):
  # since 2026-12-05 the fused-form exports outlive every call, and their logs said nothing of the lowering.
  export AOTI_EXPORT_TIMELINE=${EXPORT_TIMELINE:-30}
  # Inductor starts a pool of compile workers per exporter, as many as the CPUs; three exporters and two
  # split-lowering helpers at once start five such pools on 16 CPUs. Four each, unless EXPORT_COMPILE_THREADS says
  # otherwise (the timeline's load and available memory show whether it was the pools).
  export TORCHINDUCTOR_COMPILE_THREADS=${EXPORT_COMPILE_THREADS:-4}
  mkdir -p "$TORCHINDUCTOR_CACHE_DIR" "$TRITON_CACHE_DIR" 2>/dev/null
  export_cache_restore
  for name in ${LONG_EXPORTS//,/ } $([[ ${REF_EXPORT:-0} == 1 ]] && echo ref); do
    local ctx_args=(--max-ctx "$LONG_CTX")
    if [[ $name == ref ]]; then
      flags=$(export_flags bf16) || { problem "bench_llm.EXPORTS has no stock bf16 export"; continue; }
      dir="$WORK/bf16"; ctx_args=()
      # stage A1's export (bench/llm stamps it its own way) counts as the same one
      [[ $DRY != 1 && -f "$dir/manifest.json" && ! -f "$dir/export.flags" ]] && echo "$flags" > "$dir/export.flags"
    else
      flags=$(export_flags "$name") || { problem "LONG_EXPORTS: $name is not one of bench_llm.EXPORTS"; continue; }
      flags="$flags${LONG_EXPORT_FLAGS:+ $LONG_EXPORT_FLAGS}"  # e.g. --autotune off (part of the stamp)
      dir="$WORK/long_${name}_$LONG_CTX"
    fi
    stamp="$flags${ctx_args[*]:+ ${ctx_args[*]}}"
    if [[ $DRY != 1 && -f "$dir/manifest.json" && "$(cat "$dir/export.flags" 2>/dev/null)" == "$stamp" ]]; then
      printf 'export_%s\treused\t0\n' "$name" >> "$RES/steps.tsv"; echo "export_$name: reused $dir"; continue
    fi
    local cmd=(python3 tools/export/llm/export_llm.py --out "$dir" --config 1b "${ctx_args[@]}" $flags)
    if [[ $DRY == 1 ]]; then
      step "export_$name" "$timeout_s" "${cmd[@]}"  # in this shell: its mismatches must count
    else
      rm -f "$dir/manifest.json" "$dir/export.flags"
      # One Inductor cache per export: two exports compiling the same kernel into one cache at once collided
      # (objcopy on a half-written .o, 2026-12-04 15:59).
      # EXPORT_PARALLEL=0: one after another (each still capped by the stage's deadline), for a host where the
      # exports at once run out of CPUs or memory (their timelines say so).
      if [[ ${EXPORT_PARALLEL:-1} == 0 ]]; then
        ( export TORCHINDUCTOR_CACHE_DIR="$WORK/cache/inductor_$name"
          step "export_$name" "$timeout_s" "${cmd[@]}" && echo "$stamp" > "$dir/export.flags" )
      else
        { export TORCHINDUCTOR_CACHE_DIR="$WORK/cache/inductor_$name"
          step "export_$name" "$timeout_s" "${cmd[@]}" && echo "$stamp" > "$dir/export.flags"; } &
        pids+=($!)
      fi
    fi
  done
  for p in "${pids[@]}"; do wait "$p"; done
  # --split-lowering's helper process logs beside its export: kept with the step logs
  for name in ${LONG_EXPORTS//,/ }; do
    cp "$WORK/long_${name}_$LONG_CTX/.split-lowering/helper.log" "$RES/export_$name.helper.log" 2>/dev/null
  done
  export_cache_save
}

stage_B() {
  start_stage B; setup_python
  long_exports $((BUDGET - 150))
  long_measure
  finish_stage
}

# B's measurements of the exports long_exports made.
long_measure() {
  local positions_args=(--decode-at "$LONG_POSITIONS" --decode-window "$LONG_WINDOW" --max-ctx "$LONG_CTX")
  for name in ${LONG_EXPORTS//,/ }; do
    local dir="$WORK/long_${name}_$LONG_CTX"
    local gen=("$BUILD/examples/generate/generate" "$dir/llm.pte" --prompt-lens 128 --new-tokens 256 --reps 3
               "${positions_args[@]}" --profile-kernels --json "$RES/generate_$name.json")
    # If decode's graph cannot be used with this program, the figures with plain calls are still worth the call.
    step "generate_$name" 150 "${gen[@]}" $([[ $DRY == 1 ]] || expect_tokens "$dir/manifest.json") ||
      { [[ -f "$dir/llm.pte" ]] && step "generate_${name}_nographs" 150 "${gen[@]}" --no-graphs; }
  done
  # The same positions that fit a 1024-position cache, on A's stock bf16 export when the machine still has it.
  if [[ $DRY == 1 || -f "$WORK/bf16/llm.pte" ]]; then
    step generate_ref_bf16_1024 90 "$BUILD/examples/generate/generate" "$WORK/bf16/llm.pte" --prompt-lens 128 \
      --new-tokens 256 --reps 3 --decode-at 128,896 --decode-window 64 --max-ctx 1024 --profile-kernels \
      --json "$RES/generate_ref.json"
  fi
  # One decode graph replay kernel by kernel (CUPTI, bench/graph_trace.cpp) per export, when the pack has the tracer:
  # issue 32's "the runtime adds nothing" (step time against the summed kernel time).
  local tracer="$BUILD/bench/libaoti_cuda_graph_trace.so" traced
  if [[ -f "$tracer" ]]; then
    for traced in ${LONG_EXPORTS//,/ } ref; do
      local pte="$WORK/long_${traced}_$LONG_CTX/llm.pte"; [[ $traced == ref ]] && pte="$WORK/bf16/llm.pte"
      [[ $DRY == 1 || -f "$pte" ]] || continue
      step "trace_$traced" 60 env AOTI_CUDA_GRAPH_TRACE="$RES/trace_$traced.json" LD_PRELOAD="$tracer" \
        "$BUILD/examples/generate/generate" "$pte" --prompt-lens 128 --new-tokens 64 --reps 1
    done
  fi
  if [[ $DRY != 1 ]]; then
    for name in ${LONG_EXPORTS//,/ }; do
      local ref=()
      [[ -f "$RES/generate_ref.json" ]] && ref=(--ref "$RES/generate_ref.json" --ref-manifest "$WORK/bf16/manifest.json")
      [[ -f "$RES/trace_$name.json" ]] && ref+=(--trace "$RES/trace_$name.json")
      [[ -f "$RES/generate_ref.json" && -f "$RES/trace_ref.json" ]] && ref+=(--ref-trace "$RES/trace_ref.json")
      python3 "$HERE/llm_job.py" long-summary --generate "$RES/generate_$name.json" \
        --manifest "$WORK/long_${name}_$LONG_CTX/manifest.json" "${ref[@]}" \
        --out "$RES/summary_long_$name.json" > /dev/null
      cp "$RES/generate_$name.json" "$OUT/${STAGE}_generate_$name.json" 2>/dev/null
    done
  fi
}

# What dependent launch buys, in one job: each export's generate with the overlap on, off, and on again (a drift
# between the two "on" runs bounds the noise), then the int4 kernels back to back (bench/int4_bench.cu) both ways.
stage_C() {
  start_stage C; setup_python
  start_suite
  long_exports $((BUDGET - 170))
  [[ -n "$SUITE_PID" ]] && wait "$SUITE_PID"  # the suite shares the GPU: done before anything is timed
  pdl_measure
  finish_stage
}

# C's measurements: each export's decode with dependent launch on / off / on, the int4 kernels both ways.
pdl_measure() {
  local name mode
  for name in ${LONG_EXPORTS//,/ }; do
    local dir="$WORK/long_${name}_$LONG_CTX"
    [[ $DRY == 1 || -f "$dir/llm.pte" ]] || continue
    # on / off / on2: dependent launch; c16, c8: decode attention as one kernel over clusters of 16 or 8 blocks
    # (TuningOptions::attention_cluster); c16on, c8on: with dependent launch too (the chain bench's best at 04:37
    # on 12-05 was clusters with the overlap). CLUSTER_MEASURE=0 leaves the cluster runs out.
    local modes="on off on2"
    [[ ${CLUSTER_MEASURE:-1} == 1 ]] && modes+=" c16 c8 c16on c8on"
    for mode in $modes; do
      local pdl=1 cluster=0
      case $mode in off|c16|c8) pdl=0 ;; esac
      case $mode in c16|c16on) cluster=16 ;; c8|c8on) cluster=8 ;; esac
      step "generate_${name}_$mode" 60 env AOTI_CUDA_DEPENDENT_LAUNCH=$pdl AOTI_CUDA_ATTENTION_CLUSTER=$cluster \
        "$BUILD/examples/generate/generate" "$dir/llm.pte" --prompt-lens 128 --new-tokens 256 --reps 3 \
        --decode-at "$LONG_POSITIONS" --decode-window "$LONG_WINDOW" --max-ctx "$LONG_CTX" \
        --json "$RES/generate_${name}_$mode.json" $([[ $DRY == 1 ]] || expect_tokens "$dir/manifest.json")
    done
  done
  int4_benches
  [[ $DRY == 1 ]] || python3 "$HERE/llm_job.py" pdl-summary "$RES" --out "$RES/summary_pdl.json" > /dev/null
}

# The int4 kernels back to back on the model's shapes, when the pack has their bench: dependent launch on, off, and
# on with each call's first weights requested before its wait (early: Problem::weights_early).
int4_benches() {
  [[ -x "$BUILD/bench/aoti_cuda_int4_bench" ]] || return 0
  local mode
  for mode in on off early; do
    local flags=(--dependent-launch "$([[ $mode == off ]] && echo off || echo on)")
    [[ $mode == early ]] && flags+=(--weights-early)
    step "int4_bench_$mode" 90 "$BUILD/bench/aoti_cuda_int4_bench" "${flags[@]}" --iters 15 \
      --shapes 3072x2048,2048x2048,11264x2048,2048x5632,32000x2048 --m 1,4 --json "$RES/int4_bench_$mode.json"
  done
}

# B and C in one call, with the stock bf16 export beside (REF_EXPORT=1 by default here) and the GPU suite beside the
# exports: every figure of issue 32 from one job. Called again at once on the warm machine it reuses the exports
# that finished and makes the rest.
stage_BC() {
  start_stage BC; setup_python
  start_suite
  # Without the dependent-launch runs the measurements take ~40 s: the exports get the time (an int4 export alone
  # outlived 390 s on 2026-12-04 16:36).
  REF_EXPORT=${REF_EXPORT:-1} long_exports $((BUDGET - $([[ ${PDL_MEASURE:-1} == 1 ]] && echo 170 || echo 80)))
  [[ -n "$SUITE_PID" ]] && wait "$SUITE_PID"  # the suite shares the GPU: done before anything is timed
  long_measure
  # PDL_MEASURE=0: dependent launch is decided (on by default since 2026-12-05); its on/off runs can be left out.
  [[ ${PDL_MEASURE:-1} == 1 ]] && pdl_measure
  # The decode attention kernel alone by position (its log is in the archive).
  kernel_benches
  finish_stage
}
# X: the exports alone, with the whole call (BC's exports get 390 s, which a slow host's need not fit). BC called at
# once afterwards, on the still-warm machine, reuses them; on a fresh one it exports again from export_cache.tgz.
stage_X() {
  start_stage X; setup_python
  start_suite  # beside the exports, as in BC; then BC with RUN_SUITE=0 has its whole time for the measurements
  REF_EXPORT=${REF_EXPORT:-1} long_exports $((BUDGET - 25))
  [[ -n "$SUITE_PID" ]] && wait "$SUITE_PID"
  finish_stage
}

# The decode kernels alone, each in a few seconds, when the pack has their benches (SUITE=1): decode attention by
# position, each fused projection of a layer against the plain one it replaces, and whole layers back to back
# (--chain). Their logs and fused_linear_bench.json are in the archive.
kernel_benches() {
  if [[ -x "$BUILD/bench/aoti_cuda_attention_bench" ]]; then
    step attention_decode 60 "$BUILD/bench/aoti_cuda_attention_bench" --decode
  fi
  # A previous build's attention bench beside it (README, "To compare two versions of a kernel"): an A/B in one call.
  if [[ -x "$BUILD/bench/aoti_cuda_attention_bench_old" ]]; then
    step attention_decode_old 60 "$BUILD/bench/aoti_cuda_attention_bench_old" --decode
  fi
  if [[ -x "$BUILD/bench/aoti_cuda_fused_linear_bench" ]]; then
    step fused_linear_bench 90 "$BUILD/bench/aoti_cuda_fused_linear_bench" --json "$RES/fused_linear_bench.json"
    # 22 decode layers in one graph: plain launches, dependent launch, dependent launch with the weights loaded early.
    step fused_linear_chain 60 "$BUILD/bench/aoti_cuda_fused_linear_bench" --chain
  fi
  # Whether a kernel's parameter count changes the gaps inside a graph (the stock export's 1.043x; seconds).
  if [[ -x "$BUILD/bench/aoti_cuda_graph_gap_probe" ]]; then
    step graph_gap_probe 30 "$BUILD/bench/aoti_cuda_graph_gap_probe"
  fi
}

# K: the kernels alone, no export (about a minute with the GPU suite): to measure a kernel change before spending
# minutes of exports on it.
stage_K() {
  start_stage K
  start_suite
  [[ -n "$SUITE_PID" ]] && wait "$SUITE_PID"
  kernel_benches
  int4_benches  # (BC runs them in pdl_measure)
  [[ $DRY == 1 || ! -f "$RES/int4_bench_on.json" ]] ||
    python3 "$HERE/llm_job.py" pdl-summary "$RES" --out "$RES/summary_pdl.json" > /dev/null
  # NCU=1: Nsight Compute on the decode attention and the norm + q/k/v projections (ncu-kernels.sh), after the
  # benches so that their figures are not taken beside the profiler.
  if [[ ${NCU:-0} == 1 ]]; then step ncu_kernels 240 "$HERE/ncu-kernels.sh" "$BUILD"; fi
  finish_stage
}

# The step machinery itself, on the CPU with the real step(): a step that passes, one that outlives its timeout,
# one that fails, one cut to the time left, one skipped (test_device_llm.sh runs it with an 8 s budget).
stage_selftest() {
  start_stage selftest
  step passes 5 true
  step outlives_timeout 2 sleep 30
  step fails 5 false
  step cut_to_budget 30 sleep 30
  step skipped 30 true
  finish_stage
}

# ---- the dry run's static checks (beyond what every step checks) -------------------------------------------------
dry_checks() {
  local f
  for f in $PACK_FILES CMakeCache.txt; do [[ -e "$BUILD/$f" ]] || problem "$BUILD/$f is missing (the pack)"; done
  for f in $PACK_FILES; do
    [[ $f == *.so* || -x "$BUILD/$f" ]] || problem "$BUILD/$f is not executable"
  done
  local help
  help=$("$BUILD/examples/generate/generate" --help 2>&1) || problem "generate --help failed: $help"
  for f in $GENERATE_FLAGS; do grep -q -- "$f" <<<"$help" || problem "generate --help does not list $f"; done
  help=$(python3 bench/llm/bench_llm.py --help 2>&1)
  for f in --stage --graph-ab --export-timeout --parts --budget --work; do
    grep -q -- "$f" <<<"$help" || problem "bench_llm.py --help does not list $f"
  done
  python3 -c "import sys; sys.path.insert(0, 'bench/llm'); import bench_llm as b
for n in ('bf16', 'int4'):
    assert b.EXPORTS[n][0] in ('llm', 'int4'), n" || problem "bench_llm.EXPORTS lacks the stock bf16/int4 exports"
  help=$(python3 tools/export/llm/export_llm.py --help 2>&1)
  for f in --max-ctx --quant --gemm --sdpa --fusion --out --config; do
    grep -q -- "$f" <<<"$help" || problem "export_llm.py --help does not list $f"
  done
  for name in ${LONG_EXPORTS//,/ }; do
    flags=$(export_flags "$name" 2>/dev/null) ||
      { problem "LONG_EXPORTS: no export $name in bench_llm.EXPORTS"; continue; }
    # The whole command line as export_llm.py parses it (LONG_EXPORT_FLAGS included): a typo stops here, not there.
    python3 -c "import sys; sys.path.insert(0, 'tools/export/llm'); from export_llm import parse_args
parse_args(['--out', 'x', '--max-ctx', '$LONG_CTX'] + sys.argv[1:])" $flags ${LONG_EXPORT_FLAGS:-} >/dev/null 2>&1 ||
      problem "export_llm.py refuses the flags of $name: $flags ${LONG_EXPORT_FLAGS:-}"
  done
  # ExecuTorch's CUDA LLM recipe: torchao int4 weight-only, tile_packed_to_4d, group 128.
  grep -q 'Int4WeightOnlyConfig(group_size=group_size, int4_packing_format="tile_packed_to_4d")' tools/export/llm/export_llm.py &&
    grep -q 'def quantize_int4(model, group_size: int = 128)' tools/export/llm/export_llm.py ||
    problem "export_llm.py --quant int4 is no longer Int4WeightOnlyConfig tile_packed_to_4d, group 128"
  # The libtorch runner (built on the machine from source) ignores options it does not read: each one bench_llm
  # passes to `aoti_runner llm` must be read in its source.
  for f in decode-graph share max-ctx vocab prompt-lens new-tokens reps; do
    grep -q "a.get(\"$f\"" bench/peers/aoti_runner.cpp || problem "the libtorch runner does not read --$f"
  done
  help=$(python3 bench/peers/executorch/device_run.py --help 2>&1)
  for f in --et13 --llm-exports --llm-work --parts --budget; do
    grep -q -- "$f" <<<"$help" || problem "executorch device_run.py --help does not list $f"
  done
  local et
  for et in "$ET12" ${ET13:+"$ET13"}; do
    if [[ -f "$et/NONE" ]]; then echo "note: $(cat "$et/NONE")"; continue; fi
    [[ -x "$et/et_runner" && -f "$et/libaoti_cuda_shims.so" ]] || { problem "$et: et_runner + libaoti_cuda_shims.so"; continue; }
    for f in generate --data --prompt-lens --new-tokens --reps --expect-tokens --weight-sharing --cuda-graph; do
      grep -aq -- "$f" "$et/et_runner" || problem "$et/et_runner does not know $f"
    done
  done
  [[ -n "$ET13" ]] || echo "note: no ExecuTorch 1.3 peer beside BUILD (et13): its rows will be missing"
  grep -q 'pinned staging")' tests/load_order/gpu_cases.cpp || problem "the large-program case's name no longer ends in 'pinned staging'"
  grep -aq 'pinned staging' "$BUILD/tests/libaoti_cuda_load_order_cases.so" || problem "the packed cases library lacks the large-program case"
  grep -q 'AOTI_CUDA_LARGE_PROGRAM' tests/load_order/gpu_cases.cpp || problem "the large-program case no longer reads AOTI_CUDA_LARGE_PROGRAM"
  [[ -f tests/fixtures.tar.xz && -f cmake/unpack_fixtures.cmake ]] || problem "the fixtures archive or its unpacker is missing"
  for f in bench/llm/run_on_device.sh bench/peers/executorch/run_on_device.sh "$HERE/device-llm.sh"; do
    bash -n "$f" || problem "$f: bash syntax"
  done
  # The stage deadline leaves the call's 600 s room for the set-up before it and the archive after it.
  (( BUDGET <= 570 )) || problem "BUDGET $BUDGET s: a stage must end inside the device call's 600 s"
  # The device calls: README.md quotes each exactly, each within the tool's 2000 characters.
  local call
  while IFS= read -r call; do
    (( ${#call} <= 2000 )) || problem "call over 2000 characters: $call"
    grep -qF -- "$call" "$HERE/README.md" || problem "README.md does not quote the call: $call"
  done < <(bash "$HERE/device-llm.sh" --print-calls)
  # What travels: the tree (tracked + untracked-not-ignored) and the carried paths, under the tool's 64 MiB.
  local carry=${CARRY-.carry/llmjob} sizes
  if git -C "$ROOT" rev-parse >/dev/null 2>&1; then
    # A carried path must be ignored by git, else it travels twice (in the tree and as carry).
    if [[ -n "$carry" && "$carry" != /* ]] && ! git -C "$ROOT" check-ignore -q "$carry"; then
      problem "$carry is not ignored by git: it would travel with the tree and again as carry"
    fi
    mapfile -d '' tree < <(git -C "$ROOT" ls-files -z --cached --others --exclude-standard)
    sizes=$(cd "$ROOT" && python3 "$HERE/llm_job.py" carry-size "${tree[@]}" ${carry:+$carry})
    echo "travels (tree + ${carry:-nothing carried}): $sizes"
    python3 -c "import json,sys; s=json.loads(sys.argv[1]); sys.exit(0 if s['block_mib'] < 60 else 1)" "$sizes" ||
      problem "tree + carry reach 60 MiB counted in 4 KiB blocks (the limit is 64 MiB): $sizes"
  fi
}

case "$STAGE" in
  A1) stage_A1 ;;
  A2) stage_A2 ;;
  B) stage_B ;;
  C) stage_C ;;
  BC) stage_BC ;;
  X) stage_X ;;
  K) stage_K ;;
  selftest) stage_selftest ;;
  all) [[ $DRY == 1 ]] || { echo "STAGE all is for the dry run"; exit 2; }
       stage_A1; stage_A2; stage_B; stage_C; stage_BC; stage_X; stage_K ;;
  *) echo "unknown STAGE $STAGE (A1, A2, B, C, BC, X, K)"; exit 2 ;;
esac
rc=$?
if [[ $DRY == 1 ]]; then
  dry_checks
  if (( problems > 0 )); then echo "dry run: $problems mismatch(es)"; exit 1; fi
  echo "dry run: every stage's binaries, scripts, flags, wheels and sizes check out"
  exit 0
fi
exit $rc
