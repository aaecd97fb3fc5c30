#!/usr/bin/env python3
"""Helpers of device-llm.sh (the GPU job of issues 30-32's LLM measurements); stdlib only, no torch.

    python3 llm_job.py upload-check --cpp LOG... --torch LOG... [--llm-results llm_results.json] --out JSON
    python3 llm_job.py long-summary --generate JSON --manifest manifest.json [--ref JSON --ref-manifest M] --out JSON
    python3 llm_job.py carry-size PATH...        # what a device call would send, in bytes and in 4 KiB blocks
    python3 llm_job.py wheels DIR                 # the wheels the LLM exports need, one version each
    python3 llm_job.py merge-et KEPT.json NEW.json OUT.json   # the fixture rows of a kept ExecuTorch-peer run
                                                  # with the LLM rows of stage A2's (report.py reads one file)
    python3 llm_job.py markdown A2_results.json|B_results.json   # the upload / long-context tables for docs/
    python3 llm_job.py targets BC_results.json [--stream-read read_bw.json]   # issue 32's targets table, met or
                                                  # not, from one BC job; with the job's streaming read, each
                                                  # export's % of the roofline
    python3 llm_job.py targets-chart llm-targets.json OUT.png   # each export's % of the roofline, one group of
                                                  # bars a job that measured its streaming read
    python3 llm_job.py expect-args manifest.json  # generate's --expect-tokens / --expect-top for an export
    python3 llm_job.py trace-summary --trace T.json --generate G.json --out JSON  # one traced replay against
                                                  # the untraced step, and the gaps between its kernels
    python3 llm_job.py pdl-summary RES_DIR --out JSON   # stage C: decode tokens/s and int4 back-to-back us with
                                                  # dependent launch on / off (generate_<export>_<on|off|on2>.json,
                                                  # int4_bench_<on|off>.json in RES_DIR)

upload-check (issue 30's target "the LLM's weights upload within 10 % of the rate in a plain C++ process"): the
load-order program's large-program case (tests/load_order/gpu_cases.cpp, AOTI_CUDA_LARGE_PROGRAM = the bf16 LLM)
prints "large program, load K: ... GB/s" for 3 loads per process. The first load of a process also pays for its
first pinned staging buffer, so the figure per process is the median of loads 1 and 2; the figure per side (C++
process with libcudart first / PyTorch process that made its CUDA context first) is the median over its processes.
Met when torch >= 0.9 x C++.

long-summary (issue 32 item 4): decode tokens/s at each position of `generate --decode-at`, and the share of a
profiled decode step's kernel time that is attention. Attention, by kernel name: anything named *sdpa*, *attention*,
*attn*, *flash* or *softmax*; and, in programs whose decode SDPA is decomposed into matmuls with cuBLAS GEMMs
(manifest gemm == cublas and sdpa decomposed/mixed/flash), the extern GEMMs that are not one-row GEMVs ("aoti_cuda
cuBLAS GEMM"): at decode every projection has one row (GEMV) and only attention's two batched matmuls per layer have
more (the query heads of a KV head as rows). That count is checked (2 x layers launches), else the share is marked
unverified.
"""

from __future__ import annotations

import argparse
import ast
import glob
import json
import math
import os
import re
import statistics
import sys

LOAD_LINE = re.compile(r"large program, load (\d+): ([0-9.]+) MiB, staged ([0-9.]+) MiB, ([0-9.]+) GB/s")
ATTENTION_NAME = re.compile(r"sdpa|attention|attn|flash|softmax", re.IGNORECASE)
# Inductor names a fused kernel after the operators it feeds too: a Triton kernel that prepares the inputs of
# aoti_cuda's decode attention operator (rotary embeddings, a copy of the step's V row) carries the operator's name
# without doing any attention. Such a kernel counts only if its name also holds another attention word.
OPERATOR_NAME = re.compile(r"aoti_cuda_decode_attention(?:_update|_qkv)?", re.IGNORECASE)
EXTERN_GEMM = "aoti_cuda cuBLAS GEMM"
DEVICE_LIMIT_MIB = 64  # the device tool: tracked + untracked-not-ignored files + carried paths, per call
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import roofline  # noqa: E402  (bench/roofline.py: the bytes a decode step must read; stdlib only)


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def process_rate(text):
    """GB/s of one process's log: the median of its loads after the first (the first alone when it is the only
    one); None when the log has no load line (the case did not run)."""
    loads = {int(m.group(1)): float(m.group(4)) for m in LOAD_LINE.finditer(text)}
    if not loads:
        return None, loads
    later = [v for k, v in sorted(loads.items()) if k >= 1]
    return statistics.median(later or list(loads.values())), loads


