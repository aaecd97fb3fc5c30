#!/usr/bin/env python3
"""torch.ops.aten._weight_int4pack_mm timed exactly like bench/int4_bench.cu (same shapes, a
read of 512 MiB before each call so weights come from HBM and L2 holds no dirty lines, CUDA
events around the call alone, median of the iterations).

    python3 tools/int4/bench_torch.py OUT.json [--iters N] [--group G] [--inner-k-tiles T]
"""
import json
import sys

import torch


def main():
    args = sys.argv[1:]
    out = args[0]
    opt = {"--iters": 30, "--group": 128, "--inner-k-tiles": 8}
    for i in range(1, len(args) - 1, 2):
        opt[args[i]] = int(args[i + 1])
    iters, group, ikt = opt["--iters"], opt["--group"], opt["--inner-k-tiles"]
    dev = "cuda"
    flush = torch.ones(128 << 20, dtype=torch.int32, device=dev)  # 512 MiB
    results = []
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}; group {group}, innerKTiles {ikt}")
    for n, k in ((4096, 4096), (11008, 4096), (4096, 11008)):
        q = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, device=dev)
        w = torch.ops.aten._convert_weight_to_int4pack(q, ikt)
        sz = (torch.rand(k // group, n, 2, device=dev) * 0.01).to(torch.bfloat16)
        for m in (1, 4, 16, 64, 256, 2048):
            x = torch.randn(m, k, device=dev).to(torch.bfloat16)
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            times = []
            for i in range(-3, iters):
                flush.max()  # a read-only pass over 512 MiB
                start.record()
                torch.ops.aten._weight_int4pack_mm(x, w, group, sz)
                stop.record()
                stop.synchronize()
                if i >= 0:
                    times.append(start.elapsed_time(stop) * 1000.0)
            times.sort()
            us = times[len(times) // 2]
            nbytes = n * k / 2 + (k // group) * n * 4
            results.append({"m": m, "n": n, "k": k, "us": round(us, 3), "gbps": round(nbytes / (us * 1e-6) / 1e9, 1)})
            print(f"{m:6d} {n:6d} {k:6d} {us:10.2f} {results[-1]['gbps']:10.1f}")
    with open(out, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "group": group,
                   "inner_k_tiles": ikt, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
