#!/usr/bin/env bash
# Where an LLM export spends its time, when one runs past its step's timeout on the GPU machine.
#   export-probe.sh OUT WHL_DIR SECONDS NAME=ARGS [NAME=ARGS ...]
# Runs tools/export/llm/export_llm.py once per NAME=ARGS, all at once (as the LLM job's stages do), each under
# SECONDS. 20 s before its end each export prints every Python thread's stack (faulthandler) into OUT/NAME.log; the
# busiest processes are listed every 20 s in OUT/ps.log, so a stuck lowering is told from a slow one.
# PROBE_DUMP_EVERY=N: the stacks every N seconds instead, a timeline of where the lowering goes.
set -uo pipefail
OUT=${1:?usage: export-probe.sh OUT WHL_DIR SECONDS NAME=ARGS...}; WHL=${2:?}; T=${3:?}; shift 3
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"; cd "$ROOT"
SITE=${AOTI_EXPORT_SITE:-/tmp/site}  # where device-llm.sh installs the wheels too
mkdir -p "$OUT"
[[ -d $SITE/executorch ]] || python3 -m pip install -q --no-index --no-deps --no-compile --target "$SITE" "$WHL"/*.whl
export PYTHONPATH="$SITE" FLATC_EXECUTABLE="$SITE/executorch/data/bin/flatc" PYTHONWARNINGS=ignore PYTHONUNBUFFERED=1
for spec in "$@"; do
  name=${spec%%=*}; read -r -a args <<< "${spec#*=}"
  (
    # One Inductor cache each, as device-llm.sh gives its exports: two exports of one model compile kernels of the
    # same hash, and in a shared cache one's link step lost the other's .fatbin.o files (2026-12-05 15:09 UTC).
    export TORCHINDUCTOR_CACHE_DIR="${PROBE_CACHE:-/tmp/export-probe-cache}/inductor_$name"
    start=$SECONDS
    timeout -s KILL "$T" python3 -c "
import faulthandler, runpy, sys, threading, time, traceback
every = ${PROBE_DUMP_EVERY:-0}
if every > 0:
    # faulthandler's repeating dump crashed the export at its second dump (exit 139, 2026-12-05 17:41 UTC), so the
    # timeline comes from a Python thread, which reads the main thread's frames under the GIL.
    main = threading.main_thread().ident
    def timeline():
        t0 = time.monotonic()
        while True:
            time.sleep(every)
            stack = ''.join(traceback.format_stack(sys._current_frames()[main])[-14:])
            print(f'--- main thread at {time.monotonic() - t0:.0f} s:\\n{stack}', file=sys.stderr, flush=True)
    threading.Thread(target=timeline, daemon=True).start()
else:
    faulthandler.dump_traceback_later($((T - 20)), exit=False)
sys.argv = ['export_llm.py'] + sys.argv[1:]
sys.path.insert(0, 'tools/export/llm')
runpy.run_path('tools/export/llm/export_llm.py', run_name='__main__')" "${args[@]}" > "$OUT/$name.log" 2>&1
    echo "exit $? after $((SECONDS - start)) s" >> "$OUT/$name.log"
  ) &
done
while [[ -n "$(jobs -rp)" ]]; do
  { echo "== $(date +%T)"; ps -eo pid,ppid,pcpu,etimes,rss,args --sort=-pcpu | cut -c1-200 | head -15; } >> "$OUT/ps.log"
  sleep 20
done
wait
tail -n 3 "$OUT"/*.log | grep -v '^$'