def upload_check(cpp_logs, torch_logs, llm_results=None):
    out = {"rule": "median GB/s of loads 1..2 per process, median over processes; met when torch >= 0.9 x C++"}
    for side, logs in (("cpp", cpp_logs), ("torch", torch_logs)):
        rates, per = [], []
        for path in logs:
            try:
                with open(path, errors="replace") as f:
                    text = f.read()
            except OSError:
                text = ""
            rate, loads = process_rate(text)
            per.append({"log": os.path.basename(path), "loads_gb_s": loads, "rate_gb_s": rate,
                        # the case passed AND ran (without a GPU it returns early and counts as passed)
                        "passed": "test cases: " in text and "| 0 failed |" in text and bool(loads)})
            if rate is not None:
                rates.append(rate)
        out[side] = {"processes": per, "rate_gb_s": statistics.median(rates) if rates else None}
    c, t = out["cpp"]["rate_gb_s"], out["torch"]["rate_gb_s"]
    out["ratio_torch_to_cpp"] = t / c if c and t is not None else None
    out["met"] = None if out["ratio_torch_to_cpp"] is None else out["ratio_torch_to_cpp"] >= 0.9
    runs = ((load_json(llm_results) or {}).get("runs") or {}) if llm_results else {}
    gen = runs.get("aoti_cuda_bf16") or {}
    # examples/generate (the SDK linked plainly), for context: the first and only load of its process
    out["generate_bf16_upload_gb_s"] = gen.get("upload_gb_per_s")
    return out


def attention_share(kernels, manifest):
    """(attention ms, total ms, verified, names counted) of one profiled decode step's [name, launches, ms] list."""
    cfg = (manifest or {}).get("config") or {}
    decomposed = (manifest or {}).get("gemm") == "cublas" and (manifest or {}).get("sdpa") in ("decomposed", "mixed", "flash")
    total = sum(k[2] for k in kernels)
    att, names, gemm_launches = 0.0, [], 0
    for name, launches, ms in kernels:
        if ATTENTION_NAME.search(OPERATOR_NAME.sub("", name) if name.startswith("triton_") else name):
            att += ms
            names.append(name)
        elif decomposed and name == EXTERN_GEMM:
            att += ms
            names.append(name)
            gemm_launches += launches
    verified = True
    if decomposed:
        verified = gemm_launches == 2 * int(cfg.get("n_layers", -1))
    else:
        verified = bool(names)  # the backend's SDPA kernel (or flash) must have been seen
    return att, total, verified, sorted(set(names))


def long_summary(gen, manifest, ref=None, ref_manifest=None, trace=None, ref_trace=None):
    def rows(g, m):
        out = {}
        if not g:
            return out
        for pos in g.get("decode_at") or []:
            key = f"at{pos}_"
            row = {"tok_s": g.get(key + "decode_tok_s"), "steps": g.get(key + "decode_steps")}
            if row["tok_s"]:
                row["step_ms"] = 1000.0 / row["tok_s"]
            kernels = g.get(key + "decode_kernels")
            if kernels:
                att, total, verified, names = attention_share(kernels, m)
                row.update({"kernel_ms": total, "attention_ms": att,
                            "attention_share": att / total if total else None,
                            "attention_verified": verified, "attention_kernels": names})
            out[str(pos)] = row
        return out

    cfg = (manifest or {}).get("config") or {}
    recorded = ("quant", "gemm", "sdpa", "fusion", "autotune", "split_lowering", "export_times")
    res = {"export": {k: (manifest or {}).get(k) for k in recorded},
           "max_ctx": cfg.get("max_ctx"), "positions": rows(gen, manifest)}
    if gen:
        res["p128_decode_tok_s"] = gen.get("p128_decode_tok_s")
        res["p128_ttft_ms"] = gen.get("p128_ttft_ms")
        res["expect_match"] = [gen.get("expect_match"), gen.get("expect_count")]
        # Every step fed eager's previous token (generate's teacher forcing): a kernel error misses many steps.
        res["forced_match"] = [gen.get("forced_match"), gen.get("forced_count")]
        # Its misses told apart with eager's own logits (generate --expect-top): near ties and clear misses.
        if gen.get("forced_near_ties") is not None:
            res["forced_misses"] = {"near_ties": gen.get("forced_near_ties"), "clear": gen.get("forced_clear_misses")}
    if ref:
        res["reference"] = {"max_ctx": ((ref_manifest or {}).get("config") or {}).get("max_ctx"),
                            "export": {k: (ref_manifest or {}).get(k) for k in ("quant", "gemm", "sdpa")},
                            "positions": rows(ref, ref_manifest)}
    if trace:
        res["trace"] = trace_summary(trace, gen)
    if ref and ref_trace:
        res["reference"]["trace"] = trace_summary(ref_trace, ref)
    at128 = res["positions"].get("128") or {}
    share = at128.get("attention_share")
    res["attention_dominates_at_128"] = None if share is None else share > 0.5
    return res


