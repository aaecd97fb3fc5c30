#!/usr/bin/env python3
"""Turns the GPU machine's benchmark results into docs/benchmarks/.

    python3 bench/report.py RESULTS... [--out docs/benchmarks] [--date YYYY-MM-DD] [--name NAME]

Each RESULTS is a folder as bench/llm/run_on_device.sh leaves it ($OUT: llm_results.json and/or
calls_results.json), or one results file, such as those kept in bench/results/ (llm-2026-12-03.json; what it
holds is read from its content: "runs" for the LLM benchmark, "calls" for the per-call one). Writes, for each:
  llm.json, llm.md, llm-decode.png, llm-ttft.png, llm-load.png   load, GPU memory, time to first token (128/512-token prompts),
                                 decode tokens/s per contender, with the ratios of the LLM targets
                                 (decode and TTFT: aoti_cuda's best bf16 program, Triton or cuBLAS GEMMs)
  calls.json, calls.md, calls.png  p50 of a synchronized call with device inputs per fixture method:
                                 aoti_cuda (from `aoti_cuda bench`, every p50 mode it reports),
                                 libtorch AOTI runner, eager PyTorch, CUDA-graph replay of eager
--name replaces "llm" / "calls" in those names (one results input only), e.g. --name calls-libtorch.
The Markdown's generated part lies between the markers <!-- report:begin --> and <!-- report:end -->: when the
document exists with both, only that part is replaced, so a hand-written title and introduction (what the run
was, where its raw results are) survive regeneration. The charts are embedded in the Markdown.
matplotlib is needed for the PNGs only (skipped with a message when it is missing).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from report_output import BEGIN, END, charts_markdown, hbar_chart, write_doc  # noqa: E402,F401
import roofline  # noqa: E402

LLM_ROWS = [  # (key in runs, label)
    ("aoti_cuda_bf16", "aoti_cuda (bf16)"),
    ("aoti_cuda_bf16cublas", "aoti_cuda (bf16, cuBLAS GEMMs)"),
    ("aoti_cuda_bf16fast", "aoti_cuda (bf16, cuBLAS GEMMs, decomposed SDPA)"),
    ("aoti_cuda_bf16cublas_nogemv", "aoti_cuda (bf16, cuBLAS GEMMs; decode's too)"),
    ("aoti_cuda_bf16fast_nogemv", "aoti_cuda (bf16, cuBLAS GEMMs, decomposed SDPA; decode's too)"),
    ("aoti_cuda_bf16fast_gemv8", "aoti_cuda (bf16, cuBLAS GEMMs, decomposed SDPA; few-row kernels to 8 rows)"),
    ("aoti_cuda_bf16fast_nocache", "aoti_cuda (bf16, cuBLAS GEMMs, decomposed SDPA; no block cache)"),
    ("aoti_cuda_bf16mix", "aoti_cuda (bf16, cuBLAS GEMMs, decode's SDPA decomposed)"),
    ("aoti_cuda_bf16mix_nocache", "aoti_cuda (bf16, cuBLAS GEMMs, decode's SDPA decomposed; no block cache)"),
    ("aoti_cuda_bf16mixfuse", "aoti_cuda (bf16, cuBLAS GEMMs, decode's SDPA decomposed, Inductor's fusion defaults)"),
    ("aoti_cuda_bf16flash", "aoti_cuda (bf16, cuBLAS GEMMs, flash attention prefill, decode's SDPA decomposed, Inductor's fusion defaults)"),
    ("aoti_cuda_bf16dop", "aoti_cuda (bf16, cuBLAS GEMMs, decode through aoti_cuda's own decode attention shim: "
                          "runs on aoti_cuda only)"),
    ("aoti_cuda_bf16_nographs", "aoti_cuda (bf16; graphs off)"),
    ("aoti_cuda_int4", "aoti_cuda (int4)"),
    ("aoti_cuda_int4_nographs", "aoti_cuda (int4; graphs off)"),
    ("aoti_cuda_int4fast", "aoti_cuda (int4, cuBLAS GEMMs, decomposed SDPA)"),
    ("aoti_cuda_int4fast_nogemv", "aoti_cuda (int4, cuBLAS GEMMs, decomposed SDPA; decode's too)"),
    ("aoti_cuda_int4fast_gemv8", "aoti_cuda (int4, cuBLAS GEMMs, decomposed SDPA; few-row kernels to 8 rows)"),
    ("libtorch_aoti", "libtorch AOTI runner (C++)"),
    ("libtorch_aoti_graph", "libtorch AOTI runner (C++), decode in a CUDA graph"),
    ("eager", "eager PyTorch"),
    ("eager_graph", "eager + CUDA graph (decode)"),
    ("torch_compile", "torch.compile max-autotune"),
    ("eager_int4", "eager PyTorch (int4, torchao)"),
]
# Every bf16 peer with each of its settings: "best peer" is the best of them, CUDA graphs included where a peer
# has them.
BF16_PEERS = ["libtorch_aoti", "libtorch_aoti_graph", "eager", "eager_graph", "torch_compile"]
# aoti_cuda's bf16 programs (the backend's Triton GEMMs; cuBLAS GEMMs): the decode and TTFT targets take the best.
AOTI_BF16 = ["aoti_cuda_bf16", "aoti_cuda_bf16cublas", "aoti_cuda_bf16fast", "aoti_cuda_bf16fast_gemv8", "aoti_cuda_bf16mix",
             "aoti_cuda_bf16mixfuse", "aoti_cuda_bf16flash", "aoti_cuda_bf16dop"]


def num(v):
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def fmt(v, digits=1):
    v = num(v)
    return "–" if v is None else f"{v:,.{digits}f}"


def llm_rows(res):
    """One normalized record per contender that produced numbers."""
    lens = [int(x) for x in str(res.get("params", {}).get("prompt_lens", "128,512")).split(",") if x]
    rows = []
    for key, label in LLM_ROWS:
        r = (res.get("runs") or {}).get(key)
        if not r:
            continue
        row = {"key": key, "label": label, "error": r.get("error"), "load_ms": num(r.get("load_ms")),
               "gpu_mem_mib": num(r.get("gpu_mem_mib")), "compile_s": num(r.get("compile_s"))}
        for n in lens:
            row[f"ttft_{n}_ms"] = num(r.get(f"p{n}_ttft_ms"))
            row[f"ttft_first_{n}_ms"] = num(r.get(f"p{n}_ttft_first_ms"))
            row[f"decode_{n}_tok_s"] = num(r.get(f"p{n}_decode_tok_s"))
            row[f"tokens_{n}"] = r.get(f"p{n}_tokens")
            row[f"queued_{n}_ms"] = num(r.get(f"p{n}_prefill_queued_ms"))
        for k in ("library_ms", "container_ms", "weights_ms", "parse_ms", "expect_match", "expect_count",
                  "forced_match", "forced_count",
                  "share_path", "gpu_mem_after_load_mib", "upload_gb_per_s", "upload_ms", "weights_uploaded_mib",
                  "weights_not_uploaded_mib", "graphs", "framework_warmup_ms", "load_phases_ms", "job"):
            if k in r:
                row[k] = r[k]
        rows.append(row)
    return rows, lens


def best(rows, keys, field, higher):
    vals = [(r[field], r["label"]) for r in rows if r["key"] in keys and num(r.get(field)) is not None]
    if not vals:
        return None, None
    return (max if higher else min)(vals)


def best_beside(rows, peer_label, field, higher):
    """aoti_cuda's best bf16 program for `field` among the rows measured in the same job as the peer's row
    (results merged from several jobs carry "job"); another job's only when that job measured none, and then
    named so."""
    job = next((r.get("job") for r in rows if r["label"] == peer_label), None)
    mine, me = best([r for r in rows if job is None or r.get("job") == job], AOTI_BF16, field, higher)
    if mine is None:
        mine, me = best(rows, AOTI_BF16, field, higher)
        me = me and me + ", another job"
    return mine, me


def llm_targets(rows, lens, res_bandwidth=None):
    by = {r["key"]: r for r in rows}
    a = by.get("aoti_cuda_bf16", {})
    out = []
    n0 = lens[0] if lens else 128
    for n in lens:  # aoti_cuda: its best bf16 program beside the best peer, named in the row
        b, who = best(rows, BF16_PEERS, f"decode_{n}_tok_s", True)
        mine, me = best_beside(rows, who, f"decode_{n}_tok_s", True)
        if mine and b:
            out.append({"target": f"decode tokens/s ({n}-token prompt) >= best peer", "aoti_cuda": mine,
                        "aoti_cuda_name": me, "reference": b, "reference_name": who, "ratio": mine / b, "met": mine >= b})
        b, who = best(rows, BF16_PEERS, f"ttft_{n}_ms", False)
        mine, me = best_beside(rows, who, f"ttft_{n}_ms", False)
        if mine and b:
            out.append({"target": f"time to first token ({n}) <= best peer", "aoti_cuda": mine, "aoti_cuda_name": me,
                        "reference": b, "reference_name": who, "ratio": mine / b, "met": mine <= b})
    lt = by.get("libtorch_aoti", {})
    if num(a.get("load_ms")) and num(lt.get("load_ms")):
        out.append({"target": "load <= 1/3 of the libtorch runner's", "aoti_cuda": a["load_ms"], "reference": lt["load_ms"],
                    "reference_name": "libtorch AOTI runner", "ratio": a["load_ms"] / lt["load_ms"],
                    "met": a["load_ms"] * 3 <= lt["load_ms"]})
    # Upload: every bf16 program uploads the same weights; the best ratio to the pinned copies measured in
    # its own job (res_bandwidth["by_job"] when results of several jobs are merged), named in the row.
    uploads = []
    for r in rows:
        if r["key"] not in AOTI_BF16 or not num(r.get("upload_gb_per_s")):
            continue
        pinned = num(((res_bandwidth or {}).get("by_job") or {}).get(r.get("job") or "")) or num(
            (res_bandwidth or {}).get("pinned_h2d_gb_per_s"))
        if pinned:
            uploads.append((r["upload_gb_per_s"] / pinned, r["upload_gb_per_s"], pinned, r["label"]))
    if uploads:
        ratio, rate, pinned, who = max(uploads)
        out.append({"target": "weights upload >= 80% of pinned host->device bandwidth (GB/s)",
                    "aoti_cuda": rate, "aoti_cuda_name": who, "reference": pinned,
                    "reference_name": "pinned copy, same run", "ratio": ratio, "met": ratio >= 0.8})
    i4 = by.get("aoti_cuda_int4", {})
    if num(i4.get(f"decode_{n0}_tok_s")) and num(a.get(f"decode_{n0}_tok_s")):
        r = i4[f"decode_{n0}_tok_s"] / a[f"decode_{n0}_tok_s"]
        out.append({"target": "int4 decode >= 2.5x bf16 decode", "aoti_cuda": i4[f"decode_{n0}_tok_s"],
                    "reference": a[f"decode_{n0}_tok_s"], "reference_name": "aoti_cuda bf16", "ratio": r, "met": r >= 2.5})
    return out


def compile_note(res, rows):
    warm = next((r.get("compile_s") for r in rows if r["key"] == "torch_compile"), None)
    cold = num(((res.get("runs") or {}).get("compile_warm") or {}).get("compile_s"))
    if warm is None and cold is None:
        return ""
    return (f" torch.compile's compilation is not in its load time: {fmt(cold)} s the first time (empty caches, while "
            f"other compilations ran), {fmt(warm)} s in the measured run (warm caches).")


def queued_notes(rows, lens):
    """The host time until the prefill call returned with its work queued, beside the TTFT: when the two are close,
    the host, not the GPU, sets the pace."""
    parts = []
    for r in rows:
        pairs = [(r.get(f"queued_{n}_ms"), r.get(f"ttft_{n}_ms")) for n in lens]
        if all(q is not None and t is not None for q, t in pairs):
            parts.append(f"{r['label']} " + " / ".join(f"{fmt(q, 2)} of {fmt(t, 2)}" for q, t in pairs))
    if not parts:
        return []
    return [f"- Host time of queuing the prefill call (the call returns once its work is queued), against the TTFT, "
            f"ms at {' / '.join(str(n) for n in lens)} tokens: " + "; ".join(parts) + "."]


def kernel_sections(res):
    """'Where the GPU time goes': generate --profile-kernels' kernel kinds per aoti_cuda run."""
    lines = []
    for key, label in (("aoti_cuda_bf16", "bf16"), ("aoti_cuda_bf16cublas", "bf16, cuBLAS GEMMs"),
                       ("aoti_cuda_bf16fast", "bf16, cuBLAS GEMMs, decomposed SDPA"),
                       ("aoti_cuda_bf16mix", "bf16, cuBLAS GEMMs, decode's SDPA decomposed"),
                       ("aoti_cuda_bf16mixfuse", "bf16, cuBLAS GEMMs, decode's SDPA decomposed, Inductor's fusion"),
                       ("aoti_cuda_bf16flash", "bf16, cuBLAS GEMMs, flash attention prefill, Inductor's fusion"),
                       ("aoti_cuda_bf16dop", "bf16, cuBLAS GEMMs, aoti_cuda's decode attention shim (aoti_cuda only)"),
                       ("aoti_cuda_int4", "int4"),
                       ("aoti_cuda_int4fast", "int4, cuBLAS GEMMs, decomposed SDPA")):
        run = (res.get("runs") or {}).get(key) or {}
        for step in ("decode", "prefill"):
            kinds = run.get(f"{step}_kernel_kinds")
            total = num(run.get(f"{step}_kernel_ms"))
            if not isinstance(kinds, dict) or not total:
                continue
            if not lines:
                lines += ["", "## Where the GPU time goes", "",
                          "One profiled call after the measurements (`generate --profile-kernels`: CUDA events around "
                          "every kernel launch, RunOptions::profile_kernels), kernels grouped by kind.", "",
                          "| program | call | kind | launches | ms | share |", "|---|---|---|---|---|---|"]
            for kind, (launches, ms) in sorted(kinds.items(), key=lambda kv: -kv[1][1]):
                lines.append(f"| {label} | {step} | {kind} | {int(launches)} | {ms:.3f} | {100 * ms / total:.1f}% |")
    return lines


