#!/usr/bin/env python3
"""CPU test of report.py and device_run.py's parsing: a made-up results file (two fixtures, one LLM export) gives the expected ratios and
verdicts, an error row stays an error row, and a second run keeps the hand-written text outside the markers."""

import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import device_run  # noqa: E402
import report  # noqa: E402

RES = {
    "machine": {"gpu": "GPU 0: test", "driver": "1", "date_utc": "2026-12-04 07:00"},
    "params": {"runs": 200, "loads": 5, "cold_reps": 3, "prompt_lens": "128,512"},
    "fixtures": {
        "aoti_cuda": {"rc": 0, "rows": [
            {"model": "add", "error_message": "", "load_median_ms": 3.0, "load_cold_ms": 300, "first_call_ms": 1,
             "host_io_p50_ms": 0.04, "device_io_p50_ms": 0.02, "rss_mib": 5, "device_mib": 2},
            {"model": "mlp", "error_message": "boom", "load_median_ms": 0}]},
        "executorch": {"rc": 4, "rows": [
            {"model": "add", "error_message": "", "load_median_ms": 20.0, "load_cold_ms": 400, "first_call_ms": 2,
             "host_io_p50_ms": 0.10, "device_io_p50_ms": None, "rss_mib": 4, "device_mib": 2, "agree": True,
             "device_io_notes": ["forward: inputs are memory-planned"]},
            {"model": "mlp", "error_message": "", "load_median_ms": 20.0, "host_io_p50_ms": 0.1, "agree": False}]},
        "executorch_13": {"rows": [{"model": "add", "error_message": "", "host_io_p50_ms": 0.05, "agree": True}]}},
    "fixtures13": None,
    "agreement": {"add": {"forward": {"rc": 0, "match": True}}, "mlp": {"forward": {"rc": 1, "match": False}}},
    "cold": {"add": {"aoti_cuda_ms": 400.0, "executorch_ms": 1000.0, "aoti_cuda_load_ms": 3.0,
                     "executorch_load_ms": 20.0, "aoti_cuda_peak_rss_mib": 5.0,
                     "executorch_peak_rss_mib": 4.0},
             "fp16": {"aoti_cuda_ms": 400.0, "executorch_ms": None, "aoti_cuda_load_ms": 3.0,
                      "executorch_error": "the program imports aoti_torch_dtype_float16, which ExecuTorch 1.2's CUDA "
                                          "shims do not define"}},
    "llm": {"bf16": {
        "aoti_cuda": {"load_ms": 900, "p128_ttft_ms": 3.0, "p512_ttft_ms": 4.0, "p128_decode_tok_s": 500.0,
                      "expect_match": 32, "expect_count": 32},
        "aoti_cuda_nographs": {"load_ms": 900, "p128_ttft_ms": 3.0, "p512_ttft_ms": 4.0, "p128_decode_tok_s": 400.0},
        "executorch_13": {"load_ms": 2000, "p128_ttft_ms": 4.0, "p512_ttft_ms": 5.0, "p128_decode_tok_s": 400.0,
                          "expect_match": 32, "expect_count": 32},
        "executorch": {"load_ms": 3000, "p128_ttft_ms": 5.0, "p512_ttft_ms": 6.0, "p128_decode_tok_s": 250.0, "peak_rss_mib": 900.0,
                       "expect_match": 1, "expect_count": 32},
        "cold": {"aoti_cuda_ms": 2000.0, "executorch_ms": 5000.0}},
        "int4": {"missing": "/tmp/llm_bench/int4/llm.pte"}},
}