def carry_size(paths):
    """Bytes and 4 KiB blocks of every file under `paths` (files or folders; links are sent as links)."""
    total = blocks = files = 0
    for p in paths:
        walk = [(os.path.dirname(p), [], [os.path.basename(p)])] if not os.path.isdir(p) else os.walk(p)
        for d, _dirs, names in walk:
            for n in names:
                f = os.path.join(d, n)
                if os.path.islink(f) or not os.path.exists(f):
                    continue
                s = os.path.getsize(f)
                total += s
                blocks += max(1, math.ceil(s / 4096)) * 4096
                files += 1
    return {"files": files, "bytes": total, "mib": total / 2**20, "block_mib": blocks / 2**20}


# The wheels the LLM exports install (tools/export/fetch_wheels.sh): executorch 1.2.0 and torchao 0.17 exactly,
# flatbuffers, ruamel.yaml and tabulate at any version; one version of each (two stop pip's install).
WHEELS = {"executorch": "1.2.0", "torchao": "0.17.", "flatbuffers": "", "ruamel_yaml": "", "tabulate": ""}


def check_wheels(folder):
    problems = []
    for name, version in WHEELS.items():
        found = sorted(glob.glob(os.path.join(folder, f"{name}-*.whl")))
        if not found:
            problems.append(f"no {name} wheel in {folder}")
        elif len(found) > 1:
            problems.append(f"{len(found)} {name} wheels in {folder} (pip stops on two versions): {found}")
        elif version and not os.path.basename(found[0]).startswith(f"{name}-{version}"):
            problems.append(f"{os.path.basename(found[0])}: the exports need {name} {version}")
    return problems


def merge_et(kept, new):
    """Stage A2 runs the ExecuTorch peer's LLM part only (PARTS=llm): its `llm` rows go into a copy of a kept run
    that has the fixture parts, so that bench/peers/executorch/report.py rewrites executorch.md with both. Per
    export: one the new run measured replaces the kept one; one it did not (missing, or not asked for, as with
    LLM_PARTS=int4) keeps the kept run's rows. Each export's rows carry the run they come from (`run`)."""
    out = json.loads(json.dumps(kept))
    kept_run = kept.get("llm_run") or {"machine": kept.get("machine"), "params": kept.get("params")}
    llm = {}
    for name, e in (kept.get("llm") or {}).items():
        llm[name] = dict(e)
        llm[name].setdefault("run", kept_run)
    new_run = {"machine": new.get("machine"), "params": new.get("params")}
    for name, e in (new.get("llm") or {}).items():
        if "missing" in e and name in llm and "missing" not in llm[name]:
            continue
        llm[name] = dict(e)
        llm[name]["run"] = new_run
    out["llm"] = llm
    out["llm_run"] = new_run
    return out


def expect_args(manifest):
    """generate's arguments that check an export against eager (device-llm.sh and targets-job.sh pass them): the
    reference tokens the export recorded for its 128-token prompt, and eager's highest logits at those steps when it
    recorded them (generate tells its teacher-forced misses apart with them); "" without a reference."""
    r = (manifest or {}).get("reference") or {}
    tokens, top = r.get("tokens") or [], r.get("top") or []
    if not tokens or r.get("prompt_len") != 128:
        return ""
    args = "--expect-tokens " + ",".join(map(str, tokens))
    if len(top) == len(tokens):
        args += " --expect-top " + ";".join(",".join("%d:%.9g" % (i, v) for i, v in step) for step in top)
    return args


def trace_gaps(kernel_list, top=5):
    """The gaps of one traced replay (bench/graph_trace.cpp's kernel_list: [name, start ns, duration ns], in start
    order): from each kernel's end to the next one's start, negative where dependent launch overlapped the two.
    Their count, sum, median, 10th and 90th percentiles, extremes, how many overlapped, and the kernels after which
    they are widest on average (where a step's time between kernels goes). None for fewer than two kernels."""
    if len(kernel_list) < 2:
        return None
    gaps, after = [], {}
    for (name, start, duration), (_, next_start, _) in zip(kernel_list, kernel_list[1:]):
        gap = next_start - (start + duration)
        gaps.append(gap)
        after.setdefault(name, []).append(gap)
    ordered = sorted(gaps)

    def percentile(p):
        return ordered[min(len(ordered) - 1, int(p * len(ordered)))]

    widest = sorted(((statistics.mean(v), len(v), k) for k, v in after.items()), key=lambda x: (-x[0], x[2]))[:top]
    return {"count": len(gaps), "sum_ns": sum(gaps), "median_ns": statistics.median(gaps),
            "p10_ns": percentile(0.1), "p90_ns": percentile(0.9), "min_ns": ordered[0], "max_ns": ordered[-1],
            "overlapped": sum(1 for g in gaps if g < 0),
            "widest_after": [{"kernel": k, "count": n, "mean_ns": m} for m, n, k in widest]}