def model_config(res):
    """The model's config from a bf16 export's manifest (the cuBLAS one when the other is absent)."""
    exports = res.get("exports") or {}
    return ((exports.get("bf16") or {}).get("config") or (exports.get("bf16cublas") or {}).get("config"))


def fast_notes(res, rows):
    """Lines on the exports with cuBLAS GEMMs and decomposed SDPA, and the few-row kernels' A/B rows."""
    keys = [r["key"] for r in rows]
    if not any(k.startswith(("aoti_cuda_bf16fast", "aoti_cuda_int4fast")) for k in keys):
        return []
    text = ("- \"decomposed SDPA\": exported with `--gemm cublas --sdpa decomposed` (the backend's "
            "triton_kernel_mode=OFF): attention is Inductor's matmuls + softmax, the matmuls extern GEMMs. "
            "In bf16: the exporter allows math SDPA's bf16 reductions (otherwise PyTorch upcasts q, K, V to float32, so "
            "each decode step would convert the whole KV cache and multiply in float32).")
    lines = [text]
    if any(k.endswith(("_nogemv", "_gemv8")) for k in keys):
        lines.append("- aoti_cuda runs extern GEMMs with one row of activations (decode's projections and the "
                     "output head) on its own bandwidth-bound kernels (`src/shim/ops/gemv.cu`), the rest on cuBLAS; "
                     "\"decode's too\" is the same program with `AOTI_CUDA_GEMV_MAX_ROWS=0` (every GEMM on cuBLAS), "
                     "\"few-row kernels to 8 rows\" with `=8` (decode's attention matmuls, 4 query rows per KV head, "
                     "on them too, p·V on a second kernel that was slower than cuBLAS), each in the same job.")
    return lines


