#!/usr/bin/env python3
"""Runs the same programs through aoti_cuda and ExecuTorch's own CUDA runtime (et_runner), on the GPU machine, in one
job, and writes OUT/executorch_results.json (bench/peers/executorch/report.py turns it into docs/benchmarks/).

    python3 device_run.py --out OUT --aoti BUILD_AOTI --et BUILD_ET --fixtures DIR
                          [--runs 200] [--loads 5] [--cold-reps 3]
                          [--llm-work /tmp/llm_bench] [--llm-exports bf16,int4] [--budget 280]

Steps (each a child process with a timeout and a log; whatever finished is written even when the budget runs out):
  fixtures   `aoti_cuda_bench` and `et_runner fixtures` over every fixture: load (first and median), first call,
             per-call p50/p99 (host I/O; device I/O where the runtime takes it), GPU memory and host RSS after load;
             et_runner checks its first call's outputs against the recorded ones.
  agreement  `aoti_cuda run --expect` on every method of every fixture (recorded inputs and tolerances).
  cold       cold start: one process that loads the program, runs the first method once on the recorded inputs,
             checks and prints the outputs, and exits (`aoti_cuda run` / `et_runner run`), timed from outside from
             spawn to exit; --cold-reps times each, alternating the runtimes; median The same runs give the load
             (file -> ready, driver and context excluded) and the process's peak host RSS.
  llm        when --llm-work holds exports (WORK/<name>/llm.pte + aoti_cuda_blob.ptd, made by bench/llm): for each,
             examples/generate (decode graphs on, and --no-graphs) and `et_runner generate` on the same files,
             128/512-token prompts, 256 decode steps, the tokens checked against the export's eager reference;
             and the cold start to the first token of each runtime, timed as above (one 128-token prompt, one token).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time


class Budget:
    def __init__(self, seconds: float):
        self.deadline = time.monotonic() + seconds

    def left(self) -> float:
        return self.deadline - time.monotonic()


def run(name, cmd, timeout, out, budget, env=None):
    """Runs cmd with its output in OUT/logs/<name>.log (appended); returns (rc, stdout text, wall seconds)."""
    limit = min(timeout, budget.left() - 5)
    log_dir = os.path.join(out, "logs")
    os.makedirs(log_dir, exist_ok=True)
    if limit <= 1:
        return None, "skipped: budget spent", 0.0
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=limit, env=env)
        rc, text = p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        rc = 124
        text = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        text += f"\n[timed out after {limit:.0f}s]"
    wall = time.monotonic() - t0
    with open(os.path.join(log_dir, name + ".log"), "a") as f:
        f.write(f"$ {' '.join(cmd)}\n{text}\n[rc={rc} wall={wall:.3f}s]\n")
    print(f"{name}: rc={rc} {wall:.2f}s", flush=True)
    return rc, text, wall


def at_json(text):
    """The last '@@JSON {...}' line of a run's output, parsed (None when absent)."""
    found = None
    for line in text.splitlines():
        if line.startswith("@@JSON "):
            try:
                found = json.loads(line[len("@@JSON "):])
            except json.JSONDecodeError:
                pass
    return found


# Runs a command and prints the peak resident set of it (and what it started) when it ends: the LLM rows compare
# the whole run's peak host memory of both runtimes (examples/generate reports no RSS of its own).
# It also prints the child's wall time from spawn to exit, so that the wrapper's own start is not counted.
PEAK_RSS_WRAPPER = ("import resource, subprocess, sys, time\n"
                    "t0 = time.monotonic()\n"
                    "rc = subprocess.call(sys.argv[1:])\n"
                    "wall = time.monotonic() - t0\n"
                    "print('@@MAXRSS_KIB', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, flush=True)\n"
                    "print('@@WALL_S', wall, flush=True)\n"
                    "sys.exit(rc)")


def wrapped_wall_s(text):
    for line in text.splitlines():
        if line.startswith("@@WALL_S "):
            return float(line.split()[1])
    return None


