#!/usr/bin/env python3
"""Merges bench/int4_bench.cu --json and tools/int4/bench_torch.py outputs (same device run)
into docs/benchmarks/int4.json and the table of docs/benchmarks/int4.md.

    python3 tools/int4/report.py OURS.json TORCH.json OUT.json   # prints the markdown table
"""
import json
import sys

HBM_GBPS = 4800.0  # H200 HBM3e peak


def main():
    ours, torch_ = (json.load(open(p)) for p in sys.argv[1:3])
    tk = {(r["m"], r["n"], r["k"]): r for r in torch_["results"]}
    rows = []
    for r in ours["results"]:
        t = tk[(r["m"], r["n"], r["k"])]
        rows.append({**{k: r[k] for k in ("m", "n", "k")}, "ours_us": r["us"], "ours_gbps": r["gbps"],
                     "torch_us": t["us"], "torch_gbps": t["gbps"], "speedup_vs_torch": round(t["us"] / r["us"], 2),
                     "ours_pct_hbm": round(100 * r["gbps"] / HBM_GBPS, 1)})
    out = {"device": ours["device"], "torch": torch_.get("torch"), "group": ours["group"],
           "inner_k_tiles": ours["inner_k_tiles"], "hbm_peak_gbps": HBM_GBPS, "results": rows}
    with open(sys.argv[3], "w") as f:
        json.dump(out, f, indent=1)
    print("| M | N × K | ours µs | ours GB/s (% of HBM) | torch µs | torch GB/s | torch µs / ours µs |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['m']} | {r['n']} × {r['k']} | {r['ours_us']:.2f} | {r['ours_gbps']:.0f} ({r['ours_pct_hbm']:.0f}%) "
              f"| {r['torch_us']:.2f} | {r['torch_gbps']:.0f} | {r['speedup_vs_torch']:.2f} |")


if __name__ == "__main__":
    main()
