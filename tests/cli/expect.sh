#!/bin/sh
# expect.sh RC PATTERN... -- COMMAND ARGS...
# Runs COMMAND (stdout and stderr together), prints its output, and passes when
# its exit status is RC ("any" accepts every status) and every extended regular
# expression PATTERN matches some line ("!PATTERN": matches no line).
rc_want="$1"; shift
patterns=""
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do
  patterns="$patterns
$1"; shift
done
[ "$1" = "--" ] && shift
out=$("$@" 2>&1); rc=$?
printf '%s\n[exit status %s]\n' "$out" "$rc"
if [ "$rc_want" != "any" ] && [ "$rc" != "$rc_want" ]; then
  echo "FAILED: exit status $rc, expected $rc_want"; exit 1
fi
status=0
echo "$patterns" | while IFS= read -r p; do
  [ -z "$p" ] && continue
  case "$p" in
    !*) if printf '%s\n' "$out" | grep -Eq -- "${p#!}"; then echo "FAILED: output matches '${p#!}'"; exit 1; fi ;;
    *) if ! printf '%s\n' "$out" | grep -Eq -- "$p"; then echo "FAILED: no line matches '$p'"; exit 1; fi ;;
  esac
done || status=1
exit $status