def cublas_notes(res, rows):
    """Lines on the bf16 export with cuBLAS GEMMs (export_llm.py --gemm cublas), when the results have it."""
    exp = (res.get("exports") or {}).get("bf16cublas") or {}
    c = next((r for r in rows if r["key"] == "aoti_cuda_bf16cublas"), None)
    if not exp and not c:
        return []
    text = ("- aoti_cuda (bf16, cuBLAS GEMMs): the bf16 model exported with `--gemm cublas` (Inductor's ATEN GEMMs, "
            "called as `aoti_torch_cuda_{mm,addmm,bmm}_out`, which aoti_cuda runs with cuBLAS; everything else as the "
            "bf16 export)")
    et = exp.get("export_times") or {}
    if et:
        text += f"; export {fmt(et.get('total_s'))} s, of which lowering {fmt(et.get('lower_s'))} s (no GEMM autotuning)"
    if exp.get("gemm_kernels"):
        text += "; extern GEMM kernels accepted: " + ", ".join(f"`{k}`" for k in sorted(exp["gemm_kernels"]))
    if c and c.get("expect_count"):
        text += (f"; the first {int(c['expect_match'])} of {int(c['expect_count'])} tokens it generated equal eager "
                 "PyTorch's")
    return [text + "."]


def llm_markdown(res, rows, lens, targets, date, chart_lines=()):
    """(title, generated body) of the LLM document."""
    m = res.get("machine", {})
    exp = (res.get("exports") or {}).get("bf16") or {}
    cfg = exp.get("config") or model_config(res) or {}
    if cfg:
        model = (f"{cfg.get('params', 0) / 1e9:.2f} B parameters (d={cfg.get('dim')}, {cfg.get('n_layers')} layers, "
                 f"{cfg.get('n_heads')} heads x {cfg.get('head_dim')}, {cfg.get('n_kv_heads')} KV heads, FFN {cfg.get('ffn')}, "
                 f"vocab {cfg.get('vocab')}, context {cfg.get('max_ctx')})")
    else:
        model = f"config `{(res.get('config') or {}).get('name', '?')}` (no export manifest: see the steps in llm.json)"
    lines = [f"{m.get('gpu', 'GPU ?')}, torch {m.get('torch', '?')} (CUDA {m.get('cuda', '?')}). Model: Llama-style "
             f"decoder, {model}, bf16, random weights from a fixed seed, greedy decoding. Same weights, prompts and "
             "protocol for every contender (`bench/llm/run_on_device.sh`)"
             + (", in the jobs listed below." if res.get("jobs") else ".") , ""]
    head = ["contender", "load (ms)", "GPU memory (MiB)"] + [f"TTFT {n} (ms)" for n in lens] + \
           [f"decode tok/s ({n})" for n in lens]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        if r.get("error"):
            lines.append(f"| {r['label']} | failed: {str(r['error'])[:80]} |" + " |" * (len(head) - 2))
            continue
        cells = [r["label"], fmt(r["load_ms"]), fmt(r["gpu_mem_mib"], 0)] + \
                [fmt(r.get(f"ttft_{n}_ms"), 2) for n in lens] + [fmt(r.get(f"decode_{n}_tok_s")) for n in lens]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "- load: file -> ready (aoti_cuda: `Module` constructor after the CUDA context exists; libtorch: both "
              "`AOTIModelPackageLoader`s and binding decode to prefill's constants; eager: `torch.load(mmap)` + "
              "`load_state_dict` on the GPU)." + compile_note(res, rows),
              "- TTFT: prefill of the prompt -> next token on the GPU, synchronized; median of 5 after one untimed call.",
              "- decode: 256 greedy steps after the prompt, each step's output token fed back as the next input on the "
              "GPU, one synchronization at the end.",
              "- GPU memory: device memory in use (cudaMemGetInfo) after the run minus before loading, in the "
              "contender's own process."]
    phases = next((r for r in rows if r["key"] == "aoti_cuda_bf16"), None)
    if phases and phases.get("weights_ms") is not None:
        lines.append(f"- aoti_cuda load phases: parse {fmt(phases.get('parse_ms'), 2)} ms, libraries "
                     f"{fmt(phases.get('library_ms'))} ms, containers {fmt(phases.get('container_ms'))} ms, weights "
                     f"{fmt(phases.get('weights_ms'))} ms"
                     + (f" (uploaded {fmt(phases.get('weights_uploaded_mib'), 0)} MiB at {fmt(phases.get('upload_gb_per_s'), 2)} GB/s;"
                        f" not uploaded, shared: {fmt(phases.get('weights_not_uploaded_mib'), 0)} MiB)"
                        if phases.get("upload_gb_per_s") is not None else "") + ".")
    bw = (res.get("runs") or {}).get("bandwidth") or {}
    if num(bw.get("pinned_h2d_gb_per_s")):
        lines.append(f"- Host -> device copies in the same run (1 GiB, PyTorch): pinned {fmt(bw['pinned_h2d_gb_per_s'], 1)} GB/s, "
                     f"pageable {fmt(bw.get('pageable_h2d_gb_per_s'), 1)} GB/s.")
    pt = next((r for r in rows if r["key"] == "eager"), None)
    if pt and pt.get("framework_warmup_ms") is not None:
        lines.append(f"- PyTorch peers: their load is timed after PyTorch's own CUDA start-up in the process (building and "
                     f"running a tiny model first: {fmt(pt['framework_warmup_ms'], 0)} ms for eager), which is not part of loading the model.")
    if phases and phases.get("graphs") is not None:
        lines.append("- aoti_cuda's decode ran " + ("as a CUDA graph (LoadOptions::cuda_graph_methods)." if phases["graphs"]
                                                 else "as plain calls (this SDK build had no CUDA graphs)."))
    if phases and phases.get("expect_count"):
        agree = []
        for key in ("torch_compile", "libtorch_aoti"):  # compiled peers, same weights and prompt
            peer = next((r for r in rows if r["key"] == key), None)
            # Against the aoti_cuda program measured in the peer's job when there is one (merged results).
            beside = next((r for r in rows if r["key"] in AOTI_BF16 and peer and peer.get("job")
                           and r.get("job") == peer.get("job") and r.get(f"tokens_{lens[0]}")), phases)
            mine, theirs = beside.get(f"tokens_{lens[0]}") or [], (peer or {}).get(f"tokens_{lens[0]}") or []
            if mine and theirs:
                same = next((i for i, (x, y) in enumerate(zip(mine, theirs)) if x != y), min(len(mine), len(theirs)))
                who = "" if beside is phases else f" ({beside['label']}, same job)"
                agree.append(f"the first {same} of {min(len(mine), len(theirs))}{who} equal {peer['label']}'s")
        lines.append(f"- Check ({lens[0]}-token prompt): the first {int(phases['expect_match'])} of "
                     f"{int(phases['expect_count'])} tokens aoti_cuda generated equal eager PyTorch's"
                     + ("; " + "; ".join(agree) if agree else "")
                     + " (bf16 rounding differs between kernels and random weights make near ties, so greedy runs part)"
                     + (f"; fed eager's previous token at every step (teacher forcing), {int(phases['forced_match'])} of "
                        f"{int(phases['forced_count'])} steps give eager's next token" if phases.get("forced_count") else "")
                     + ".")
    jobs = res.get("jobs") or {}
    if jobs:
        for name in sorted(jobs):
            who = ", ".join(r["label"] for r in rows if (res["runs"].get(r["key"]) or {}).get("job") == name)
            lines.append(f"- Run {name} (finished {jobs[name].get('finished', '?')}): {who}. {jobs[name].get('note', '')}")
    int4 = (res.get("exports") or {}).get("int4") or {}
    q = next((r for r in rows if r["key"] == "aoti_cuda_int4"), None)
    if q and q.get("expect_count"):
        lines.append(f"- int4: the first {int(q['expect_match'])} of {int(q['expect_count'])} tokens equal eager int4's "
                     "(torchao's kernel and aoti_cuda's accumulate in another order; greedy paths part after a near tie)"
                     + (f"; teacher-forced, {int(q['forced_match'])} of {int(q['forced_count'])} steps agree"
                        if q.get("forced_count") else "") + ".")
    et = exp.get("export_times")
    if et and int4.get("export_times"):
        lines.append(f"- int4 export: {fmt(int4['export_times'].get('total_s'))} s (run beside the bf16 export).")
    if et:
        lines.append(f"- Export (ExecuTorch 1.2 CUDA backend, max_autotune): {fmt(et.get('total_s'))} s in all, of which "
                     f"lowering (AOTInductor + Triton autotuning) {fmt(et.get('lower_s'))} s.")
    lines += queued_notes(rows, lens)
    lines += cublas_notes(res, rows)
    lines += fast_notes(res, rows)
    lines += list(chart_lines)
    lines += kernel_sections(res)
    if targets:
        lines += ["", "## Targets", "", "| target | aoti_cuda | reference | ratio | met |", "|---|---|---|---|---|"]
        for t in targets:
            mine = fmt(t["aoti_cuda"], 2) + (f" ({t['aoti_cuda_name']})" if t.get("aoti_cuda_name") else "")
            lines.append(f"| {t['target']} | {mine} | {fmt(t['reference'], 2)} ({t['reference_name']}) | "
                         f"{t['ratio']:.2f} | {'yes' if t['met'] else 'no'} |")
    return f"LLM benchmark ({date})", "\n".join(lines) + "\n"


