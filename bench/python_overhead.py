#!/usr/bin/env python3
"""What the Python binding adds to a call: ``m.forward(x)`` against the C++ ``Module::execute`` it wraps,
in one process, on the same torch CUDA tensors with the same options (torch's current stream, CUDA graphs
as loaded), and the same for bound outputs (``m.forward(x, out=y)`` against ``execute_into``).

    python3 bench/python_overhead.py [--pte tests/fixtures/mlp/mlp.pte] [--runs 3000] [--no-graphs]
                                     [--json FILE] [--check]

Each timed call returns once its work is queued (the stream is synchronized after it, outside the timed
part), so the numbers are the host-side cost of a call with an idle GPU. The C++ side is timed in C++
(``Module._bench``); the two sides alternate in blocks so that drift affects both. Targets: forward p50
<= C++ execute p50 + 5 us; bound outputs p50 <= C++ execute_into p50 + 3 us. Exit status: 0 (also when
a target is missed, unless --check), 1 with --check and a target missed, 3 when it cannot run here.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_US = {"forward": 5.0, "bound": 3.0}


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def python_times(m, x, out, sync, runs: int) -> list[float]:
    """Per-call nanoseconds of m.forward(x) (out=None) or m.forward(x, out=out), timed inline (no wrapper)."""
    times = []
    clock = time.perf_counter_ns
    forward = m.forward
    if out is None:
        for _ in range(runs):
            t0 = clock()
            forward(x)
            t1 = clock()
            sync()
            times.append(float(t1 - t0))
    else:
        for _ in range(runs):
            t0 = clock()
            forward(x, out=out)
            t1 = clock()
            sync()
            times.append(float(t1 - t0))
    return times


def measure(m, x, out, runs: int, blocks: int) -> dict:
    import torch

    sync = torch.cuda.synchronize
    result = {}
    for name, kwargs in (("forward", {}), ("bound", {"out": out})):
        py, cpp = [], []
        bound = kwargs.get("out")
        python_times(m, x, bound, sync, 200)  # warm-up (graph capture, caches)
        m._bench("forward", [x], runs=200, warmup=0, **kwargs)
        gc.disable()
        try:
            for _ in range(blocks):
                py += python_times(m, x, bound, sync, runs // blocks)
                cpp += m._bench("forward", [x], runs=runs // blocks, warmup=0, **kwargs)
        finally:
            gc.enable()
        result[name] = {
            "cpp_p50_us": percentile(cpp, 0.5) / 1e3, "cpp_p90_us": percentile(cpp, 0.9) / 1e3,
            "py_p50_us": percentile(py, 0.5) / 1e3, "py_p90_us": percentile(py, 0.9) / 1e3,
            "py_mean_us": statistics.fmean(py) / 1e3, "runs": len(py),
        }
        r = result[name]
        r["overhead_p50_us"] = r["py_p50_us"] - r["cpp_p50_us"]
        r["target_us"] = TARGET_US[name]
        r["target_met"] = r["overhead_p50_us"] <= TARGET_US[name]
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pte", default=str(ROOT / "tests/fixtures/mlp/mlp.pte"))
    ap.add_argument("--runs", type=int, default=3000)
    ap.add_argument("--blocks", type=int, default=5)
    ap.add_argument("--no-graphs", action="store_true", help="plain calls (default: CUDA graphs)")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("cannot run here: torch is not installed", file=sys.stderr)
        return 3
    import aoti_cuda

    reason = aoti_cuda.gpu_unavailable_reason() or ("" if torch.cuda.is_available() else "torch sees no GPU")
    if reason:
        print(f"cannot run here: {reason}", file=sys.stderr)
        return 3
    pte = Path(args.pte)
    manifest = json.loads((pte.parent / "manifest.json").read_text())
    spec = manifest["methods"]["forward"]
    inputs = []
    for s in spec["inputs"]:
        raw = bytearray((pte.parent / s["file"]).read_bytes())
        inputs.append(torch.frombuffer(raw, dtype=getattr(torch, s["dtype"])).reshape(s["shape"]).cuda())
    if len(inputs) != 1:
        print("this benchmark takes a one-input forward (e.g. the mlp fixture)", file=sys.stderr)
        return 2
    x = inputs[0]
    m = aoti_cuda.Module(pte, cuda_graphs=not args.no_graphs)
    outs = [o.clone() for o in m.forward(x)]
    out = outs if len(outs) > 1 else outs[0]
    result = {"pte": str(pte), "graphs": not args.no_graphs, "torch": torch.__version__,
              "device": torch.cuda.get_device_name(0), **measure(m, x, out, args.runs, args.blocks)}
    result["graph_status"] = repr(m.graph_status("forward"))
    result["torch_route"] = aoti_cuda._ext._torch_route()  # "exchange": DLPack's C table; "python": torch's DLPack calls
    m.close()

    print(f"{pte.name}, CUDA graphs {'on' if result['graphs'] else 'off'}, {result['device']}, torch {result['torch']}, "
          f"torch tensors through the {result['torch_route']} route")
    print(f"{'call':<28}{'C++ p50':>10}{'Python p50':>12}{'overhead':>10}{'target':>9}")
    ok = True
    for name, label in (("forward", "m.forward(x)"), ("bound", "m.forward(x, out=y)")):
        r = result[name]
        ok &= r["target_met"]
        print(f"{label:<28}{r['cpp_p50_us']:>8.2f}us{r['py_p50_us']:>10.2f}us{r['overhead_p50_us']:>8.2f}us"
              f"{'<= ' + format(r['target_us'], 'g') + 'us':>9}  {'met' if r['target_met'] else 'MISSED'}")
    print(json.dumps(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    return 1 if (args.check and not ok) else 0


if __name__ == "__main__":
    sys.exit(main())
