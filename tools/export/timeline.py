"""Where a long export's time goes, while it runs: AOTI_EXPORT_TIMELINE=N makes an exporter print, every N seconds,
its main thread's innermost frames and the processes it started (compilers, linkers, Inductor's compile workers)
with their CPU seconds. An export cut by a time limit leaves in its log where it was, and whether it was waiting
on child processes (nvcc, g++, ptxas) or on its own Python, on one core or many.

Standard library only, Linux (/proc). A Python thread reads the main thread's frames under the GIL: faulthandler's
repeating dump crashed an exporter at its second dump (exit 139, 2026-12-05).
"""
import os
import sys
import threading
import time
import traceback

ENV = "AOTI_EXPORT_TIMELINE"


def _proc_table():
    """pid -> (ppid, comm, cpu seconds) for every readable process."""
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue  # gone meanwhile
        # comm is in parentheses and may hold spaces; the fields after it are fixed
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        rest = stat[stat.rindex(")") + 2:].split()
        ppid, utime, stime = int(rest[1]), int(rest[11]), int(rest[12])
        table[int(entry)] = (ppid, comm, (utime + stime) / tick)
    return table


def descendants(root=None):
    """[(pid, comm, cpu seconds)] of the processes below `root` (default: this one), this one excluded."""
    root = os.getpid() if root is None else root
    table = _proc_table()
    children = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        found.append((pid, table[pid][1], table[pid][2]))
        todo.extend(children.get(pid, []))
    return sorted(found)


def cpu_seconds():
    """(this process's CPU seconds, its finished children's): short compiler runs that end between two entries
    show only in the second figure."""
    times = os.times()
    return times.user + times.system, times.children_user + times.children_system


def machine():
    """The machine's state beside the export: this process's resident MiB, the memory still available, and the load
    average (runnable processes over the last minute; above the core count, the exports wait for CPUs)."""
    def field(path, key):
        try:
            with open(path) as f:
                for line in f:
                    if line.startswith(key + ":"):
                        return int(line.split()[1])  # kB
        except OSError:
            pass
        return None

    rss = field("/proc/self/status", "VmRSS")
    avail = field("/proc/meminfo", "MemAvailable")
    try:
        with open("/proc/loadavg") as f:
            load = f.read().split()[0]
    except OSError:
        load = "?"
    mib = lambda kb: "?" if kb is None else f"{kb // 1024}"  # noqa: E731
    return f"rss {mib(rss)} MiB, available {mib(avail)} MiB, load {load} on {os.cpu_count()} CPUs"


def snapshot(elapsed, frames=8):
    """One timeline entry: elapsed and CPU seconds, the children, the main thread's innermost frames."""
    main = threading.main_thread().ident
    frame = sys._current_frames().get(main)
    stack = traceback.extract_stack(frame)[-frames:] if frame is not None else []
    kids = descendants()
    busy = sorted(kids, key=lambda k: -k[2])[:6]
    own, finished = cpu_seconds()
    running = ": " + ", ".join(f"{c}[{p}] {s:.0f} s" for p, c, s in busy) if busy else ""
    lines = [f"--- timeline at {elapsed:.0f} s: this process {own:.0f} CPU s, its finished children {finished:.0f}; "
             f"{len(kids)} running children{running}", "    " + machine()]
    lines += [f"    {os.path.basename(fs.filename)}:{fs.lineno} {fs.name}" for fs in stack]
    return "\n".join(lines)


def start_from_env(stream=None):
    """Starts the timeline thread when AOTI_EXPORT_TIMELINE is a positive number of seconds; returns whether it did."""
    try:
        every = float(os.environ.get(ENV, "0"))
    except ValueError:
        print(f"{ENV}={os.environ.get(ENV)!r} is not a number of seconds: no timeline", file=sys.stderr)
        return False
    if every <= 0:
        return False
    out = stream or sys.stderr
    t0 = time.monotonic()

    def run():
        while True:
            time.sleep(every)
            try:
                print(snapshot(time.monotonic() - t0), file=out, flush=True)
            except Exception as e:  # a diagnostic never stops the export
                print(f"--- timeline: {e}", file=out, flush=True)

    threading.Thread(target=run, name="export-timeline", daemon=True).start()
    return True