def llm_report(res, out, date, name="llm"):
    rows, lens = llm_rows(res)
    targets = llm_targets(rows, lens, (res.get("runs") or {}).get("bandwidth"))
    roof = roofline.annotate(rows, res, lens)  # None without a read_bw step or a model config
    ok = [r for r in rows if not r.get("error")]
    doc = {"date": date, "machine": res.get("machine"), "model": model_config(res),
           "exports": {q: (e or {}).get("export_times") for q, e in (res.get("exports") or {}).items()},
           "contenders": rows, "targets": targets, "roofline": roof, "steps": res.get("steps")}
    with open(os.path.join(out, f"{name}.json"), "w") as f:
        json.dump(doc, f, indent=1)
    labels = [r["label"] for r in ok]
    charts = [("LLM decode, tokens/s (higher is better)", f"{name}-decode.png",
               [(f"{n}-token prompt", [r.get(f"decode_{n}_tok_s") for r in ok]) for n in lens]),
              ("LLM time to first token, ms (lower is better)", f"{name}-ttft.png",
               [(f"{n}-token prompt", [r.get(f"ttft_{n}_ms") for r in ok]) for n in lens]),
              ("LLM load, file -> ready, ms (lower is better)", f"{name}-load.png",
               [("load", [r.get("load_ms") for r in ok])])]
    if roof:
        charts.append(("LLM decode, % of the roofline (bytes a step must read / measured read bandwidth; higher is "
                       "better)", f"{name}-roofline.png",
                       [(f"{n}-token prompt", [r.get(f"roofline_pct_{n}") for r in ok]) for n in lens]))
    for title, png, series in charts:
        hbar_chart(os.path.join(out, png), title, series, labels)
    title, body = llm_markdown(res, rows, lens, targets, date, charts_markdown(out, [(t, p) for t, p, _ in charts]) +
                               roofline.markdown(rows, roof, lens))
    write_doc(os.path.join(out, f"{name}.md"), title, body)
    print(f"wrote {out}/{name}.json, {name}.md, {name}-{{decode,ttft,load}}.png ({len(rows)} contenders, "
          f"{len(targets)} targets)")


