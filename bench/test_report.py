#!/usr/bin/env python3
"""Checks of bench/report.py on synthetic results; stdlib only (the PNGs are not drawn without matplotlib).

    python3 bench/test_report.py      # prints "report: N passed, M failed"

- LLM targets compare aoti_cuda's best program measured in the same job as the best peer (each peer with its best
  settings: CUDA graphs included), and name another job's only when the peer's job measured none;
- the per-call table's ratios, the graphs + bound column, the host I/O overhead table and the counts of rows within
  each target;
- the decode roofline: bytes per step counted by hand for the 1.1B model in bf16 and int4, % of roofline against the
  job's measured read bandwidth, the section only when the job measured it;
- both reports write their Markdown from a results folder, or from results files named as in bench/results/ (what a
  file holds read from its content), under another name with --name; regenerating keeps the hand-written text outside
  the report markers; unusable inputs fail with a message.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import report  # noqa: E402
import roofline  # noqa: E402


def run(job, ttft128, ttft512, tok):
    """One contender's LLM results: TTFT at 128 and 512 tokens, decode tokens/s at both."""
    return {"job": job, "p128_ttft_ms": ttft128, "p512_ttft_ms": ttft512, "p128_decode_tok_s": tok,
            "p512_decode_tok_s": tok, "load_ms": 50.0}


def llm_results():
    return {"params": {"prompt_lens": "128,512"}, "runs": {
        # The fastest aoti_cuda TTFT comes from an old job; the peer's job has a slower aoti_cuda program.
        "aoti_cuda_bf16": dict(run("old", 1.0, 2.0, 500.0), expect_match=13.0, expect_count=32.0, forced_match=31.0,
                               forced_count=32.0),
        "aoti_cuda_bf16mix": run("new", 2.5, 3.0, 800.0),
        "libtorch_aoti": dict(run("new", 2.0, 2.5, 450.0), p128_prefill_queued_ms=0.4, p512_prefill_queued_ms=0.5),
        # A peer alone in its job: aoti_cuda's best from another job is named so.
        "torch_compile": run("solo", 5.0, 9.0, 900.0),
    }}


def calls_results():
    def modes(model, plain, bound, plain_host, bound_host):
        return {"model": model, "method": "forward", "plain_dev": {"p50_ms": plain},
                "graphs_dev": {"p50_ms": plain}, "graphs_bound_dev": {"p50_ms": bound},
                "plain_host": {"p50_ms": plain_host}, "graphs_bound_host": {"p50_ms": bound_host}}
    return {"machine": {"gpu": "test GPU", "torch": "0"}, "calls": {
        "aoti_cuda_modes": {"rows": [modes("add", 0.016, 0.011, 0.035, 0.015),
                                     modes("mlp", 0.025, 0.017, 0.043, 0.020)]},
        "pytorch": {"rows": [{"model": "add", "method": "forward", "eager_p50_ms": 0.027, "graph_p50_ms": 0.018},
                             {"model": "mlp", "method": "forward", "eager_p50_ms": 0.075, "graph_p50_ms": 0.0155}]},
        "libtorch_aoti": [{"model": "add", "method": "forward", "p50_ms": 0.015},
                          {"model": "mlp", "method": "forward", "p50_ms": 0.026}],
    }}