def peak_rss_mib(text):
    for line in text.splitlines():
        if line.startswith("@@MAXRSS_KIB "):
            return int(line.split()[1]) / 1024.0
    return None


def et_failure(text, rc):
    """Why an ExecuTorch run failed, from its output: a missing shim or kernel, else the last error line."""
    m = re.search(r"undefined symbol: (\S+)", text)
    if m:
        return f"the program imports {m.group(1)}, which ExecuTorch 1.2's CUDA shims do not define"
    m = re.search(r"kernel '([^']+)' not found", text)
    if m:
        return (f"the program runs {m.group(1)} outside the delegate; this build has no portable kernels "
                "(their registration is generated with torchgen, which needs torch)")
    errors = [ln for ln in text.splitlines() if ln.startswith("E ") or "error" in ln.lower()]
    return (errors[-1][-300:] if errors else "") or f"exit status {rc}"


AOTI_LOAD = re.compile(r"load [0-9.]+ ms \(parse ([0-9.]+), device init [0-9.]+, library ([0-9.]+), "
                       r"container ([0-9.]+), weights ([0-9.]+)\)")


def first_load_ms(peer, text):
    """File -> ready in a fresh process, the CUDA driver and context excluded. aoti_cuda run prints its load by
    phase; its total also holds the driver's start (cudaGetDeviceCount) and the context (device init), so the
    program's part is the sum of parse, library, container and weights. et_runner run starts the driver and the
    context before it times its load (Module construction to the last load_method)."""
    if peer == "aoti_cuda":
        m = AOTI_LOAD.search(text)
        return sum(float(g) for g in m.groups()) if m else None
    j = at_json(text)
    return j.get("load_ms") if j else None


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError):
        return None


def fixture_dirs(root):
    out = []
    for name in sorted(os.listdir(root)):
        d = os.path.join(root, name)
        if os.path.exists(os.path.join(d, "manifest.json")):
            out.append(d)
    return out