def trace_summary(trace, gen, key="p128_decode_tok_s"):
    """One graph replay's kernels (bench/graph_trace.cpp's last traced launch) against the step time generate
    measured without the tracer: issue 32's "the runtime adds nothing" check is step / summed kernel time <= 1.03."""
    launches = (trace or {}).get("launches") or []
    if not launches:
        return {"error": "no graph launch traced"}
    last = launches[-1]
    kernel_ms, span_ms = last["kernel_ns"] / 1e6, last["span_ns"] / 1e6
    tok_s = (gen or {}).get(key)
    step_ms = 1000.0 / tok_s if tok_s else None
    res = {"kernels": last["kernels"], "kernel_ms": kernel_ms, "span_ms": span_ms,
           "span_over_kernels": span_ms / kernel_ms if kernel_ms else None,
           "step_ms": step_ms, "step_over_kernels": step_ms / kernel_ms if step_ms and kernel_ms else None,
           "launches_traced": trace.get("graph_launches_traced")}
    gaps = trace_gaps(last.get("kernel_list") or [])
    if gaps is not None:
        res["gaps"] = gaps
    return res


def suite_summary(suite_dir, et_ops_log=None):
    """The GPU suite's verdicts from device-suite.sh's logs: doctest's summary lines per suite, the CLI runs'
    failures, and the last line of the operator checks against PyTorch."""
    def read(path):
        try:
            with open(path, errors="replace") as f:
                return f.read()
        except OSError:
            return None
    res = {}
    for name in ("gpu_tests", "unit_tests", "alloc_tests"):
        text = read(os.path.join(suite_dir, name + ".log"))
        if text is None:
            res[name] = "no log"
            continue
        lines = [ln.strip() for ln in text.splitlines() if re.search(r"test cases:|assertions:", ln)]
        if not lines and "not in this pack" in text:
            res[name] = "not in this pack (CI runs it)"
            continue
        res[name] = lines[-2:] if lines else "no doctest summary (crashed or cut short?)"
    cli = read(os.path.join(suite_dir, "cli_run.log"))
    res["cli_run_failures"] = None if cli is None else [ln for ln in cli.splitlines() if "FAILED" in ln][:20]
    if et_ops_log:
        text = read(et_ops_log)
        res["et_ops"] = None if text is None else [ln for ln in text.splitlines() if ln.strip()][-3:]
    return res


# The one-kernel attention's runs of pdl_measure (device-llm.sh): clusters of 16 / 8, alone and with dependent launch.
CLUSTER_MODES = ("c16", "c8", "c16on", "c8on")


