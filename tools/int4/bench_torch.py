#!/usr/bin/env python3
"""torch.ops.aten._weight_int4pack_mm timed exactly like bench/int4_bench.cu (same shapes and row
counts, a read of 512 MiB before each timing so weights come from HBM and L2 holds no dirty lines,
CUDA events, median of the iterations):

  "us"         one call alone after the flush;
  "stream_us"  M <= 16: R back-to-back calls over R distinct copies of the weights (R x bytes >= 256
               MiB), captured in a CUDA graph and replayed after the flush; time / R.

    python3 tools/int4/bench_torch.py OUT.json [--iters N] [--group G] [--inner-k-tiles T]
                                      [--shapes NxK,...] [--m M,...] [--no-stream]
"""
import json
import sys

import torch

SHAPES = "3072x2048,2048x2048,11264x2048,2048x5632,32000x2048,4096x4096,11008x4096,4096x11008"
MS = "1,2,4,8,16,64,256,2048"


def parse(args):
    opt = {"--iters": "30", "--group": "128", "--inner-k-tiles": "8", "--shapes": SHAPES, "--m": MS}
    stream = True
    i = 1
    while i < len(args):
        if args[i] == "--no-stream":
            stream = False
            i += 1
            continue
        if args[i] not in opt or i + 1 >= len(args):
            sys.exit(f"bench_torch.py: unknown or incomplete option {args[i]!r}")
        opt[args[i]] = args[i + 1]
        i += 2
    shapes = [tuple(int(v) for v in s.split("x")) for s in opt["--shapes"].split(",")]
    ms = [int(v) for v in opt["--m"].split(",")]
    return int(opt["--iters"]), int(opt["--group"]), int(opt["--inner-k-tiles"]), shapes, ms, stream


def timed(fn, flush, iters, warmup=3, sync=False):
    """sync=False (one call, as int4_bench's measure()): the start event is queued behind the flush, so the
    host's dispatch of the call overlaps the flush, as it does for ours; sync=True (graph replays, as
    measure_stream()): the GPU is idle when the replay is submitted."""
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for i in range(-warmup, iters):
        flush.max()  # a read-only pass over 512 MiB
        if sync:
            torch.cuda.synchronize()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        if i >= 0:
            times.append(start.elapsed_time(stop) * 1000.0)
    times.sort()
    return times[len(times) // 2]


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    out = args[0]
    iters, group, ikt, shapes, ms, stream = parse(args)
    dev = "cuda"
    flush = torch.ones(128 << 20, dtype=torch.int32, device=dev)  # 512 MiB
    results = []
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}; group {group}, innerKTiles {ikt}")
    print(f"{'M':>6} {'N':>6} {'K':>6} {'us':>10} {'GB/s':>8} {'stream us':>10} {'GB/s':>8}")
    for n, k in shapes:
        q = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, device=dev)
        w = torch.ops.aten._convert_weight_to_int4pack(q, ikt)
        sz = (torch.rand(k // group, n, 2, device=dev) * 0.01).to(torch.bfloat16)
        nbytes = n * k / 2 + (k // group) * n * 4
        copies = min(4096, max(8, int((256 << 20) // nbytes) + 1))
        ws = szs = None
        for m in ms:
            x = torch.randn(m, k, device=dev).to(torch.bfloat16)
            us = timed(lambda: torch.ops.aten._weight_int4pack_mm(x, w, group, sz), flush, iters)
            row = {"m": m, "n": n, "k": k, "us": round(us, 3), "gbps": round(nbytes / (us * 1e-6) / 1e9, 1)}
            if stream and m <= 16:
                if ws is None:
                    ws = [w.clone() for _ in range(copies)]
                    szs = [sz.clone() for _ in range(copies)]
                s = torch.cuda.Stream()
                with torch.cuda.stream(s):
                    for r in range(2):
                        torch.ops.aten._weight_int4pack_mm(x, ws[r], group, szs[r])
                torch.cuda.synchronize()
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    for r in range(copies):
                        torch.ops.aten._weight_int4pack_mm(x, ws[r], group, szs[r])
                per = timed(graph.replay, flush, 7, warmup=1, sync=True) / copies
                row["stream_us"] = round(per, 3)
                row["stream_gbps"] = round(nbytes / (per * 1e-6) / 1e9, 1)
                del graph
            results.append(row)
            print(f"{m:6d} {n:6d} {k:6d} {us:10.2f} {row['gbps']:8.1f} {row.get('stream_us', -1):10.2f} "
                  f"{row.get('stream_gbps', -1):8.1f}", flush=True)
        del ws, szs
        torch.cuda.empty_cache()
    with open(out, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "group": group,
                   "inner_k_tiles": ikt, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
