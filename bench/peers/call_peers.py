#!/usr/bin/env python3
"""Per-call peers on every fixture model: eager PyTorch, a CUDA-graph replay of eager,
and packages for the libtorch AOTInductor runner (bench/peers/aoti_runner).

    call_peers.py measure [--fixtures DIR] [--models a,b] [--runs 200] [--json OUT]
    call_peers.py package [--fixtures DIR] [--models a,b] --out-dir DIR [--settings et|default]
                          [--jobs 8] [--budget SECONDS]

The models are rebuilt from tools/export/export_models.py's registry (same shapes and dtypes as
tests/fixtures; the weights differ, which does not matter for speed). Every method of a program is
its own row ("encdec.encode"). Inputs are random, on the GPU, at the upper bound of dynamic
dimensions (as `aoti_cuda bench` feeds a method: its input specs' sizes); integer inputs in 0..3
(valid indices for embed, kv_cache, lm).

measure: per row, p50/p90 of a synchronized call (perf_counter around call + synchronize), for
  eager (the module's forward) and graph replay (the forward captured once into a
  torch.cuda.CUDAGraph; replay + synchronize). Also first_call_ms of eager in this process.
package: torch.export + torch._inductor.aoti_compile_and_package per row into
  OUT/<model>.<method>.pt2, one process per row (`jobs` at a time, killed when `budget` runs out),
  and OUT/index.json listing each package with the input specs aoti_runner takes
  ("float32:8x64"). --settings et (default) compiles with ExecuTorch's Inductor settings
  (max_autotune, Triton-only GEMM/conv), as the fixture programs were; default = AOTI defaults.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "export"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import export_models  # noqa: E402  (stdlib-only at import)

DTYPES = {"torch.float32": "float32", "torch.bfloat16": "bfloat16", "torch.float16": "float16",
          "torch.int64": "int64", "torch.int32": "int32", "torch.bool": "bool"}


def fixture_models(fixtures: str, only: str | None):
    """Registry models that have a runnable fixture folder."""
    names = []
    for name in sorted(os.listdir(fixtures)):
        mf = os.path.join(fixtures, name, "manifest.json")
        if name not in export_models.REGISTRY or not os.path.isfile(mf):
            continue
        with open(mf) as f:
            if json.load(f).get("expect_not_runnable"):
                continue
        names.append(name)
    if only:
        wanted = [n.strip() for n in only.split(",") if n.strip()]
        names = [n for n in names if n in wanted]
    return names


def upper_bound_inputs(method):
    """The method's example inputs, with dynamic dimensions at their bound, random, on the GPU."""
    import torch

    inputs = []
    for i, t in enumerate(method.inputs):
        shape = list(t.shape)
        if method.dynamic_shapes is not None:
            for dim, d in (method.dynamic_shapes[i] or {}).items():
                shape[dim] = int(d.max)
        if t.dtype == torch.bool:
            x = torch.rand(shape, device="cuda") > 0.5
        elif not t.dtype.is_floating_point:
            x = torch.randint(0, 4, shape, dtype=t.dtype, device="cuda")
        else:
            x = torch.randn(shape, device="cuda").to(t.dtype)
        inputs.append(x)
    return inputs


def spec(t) -> str:
    return DTYPES[str(t.dtype)] + ":" + "x".join(str(s) for s in t.shape)


def p(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q / 100 * (len(v) - 1) + 0.5))]


def time_calls(fn, runs: int, warmup: int):
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    lat = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        lat.append((time.perf_counter() - t0) * 1000)
    return {"p50_ms": p(lat, 50), "p90_ms": p(lat, 90), "min_ms": min(lat)}


def measure_row(model_name, method, runs, warmup):
    import copy

    import torch

    row = {"model": model_name, "method": method.name}
    module = copy.deepcopy(method.module).cuda().eval()
    inputs = upper_bound_inputs(method)
    row["inputs"] = [spec(t) for t in inputs]
    with torch.no_grad():
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        module(*inputs)
        torch.cuda.synchronize()
        row["eager_first_call_ms"] = (time.perf_counter() - t0) * 1000
        eager = time_calls(lambda: module(*inputs), runs, warmup)
        row.update({"eager_" + k: v for k, v in eager.items()})
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                module(*inputs)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            module(*inputs)
        graph_t = time_calls(graph.replay, runs, warmup)
        row.update({"graph_" + k: v for k, v in graph_t.items()})
    return row