def pdl_summary(res_dir):
    """Stage C: per export and position, decode tokens/s with dependent launch on (the better of the two "on"
    runs, which ran before and after the "off" one), off, and on/off; with decode attention as one kernel over
    clusters of 16 and 8 blocks (runs c16, c8; c16on, c8on with dependent launch too), each against "off"; the token
    agreement of each run; per int4 shape and M, the back-to-back microseconds both ways."""
    out = {"exports": {}, "int4": []}
    runs = {}
    for path in sorted(glob.glob(os.path.join(res_dir, "generate_*_*.json"))):
        m = re.match(r"generate_(.+)_(%s)\.json$" % "|".join(("on", "off", "on2") + CLUSTER_MODES),
                     os.path.basename(path))
        doc = load_json(path)
        if m and doc:
            runs.setdefault(m.group(1), {})[m.group(2)] = doc
    for name, modes in sorted(runs.items()):
        positions = {}
        keys = sorted({k for d in modes.values() for k in d if re.fullmatch(r"(at\d+|p\d+)_decode_tok_s", k)})
        for key in keys:
            on = [modes[m][key] for m in ("on", "on2") if m in modes and modes[m].get(key)]
            off = modes.get("off", {}).get(key)
            row = {"on": max(on) if on else None, "on_runs": on, "off": off}
            row["on_over_off"] = row["on"] / off if on and off else None
            for mode in CLUSTER_MODES:  # the one-kernel attention, when it ran
                rate = modes.get(mode, {}).get(key)
                if rate:
                    row[mode] = rate
                    row[f"{mode}_over_off"] = rate / off if off else None
            positions[key[: -len("_decode_tok_s")]] = row
        agree = {m: [modes[m].get("expect_match"), modes[m].get("forced_match"), modes[m].get("expect_count")]
                 for m in modes}
        # What each run's load resolved (generate reports it): that the variables took effect.
        settings = {m: [modes[m].get("dependent_launch"), modes[m].get("attention_cluster")] for m in modes}
        out["exports"][name] = {"positions": positions, "tokens_free_forced_count": agree, "settings": settings}
    on_bench, off_bench, early_bench = (load_json(os.path.join(res_dir, f"int4_bench_{m}.json"))
                                        for m in ("on", "off", "early"))
    if on_bench and off_bench:
        off_rows = {(r["m"], r["n"], r["k"]): r for r in off_bench.get("results", [])}
        early_rows = {(r["m"], r["n"], r["k"]): r for r in (early_bench or {}).get("results", [])}
        for r in on_bench.get("results", []):
            o = off_rows.get((r["m"], r["n"], r["k"]))
            if o and r.get("stream_us") and o.get("stream_us"):
                row = {"m": r["m"], "n": r["n"], "k": r["k"], "on_us": r["stream_us"], "off_us": o["stream_us"],
                       "off_over_on": o["stream_us"] / r["stream_us"], "read_floor_us": r.get("floor_read_us")}
                e = early_rows.get((r["m"], r["n"], r["k"]))
                if e and e.get("stream_us"):  # dependent launch with the weights requested before the wait
                    row["early_us"] = e["stream_us"]
                    row["off_over_early"] = o["stream_us"] / e["stream_us"]
                out["int4"].append(row)
        out["read_gbps"] = on_bench.get("read_gbps")
    return out


def fmt(x, digits=1):
    return "–" if x is None else f"{x:.{digits}f}"


def markdown(doc):
    lines = []
    up = doc.get("upload")
    if up:
        lines += ["| process | upload GB/s (median of loads 1-2) | runs |", "|---|---|---|"]
        for side, label in (("cpp", "C++ (libcudart first, SDK RTLD_LOCAL)"), ("torch", "PyTorch, CUDA context first")):
            d = up.get(side) or {}
            lines.append(f"| {label} | {fmt(d.get('rate_gb_s'))} | {len(d.get('processes') or [])} |")
        r = up.get("ratio_torch_to_cpp")
        lines.append(f"\nPyTorch / C++: {fmt(r, 3)} (target >= 0.9: {'met' if up.get('met') else 'not met'}); "
                     f"examples/generate in the same job (first load of its process): "
                     f"{fmt(up.get('generate_bf16_upload_gb_s'))} GB/s.")
    for key, val in doc.items():
        if not key.startswith("long_"):
            continue
        lines += [f"\n{key[5:]} export, {val.get('max_ctx')}-position cache:", "",
                  "| position | decode tok/s | step ms | attention share of the profiled step | verified |",
                  "|---|---|---|---|---|"]
        for pos, row in (val.get("positions") or {}).items():
            share = row.get("attention_share")
            lines.append(f"| {pos} | {fmt(row.get('tok_s'))} | {fmt(row.get('step_ms'), 3)} | "
                         f"{'–' if share is None else f'{100 * share:.1f} %'} | {row.get('attention_verified')} |")
        ref = val.get("reference")
        if ref:
            for pos, row in (ref.get("positions") or {}).items():
                share = row.get("attention_share")
                lines.append(f"| {pos} (stock bf16, {ref.get('max_ctx')} positions) | {fmt(row.get('tok_s'))} | "
                             f"{fmt(row.get('step_ms'), 3)} | {'–' if share is None else f'{100 * share:.1f} %'} | "
                             f"{row.get('attention_verified')} |")
        for who, tr in (("this export", val.get("trace")), ("the stock bf16 export", (ref or {}).get("trace"))):
            if tr and tr.get("step_over_kernels"):
                lines.append(f"\nOne decode graph replay of {who} after a 128-token prompt, kernel by kernel (CUPTI): "
                             f"{tr['kernels']} kernels, {fmt(tr['kernel_ms'], 3)} ms of kernel time, span "
                             f"{fmt(tr['span_ms'], 3)} ms; step {fmt(tr['step_ms'], 3)} ms = "
                             f"{fmt(tr['step_over_kernels'], 3)}x the kernels' time.")
        agree = [(label, val.get(k) or [None, None]) for label, k in
                 (("leading the same", "expect_match"), ("teacher-forced steps", "forced_match"))]
        said = [f"{label} {int(m)}/{int(n)}" for label, (m, n) in agree if n]
        misses = val.get("forced_misses")
        if said and misses:
            said.append(f"of the teacher-forced misses {misses['near_ties']} near ties and {misses['clear']} clear "
                        "(eager's own margin within two bf16 steps, or not)")
        if said:
            lines.append("\nTokens against the export's eager reference (128-token prompt): " + ", ".join(said) + ".")
    return "\n".join(lines)


