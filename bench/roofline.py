"""The decode step's roofline for bench/report.py: the bytes one decode step must read, over the GPU's
streaming-read bandwidth measured in the same job (bench/read_bw.cu, step `read_bw` of bench_llm.py).

A decode step of the Llama-style model (tools/export/llm/model.py) must read, at least:
  - every linear layer's weights once: wqkv, wo, w13 (gate+up), w2 per layer, and the output head; bf16 (2 bytes
    per weight), or for the int4 exports packed int4 (half a byte) plus a bf16 (scale, zero) pair per group of 128
    input features and output feature (torchao's Int4WeightOnlyConfig, every Linear whose input width is a
    multiple of 128, the head included);
  - the RMSNorm weights (2 per layer + the final one), bf16;
  - one row of the bf16 embedding table (the token's);
  - the KV cache up to the step's position (keys and values of every layer and KV head, bf16).
Activations (a few KB per step) are left out. The step time is 1 / decode tokens/s; "% of roofline" is
(bytes / step time) / streaming bandwidth. The KV term uses the mean position of the measured steps: a prompt
of P tokens then N new tokens attends P+1 ... P+N positions.
"""

from __future__ import annotations

INT4_GROUP = 128


def _linear_bytes(k: int, n: int, quant: str) -> float:
    if quant == "int4" and k % INT4_GROUP == 0:
        return k * n / 2 + (k // INT4_GROUP) * n * 4
    return 2.0 * k * n


def step_bytes(cfg: dict, quant: str, position: float) -> dict:
    """Bytes a decode step at `position` (cache entries attended) must read; cfg as in the export manifest."""
    d, layers, heads, kv_heads, ffn, vocab = (int(cfg[k]) for k in ("dim", "n_layers", "n_heads", "n_kv_heads",
                                                                    "ffn", "vocab"))
    hd = int(cfg.get("head_dim") or d // heads)
    per_layer = (_linear_bytes(d, (heads + 2 * kv_heads) * hd, quant) + _linear_bytes(heads * hd, d, quant) +
                 _linear_bytes(d, 2 * ffn, quant) + _linear_bytes(ffn, d, quant))
    weights = layers * per_layer + _linear_bytes(d, vocab, quant)
    other = (2 * layers + 1) * d * 2 + d * 2  # norms, one embedding row
    kv = 2.0 * layers * kv_heads * hd * 2 * position
    return {"weights": weights, "norms_embedding_row": other, "kv_cache": kv, "total": weights + other + kv}


def quant_of(key: str) -> str:
    """A contender's weight format from its run name (aoti_cuda_int4, eager_int4, ...; the rest are bf16)."""
    return "int4" if "int4" in key else "bf16"


def model_cfg(res: dict) -> dict | None:
    for e in (res.get("exports") or {}).values():
        if e and isinstance(e.get("config"), dict) and "dim" in e["config"]:
            return e["config"]
    return None


def read_gbps(res: dict):
    r = (res.get("runs") or {}).get("read_bw") or {}
    v = r.get("read_gbps")
    return v if isinstance(v, (int, float)) and v > 0 else None


def annotate(rows: list, res: dict, lens: list) -> dict | None:
    """Adds step_bytes_<n>, step_ms_<n>, roofline_ms_<n> and roofline_pct_<n> to each row with a decode rate;
    returns the job's roofline facts (None without a model config or a bandwidth measurement)."""
    cfg, bw = model_cfg(res), read_gbps(res)
    if cfg is None or bw is None:
        return None
    new_tokens = int((res.get("params") or {}).get("new_tokens") or 256)
    for row in rows:
        quant = quant_of(row["key"])
        row["quant"] = quant
        for n in lens:
            tok_s = row.get(f"decode_{n}_tok_s")
            b = step_bytes(cfg, quant, n + (new_tokens + 1) / 2)
            row[f"step_bytes_{n}"] = b["total"]
            if not tok_s:
                continue
            step_s = 1.0 / tok_s
            roof_s = b["total"] / (bw * 1e9)
            row[f"step_ms_{n}"] = step_s * 1e3
            row[f"roofline_ms_{n}"] = roof_s * 1e3
            row[f"roofline_pct_{n}"] = 100.0 * roof_s / step_s
    n0 = lens[0] if lens else 128
    max_ctx = cfg.get("max_ctx")
    return {"read_gbps": bw, "read_bytes": ((res.get("runs") or {}).get("read_bw") or {}).get("bytes"),
            "new_tokens": new_tokens,
            "bytes": {q: step_bytes(cfg, q, n0 + (new_tokens + 1) / 2) for q in ("bf16", "int4")},
            "prompt_len": n0, "max_ctx": max_ctx,
            # What the exports read today: decode attends every cache position under a mask.
            "kv_cache_all_positions": step_bytes(cfg, "bf16", int(max_ctx))["kv_cache"] if max_ctx else None}


def markdown(rows: list, facts: dict | None, lens: list) -> list:
    """The '## Roofline' section (empty without facts)."""
    if not facts:
        return []
    n0 = facts["prompt_len"]
    lines = ["", "## Roofline", "",
             f"Streaming read of the same GPU, measured in the same job (`bench/read_bw.cu`, "
             f"{(facts.get('read_bytes') or 0) / 2**30:.0f} GiB read once): **{facts['read_gbps']:,.0f} GB/s**. "
             f"Bytes a decode step must read ({n0}-token prompt, mean position of the {facts['new_tokens']} "
             "decode steps): weights once (int4: packed weights + bf16 scale/zero per group of 128), RMSNorm weights, "
             "one embedding row, the KV cache up to the position; activations left out (bench/roofline.py).", ""]
    for q in ("bf16", "int4"):
        b = facts["bytes"][q]
        lines.append(f"- {q}: {b['total'] / 1e6:,.1f} MB per step (weights {b['weights'] / 1e6:,.1f} MB, KV cache "
                     f"{b['kv_cache'] / 1e6:,.1f} MB): at most {facts['read_gbps'] * 1e9 / b['total']:,.0f} tokens/s.")
    if facts.get("kv_cache_all_positions"):
        lines.append(f"- The exports measured here attend all {facts['max_ctx']} cache positions under a mask: "
                     f"{facts['kv_cache_all_positions'] / 1e6:,.1f} MB of KV cache per step instead of "
                     f"{facts['bytes']['bf16']['kv_cache'] / 1e6:,.1f} MB; the roofline counts the latter.")
    lines += ["", f"| contender | weights | MB per step ({n0}) | " + " | ".join(
        f"step ms ({n}) | roofline ms ({n}) | % of roofline ({n})" for n in lens) + " |",
              "|---|---|---:|" + "---:|---:|---:|" * len(lens)]
    for r in rows:
        if r.get("error") or not any(r.get(f"roofline_pct_{n}") for n in lens):
            continue
        cells = []
        for n in lens:
            pct = r.get(f"roofline_pct_{n}")
            cells += [f"{r[f'step_ms_{n}']:.3f}" if pct else "–", f"{r[f'roofline_ms_{n}']:.3f}" if pct else "–",
                      f"{pct:.0f} %" if pct else "–"]
        lines.append(f"| {r['label']} | {r['quant']} | {r[f'step_bytes_{n0}'] / 1e6:,.0f} | " + " | ".join(cells) + " |")
    return lines
