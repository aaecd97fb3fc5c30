#!/usr/bin/env python3
"""Turns device_run.py's results (executorch_results.json) into docs/benchmarks/executorch.md and .json: aoti_cuda
against ExecuTorch's own CUDA runtime on the same files, with the ratios of issue 31's targets.

    python3 bench/peers/executorch/report.py RESULTS.json [--out docs/benchmarks]

Only the part of executorch.md between <!-- report:begin --> and <!-- report:end --> is rewritten (bench/report.py's
convention): the title and the introduction above it are written by hand and kept.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from report_output import write_doc  # noqa: E402

# (measure, target ratio aoti_cuda / ExecuTorch: at most this)
TARGETS = {"per_call_p50": 0.8, "decode_step": 0.8, "ttft": 0.8, "load": 0.3, "cold_start": 0.5, "rss": 1.0}


def ratio(a, b):
    if a is None or b is None or not isinstance(a, (int, float)) or not isinstance(b, (int, float)) or b <= 0:
        return None
    return a / b


def fmt(x, digits=3):
    if x is None:
        return "–"
    if isinstance(x, bool):
        return "yes" if x else "**no**"
    if abs(x) >= 100:
        return f"{x:.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.{digits}f}"


def verdict(r, target):
    if r is None:
        return "–"
    return f"{r:.2f}" + (" ✓" if r <= target else " ✗")


def geomean(xs):
    xs = [x for x in xs if x is not None and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def fixture_rows(res):
    fx = res.get("fixtures") or {}
    et_rows = {r["model"]: r for r in ((fx.get("executorch") or {}).get("rows") or [])}
    ao_rows = {r["model"]: r for r in ((fx.get("aoti_cuda") or {}).get("rows") or [])}
    names = sorted(set(et_rows) | set(ao_rows) | set(res.get("cold") or {}))
    rows = []
    for n in names:
        e, a = et_rows.get(n) or {}, ao_rows.get(n) or {}
        c = (res.get("cold") or {}).get(n) or {}
        agree = (res.get("agreement") or {}).get(n)
        row = {
            "model": n,
            "aoti_error": a.get("error_message") or None,
            "et_error": e.get("error_message") or c.get("executorch_error") or None,
            # file -> ready, first load in a fresh process whose CUDA context exists (from the cold-start runs)
            "load_ms": (c.get("aoti_cuda_load_ms"), c.get("executorch_load_ms")),
            # loads 2..N inside one process (ExecuTorch finds its library still resident: see et_runner.cpp)
            "reload_ms": (a.get("load_median_ms"), e.get("load_median_ms")),
            "load_cold_ms": (a.get("load_cold_ms"), e.get("load_cold_ms")),
            "cold_start_ms": (c.get("aoti_cuda_ms"), c.get("executorch_ms")),
            "first_call_ms": (a.get("first_call_ms"), e.get("first_call_ms")),
            "host_p50_ms": (a.get("host_io_p50_ms"), e.get("host_io_p50_ms")),
            "device_p50_ms": (a.get("device_io_p50_ms"), e.get("device_io_p50_ms")),
            # peak resident set of a fresh process that loads the program and runs one call (from the cold runs)
            "rss_mib": (c.get("aoti_cuda_peak_rss_mib"), c.get("executorch_peak_rss_mib")),
            "rss_delta_mib": (a.get("rss_mib"), e.get("rss_mib")),
            "gpu_mib": (a.get("device_mib"), e.get("device_mib")),
            "agree": (all(v.get("match") for v in agree.values()) if agree else None,
                      e.get("agree") if e else None),
            "et_device_io_notes": e.get("device_io_notes") or [],
        }
        if a.get("error_message"):
            row["agree"] = (False, row["agree"][1])
        failed = bool(row["aoti_error"] or row["et_error"])  # a failed side has no numbers to compare
        for key in ("load_ms", "cold_start_ms", "host_p50_ms", "rss_mib"):
            row[key + "_ratio"] = None if failed else ratio(*row[key])
        # ExecuTorch's best per-call mode (device I/O where it takes it) against aoti_cuda's device I/O.
        et_best = min([x for x in (e.get("host_io_p50_ms"), e.get("device_io_p50_ms")) if x is not None], default=None)
        row["best_p50_ratio"] = None if failed else ratio(a.get("device_io_p50_ms"), et_best)
        # file -> first output with the context up: ExecuTorch defers work (kernel loading) to the first call
        ready = [None if x is None or y is None else x + y for x, y in zip(row["load_ms"], row["first_call_ms"])]
        row["load_first_call_ms"] = tuple(ready)
        row["load_first_call_ms_ratio"] = None if failed else ratio(*ready)
        rows.append(row)
    return rows


def fixtures_markdown(rows):
    lines = ["## Fixtures (every program of `tests/fixtures`)", "",
             "Ratios are aoti_cuda / ExecuTorch (lower is better for aoti_cuda); ✓ meets the issue's target.", "",
             f"| model | load ms (aoti / ET) | ratio (≤ {TARGETS['load']}) | cold start ms (aoti / ET) | "
             f"ratio (≤ {TARGETS['cold_start']}) | p50 host I/O ms (aoti / ET) | ratio (≤ {TARGETS['per_call_p50']}) | "
             "p50 device I/O ms (aoti / ET) | aoti device / ET best |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["aoti_error"]:
            both = f"; ExecuTorch: {r['et_error']}" if r["et_error"] else ""
            lines.append(f"| {r['model']} | neither runs it: aoti_cuda: {r['aoti_error']}{both} | | | | | | | |"
                         if r["et_error"] else f"| {r['model']} | aoti_cuda failed: {r['aoti_error']} | | | | | | | |")
            continue
        p = lambda k: f"{fmt(r[k][0])} / {fmt(r[k][1]) if not r['et_error'] else 'cannot run'}"  # noqa: E731
        lines.append(f"| {r['model']} | {p('load_ms')} | {verdict(r['load_ms_ratio'], TARGETS['load'])} | "
                     f"{p('cold_start_ms')} | {verdict(r['cold_start_ms_ratio'], TARGETS['cold_start'])} | "
                     f"{p('host_p50_ms')} | {verdict(r['host_p50_ms_ratio'], TARGETS['per_call_p50'])} | "
                     f"{p('device_p50_ms')} | {verdict(r['best_p50_ratio'], TARGETS['per_call_p50'])} |")
    lines += ["", f"| model | peak host RSS MiB, load + one call (aoti / ET) | ratio (≤ {TARGETS['rss']}) | "
                  "GPU memory after load MiB (aoti / ET) | first call ms (aoti / ET) | outputs agree (aoti / ET) |",
              "|---|---|---|---|---|---|"]
    for r in rows:
        p = lambda k: f"{fmt(r[k][0], 1)} / {fmt(r[k][1], 1)}"  # noqa: E731
        lines.append(f"| {r['model']} | {p('rss_mib')} | {verdict(r['rss_mib_ratio'], TARGETS['rss'])} | {p('gpu_mib')} | "
                     f"{p('first_call_ms')} | {fmt(r['agree'][0])} / {fmt(r['agree'][1])} |")
    cannot = [r for r in rows if r["et_error"] and not r["aoti_error"]]
    if cannot:
        lines += ["", "Programs ExecuTorch 1.2's runtime cannot run (aoti_cuda's numbers alone above; no ratio):", ""]
        lines += [f"- `{r['model']}`: {r['et_error']}" for r in cannot]
    lines += ["", "In-process reloads (median of loads 2..N in one process, ms, aoti / ET): " + ", ".join(
        f"{r['model']} {fmt(r['reload_ms'][0])} / {fmt(r['reload_ms'][1])}" for r in rows
        if not (r["aoti_error"] or r["et_error"])) + ". ExecuTorch's are not loads of the library: dlopen returns "
        "the one still resident from the first load (AOTInductor libraries cannot be unloaded)."]
    notes = sorted({n for r in rows for n in r["et_device_io_notes"]})
    lines += ["", "Summary (geometric mean of the ratios over the fixtures; fixtures meeting the target):", ""]
    for key, target_key, label in (("load_ms_ratio", "load", "load"), ("cold_start_ms_ratio", "cold_start", "cold start"),
                                   ("host_p50_ms_ratio", "per_call_p50", "per-call p50, host I/O"),
                                   ("best_p50_ratio", "per_call_p50", "per-call p50, aoti_cuda device I/O vs ExecuTorch's best"),
                                   ("rss_mib_ratio", "rss", "peak host RSS (load + one call)"),
                                   ("load_first_call_ms_ratio", "load",
                                    "load + first call (fresh-process load + in-process first call)")):
        vals = [r[key] for r in rows if r.get(key) is not None]
        met = sum(1 for v in vals if v <= TARGETS[target_key])
        lines.append(f"- {label}: {fmt(geomean(vals))} (target ≤ {TARGETS[target_key]}; {met} of {len(vals)} meet it)")
    if notes:
        lines += ["", "ExecuTorch device I/O not measured for: " + "; ".join(notes) + "."]
    return lines


LLM_RUNS = [("aoti_cuda", "aoti_cuda (decode CUDA graph)"), ("aoti_cuda_nographs", "aoti_cuda (graphs off)"),
            ("executorch", "ExecuTorch 1.2 runtime"),
            ("executorch_13", "ExecuTorch 1.3 runtime (weight sharing, decode CUDA graph; IO device-type check relaxed)")]


def et13_markdown(res):
    """The per-call p50 of ExecuTorch 1.3's runtime on the same files, when the job ran it."""
    rows13 = ((res.get("fixtures") or {}).get("executorch_13") or {}).get("rows")
    if not rows13:
        return []
    ao = {r["model"]: r for r in (((res.get("fixtures") or {}).get("aoti_cuda") or {}).get("rows") or [])}
    lines = ["", "### ExecuTorch 1.3's runtime on the same files (its IO device-type check made to pass, see build.sh)", "",
             f"| model | p50 host I/O ms (aoti / ET 1.3) | ratio (≤ {TARGETS['per_call_p50']}) | outputs agree (ET 1.3) |",
             "|---|---|---|---|"]
    vals = []
    for r in rows13:
        a = ao.get(r["model"]) or {}
        if r.get("error_message") or a.get("error_message"):
            lines.append(f"| {r['model']} | {r.get('error_message') or a.get('error_message')} | | |")
            continue
        q = ratio(a.get("host_io_p50_ms"), r.get("host_io_p50_ms"))
        vals.append(q)
        lines.append(f"| {r['model']} | {fmt(a.get('host_io_p50_ms'))} / {fmt(r.get('host_io_p50_ms'))} | "
                     f"{verdict(q, TARGETS['per_call_p50'])} | {fmt(r.get('agree'))} |")
    lines += ["", f"Geometric mean {fmt(geomean(vals))}; {sum(1 for v in vals if v is not None and v <= TARGETS['per_call_p50'])}"
                  f" of {len(vals)} meet the target."]
    return lines