# Issue 32's targets as docs/benchmarks/llm.md states them: key -> (label, threshold, met when at least it).
TARGETS = {"int4_over_stock": ("int4 ≥ 2.5× the stock bf16 export", 2.5, True),
           "int4_over_best_bf16": ("int4 ≥ 1.8× the best bf16", 1.8, True),
           "best_bf16_tok_s": ("best bf16 ≥ 1,100 tokens/s", 1100.0, True),
           "stock_step_over_kernels": ("stock step ≤ 1.03× its kernels", 1.03, False)}
ATTENTION_SHARE_MAX = 0.5  # "attention does not dominate"
BF16_ROOFLINE_PCT = 60.0  # "best bf16 export >= 1,100 tokens/s (>= 60 % of roofline)"


def _met(value, limit, at_least):
    return None if value is None else (value >= limit if at_least else value <= limit)


def default_model_config(path=os.path.join(ROOT, "tools", "export", "llm", "model.py")):
    """LlamaConfig's field defaults (the "1b" config the targets' exports use) read from model.py's source, since
    importing it needs torch: {field: int}, with head_dim = dim / n_heads as the class computes it."""
    with open(path) as f:
        tree = ast.parse(f.read())
    cls = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "LlamaConfig")
    cfg = {st.target.id: st.value.value for st in cls.body
           if isinstance(st, ast.AnnAssign) and isinstance(st.value, ast.Constant) and
           isinstance(st.value.value, int) and not isinstance(st.value.value, bool)}
    cfg["head_dim"] = cfg["dim"] // cfg["n_heads"]
    return cfg


def targets(doc, position="128", stream_gbps=None, cfg=None):
    """Issue 32's targets from one BC job's results (its long_<export> summaries, the stock export under each one's
    `reference`, and `pdl` when the switches ran): decode tokens/s at `position` (the window after a 128-token
    prompt), int4 (exports whose `export.quant` is int4) against the stock bf16 export and against the best bf16
    export, the best bf16 rate, the stock step against its kernels, and each export's attention share. Per export
    also the best of the pdl runs at that position (what a default switch would give). None where a figure is
    missing; `met` is None then too. With the same job's streaming read (`stream_gbps`, GB/s) and the model's
    config (`cfg`, the export manifest's keys), each export's and the stock export's % of the roofline at that
    position (bench/roofline.py: the bytes a step must read over the streaming rate, against the measured step)."""
    exports = {k[5:]: v for k, v in doc.items() if k.startswith("long_") and isinstance(v, dict)}

    def rate(v):
        return ((v.get("positions") or {}).get(position) or {}).get("tok_s")

    int4 = {n: rate(v) for n, v in exports.items() if (v.get("export") or {}).get("quant") == "int4" and rate(v)}
    bf16 = {n: rate(v) for n, v in exports.items() if (v.get("export") or {}).get("quant") == "bf16" and rate(v)}
    ref = next((v["reference"] for v in exports.values() if isinstance(v.get("reference"), dict)), None) or {}
    stock = ((ref.get("positions") or {}).get(position) or {}).get("tok_s")
    best_int4 = max(int4.items(), key=lambda kv: kv[1]) if int4 else (None, None)
    best_bf16 = max(bf16.items(), key=lambda kv: kv[1]) if bf16 else (None, None)
    trace = ref.get("trace") or {}

    def ratio(a, b):
        return a / b if a and b else None

    rows = {
        "int4_over_stock": (ratio(best_int4[1], stock), f"{best_int4[0]} {fmt(best_int4[1])} / stock {fmt(stock)}"),
        "int4_over_best_bf16": (ratio(best_int4[1], best_bf16[1]),
                                f"{best_int4[0]} {fmt(best_int4[1])} / {best_bf16[0]} {fmt(best_bf16[1])}"),
        "best_bf16_tok_s": (best_bf16[1], f"{best_bf16[0]}"),
        "stock_step_over_kernels": (trace.get("step_over_kernels"),
                                    f"{trace.get('kernels')} kernels, {fmt(trace.get('kernel_ms'), 3)} ms, "
                                    f"step {fmt(trace.get('step_ms'), 3)} ms"),
    }
    out = {"position": position, "targets": {}, "attention_share": {}, "switches": {}, "roofline": {}}
    if stream_gbps and cfg:
        def add_roofline(name, quant, at):
            if not (at or {}).get("tok_s"):
                return
            # The window's steps attend positions position+1 ... position+steps: its middle, as roofline.py does.
            need = roofline.step_bytes(cfg, quant, float(position) + (at.get("steps", 64) + 1) / 2)["total"]
            pct = 100.0 * need * at["tok_s"] / 1e9 / stream_gbps
            out["roofline"][name] = {"mb_per_step": need / 1e6, "tok_s": at["tok_s"],
                                     "roofline_tok_s": stream_gbps * 1e9 / need, "pct": pct,
                                     "met": pct >= BF16_ROOFLINE_PCT if name == best_bf16[0] else None}

        for name, v in sorted(exports.items()):
            add_roofline(name, (v.get("export") or {}).get("quant", "bf16"), (v.get("positions") or {}).get(position))
        add_roofline("stock", "bf16", (ref.get("positions") or {}).get(position))
        out["stream_gbps"] = stream_gbps
    for key, (value, detail) in rows.items():
        _, limit, at_least = TARGETS[key]
        out["targets"][key] = {"value": value, "target": limit, "met": _met(value, limit, at_least), "from": detail}
    for name, v in sorted(exports.items()):
        share = ((v.get("positions") or {}).get(position) or {}).get("attention_share")
        out["attention_share"][name] = {"value": share, "met": None if share is None else share < ATTENTION_SHARE_MAX}
        runs = ((doc.get("pdl") or {}).get("exports") or {}).get(name, {}).get("positions", {}).get(f"at{position}")
        if runs:
            modes = {m: runs[m] for m in ("on", "off") + CLUSTER_MODES if runs.get(m)}
            if modes:
                best = max(modes, key=modes.get)
                out["switches"][name] = {"runs": modes, "best": best,
                                         "best_over_off": ratio(modes[best], modes.get("off"))}
    return out