def flat_p50(d, prefix=""):
    """Every numeric field with 'p50' in its key, flattened ('graphs.p50_ms' -> 'graphs_p50_ms')."""
    out = {}
    if isinstance(d, dict):
        for k, v in d.items():
            key = f"{prefix}{k}"
            if isinstance(v, dict):
                out.update(flat_p50(v, key + "_"))
            elif "p50" in k and num(v) is not None:
                out[key] = v
    elif isinstance(d, list) and len(d) == 1:
        out.update(flat_p50(d[0], prefix))
    return out


AOTI_PRIMARY = ("plain_dev_p50_ms", "bench_latency_device_io_p50_ms", "device_io_p50_ms")


def calls_rows(res):
    """One row per fixture method with every contender's p50 (ms) and the ratios of the per-call targets."""
    calls = res.get("calls") or {}
    table = {}

    def row(model, method):
        return table.setdefault((model, method), {"model": model, "method": method})

    modes = calls.get("aoti_cuda_modes") or {}
    for r in modes.get("rows") or []:  # bench/aoti_cuda_call_bench: plain / graphs / bound, interleaved
        x = row(r["model"], r["method"])
        x.update({k: v for k, v in flat_p50(r).items()})
        x["graphs_note"] = r.get("graphs")
    for m, f in (modes.get("first") or {}).items():
        for x in table.values():
            if x["model"] == m and f and num(f.get("time_to_first_result_ms")) is not None:
                x["aoti_cuda_first_result_ms"] = f["time_to_first_result_ms"]
    for r in calls.get("aoti_cuda") or []:  # aoti_cuda bench
        x = row(r["model"], r["method"])
        if num(r.get("device_io_p50_ms")) is not None:
            x["device_io_p50_ms"] = r["device_io_p50_ms"]
        x.update({"bench_" + k: v for k, v in flat_p50(r.get("bench_json")).items()})
    for r in (calls.get("pytorch") or {}).get("rows", []):
        x = row(r["model"], r["method"])
        for k in ("eager_p50_ms", "graph_p50_ms"):
            if num(r.get(k)) is not None:
                x[k] = r[k]
        x["inputs"] = r.get("inputs")
    for r in calls.get("libtorch_aoti") or []:
        x = row(r["model"], r["method"])
        if num(r.get("p50_ms")) is not None:
            x["libtorch_p50_ms"] = r["p50_ms"]
            x["libtorch_load_ms"] = r.get("load_ms")
            x["libtorch_first_call_ms"] = r.get("first_call_ms")
            if all(num(r.get(k)) is not None for k in ("cuda_init_ms", "load_ms", "first_call_ms")):
                # CUDA context (and libtorch's CUDA start-up) included, as in aoti_cuda's fresh-process figure
                x["libtorch_first_result_ms"] = r["cuda_init_ms"] + r["load_ms"] + r["first_call_ms"]
    for x in table.values():
        x["aoti_cuda_p50_ms"] = next((x[k] for k in AOTI_PRIMARY if num(x.get(k)) is not None), None)
        for name, key, ref in (("plain_over_replay", "aoti_cuda_p50_ms", "graph_p50_ms"),
                               ("graphs_over_replay", "graphs_dev_p50_ms", "graph_p50_ms"),
                               ("bound_over_replay", "graphs_bound_dev_p50_ms", "graph_p50_ms"),
                               ("plain_over_libtorch", "aoti_cuda_p50_ms", "libtorch_p50_ms"),
                               ("first_result_over_libtorch", "aoti_cuda_first_result_ms", "libtorch_first_result_ms")):
            if num(x.get(key)) and num(x.get(ref)):
                x[name] = x[key] / x[ref]
    return sorted(table.values(), key=lambda x: (x["model"], x["method"]))


