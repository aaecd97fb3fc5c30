"""Checks of timeline.py (standard library only): the child-process table and the timeline's lines."""
import io
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import timeline  # noqa: E402

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


# A grandchild counts: the exporter's compilers run below Inductor's worker processes.
child = subprocess.Popen(["sh", "-c", "sleep 5 & wait"])
time.sleep(0.3)
kids = timeline.descendants()
check(any(c == "sh" and p == child.pid for p, c, _ in kids), "the child shell is listed")
check(any(c == "sleep" for _, c, _ in kids), "the grandchild sleep is listed")
check(all(p != os.getpid() for p, _, _ in kids), "this process is not its own child")

text = timeline.snapshot(12.4)
check(text.startswith("--- timeline at 12 s: this process"), "the entry starts with the elapsed seconds")
check("sleep[" in text and "running children" in text, "the entry names the children")
subprocess.run(["sh", "-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done"], check=True)
check(timeline.cpu_seconds()[1] > 0.05, "a finished child's CPU time counts")
check("test_timeline.py" in text, "the entry shows the main thread's frames")
check("MiB, available" in text and " CPUs" in text, "the entry has memory and load")
child.kill()
child.wait()

# The thread starts only for a positive number of seconds.
out = io.StringIO()
os.environ[timeline.ENV] = "0"
check(timeline.start_from_env(out) is False, "0 seconds: no timeline")
os.environ[timeline.ENV] = "soon"
check(timeline.start_from_env(out) is False, "not a number: no timeline")
os.environ[timeline.ENV] = "0.1"
check(timeline.start_from_env(out) is True, "0.1 s: the timeline starts")
time.sleep(0.35)
check(out.getvalue().count("--- timeline at") >= 2, "entries arrive every 0.1 s")

print(f"timeline: {len(failures)} failed")
sys.exit(1 if failures else 0)