def targets_markdown(t):
    def said(met):
        return "–" if met is None else ("yes" if met else "no")

    lines = [f"| target (position {t['position']}) | measured | from | met |", "|---|---:|---|---|"]
    for key, row in t["targets"].items():
        digits = 1 if key == "best_bf16_tok_s" else 3
        lines.append(f"| {TARGETS[key][0]} | {fmt(row['value'], digits)} | {row['from']} | {said(row['met'])} |")
    for name, row in t["attention_share"].items():
        share = "–" if row["value"] is None else f"{100 * row['value']:.1f} %"
        lines.append(f"| attention does not dominate, {name} | {share} | profiled step | {said(row['met'])} |")
    for name, row in t.get("roofline", {}).items():
        held = " (best bf16, ≥ 60 %)" if row["met"] is not None else ""
        lines.append(f"| % of the roofline, {name}{held} | {row['pct']:.1f} % | {fmt(row['tok_s'])} of "
                     f"{fmt(row['roofline_tok_s'])} tokens/s ({fmt(row['mb_per_step'])} MB a step at "
                     f"{fmt(t['stream_gbps'])} GB/s) | {said(row['met'])} |")
    for name, sw in t["switches"].items():
        runs = ", ".join(f"{m} {fmt(r)}" for m, r in sw["runs"].items())
        lines.append(f"\n{name}, tokens/s by switch: {runs}; best {sw['best']} "
                     f"({fmt(sw['best_over_off'], 3)}× off)")
    return "\n".join(lines)