def aoti_run_cmd(cli, d, m, method):
    spec = m["methods"][method]
    cmd = [cli, "run", os.path.join(d, m["pte"]), "--method", method]
    for i in spec["inputs"]:
        cmd += ["--input", os.path.join(d, i["file"]) + "@" + ",".join(str(x) for x in i["shape"])]
    for o in spec["outputs"]:
        cmd += ["--expect", os.path.join(d, o["file"])]
    # aoti_cuda run takes one tolerance for every output: the loosest the manifest records for this method.
    cmd += ["--atol", str(max(o.get("atol", 1e-3) for o in spec["outputs"])),
            "--rtol", str(max(o.get("rtol", 1e-3) for o in spec["outputs"]))]
    return cmd


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--aoti", required=True, help="aoti_cuda build (aoti_cuda, bench/aoti_cuda_bench, examples/generate)")
    ap.add_argument("--et", required=True, help="the peer build (et_runner, libaoti_cuda_shims.so)")
    ap.add_argument("--fixtures", required=True)
    ap.add_argument("--et13", help="optional second peer build from ExecuTorch v1.3.0 (build.sh with ET_TAG=v1.3.0): "
                                   "its per-call p50 on the fixtures, and the LLM with weight_sharing_across_methods "
                                   "and decode in a CUDA graph")
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--loads", type=int, default=5)
    ap.add_argument("--cold-reps", type=int, default=3)
    ap.add_argument("--llm-work", help="bench/llm's work folder holding the exports (WORK/<name>/llm.pte)")
    ap.add_argument("--llm-exports", default="bf16,int4")
    ap.add_argument("--prompt-lens", default="128,512")
    ap.add_argument("--new-tokens", type=int, default=256)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--parts", default="fixtures,agreement,cold,llm")
    ap.add_argument("--budget", type=float, default=280)
    a = ap.parse_args(argv)
    parts = set(a.parts.split(","))
    os.makedirs(a.out, exist_ok=True)
    budget = Budget(a.budget)
    cli = os.path.join(a.aoti, "aoti_cuda")
    bench = os.path.join(a.aoti, "bench", "aoti_cuda_bench")
    generate = os.path.join(a.aoti, "examples", "generate", "generate")
    et = os.path.join(a.et, "et_runner")
    res = {"machine": {}, "params": vars(a).copy(), "fixtures": {}, "agreement": {}, "cold": {}, "llm": {}}
    try:
        res["machine"]["gpu"] = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout.strip()
        res["machine"]["driver"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True,
            text=True).stdout.strip()
    except OSError:
        pass
    res["machine"]["date_utc"] = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    dirs = fixture_dirs(a.fixtures)
    results_path = os.path.join(a.out, "executorch_results.json")

    def save():
        with open(results_path, "w") as f:
            json.dump(res, f, indent=1)

    try:
        if "fixtures" in parts:
            common = ["--runs", str(a.runs), "--loads", str(a.loads)]
            # One process per program: ExecuTorch 1.2's runtime cannot hold two programs with a method of the
            # same name in one process (et_runner.cpp's header says why).
            rows = []
            for d in dirs:
                name = os.path.basename(d)
                tmp = os.path.join(a.out, "logs", f"et_fixture_{name}.json")
                # 30 s: a small program takes under 1 s; a hang must not eat the job
                rc, text, _ = run("et_fixtures", [et, "fixtures"] + common + ["--json", tmp, d], 30, a.out, budget)
                got = load_json(tmp)
                if got:
                    rows += got
                else:  # the process died (e.g. a symbol the program imports is missing): keep why
                    rows.append({"model": name, "error": "failed", "error_message": et_failure(text, rc)})
            res["fixtures"]["executorch"] = {"rows": rows}
            if a.et13:
                rows13 = []
                for d in dirs:
                    name = os.path.basename(d)
                    tmp = os.path.join(a.out, "logs", f"et13_fixture_{name}.json")
                    rc, text, _ = run("et13_fixtures", [os.path.join(a.et13, "et_runner"), "fixtures"] + common +
                                      ["--json", tmp, d], 30, a.out, budget)
                    got = load_json(tmp)
                    rows13 += got if got else [{"model": name, "error": "failed", "error_message": et_failure(text, rc)}]
                res["fixtures"]["executorch_13"] = {"rows": rows13}
            rc, _, _ = run("aoti_fixtures", [bench] + common + ["--json", os.path.join(a.out, "aoti_fixtures.json"),
                                                                a.fixtures], 150, a.out, budget)
            res["fixtures"]["aoti_cuda"] = {"rc": rc, "rows": load_json(os.path.join(a.out, "aoti_fixtures.json"))}
            save()
        if "agreement" in parts:
            for d in dirs:
                m = load_json(os.path.join(d, "manifest.json"))
                for method in m["methods"]:
                    rc, text, _ = run("aoti_agree", aoti_run_cmd(cli, d, m, method), 30, a.out, budget)
                    res["agreement"].setdefault(m["name"], {})[method] = {"rc": rc, "match": rc == 0}
            save()
        if "cold" in parts:
            for d in dirs:
                m = load_json(os.path.join(d, "manifest.json"))
                method = next(iter(m["methods"]))
                row = {"method": method}
                for peer in ("aoti_cuda", "executorch"):
                    row.update({peer + "_s": [], peer + "_rc": [], peer + "_load_ms_all": []})
                for _ in range(a.cold_reps):
                    for peer, cmd in (("aoti_cuda", aoti_run_cmd(cli, d, m, method)),
                                      ("executorch", [et, "run", d, "--method", method])):
                        rc, text, _ = run("cold_" + peer, [sys.executable, "-c", PEAK_RSS_WRAPPER] + cmd, 30, a.out,
                                          budget)
                        row[peer + "_rc"].append(rc)
                        if rc == 0:
                            row[peer + "_s"].append(wrapped_wall_s(text))
                            row.setdefault(peer + "_peak_rss_mib_all", []).append(peak_rss_mib(text))
                            load = first_load_ms(peer, text)
                            if load is not None:
                                row[peer + "_load_ms_all"].append(load)
                        elif peer == "executorch":
                            row["executorch_error"] = et_failure(text, rc)
                for peer in ("aoti_cuda", "executorch"):
                    row[peer + "_ms"] = 1000 * statistics.median(row[peer + "_s"]) if row[peer + "_s"] else None
                    row[peer + "_load_ms"] = (statistics.median(row[peer + "_load_ms_all"])
                                              if row[peer + "_load_ms_all"] else None)
                    rss = [x for x in row.get(peer + "_peak_rss_mib_all", []) if x is not None]
                    row[peer + "_peak_rss_mib"] = statistics.median(rss) if rss else None
                res["cold"][m["name"]] = row
            save()
        if "llm" in parts and a.llm_work:
            for name in a.llm_exports.split(","):
                folder = os.path.join(a.llm_work, name)
                pte, ptd = os.path.join(folder, "llm.pte"), os.path.join(folder, "aoti_cuda_blob.ptd")
                if not os.path.exists(pte):
                    res["llm"][name] = {"missing": pte}
                    continue
                manifest = load_json(os.path.join(folder, "manifest.json")) or {}
                ref = manifest.get("reference") or {}
                expect = []
                if ref.get("tokens") and str(ref.get("prompt_len")) == a.prompt_lens.split(",")[0]:
                    expect = ["--expect-tokens", ",".join(str(t) for t in ref["tokens"])]
                measure = ["--prompt-lens", a.prompt_lens, "--new-tokens", str(a.new_tokens), "--reps", str(a.reps)]
                entry = {"export": {k: manifest.get(k) for k in ("config", "quant", "gemm", "sdpa", "fusion")}}
                for run_name, cmd in (("aoti_cuda", [generate, pte] + measure + expect),
                                      ("aoti_cuda_nographs", [generate, pte, "--no-graphs"] + measure + expect),
                                      ("executorch", [et, "generate", pte, "--data", ptd] + measure + expect)) + \
                        ((("executorch_13", [os.path.join(a.et13, "et_runner"), "generate", pte, "--data", ptd,
                                             "--weight-sharing", "--cuda-graph", "decode"] + measure + expect),)
                         if a.et13 else ()):
                    rc, text, wall = run(f"llm_{name}_{run_name}", [sys.executable, "-c", PEAK_RSS_WRAPPER] + cmd,
                                         120, a.out, budget)
                    entry[run_name] = at_json(text) or {"error": f"rc={rc}"}
                    entry[run_name]["rc"] = rc
                    entry[run_name]["peak_rss_mib"] = peak_rss_mib(text)
                    save()
                cold = {"aoti_cuda_s": [], "executorch_s": []}
                one = ["--prompt-lens", a.prompt_lens.split(",")[0], "--new-tokens", "1", "--reps", "0"]
                for _ in range(2):
                    for peer, cmd in (("aoti_cuda", [generate, pte] + one),
                                      ("executorch", [et, "generate", pte, "--data", ptd] + one)):
                        rc, text, _ = run(f"llm_{name}_cold_{peer}", [sys.executable, "-c", PEAK_RSS_WRAPPER] + cmd,
                                          60, a.out, budget)
                        if rc == 0:
                            cold[peer + "_s"].append(wrapped_wall_s(text))
                for peer in ("aoti_cuda", "executorch"):
                    cold[peer + "_ms"] = 1000 * statistics.median(cold[peer + "_s"]) if cold[peer + "_s"] else None
                entry["cold"] = cold
                res["llm"][name] = entry
                save()
    finally:
        res["budget_left_s"] = budget.left()
        save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