def check_device_run():
    """The parsers that read the runtimes' output, and the wrapper that times a process and reads its peak RSS."""
    text = "x: symbol lookup error: /tmp/forward_so_blob7.so: undefined symbol: aoti_torch_dtype_float16"
    assert "aoti_torch_dtype_float16" in device_run.et_failure(text, 127)
    assert "aten::sigmoid.out" in device_run.et_failure("E 0 op_registry] kernel 'aten::sigmoid.out' not found.", 1)
    assert device_run.et_failure("", 5) == "exit status 5"
    aoti = "m.pte: method 'forward' ran; load 202.9 ms (parse 0.5, device init 99.4, library 3.6, container 0.1, weights 1.0)"
    assert abs(device_run.first_load_ms("aoti_cuda", aoti) - 5.2) < 1e-9  # driver and context left out
    assert device_run.first_load_ms("aoti_cuda", "no load line") is None
    assert device_run.first_load_ms("executorch", 'noise\n@@JSON {"load_ms": 3.5}\n') == 3.5
    assert device_run.at_json("@@JSON {broken") is None
    import subprocess
    p = subprocess.run([sys.executable, "-c", device_run.PEAK_RSS_WRAPPER, sys.executable, "-c",
                        "import sys; x = bytearray(64 << 20); sys.exit(7)"], capture_output=True, text=True)
    assert p.returncode == 7, p  # the child's status comes through
    assert device_run.peak_rss_mib(p.stdout) >= 64, p.stdout  # the child's 64 MiB are seen
    assert 0 < device_run.wrapped_wall_s(p.stdout) < 30, p.stdout


def main():
    check_device_run()
    rows = {r["model"]: r for r in report.fixture_rows(RES)}
    add = rows["add"]
    assert abs(add["load_ms_ratio"] - 0.15) < 1e-9, add
    assert abs(add["cold_start_ms_ratio"] - 0.4) < 1e-9, add
    assert abs(add["host_p50_ms_ratio"] - 0.4) < 1e-9, add
    assert abs(add["best_p50_ratio"] - 0.2) < 1e-9, add  # ExecuTorch's best: host I/O (device I/O not taken)
    assert abs(add["rss_mib_ratio"] - 1.25) < 1e-9, add
    assert add["agree"] == (True, True), add
    assert abs(add["load_first_call_ms_ratio"] - 4.0 / 22.0) < 1e-9, add  # (3 + 1) / (20 + 2)
    assert rows["mlp"]["aoti_error"] == "boom" and rows["mlp"]["agree"] == (False, False), rows["mlp"]
    assert report.verdict(0.4, 0.5) == "0.40 ✓" and report.verdict(1.25, 1.0) == "1.25 ✗"
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "r.json")
        with open(path, "w") as f:
            json.dump(RES, f)
        assert report.main([path, "--out", d]) == 0
        md = open(os.path.join(d, "executorch.md")).read()
        assert md.startswith("# aoti_cuda and ExecuTorch's own CUDA runtime\n"), md[:80]
        assert "| add | 3.000 / 20.0 | 0.15 ✓ |" in md, md
        assert "aoti_cuda failed: boom" in md, md
        assert "- `fp16`: the program imports aoti_torch_dtype_float16" in md, md
        assert "| fp16 | 3.000 / cannot run | – |" in md, md
        assert "- decode step: 0.50 ✓ (0.625; target ≤ 0.8)" in md, md
        assert "| ExecuTorch 1.2 runtime | 3000 | 5000 | 5.000 | 6.000 | 250 | 4.000 | – | 900 | 1/32 |" in md, md
        assert "Export missing" in md
        assert "- decode step against ExecuTorch 1.3 with its decode graph: 0.80 ✓" in md, md
        assert "| ExecuTorch 1.3 runtime (weight sharing, decode CUDA graph; IO device-type check relaxed) | 2000 |" in md, md
        assert "ExecuTorch 1.3's runtime on the same files" in md and "| add | 0.040 / 0.050 | 0.80 ✓ | yes |" in md, md
        assert "- load: 0.150 (target ≤ 0.3; 1 of 1 meet it)" in md, md  # the failed fixture has no ratio
        # Hand-written text outside the markers survives a second run.
        with open(os.path.join(d, "executorch.md"), "w") as f:
            f.write(md.replace("# aoti_cuda and ExecuTorch's own CUDA runtime\n", "# Title\n\nHand-written.\n"))
        assert report.main([path, "--out", d]) == 0
        md2 = open(os.path.join(d, "executorch.md")).read()
        assert md2.startswith("# Title\n\nHand-written.\n") and "| add | 3.000 / 20.0 |" in md2, md2[:200]
        js = json.load(open(os.path.join(d, "executorch.json")))
        assert js["targets"]["load"] == 0.3
    print("test_report: ok")


if __name__ == "__main__":
    main()