def roofline_chart(doc):
    """The bars of the roofline chart from docs/benchmarks/llm-targets.json's jobs (targets --json, with the job, GPU
    and results added): one label a job that measured its streaming read, newest first as the file lists them, and
    one series an export (every export any such job measured, the stock export last), None where a job lacks it.
    Returns (labels, [(series name, [pct a job])])."""
    jobs = [j for j in doc.get("jobs", []) if j.get("roofline")]
    names = sorted({n for j in jobs for n in j["roofline"] if n != "stock"})
    if any("stock" in j["roofline"] for j in jobs):
        names.append("stock")
    labels = [f"{j.get('gpu', '?').replace('NVIDIA ', '')}, {j.get('job', '?')} "
              f"(streaming read {fmt(j.get('stream_read_gbps') or j.get('stream_gbps'))} GB/s)" for j in jobs]
    series = [(("stock ExecuTorch bf16 export" if n == "stock" else n),
               [(j["roofline"].get(n) or {}).get("pct") for j in jobs]) for n in names]
    return labels, series


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    u = sub.add_parser("upload-check")
    u.add_argument("--cpp", nargs="+", default=[])
    u.add_argument("--torch", nargs="+", default=[])
    u.add_argument("--llm-results")
    u.add_argument("--out", required=True)
    s = sub.add_parser("long-summary")
    s.add_argument("--generate", required=True)
    s.add_argument("--manifest", required=True)
    s.add_argument("--ref")
    s.add_argument("--ref-manifest")
    s.add_argument("--trace", help="bench/graph_trace.cpp's JSON of a traced run of the same export")
    s.add_argument("--ref-trace", help="the same for the reference export")
    s.add_argument("--out", required=True)
    c = sub.add_parser("carry-size")
    c.add_argument("paths", nargs="+")
    w = sub.add_parser("wheels")
    w.add_argument("folder")
    m = sub.add_parser("merge-et")
    m.add_argument("kept")
    m.add_argument("new")
    m.add_argument("out")
    ts = sub.add_parser("trace-summary")
    ts.add_argument("--trace", required=True)
    ts.add_argument("--generate", required=True)
    ts.add_argument("--out", required=True)
    ss = sub.add_parser("suite-summary")
    ss.add_argument("suite_dir")
    ss.add_argument("et_ops_log", nargs="?")
    ss.add_argument("--out", required=True)
    pd = sub.add_parser("pdl-summary")
    pd.add_argument("res_dir")
    pd.add_argument("--out", required=True)
    md = sub.add_parser("markdown")
    md.add_argument("results")
    tg = sub.add_parser("targets")
    tg.add_argument("results")
    tg.add_argument("--position", default="128")
    tg.add_argument("--json", action="store_true")
    tg.add_argument("--stream-read", help="aoti_cuda_read_bw's JSON from the same job (read_gbps): adds each "
                    "export's % of the roofline (the exports of the 1b config, LlamaConfig's defaults)")
    tc = sub.add_parser("targets-chart")
    tc.add_argument("targets_json", help="docs/benchmarks/llm-targets.json")
    tc.add_argument("out_png")
    ea = sub.add_parser("expect-args")
    ea.add_argument("manifest")
    a = ap.parse_args(argv)
    if a.cmd == "targets":
        gbps = cfg = None
        if a.stream_read:
            gbps = (load_json(a.stream_read) or {}).get("read_gbps")
            if not isinstance(gbps, (int, float)) or gbps <= 0:
                print(f"targets: no read_gbps in {a.stream_read}")
                return 1
            cfg = default_model_config()
        t = targets(load_json(a.results) or {}, a.position, gbps, cfg)
        print(json.dumps(t, indent=1) if a.json else targets_markdown(t))
        return 0
    if a.cmd == "targets-chart":
        doc = load_json(a.targets_json) or {}
        labels, series = roofline_chart(doc)
        if not labels:
            print(f"targets-chart: no job with a streaming read in {a.targets_json}")
            return 1
        import report_output  # bench/report_output.py (on sys.path with roofline): the charts of the benchmarks
        positions = sorted({str(j.get("position", "?")) for j in doc["jobs"] if j.get("roofline")})
        title = (f"LLM decode at position {', '.join(positions)}, % of the roofline "
                 f"(best bf16 held to {BF16_ROOFLINE_PCT:.0f} %)")
        return 0 if report_output.hbar_chart(a.out_png, title, series, labels) else 1
    if a.cmd == "merge-et":
        kept, new = load_json(a.kept), load_json(a.new)
        if kept is None or new is None:
            print(f"merge-et: cannot read {a.kept if kept is None else a.new}")
            return 1
        with open(a.out, "w") as f:
            json.dump(merge_et(kept, new), f, indent=1)
        return 0
    if a.cmd == "expect-args":
        print(expect_args(load_json(a.manifest)))
        return 0
    if a.cmd == "markdown":
        print(markdown(load_json(a.results) or {}))
        return 0
    if a.cmd == "upload-check":
        res = upload_check(a.cpp, a.torch, a.llm_results)
    elif a.cmd == "long-summary":
        res = long_summary(load_json(a.generate), load_json(a.manifest), load_json(a.ref) if a.ref else None,
                           load_json(a.ref_manifest) if a.ref_manifest else None,
                           load_json(a.trace) if a.trace else None, load_json(a.ref_trace) if a.ref_trace else None)
    elif a.cmd == "trace-summary":
        res = trace_summary(load_json(a.trace), load_json(a.generate))
    elif a.cmd == "suite-summary":
        res = suite_summary(a.suite_dir, a.et_ops_log)
    elif a.cmd == "pdl-summary":
        res = pdl_summary(a.res_dir)
    elif a.cmd == "carry-size":
        print(json.dumps(carry_size(a.paths)))
        return 0
    else:
        problems = check_wheels(a.folder)
        for p in problems:
            print("wheels: " + p)
        return 1 if problems else 0
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)
    print(json.dumps(res, indent=1)[:4000])
    return 0


if __name__ == "__main__":
    sys.exit(main())