def main() -> int:
    results = []

    def check(name, ok):
        results.append(bool(ok))
        print(f"  {'ok  ' if ok else 'FAIL'} {name}")

    rows, lens = report.llm_rows(llm_results())
    targets = {t["target"]: t for t in report.llm_targets(rows, lens)}
    ttft = targets.get("time to first token (128) <= best peer") or {}
    check("TTFT: the peer is the runner (best bf16 peer)", ttft.get("reference") == 2.0)
    check("TTFT: aoti_cuda's figure is from the runner's job, not the faster old one",
          ttft.get("aoti_cuda") == 2.5 and ttft.get("met") is False)
    decode = targets.get("decode tokens/s (128-token prompt) >= best peer") or {}
    check("decode: a peer alone in its job is compared with another job's best, named so",
          decode.get("reference") == 900.0 and decode.get("aoti_cuda") == 800.0
          and "another job" in (decode.get("aoti_cuda_name") or ""))
    # The peer's best settings count: the runner with its decode step in a CUDA graph beats aoti_cuda's 800.
    graph_rows, _ = report.llm_rows({"params": {"prompt_lens": "128"}, "runs": {
        "aoti_cuda_bf16": run("g", 2.0, 2.0, 500.0), "libtorch_aoti": run("g", 2.0, 2.0, 450.0),
        "libtorch_aoti_graph": run("g", 2.0, 2.0, 600.0)}})
    graph_decode = {t["target"]: t for t in report.llm_targets(graph_rows, [128])}.get(
        "decode tokens/s (128-token prompt) >= best peer") or {}
    check("decode: the best peer is the runner in a CUDA graph, and the target is missed",
          graph_decode.get("reference") == 600.0 and "CUDA graph" in (graph_decode.get("reference_name") or "")
          and graph_decode.get("met") is False)
    check("best_beside without jobs: the overall best", report.best_beside(
        [dict(r, job=None) for r in rows], "libtorch AOTI runner (C++)", "ttft_128_ms", False)[0] == 1.0)

    crow = {r["model"]: r for r in report.calls_rows(calls_results())}
    check("plain / replay", abs(crow["add"]["plain_over_replay"] - 0.016 / 0.018) < 1e-9)
    check("graphs + bound / replay", abs(crow["mlp"]["bound_over_replay"] - 0.017 / 0.0155) < 1e-9)
    check("plain / libtorch", abs(crow["mlp"]["plain_over_libtorch"] - 0.025 / 0.026) < 1e-9)
    io = "\n".join(report.host_io_lines(list(crow.values())))
    check("host I/O overhead: plain and graphs + bound differences in µs", "| add.forward |" in io
          and "| 19.0 | 4.0 |" in io)

    with tempfile.TemporaryDirectory() as tmp:
        src, out = os.path.join(tmp, "in"), os.path.join(tmp, "out")
        os.makedirs(src)
        with open(os.path.join(src, "calls_results.json"), "w") as f:
            json.dump(calls_results(), f)
        with open(os.path.join(src, "llm_results.json"), "w") as f:
            json.dump(dict(llm_results(), machine={"gpu": "test GPU"}), f)
        rc = report.main([src, "--out", out, "--date", "2026-01-01"])
        check("main: exit 0", rc == 0)
        calls_md = open(os.path.join(out, "calls.md")).read()
        check("calls.md: targets counted (graphs + bound ≤ 0.8: 1 of 2)",
              "graphs + bound / replay ≤ 0.8: 1 of 2" in calls_md)
        check("calls.md: the host I/O table", "Host I/O overhead" in calls_md)
        llm_md = open(os.path.join(out, "llm.md")).read()
        check("llm.md: the targets table", "## Targets" in llm_md)
        check("llm.md: the token check, free-running and teacher-forced",
              "the first 13 of 32 tokens aoti_cuda generated equal eager PyTorch's" in llm_md
              and "(teacher forcing), 31 of 32 steps give eager's next token" in llm_md)
        check("llm.md: the prefill's queuing time beside the TTFT, for the runs that report it",
              "Host time of queuing the prefill" in llm_md and "libtorch AOTI runner (C++) 0.40 of 2.00 / 0.50 of 2.50"
              in llm_md and "eager" not in llm_md.split("Host time of queuing")[1].split("\n")[0])

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out")
        llm_file, calls_file = os.path.join(tmp, "llm-2026-01-01.json"), os.path.join(tmp, "calls-2026-01-01.json")
        with open(llm_file, "w") as f:
            json.dump(llm_results(), f)
        with open(calls_file, "w") as f:
            json.dump(calls_results(), f)
        check("main: results files, kind read from the content", report.main([calls_file, llm_file, "--out", out]) == 0
              and os.path.exists(os.path.join(out, "calls.md")) and os.path.exists(os.path.join(out, "llm.md")))
        named = os.path.join(out, "calls-other.md")
        check("main: --name names the outputs", report.main([calls_file, "--out", out, "--name", "calls-other"]) == 0
              and os.path.exists(named) and os.path.exists(os.path.join(out, "calls-other.json")))
        text = open(named).read()
        marked = text.startswith("# ") and report.BEGIN in text and text.rstrip().endswith(report.END)
        with open(named, "w") as f:
            f.write("# My title\n\nWhat this run was.\n\n" + report.BEGIN + "\nold numbers\n" + report.END + "\nAfter.\n")
        report.main([calls_file, "--out", out, "--name", "calls-other"])
        text = open(named).read()
        check("regenerating keeps the text outside the markers and replaces what is inside", marked
              and text.startswith("# My title\n\nWhat this run was.\n\n" + report.BEGIN) and text.endswith(report.END + "\nAfter.\n")
              and "old numbers" not in text and "| add.forward |" in text)
        neither = os.path.join(tmp, "other.json")
        with open(neither, "w") as f:
            json.dump({"something": 1}, f)
        check("main: a file that holds neither kind of results fails", report.main([neither, "--out", out]) == 1)
        check("main: a missing path fails", report.main([os.path.join(tmp, "missing.json"), "--out", out]) == 1)
        check("main: --name with two inputs fails", report.main([calls_file, llm_file, "--out", out, "--name", "x"]) == 1)

    # The roofline (bench/roofline.py), counted by hand for the 1.1B model: linear weights per layer
    # 3072x2048 + 2048x2048 + 11264x2048 + 2048x5632 = 45,088,768, x22 + the 32000x2048 head = 1,057,488,896.
    cfg = {"vocab": 32000, "dim": 2048, "n_layers": 22, "n_heads": 16, "n_kv_heads": 4, "ffn": 5632, "head_dim": 128}
    norms_row = 45 * 2048 * 2 + 2048 * 2
    kv_per_pos = 2 * 22 * 4 * 128 * 2
    b16, i4 = roofline.step_bytes(cfg, "bf16", 10), roofline.step_bytes(cfg, "int4", 10)
    check("roofline: bf16 bytes = 2 x weights + norms + one embedding row + KV cache",
          b16["total"] == 2 * 1057488896 + norms_row + 10 * kv_per_pos)
    # int4: half a byte per weight + 4 bytes per (group of 128 inputs, output): 33,046,528 bytes of scales.
    check("roofline: int4 bytes = weights / 2 + scales + the same bf16 rest",
          i4["total"] == 1057488896 / 2 + 33046528 + norms_row + 10 * kv_per_pos)
    roof_res = {"params": {"prompt_lens": "128", "new_tokens": 256}, "exports": {"int4": {"config": cfg}},
                "runs": {"aoti_cuda_bf16": {"p128_decode_tok_s": 500.0}, "aoti_cuda_int4fast": {"p128_decode_tok_s": 1000.0},
                         "read_bw": {"read_gbps": 4000.0, "bytes": 2 << 30}}}
    rrows, rlens = report.llm_rows(roof_res)
    facts = roofline.annotate(rrows, roof_res, rlens)
    by = {r["key"]: r for r in rrows}
    want16 = (2 * 1057488896 + norms_row + (128 + 128.5) * kv_per_pos) / 4e12 / 2e-3 * 100
    want4 = (1057488896 / 2 + 33046528 + norms_row + (128 + 128.5) * kv_per_pos) / 4e12 / 1e-3 * 100
    check("roofline: % per export from tokens/s and the job's read bandwidth",
          facts is not None and abs(by["aoti_cuda_bf16"]["roofline_pct_128"] - want16) < 1e-9
          and abs(by["aoti_cuda_int4fast"]["roofline_pct_128"] - want4) < 1e-9 and by["aoti_cuda_int4fast"]["quant"] == "int4")
    md = "\n".join(roofline.markdown(rrows, facts, rlens))
    roof_res["exports"]["int4"]["config"] = dict(cfg, max_ctx=1024)
    facts = roofline.annotate(rrows, roof_res, rlens)
    md = "\n".join(roofline.markdown(rrows, facts, rlens))
    check("roofline: the KV cache the exports read over all positions, beside the counted one",
          facts["kv_cache_all_positions"] == 1024 * kv_per_pos and "attend all 1024 cache positions" in md)
    check("roofline: the section's table", "## Roofline" in md and "| aoti_cuda (int4, cuBLAS GEMMs, decomposed SDPA) | int4 |" in md
          and f"{want4:.0f} %" in md)
    no_bw = dict(roof_res, runs={k: v for k, v in roof_res["runs"].items() if k != "read_bw"})
    check("roofline: none without the job's read bandwidth", roofline.annotate(report.llm_rows(no_bw)[0], no_bw, [128]) is None)
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "llm_results.json"), "w") as f:
            json.dump(roof_res, f)
        report.main([tmp, "--out", tmp, "--date", "2026-01-01"])
        doc = json.load(open(os.path.join(tmp, "llm.json")))
        check("roofline: llm.md and llm.json carry it", "## Roofline" in open(os.path.join(tmp, "llm.md")).read()
              and doc["roofline"]["read_gbps"] == 4000.0)

    failed = results.count(False)
    print(f"report: {len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
