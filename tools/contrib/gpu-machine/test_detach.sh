#!/usr/bin/env bash
# Checks of detach.sh without a GPU: a job outlives the shell that started it, `wait` answers 3 while it runs and
# its exit status once it ended, copies its log and files, refuses a second start of a running job, and answers 2
# for a job this machine does not have.
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
D="$HERE/detach.sh"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
job="test-detach-$$"
passed=0 failed=0
check() { if eval "$2"; then echo "ok   $1"; passed=$((passed + 1)); else echo "FAIL $1"; failed=$((failed + 1)); fi; }

# The job is started from a subshell that ends at once, as a device call does.
( bash "$D" start "$job" -- bash -c 'sleep 3; echo result > "$DETACHED_OUT/result.txt"; echo finished; exit 7' ) \
  > "$tmp/start.log" 2>&1
check "start reports the job" 'grep -q "job $job started" "$tmp/start.log"'
bash "$D" start "$job" -- true > "$tmp/again.log" 2>&1; rc=$?
check "a second start of a running job is refused" '[[ $rc == 1 ]] && grep -q "still running" "$tmp/again.log"'
bash "$D" wait "$job" 1 "$tmp/out" > /dev/null 2>&1; rc=$?
check "wait answers 3 while the job runs" '[[ $rc == 3 ]]'
bash "$D" wait "$job" 20 "$tmp/out" > /dev/null 2>&1; rc=$?
check "wait answers the job's own status once it ended" '[[ $rc == 7 ]]'
check "the job's files are copied" '[[ "$(cat "$tmp/out/result.txt" 2>/dev/null)" == result ]]'
check "the job's log is copied" 'grep -q finished "$tmp/out/detached_$job.log" 2>/dev/null'
bash "$D" wait "no-such-job-$$" 1 "$tmp/out" > /dev/null 2>&1; rc=$?
check "an unknown job answers 2" '[[ $rc == 2 ]]'
rm -rf "/tmp/detached/$job"
echo "detach: $passed passed, $failed failed"
(( failed == 0 ))