def cmd_measure(args):
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.ones(1, device="cuda")
    rows = []
    for name in fixture_models(args.fixtures, args.models):
        model = export_models.REGISTRY[name].build()
        for method in model.methods:
            try:
                rows.append(measure_row(name, method, args.runs, args.warmup))
            except Exception as exc:
                rows.append({"model": name, "method": method.name, "error": f"{type(exc).__name__}: {exc}"[:300]})
            r = rows[-1]
            print(f"{name}.{method.name}: eager p50 {r.get('eager_p50_ms', float('nan')) * 1000:.1f} us, "
                  f"graph p50 {r.get('graph_p50_ms', float('nan')) * 1000:.1f} us {r.get('error', '')}", flush=True)
    result = {"peer": "pytorch_calls", "torch": torch.__version__, "device": torch.cuda.get_device_name(0),
              "runs": args.runs, "rows": rows}
    text = json.dumps(result)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    print("@@JSON " + text)
    return 0


ET_SETTINGS = {"max_autotune": True, "max_autotune_gemm_backends": "TRITON", "max_autotune_conv_backends": "TRITON",
               "emulate_precision_casts": True, "loop_ordering_after_fusion": False}


def package_one(name, method_name, out_dir, settings):
    """Child process: export and package one method; prints '@@PKG {...}'."""
    import copy

    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    model = export_models.REGISTRY[name].build()
    method = next(m for m in model.methods if m.name == method_name)
    module = copy.deepcopy(method.module).cuda().eval()
    inputs = upper_bound_inputs(method)
    t0 = time.perf_counter()
    with torch.no_grad():
        ep = torch.export.export(module, tuple(inputs), dynamic_shapes=None)
    path = os.path.join(out_dir, f"{name}.{method_name}.pt2")
    configs = dict(ET_SETTINGS) if settings == "et" else {}
    torch._inductor.aoti_compile_and_package(ep, package_path=path, inductor_configs=configs)
    rec = {"model": name, "method": method_name, "package": path, "inputs": [spec(t) for t in inputs],
           "compile_s": time.perf_counter() - t0, "settings": settings}
    print("@@PKG " + json.dumps(rec), flush=True)


def cmd_package(args):
    """Parent: one child per row, `jobs` at a time, within `budget` seconds."""
    os.makedirs(args.out_dir, exist_ok=True)
    rows = []
    for name in fixture_models(args.fixtures, args.models):
        for method in export_models.REGISTRY[name].build().methods:
            rows.append((name, method.name))
    deadline = time.time() + args.budget
    pending, running, done = list(rows), {}, []
    while pending or running:
        while pending and len(running) < args.jobs and time.time() < deadline:
            name, meth = pending.pop(0)
            log = open(os.path.join(args.out_dir, f"{name}.{meth}.log"), "w")
            cmd = [sys.executable, os.path.abspath(__file__), "_one", name, meth, args.out_dir, args.settings]
            running[(name, meth)] = (subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True), log)
        if time.time() >= deadline:
            for key, (proc, log) in running.items():
                os.killpg(proc.pid, 9)
            done += [{"model": n, "method": m, "error": "budget spent"} for (n, m) in list(running) + pending]
            pending, running = [], {}
            break
        time.sleep(0.5)
        for key in [k for k, (proc, _) in running.items() if proc.poll() is not None]:
            proc, log = running.pop(key)
            log.close()
            rec = None
            with open(log.name, errors="replace") as f:
                for line in f:
                    if line.startswith("@@PKG "):
                        rec = json.loads(line[6:])
            done.append(rec or {"model": key[0], "method": key[1], "error": f"exit {proc.returncode}, see {log.name}"})
            print(f"package {key[0]}.{key[1]}: {'ok' if rec else 'FAILED'}", flush=True)
    with open(os.path.join(args.out_dir, "index.json"), "w") as f:
        json.dump(done, f, indent=1)
    return 0


def main(argv=None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv and argv[0] == "_one":
        package_one(*argv[1:5])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("command", choices=["measure", "package"])
    ap.add_argument("--fixtures", default=os.path.join(ROOT, "tests", "fixtures"))
    ap.add_argument("--models")
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--json")
    ap.add_argument("--out-dir", default="/tmp/call_aoti")
    ap.add_argument("--settings", choices=["et", "default"], default="et")
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--budget", type=float, default=240)
    args = ap.parse_args(argv)
    return cmd_measure(args) if args.command == "measure" else cmd_package(args)


if __name__ == "__main__":
    sys.exit(main())
