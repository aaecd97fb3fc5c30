#!/usr/bin/env python3
"""CPU checks of llm_job.py (device-llm.sh's helpers): the upload figures parsed from the load-order program's
lines, the attention share of a profiled decode step, the wheel check, the merge of ExecuTorch-peer results.
No torch. Prints "llm_job: N passed, M failed"; exit status 1 on any failure."""

from __future__ import annotations

import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import llm_job  # noqa: E402

CPP_LOG = """load-order test: libcudart and libcuda in the global scope before libaoti_cuda
large program, load 0: 4200.5 MiB, staged 4200.5 MiB, 30.1 GB/s
large program, load 1: 4200.5 MiB, staged 4200.5 MiB, 46.0 GB/s
large program, load 2: 4200.5 MiB, staged 4200.5 MiB, 44.0 GB/s
[doctest] test cases: 1 | 1 passed | 0 failed | 5 skipped
"""


def main() -> int:
    results = []

    def check(name, ok):
        results.append(bool(ok))
        print(("ok   " if ok else "FAIL ") + name)

    with tempfile.TemporaryDirectory() as t:
        def write(name, text):
            p = os.path.join(t, name)
            with open(p, "w") as f:
                f.write(text)
            return p

        cpp = [write("c1.log", CPP_LOG), write("c2.log", CPP_LOG.replace("46.0", "48.0"))]
        slow = CPP_LOG.replace("46.0", "39.0").replace("44.0", "40.0")  # median 39.5 of loads 1-2
        torch_ok = [write("t1.log", CPP_LOG.replace("46.0", "43.0")), write("t2.log", CPP_LOG)]
        r = llm_job.upload_check(cpp, torch_ok)
        check("upload: the first load of a process is left out (median of loads 1-2)",
              r["cpp"]["processes"][0]["rate_gb_s"] == 45.0)
        check("upload: median over processes", r["cpp"]["rate_gb_s"] == 45.5 and r["torch"]["rate_gb_s"] == 44.25)
        check("upload: within 10 % is met", r["met"] is True)
        md = llm_job.markdown({"upload": r})
        check("markdown: the upload table and its verdict", "| PyTorch, CUDA context first | 44.2 |" in md
              and "target >= 0.9: met" in md)
        r = llm_job.upload_check(cpp, [write("t3.log", slow)])
        check("upload: 39.5 against 45.5 GB/s (0.87) is not met", r["met"] is False)
        r = llm_job.upload_check(cpp, [write("t4.log", "Traceback: no CUDA\n")])
        check("upload: a process without load lines gives no verdict", r["met"] is None and r["torch"]["rate_gb_s"] is None)

        # A decode step of a cuBLAS + decomposed-SDPA export (2 layers): GEMVs for the projections, two bmm per
        # layer on cuBLAS, softmax in a Triton reduction.
        mix = {"gemm": "cublas", "sdpa": "mixed", "config": {"n_layers": 2}}
        kernels = [["aoti_cuda GEMV (few rows)", 9, 0.5], ["aoti_cuda cuBLAS GEMM", 4, 0.2],
                   ["triton_per_fused__softmax_3", 2, 0.1], ["triton_poi_fused_add_1", 10, 0.2]]
        att, total, verified, _ = llm_job.attention_share(kernels, mix)
        check("attention: bmm on cuBLAS + softmax counted (0.3 of 1.0 ms), verified by 2 x layers launches",
              abs(att - 0.3) < 1e-9 and abs(total - 1.0) < 1e-9 and verified)
        kernels[1][1] = 5
        check("attention: a GEMM count other than 2 x layers is marked unverified",
              llm_job.attention_share(kernels, mix)[2] is False)
        stock = {"gemm": "triton", "sdpa": "triton", "config": {"n_layers": 2}}
        att, total, verified, names = llm_job.attention_share(
            [["_sdpa_fwd_kernel_m32", 2, 0.26], ["triton_tem_fused_mm_0", 8, 0.74]], stock)
        check("attention: the stock export's Triton SDPA kernel by name", abs(att - 0.26) < 1e-9 and verified
              and names == ["_sdpa_fwd_kernel_m32"])
        check("attention: no attention kernel found is unverified",
              llm_job.attention_share([["triton_tem_fused_mm_0", 8, 0.74]], stock)[2] is False)
        gen = {"decode_at": [128, 4000], "at128_decode_tok_s": 800.0, "at4000_decode_tok_s": 500.0,
               "at128_decode_kernels": [["aoti_cuda GEMV (few rows)", 9, 0.9], ["aoti_cuda cuBLAS GEMM", 4, 0.1]],
               "p128_decode_tok_s": 790.0}
        s = llm_job.long_summary(gen, dict(mix, config={"n_layers": 2, "max_ctx": 4096}))
        check("long summary: tokens/s and step time per position", s["positions"]["4000"]["tok_s"] == 500.0
              and abs(s["positions"]["128"]["step_ms"] - 1.25) < 1e-9 and s["max_ctx"] == 4096)
        check("long summary: attention does not dominate at 128 (10 %)", s["attention_dominates_at_128"] is False)
        split = {"helper_method": "decode", "from_helper": True}
        s2 = llm_job.long_summary(gen, dict(mix, autotune="off", split_lowering=split, export_times={"lower_s": 9.0}))
        check("long summary: how the export was made (autotune, split lowering, times)",
              s2["export"]["autotune"] == "off" and s2["export"]["split_lowering"] == split
              and s2["export"]["export_times"] == {"lower_s": 9.0})
        md = llm_job.markdown({"long_bf16mix": s})
        check("markdown: one row per position", "| 128 | 800.0 |" in md and "| 4000 | 500.0 |" in md)

        w = os.path.join(t, "whl")
        os.makedirs(w)
        for n in ("executorch-1.2.0-cp312-cp312-manylinux_2_28_x86_64.whl", "torchao-0.17.0-cp310-abi3-x.whl",
                  "flatbuffers-25.12.19-py2.py3-none-any.whl", "ruamel_yaml-0.19.1-py3-none-any.whl",
                  "tabulate-0.10.0-py3-none-any.whl"):
            open(os.path.join(w, n), "w").close()
        check("wheels: the five the exports need", llm_job.check_wheels(w) == [])
        open(os.path.join(w, "torchao-0.16.0-cp310-abi3-x.whl"), "w").close()
        check("wheels: two torchao versions refused", any("2 torchao" in p for p in llm_job.check_wheels(w)))
        os.remove(os.path.join(w, "torchao-0.17.0-cp310-abi3-x.whl"))
        check("wheels: torchao 0.16 refused", any("0.17" in p for p in llm_job.check_wheels(w)))
        os.remove(os.path.join(w, "executorch-1.2.0-cp312-cp312-manylinux_2_28_x86_64.whl"))
        check("wheels: a missing executorch named", any("no executorch" in p for p in llm_job.check_wheels(w)))

        sized = write("f.bin", "x" * 5000)
        c = llm_job.carry_size([sized])
        check("carry size: bytes and 4 KiB blocks", c["bytes"] == 5000 and c["block_mib"] == 8192 / 2**20)

        kept = {"fixtures": {"aoti_cuda": {"rows": [1]}}, "llm": {}, "cold": {"x": 1}}
        merged = llm_job.merge_et(kept, {"llm": {"bf16": {"aoti_cuda": {}}}, "params": {"parts": "llm"}})
        check("merge-et: fixture rows kept, LLM rows taken", merged["fixtures"] == kept["fixtures"]
              and "bf16" in merged["llm"] and kept["llm"] == {})
        both = {"fixtures": {}, "llm": {"bf16": {"aoti_cuda": {"load_ms": 70}}, "int4": {"missing": "x"}},
                "llm_run": {"machine": {"date_utc": "09:09"}}}
        merged = llm_job.merge_et(both, {"llm": {"int4": {"aoti_cuda": {"load_ms": 27}}, "bf16": {"missing": "y"}},
                                         "machine": {"date_utc": "11:28"}})
        check("merge-et: per export, a measured row replaces a missing one and is never replaced by one",
              merged["llm"]["bf16"]["aoti_cuda"] == {"load_ms": 70} and merged["llm"]["int4"]["aoti_cuda"] ==
              {"load_ms": 27} and merged["llm"]["bf16"]["run"]["machine"]["date_utc"] == "09:09"
              and merged["llm"]["int4"]["run"]["machine"]["date_utc"] == "11:28")

        long_doc = {"long_x": {"max_ctx": 4096, "positions": {}, "expect_match": [1.0, 32.0],
                               "forced_match": [31.0, 32.0]}}
        check("markdown: the free-running and the teacher-forced token agreement",
              "leading the same 1/32, teacher-forced steps 31/32." in llm_job.markdown(long_doc))
        long_doc["long_x"]["forced_misses"] = {"near_ties": 1, "clear": 0}
        check("markdown: the teacher-forced misses told apart into near ties and clear misses",
              "teacher-forced steps 31/32, of the teacher-forced misses 1 near ties and 0 clear"
              in llm_job.markdown(long_doc))
        summary = llm_job.long_summary({"forced_match": 30, "forced_count": 32, "forced_near_ties": 2,
                                        "forced_clear_misses": 0}, None)
        check("long summary: generate's near ties and clear misses, when it had eager's logits",
              summary["forced_misses"] == {"near_ties": 2, "clear": 0}
              and "forced_misses" not in llm_job.long_summary({"forced_match": 30, "forced_count": 32}, None))
        del long_doc["long_x"]["forced_misses"]
        long_doc["long_x"]["forced_match"] = [None, None]
        check("markdown: a run without teacher forcing says only what it measured",
              "leading the same 1/32." in llm_job.markdown(long_doc)
              and "teacher-forced" not in llm_job.markdown(long_doc))

        trace = {"graph_launches_traced": 70, "launches": [
            {"kernels": 250, "span_ns": 990000, "kernel_ns": 800000},
            {"kernels": 250, "span_ns": 1000000, "kernel_ns": 900000}]}
        r = llm_job.trace_summary(trace, {"p128_decode_tok_s": 1000.0})
        check("trace summary: the last replay's kernel time and span against the untraced step time",
              r["kernels"] == 250 and abs(r["kernel_ms"] - 0.9) < 1e-9 and abs(r["step_over_kernels"] - 1.0 / 0.9) < 1e-9
              and abs(r["span_over_kernels"] - 1.0 / 0.9) < 1e-9)
        check("trace summary: no gaps without a kernel list", "gaps" not in r)
        listed = {"launches": [{"kernels": 4, "span_ns": 1000, "kernel_ns": 700, "kernel_list": [
            ["a", 0, 100], ["sdpa", 300, 200], ["b", 1200, 100], ["a", 1250, 100]]}]}
        g = llm_job.trace_summary(listed, {})["gaps"]
        check("trace gaps: end to next start, negative where two kernels overlapped",
              g["count"] == 3 and g["sum_ns"] == 200 + 700 - 50 and g["min_ns"] == -50 and g["max_ns"] == 700
              and g["overlapped"] == 1 and g["median_ns"] == 200)
        check("trace gaps: the widest after a kernel first, by mean",
              [w["kernel"] for w in g["widest_after"]] == ["sdpa", "a", "b"]
              and g["widest_after"][0]["mean_ns"] == 700 and g["widest_after"][1]["mean_ns"] == 200)
        check("trace gaps: fewer than two kernels have none", llm_job.trace_gaps([["a", 0, 1]]) is None)
        ref = {"reference": {"prompt_len": 128, "tokens": [5, 7], "top": [[[5, 1.5]], [[7, 2.0], [3, 1.0]]]}}
        check("expect args: the tokens and eager's top logits; nothing without a 128-token reference",
              llm_job.expect_args(ref) == "--expect-tokens 5,7 --expect-top 5:1.5;7:2,3:1"
              and llm_job.expect_args({"reference": {"prompt_len": 64, "tokens": [1]}}) == ""
              and llm_job.expect_args(None) == "")
        check("trace summary: no traced launch says so", llm_job.trace_summary({"launches": []}, {}) ==
              {"error": "no graph launch traced"})
        md = llm_job.markdown({"long_x": {"max_ctx": 4096, "positions": {}, "trace": r}})
        check("markdown: the traced replay's line", "250 kernels, 0.900 ms of kernel time" in md and "1.111x" in md)

        suite = os.path.join(t, "suite")
        os.makedirs(suite)
        with open(os.path.join(suite, "gpu_tests.log"), "w") as f:
            f.write("== GPU test suite\n[doctest] test cases:   80 |   79 passed | 1 failed | 0 skipped\n"
                    "[doctest] assertions: 70000 | 69999 passed | 1 failed |\n")
        with open(os.path.join(suite, "cli_run.log"), "w") as f:
            f.write("add: ok\n  FAILED: outputs differ\nmlp: ok\n")
        ops = write("ops.log", "sort ok\n432 checks, 0 failed\n")
        r = llm_job.suite_summary(suite, ops)
        check("suite summary: doctest's two summary lines, the CLI failures, the operator checks' verdict",
              r["gpu_tests"][0].endswith("1 failed | 0 skipped") and len(r["gpu_tests"]) == 2
              and r["cli_run_failures"] == ["  FAILED: outputs differ"] and r["et_ops"][-1] == "432 checks, 0 failed")
        check("suite summary: a missing log says so", r["unit_tests"] == "no log")

        dopu = {"gemm": "cublas", "sdpa": "decode-op-update", "config": {"n_layers": 22}}
        kernels = [["aoti_cuda GEMV (few rows)", 89, 1.06], ["aoti_cuda decode attention", 22, 0.27],
                   ["triton_poi_fused__to_copy_add_aoti_cuda_decode_attention_update_cat_index_select_mul_1", 22, 0.09],
                   ["triton_poi_fused__to_copy_aoti_cuda_decode_attention_update_slice_transpose_copy_3", 22, 0.08],
                   ["triton_red_fused__softmax_7", 22, 0.05]]
        att, total, verified, names = llm_job.attention_share(kernels, dopu)
        check("attention share: kernels that only feed the decode attention operator are not attention",
              abs(att - 0.32) < 1e-9 and verified and names == ["aoti_cuda decode attention", "triton_red_fused__softmax_7"])

        pdl = os.path.join(t, "pdl")
        os.makedirs(pdl)
        for mode, rate in (("on", 1000.0), ("off", 900.0), ("on2", 1010.0), ("c16", 945.0), ("c16on", 1035.0),
                           ("c8on", 1053.0)):
            with open(os.path.join(pdl, f"generate_int4dopu_{mode}.json"), "w") as f:
                json.dump({"at128_decode_tok_s": rate, "p128_decode_tok_s": rate - 50, "expect_match": 10,
                           "forced_match": 31, "expect_count": 32, "dependent_launch": int(mode != "off"),
                           "attention_cluster": int(mode[1:3]) if mode.startswith("c1") else
                           8 if mode.startswith("c8") else 0}, f)
        for mode, us in (("on", 8.0), ("off", 10.0), ("early", 6.25)):
            with open(os.path.join(pdl, f"int4_bench_{mode}.json"), "w") as f:
                json.dump({"read_gbps": 4500.0, "results": [{"m": 1, "n": 2048, "k": 2048, "us": 5.0, "stream_us": us,
                                                             "floor_read_us": 2.3}, {"m": 64, "n": 2048, "k": 2048,
                                                                                     "us": 9.0}]}, f)
        r = llm_job.pdl_summary(pdl)
        at = r["exports"]["int4dopu"]["positions"]["at128"]
        check("pdl summary: the better 'on' run against 'off', per position",
              at["on"] == 1010.0 and at["off"] == 900.0 and abs(at["on_over_off"] - 1010.0 / 900.0) < 1e-12
              and r["exports"]["int4dopu"]["positions"]["p128"]["off"] == 850.0)
        check("pdl summary: the one-kernel attention runs against 'off'; a mode that did not run is absent",
              at["c16"] == 945.0 and abs(at["c16_over_off"] - 1.05) < 1e-12 and at["c16on"] == 1035.0
              and abs(at["c16on_over_off"] - 1.15) < 1e-12 and at["c8on"] == 1053.0
              and abs(at["c8on_over_off"] - 1.17) < 1e-12 and "c8" not in at)
        check("pdl summary: each run's resolved settings, as generate reported them",
              r["exports"]["int4dopu"]["settings"]["c16on"] == [1, 16]
              and r["exports"]["int4dopu"]["settings"]["c8on"] == [1, 8]
              and r["exports"]["int4dopu"]["settings"]["off"] == [0, 0])
        check("pdl summary: the token agreement of every run",
              r["exports"]["int4dopu"]["tokens_free_forced_count"]["off"] == [10, 31, 32])
        check("pdl summary: int4 back to back both ways, rows without a back-to-back time left out",
              r["int4"] == [{"m": 1, "n": 2048, "k": 2048, "on_us": 8.0, "off_us": 10.0, "off_over_on": 1.25,
                             "read_floor_us": 2.3, "early_us": 6.25, "off_over_early": 1.6}])

        # Issue 32's targets from one BC job: the stock export under `reference`, the switches under `pdl`.
        stock = {"max_ctx": 1024, "positions": {"128": {"tok_s": 500.0}},
                 "trace": {"kernels": 255, "kernel_ms": 2.0, "step_ms": 2.05, "step_over_kernels": 1.025}}
        bc = {"long_bf16x": {"export": {"quant": "bf16"}, "reference": stock,
                             "positions": {"128": {"tok_s": 1000.0, "attention_share": 0.2}}},
              "long_bf16y": {"export": {"quant": "bf16"}, "positions": {"128": {"tok_s": 1120.0}}},
              "long_int4x": {"export": {"quant": "int4"}, "reference": stock,
                             "positions": {"128": {"tok_s": 1400.0, "attention_share": 0.55}}},
              "pdl": {"exports": {"int4x": {"positions": {"at128": {"on": 1390.0, "off": 1400.0, "c8on": 1470.0,
                                                                    "c8on_over_off": 1.05}}}}}}
        t = llm_job.targets(bc)
        g = t["targets"]
        check("targets: int4 against the stock export and the best bf16, the best bf16, the stock step",
              g["int4_over_stock"]["value"] == 2.8 and g["int4_over_stock"]["met"] is True
              and abs(g["int4_over_best_bf16"]["value"] - 1.25) < 1e-12 and g["int4_over_best_bf16"]["met"] is False
              and g["best_bf16_tok_s"]["value"] == 1120.0 and g["best_bf16_tok_s"]["met"] is True
              and "bf16y" in g["int4_over_best_bf16"]["from"]
              and g["stock_step_over_kernels"]["value"] == 1.025 and g["stock_step_over_kernels"]["met"] is True)
        check("targets: attention share per export (missing where not profiled), the best switch against off",
              t["attention_share"]["int4x"] == {"value": 0.55, "met": False}
              and t["attention_share"]["bf16y"] == {"value": None, "met": None}
              and t["switches"]["int4x"]["best"] == "c8on" and abs(t["switches"]["int4x"]["best_over_off"] - 1.05) < 1e-12
              and "best c8on (1.050× off)" in llm_job.targets_markdown(t))
        bare = llm_job.targets({"long_int4x": bc["long_int4x"] | {"reference": None}})["targets"]
        check("targets: a figure that did not come back is missing, not met or failed",
              bare["int4_over_stock"] == {"value": None, "target": 2.5, "met": None, "from": "int4x 1400.0 / stock –"}
              and bare["best_bf16_tok_s"]["met"] is None and bare["stock_step_over_kernels"]["met"] is None)

        # The roofline rows: LlamaConfig's defaults read from model.py without torch, the window's middle position.
        cfg = llm_job.default_model_config()
        check("targets: the 1b config from model.py's source",
              (cfg["dim"], cfg["n_layers"], cfg["n_heads"], cfg["n_kv_heads"], cfg["ffn"], cfg["vocab"],
               cfg["head_dim"]) == (2048, 22, 16, 4, 5632, 32000, 128))
        small = {"dim": 256, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "ffn": 512, "vocab": 1024, "head_dim": 64}
        roof = llm_job.targets(bc, stream_gbps=1000.0, cfg=small)
        need_bf16 = llm_job.roofline.step_bytes(small, "bf16", 160.5)["total"]
        need_int4 = llm_job.roofline.step_bytes(small, "int4", 160.5)["total"]
        r = roof["roofline"]
        check("targets: % of the roofline per export and for the stock export; only the best bf16 held to 60 %",
              abs(r["bf16y"]["pct"] - 100.0 * need_bf16 * 1120.0 / 1e12) < 1e-9
              and abs(r["int4x"]["pct"] - 100.0 * need_int4 * 1400.0 / 1e12) < 1e-9
              and abs(r["stock"]["roofline_tok_s"] - 1e12 / need_bf16) < 1e-6
              and r["bf16y"]["met"] is (r["bf16y"]["pct"] >= 60.0) and r["bf16x"]["met"] is None
              and r["int4x"]["met"] is None and need_int4 < need_bf16
              and "% of the roofline, bf16y (best bf16, ≥ 60 %)" in llm_job.targets_markdown(roof))
        check("targets: no roofline rows without the streaming read",
              llm_job.targets(bc, cfg=small)["roofline"] == {} and "roofline" not in llm_job.targets_markdown(t))
        # The chart of llm-targets.json: a group a job with a streaming read, a series an export, the stock one last.
        jobs = {"jobs": [
            dict(roof, job="2026-01-02 10:00 UTC", gpu="NVIDIA H200", stream_read_gbps=1000.0),
            {"job": "2026-01-01 09:00 UTC", "gpu": "NVIDIA H100 80GB HBM3", "roofline": {}},
            {"job": "2026-01-01 08:00 UTC", "gpu": "NVIDIA H100 80GB HBM3", "stream_read_gbps": 900.0,
             "roofline": {"bf16y": {"pct": 61.5}}}]}
        labels, series = llm_job.roofline_chart(jobs)
        check("targets-chart: one group a job that measured its streaming read, one series an export, stock last",
              labels == ["H200, 2026-01-02 10:00 UTC (streaming read 1000.0 GB/s)",
                         "H100 80GB HBM3, 2026-01-01 08:00 UTC (streaming read 900.0 GB/s)"]
              and [n for n, _ in series] == ["bf16x", "bf16y", "int4x", "stock ExecuTorch bf16 export"]
              and dict(series)["bf16y"] == [r["bf16y"]["pct"], 61.5] and dict(series)["int4x"][1] is None
              and dict(series)["stock ExecuTorch bf16 export"] == [r["stock"]["pct"], None])
        with tempfile.TemporaryDirectory() as d:
            empty, png = os.path.join(d, "empty.json"), os.path.join(d, "x.png")
            with open(empty, "w") as f:
                f.write('{"jobs": [{"job": "x", "roofline": {}}]}')
            check("targets-chart: nothing to draw without a streaming read",
                  llm_job.roofline_chart({"jobs": [{"job": "x", "roofline": {}}]}) == ([], [])
                  and llm_job.main(["targets-chart", empty, png]) == 1 and not os.path.exists(png))

    failed = results.count(False)
    print(f"llm_job: {len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
