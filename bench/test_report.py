#!/usr/bin/env python3
"""Checks of bench/report.py on synthetic results; stdlib only (the PNGs are not drawn without matplotlib).

    python3 bench/test_report.py      # prints "report: N passed, M failed"

- LLM targets compare aoti_cuda's best program measured in the same job as the best peer, and name another job's
  only when the peer's job measured none;
- the per-call table's ratios, the graphs + bound column, the host I/O overhead table and the counts of rows within
  each target;
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


def llm_results():
    def run(job, ttft128, ttft512, tok):
        return {"job": job, "p128_ttft_ms": ttft128, "p512_ttft_ms": ttft512, "p128_decode_tok_s": tok,
                "p512_decode_tok_s": tok, "load_ms": 50.0}
    return {"params": {"prompt_lens": "128,512"}, "runs": {
        # The fastest aoti_cuda TTFT comes from an old job; the peer's job has a slower aoti_cuda program.
        "aoti_cuda_bf16": run("old", 1.0, 2.0, 500.0),
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

    failed = results.count(False)
    print(f"report: {len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