def us(v):
    return "–" if num(v) is None else f"{v * 1000:.1f}"


CALL_COLUMNS = [  # (header, key, formatter)
    ("aoti_cuda (µs)", "aoti_cuda_p50_ms", us),
    ("aoti_cuda graphs (µs)", "graphs_dev_p50_ms", us),
    ("aoti_cuda graphs + bound (µs)", "graphs_bound_dev_p50_ms", us),
    ("libtorch AOTI (µs)", "libtorch_p50_ms", us),
    ("eager (µs)", "eager_p50_ms", us),
    ("eager graph replay (µs)", "graph_p50_ms", us),
    ("aoti_cuda / replay (≤ 1.2)", "plain_over_replay", lambda v: fmt(v, 2)),
    ("graphs / replay (≤ 0.8)", "graphs_over_replay", lambda v: fmt(v, 2)),
    ("graphs + bound / replay (≤ 0.8)", "bound_over_replay", lambda v: fmt(v, 2)),
    ("aoti_cuda / libtorch (≤ 0.9)", "plain_over_libtorch", lambda v: fmt(v, 2)),
    ("first result: aoti_cuda / libtorch (≤ 1)", "first_result_over_libtorch", lambda v: fmt(v, 2)),
]


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "bool": 1, "uint8": 1, "int8": 1}