def llm_markdown(res):
    llm = res.get("llm") or {}
    if not llm:
        return ["## LLM", "", "Not run in this job (no exports in the work folder)."]
    lines = ["## LLM (1.1 B model, stock exports)", ""]
    lens = [x for x in str((res.get("params") or {}).get("prompt_lens", "128,512")).split(",") if x]
    for name, e in llm.items():
        if "missing" in e:
            lines += [f"### {name}", "", f"Export missing: `{e['missing']}`.", ""]
            continue
        lines += [f"### {name}", ""]
        run_date = (((e.get("run") or {}).get("machine")) or {}).get("date_utc")
        if run_date:
            lines += [f"Measured in the run of {run_date} UTC (both runtimes in the same job).", ""]
        hdr = "| runtime | load ms | cold start to first token ms | " + " | ".join(f"TTFT {n} ms" for n in lens) + \
              " | decode tok/s (after 128) | decode step ms | GPU MiB after load | peak host RSS MiB | tokens vs eager |"
        lines += [hdr, "|" + "---|" * (hdr.count("|") - 1)]
        et = e.get("executorch") or {}
        for key, label in LLM_RUNS:
            if key not in e:
                continue
            r = e.get(key) or {}
            if "error" in r:
                lines.append(f"| {label} | error ({r['error']}; see logs) |" + " |" * (hdr.count("|") - 3))
                continue
            tok_s = r.get(f"p{lens[0]}_decode_tok_s") if lens else None
            step = 1000.0 / tok_s if tok_s else None
            # Cold starts are measured for aoti_cuda (graphs on) and ExecuTorch 1.2 only.
            cold = (e.get("cold") or {}).get({"aoti_cuda": "aoti_cuda_ms", "executorch": "executorch_ms"}.get(key, ""))
            agree = f"{int(r['expect_match'])}/{int(r['expect_count'])}" if "expect_count" in r else "–"
            cells = [label, fmt(r.get("load_ms")), fmt(cold)] + [fmt(r.get(f"p{n}_ttft_ms")) for n in lens] + \
                    [fmt(tok_s), fmt(step), fmt(r.get("gpu_mem_after_load_mib")),
                     fmt(r.get("peak_rss_mib")), agree]
            lines.append("| " + " | ".join(cells) + " |")
        if et and "error" not in et:
            lines += ["", "Ratios aoti_cuda / ExecuTorch 1.2 (graphs on; graphs off in brackets):", ""]
            for key, label, target in [(f"p{n}_ttft_ms", f"TTFT {n}", "ttft") for n in lens] + \
                                      [("decode_step", "decode step", "decode_step"), ("load_ms", "load", "load")]:
                def val(r, key=key):
                    if key == "decode_step":
                        t = r.get(f"p{lens[0]}_decode_tok_s")
                        return 1000.0 / t if t else None
                    return r.get(key)
                on = ratio(val(e.get("aoti_cuda") or {}), val(et))
                off = ratio(val(e.get("aoti_cuda_nographs") or {}), val(et))
                lines.append(f"- {label}: {verdict(on, TARGETS[target])} ({fmt(off)}; target ≤ {TARGETS[target]})")
            e13 = e.get("executorch_13") or {}
            if e13 and "error" not in e13:
                t = e13.get(f"p{lens[0]}_decode_tok_s")
                mine = (e.get("aoti_cuda") or {}).get(f"p{lens[0]}_decode_tok_s")
                q = ratio(1000.0 / mine if mine else None, 1000.0 / t if t else None)
                lines.append(f"- decode step against ExecuTorch 1.3 with its decode graph: {verdict(q, TARGETS['decode_step'])}")
                for n in lens:
                    q = ratio((e.get("aoti_cuda") or {}).get(f"p{n}_ttft_ms"), e13.get(f"p{n}_ttft_ms"))
                    lines.append(f"- TTFT {n} against ExecuTorch 1.3: {verdict(q, TARGETS['ttft'])}")
            c = e.get("cold") or {}
            lines.append(f"- cold start: {verdict(ratio(c.get('aoti_cuda_ms'), c.get('executorch_ms')), TARGETS['cold_start'])}"
                         f" (target ≤ {TARGETS['cold_start']})")
        lines += ["", "Tokens vs eager: how many of the first 32 greedy tokens (128-token prompt) equal eager PyTorch's. "
                      "With these random weights, runs whose kernels round differently part at near ties (PyTorch's own "
                      "torch.compile of the model parts from eager at the first decode token), so the count catches "
                      "gross errors; it does not rank the runtimes.", ""]
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                                  "docs", "benchmarks"))
    a = ap.parse_args(argv)
    with open(a.results) as f:
        res = json.load(f)
    rows = fixture_rows(res)
    m = res.get("machine") or {}
    body = [f"Run of {m.get('date_utc', '?')} UTC on {m.get('gpu', '?')} (driver {m.get('driver', '?')}); "
            f"{(res.get('params') or {}).get('runs', '?')} timed calls per mode, "
            f"{(res.get('params') or {}).get('loads', '?')} loads per program, "
            f"{(res.get('params') or {}).get('cold_reps', '?')} cold starts per runtime.", ""]
    body += fixtures_markdown(rows) + et13_markdown(res) + [""] + llm_markdown(res)
    os.makedirs(a.out, exist_ok=True)
    write_doc(os.path.join(a.out, "executorch.md"), "aoti_cuda and ExecuTorch's own CUDA runtime",
              "\n".join(body) + "\n")
    with open(os.path.join(a.out, "executorch.json"), "w") as f:
        json.dump({"targets": TARGETS, "fixtures": rows, "llm": res.get("llm"), "machine": m,
                   "params": res.get("params")}, f, indent=1)
    print(f"wrote {os.path.join(a.out, 'executorch.md')} and executorch.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
