#!/usr/bin/env bash
# A job longer than one device call (600 s at most). The device machine keeps a process that started its own session
# running after the call that started it returns, until the machine goes back, about 30 s after the last call ended.
# So a long job is started in one call and waited for in as many calls as it needs, each made at once:
#
#   call 1: bash tools/contrib/gpu-machine/detach.sh start JOB -- COMMAND [ARGS...] &&
#           bash tools/contrib/gpu-machine/detach.sh wait JOB 560 "$OUT"
#   call 2, within 30 s of call 1's end:  bash tools/contrib/gpu-machine/detach.sh wait JOB 560 "$OUT"
#
# start: runs COMMAND in a new session (setsid) in the current folder, with DETACHED_OUT set to a folder for the files
#        it wants back; its output goes to /tmp/detached/JOB/log and its exit status to /tmp/detached/JOB/rc.
#        Refuses a JOB that is still running.
# wait:  returns when the job has ended, or after SECONDS. Either way it copies the job's log and every file of
#        DETACHED_OUT (no sub-folders: the device tool brings back plain files only, 8 at most) into DEST.
#        Exit status: the job's, when it ended; 3 while it still runs (call wait again at once); 2 for no such job.
#
# The device tool counts held time, not call time, as device time: waiting across calls costs what one long call
# would. A machine that went back between calls takes the job with it: `wait` on a fresh one answers 2.
set -uo pipefail

ROOT=/tmp/detached
usage() { sed -n '2,17p' "$0" >&2; exit 64; }

case "${1:-}" in
  start)
    [[ $# -ge 4 && "$3" == "--" ]] || usage
    job=$2; dir="$ROOT/$job"; shift 3
    if [[ -f "$dir/pid" && ! -f "$dir/rc" ]] && kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
      echo "detach: job $job is still running (pid $(cat "$dir/pid"))" >&2; exit 1
    fi
    rm -rf "$dir"; mkdir -p "$dir/out"
    # The job's status is written by the job's own shell, so it is there whatever the caller does meanwhile.
    DETACHED_OUT="$dir/out" setsid bash -c '"$@" > "$0/log" 2>&1 < /dev/null; echo $? > "$0/rc.tmp"; mv "$0/rc.tmp" "$0/rc"' \
      "$dir" "$@" &
    echo $! > "$dir/pid"
    echo "detach: job $job started (pid $(cat "$dir/pid")), log $dir/log"
    ;;
  wait)
    [[ $# -eq 4 ]] || usage
    job=$2; seconds=$3; dest=$4; dir="$ROOT/$job"
    [[ -d "$dir" ]] || { echo "detach: no job $job on this machine (a fresh one?)" >&2; exit 2; }
    end=$((SECONDS + seconds))
    while [[ ! -f "$dir/rc" ]] && (( SECONDS < end )); do sleep 2; done
    mkdir -p "$dest"
    cp "$dir/log" "$dest/detached_$job.log" 2>/dev/null
    find "$dir/out" -maxdepth 1 -type f -exec cp {} "$dest/" \;
    if [[ -f "$dir/rc" ]]; then
      rc=$(cat "$dir/rc"); echo "detach: job $job ended with status $rc"; exit "$rc"
    fi
    echo "detach: job $job still running after ${seconds} s: call wait again within 30 s"
    tail -n 5 "$dir/log"
    exit 3
    ;;
  *) usage ;;
esac
