#!/usr/bin/env python3
"""Merges bench/int4_bench.cu --json and tools/int4/bench_torch.py outputs (same device run)
into docs/benchmarks/int4.json and the tables of docs/benchmarks/int4.md.

    python3 tools/int4/report.py OURS.json TORCH.json OUT.json   # prints the markdown tables

"% of read" divides by the streaming-read bandwidth int4_bench measured in the same job
(ours.json's read_gbps), not by a datasheet peak.
"""
import json
import sys


def pct(gbps, read):
    return round(100.0 * gbps / read, 1) if gbps and read else None


def merge(ours, torch_):
    read = ours.get("read_gbps")
    tk = {(r["m"], r["n"], r["k"]): r for r in torch_["results"]}
    floors = {(r["n"], r["k"]): r for r in ours["results"] if "floor_read_us" in r}
    rows = []
    for r in ours["results"]:
        t = tk.get((r["m"], r["n"], r["k"]))
        if t is None:
            continue
        row = {**{k: r[k] for k in ("m", "n", "k")}, "ours_us": r["us"], "ours_gbps": r["gbps"],
               "torch_us": t["us"], "torch_gbps": t["gbps"], "speedup_vs_torch": round(t["us"] / r["us"], 2),
               "ours_pct_read": pct(r["gbps"], read)}
        if "stream_us" in r and "stream_us" in t:
            row.update({"ours_stream_us": r["stream_us"], "ours_stream_gbps": r["stream_gbps"],
                        "ours_stream_pct_read": pct(r["stream_gbps"], read),
                        "torch_stream_us": t["stream_us"], "torch_stream_gbps": t["stream_gbps"],
                        "torch_stream_pct_read": pct(t["stream_gbps"], read),
                        "stream_speedup_vs_torch": round(t["stream_us"] / r["stream_us"], 2)})
            f = floors.get((r["n"], r["k"]))
            if f:
                row.update({"floor_empty_us": f["floor_empty_us"], "floor_read_us": f["floor_read_us"],
                            "ours_over_read_floor": round(r["stream_us"] / f["floor_read_us"], 2)})
        rows.append(row)
    return {"device": ours["device"], "torch": torch_.get("torch"), "group": ours["group"],
            "inner_k_tiles": ours["inner_k_tiles"], "read_gbps": read, "read_bytes": ours.get("read_bytes"),
            "results": rows}


def tables(out):
    lines = [f"Streaming read (same job, {out['read_bytes'] / 2**30:.0f} GiB): **{out['read_gbps']:.0f} GB/s**.", "",
             "Back-to-back calls (CUDA graph over distinct weight copies; M <= 16):", "",
             "| M | N × K | ours µs | ours GB/s (% of read) | torch µs | torch GB/s (% of read) | torch µs / ours µs "
             "| read kernel, same bytes, µs | empty kernel µs |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in out["results"]:
        if "ours_stream_us" in r:
            fr = f"{r['floor_read_us']:.2f}" if "floor_read_us" in r else "–"
            fe = f"{r['floor_empty_us']:.2f}" if "floor_empty_us" in r else "–"
            lines.append(f"| {r['m']} | {r['n']} × {r['k']} | {r['ours_stream_us']:.2f} | {r['ours_stream_gbps']:.0f} "
                         f"({r['ours_stream_pct_read']:.0f}%) | {r['torch_stream_us']:.2f} | {r['torch_stream_gbps']:.0f} "
                         f"({r['torch_stream_pct_read']:.0f}%) | {r['stream_speedup_vs_torch']:.2f} | {fr} | {fe} |")
    lines += ["", "One call alone (after an L2 flush, launch latency included):", "",
              "| M | N × K | ours µs | ours GB/s (% of read) | torch µs | torch GB/s | torch µs / ours µs |",
              "|---:|---|---:|---:|---:|---:|---:|"]
    for r in out["results"]:
        lines.append(f"| {r['m']} | {r['n']} × {r['k']} | {r['ours_us']:.2f} | {r['ours_gbps']:.0f} "
                     f"({r['ours_pct_read']:.0f}%) | {r['torch_us']:.2f} | {r['torch_gbps']:.0f} | "
                     f"{r['speedup_vs_torch']:.2f} |")
    return "\n".join(lines)


def main():
    ours, torch_ = (json.load(open(p)) for p in sys.argv[1:3])
    out = merge(ours, torch_)
    with open(sys.argv[3], "w") as f:
        json.dump(out, f, indent=1)
    print(tables(out))


if __name__ == "__main__":
    main()