def largest_io_bytes(model, method):
    """The largest input or output tensor of a fixture method in bytes (its manifest's shapes), or None."""
    try:
        with open(os.path.join(ROOT, "tests", "fixtures", model, "manifest.json")) as f:
            spec = json.load(f)["methods"][method]
    except (OSError, ValueError, KeyError):
        return None
    sizes = [math.prod(t["shape"]) * DTYPE_BYTES.get(t["dtype"], 4) for t in spec["inputs"] + spec["outputs"]]
    return max(sizes) if sizes else None


def host_io_lines(rows):
    """Issue 12's host I/O overhead: p50 with host inputs and outputs minus p50 with device ones."""
    out = ["", "Host I/O overhead: p50 with host inputs and outputs minus p50 with device-resident ones, µs "
           "(target: ≤ 5 for tensors under 64 KiB).", "",
           "| program.method | largest tensor (KiB) | plain | graphs + bound |", "|---|---|---|---|"]
    any_row = False
    for r in rows:
        diffs = []
        for mode in ("plain", "graphs_bound"):
            h, d = r.get(f"{mode}_host_p50_ms"), r.get(f"{mode}_dev_p50_ms")
            diffs.append(us(h - d) if num(h) is not None and num(d) is not None else "–")
        if diffs == ["–", "–"]:
            continue
        any_row = True
        size = largest_io_bytes(r["model"], r["method"])
        out.append(f"| {r['model']}.{r['method']} | {'–' if size is None else f'{size / 1024:.1f}'} | "
                   f"{diffs[0]} | {diffs[1]} |")
    return out if any_row else []


def calls_report(res, out, date, name="calls"):
    rows = calls_rows(res)
    cols = [c for c in CALL_COLUMNS if any(num(r.get(c[1])) is not None for r in rows)]
    m = res.get("machine", {})
    lines = [f"{m.get('gpu', 'GPU ?')}, torch {m.get('torch', '?')}. p50 of a "
             "synchronized call with device-resident inputs (outputs on the device), in microseconds, on random inputs at "
             "the methods' upper-bound shapes; each contender in its own process (aoti_cuda's modes interleaved in one, "
             "`bench/aoti_cuda_call_bench`, or `aoti_cuda bench` where that is absent). The targets are in the "
             "headers. First result: CUDA context + load + first call in a fresh process (libtorch: its first CUDA "
             "tensor op + AOTIModelPackageLoader + first run).", "",
             "| program.method | " + " | ".join(c[0] for c in cols) + " |", "|---|" + "---|" * len(cols)]
    for r in rows:
        lines.append(f"| {r['model']}.{r['method']} | " + " | ".join(c[2](r.get(c[1])) for c in cols) + " |")
    notes = sorted({r["graphs_note"] for r in rows if r.get("graphs_note")})
    if notes:
        lines += ["", "aoti_cuda graph notes: " + "; ".join(notes)]
    lines += host_io_lines(rows)
    lines += ["", "Rows within each target, of the rows measured:"]
    for key, limit, what in (("plain_over_replay", 1.2, "aoti_cuda / replay ≤ 1.2"),
                             ("graphs_over_replay", 0.8, "graphs / replay ≤ 0.8"),
                             ("bound_over_replay", 0.8, "graphs + bound / replay ≤ 0.8"),
                             ("plain_over_libtorch", 0.9, "aoti_cuda / libtorch ≤ 0.9"),
                             ("first_result_over_libtorch", 1.0, "first result: aoti_cuda / libtorch ≤ 1")):
        vals = [r[key] for r in rows if num(r.get(key)) is not None]
        if vals:
            lines.append(f"- {what}: {sum(v <= limit for v in vals)} of {len(vals)} (median ratio "
                         f"{sorted(vals)[len(vals) // 2]:.2f})")
    with open(os.path.join(out, f"{name}.json"), "w") as f:
        json.dump({"date": date, "machine": m, "rows": rows}, f, indent=1)
    labels = [f"{r['model']}.{r['method']}" for r in rows]
    # The mode users are told is fastest (graphs + outputs bound to their buffers) beside the peers.
    series = [(name, [None if r.get(key) is None else r[key] * 1000 for r in rows])
              for name, key in (("aoti_cuda graphs + bound outputs", "graphs_bound_dev_p50_ms"),
                                ("libtorch AOTI", "libtorch_p50_ms"), ("eager", "eager_p50_ms"),
                                ("eager graph replay", "graph_p50_ms"))
              if any(num(r.get(key)) is not None for r in rows)]
    title = "p50 per call, µs (log scale; lower is better)"
    hbar_chart(os.path.join(out, f"{name}.png"), title, series, labels, log=True)
    lines += charts_markdown(out, [(title, f"{name}.png")])
    write_doc(os.path.join(out, f"{name}.md"), f"Per-call latency ({date})", "\n".join(lines) + "\n")
    print(f"wrote {out}/{name}.json, {name}.md, {name}.png ({len(rows)} rows)")


KINDS = (  # (results file in a folder, key that marks the content, report)
    ("llm_results.json", "runs", llm_report),
    ("calls_results.json", "calls", calls_report),
)


def results_inputs(paths):
    """(path, report, results) for each results file named, or found in a named folder; ValueError naming the path
    when one cannot be used."""
    files = []
    for p in paths:
        if os.path.isdir(p):
            found = [os.path.join(p, f) for f, _, _ in KINDS if os.path.exists(os.path.join(p, f))]
            if not found:
                raise ValueError(f"{p}: no {' or '.join(f for f, _, _ in KINDS)} in this folder")
            files += found
        elif os.path.isfile(p):
            files.append(p)
        else:
            raise ValueError(f"{p}: no such file or folder")
    inputs = []
    for path in files:
        try:
            with open(path) as f:
                res = json.load(f)
        except (OSError, ValueError) as e:
            raise ValueError(f"{path}: not readable JSON ({e})") from None
        fn = next((fn for _, key, fn in KINDS if isinstance(res, dict) and key in res), None)
        if fn is None:
            raise ValueError(f"{path}: neither LLM results (a \"runs\" object) nor per-call results (\"calls\")")
        inputs.append((path, fn, res))
    return inputs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", nargs="+", help="results folder or file (see above)")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "benchmarks"))
    ap.add_argument("--date")
    ap.add_argument("--name", help='base name of the outputs instead of "llm" / "calls" (one results input only)')
    a = ap.parse_args(argv)
    try:
        inputs = results_inputs(a.results)
    except ValueError as e:
        print(f"report: {e}", file=sys.stderr)
        return 1
    if a.name and len(inputs) != 1:
        print(f"report: --name needs exactly one results input ({len(inputs)} given or found)", file=sys.stderr)
        return 1
    os.makedirs(a.out, exist_ok=True)
    for path, fn, res in inputs:
        date = a.date or (res.get("finished") or "")[:10] or "undated"
        if a.name:
            fn(res, a.out, date, a.name)
        else:
            fn(res, a.out, date)
    return 0


if __name__ == "__main__":
    sys.exit(main())
