#!/usr/bin/env python3
"""CPU checks of the benchmark LLM (model.py); needs torch, exits 0 with SKIPPED without it.

    python3 tools/export/llm/test_model.py      # prints "llm model: N passed, M failed"

- prefill of a prompt, then decode of the next token == prefill of the longer prompt (cache
  positions, rotary embeddings, the decode mask and the grouped-query folding agree);
- decode step by step from a 2-token prefill reaches the same logits as one prefill;
- the cache matters (decode on an empty cache differs), and prefill resets earlier state;
- weights are the same for the same seed and differ for another; num_params() counts them;
- the exporter's eager reference records eager's highest logits at each step (generate --expect-top);
- torch.export of both methods succeeds with T dynamic (what export_llm.py runs before lowering);
- aoti_cuda's decode attention operator (decode_attention_op.py, --sdpa decode-op): against a float64 softmax
  reference with grouped-query heads and one position per sequence, decode through it gives the masked model's
  logits, and torch.export keeps it as one opaque node (no masked SDPA left in decode);
- aoti_cuda's fused linear operators (fused_linear_op.py): the bf16 form's eager arithmetic is the unfused ops' bit
  for bit (RMSNorm prologue; projection; SwiGLU and residual epilogue), decode through it gives the qkv-form decode's
  bits in bf16, and torch.export keeps four per layer plus the head, with no RMSNorm, SiLU or matmul left; the int4
  form (torchao's Int4TilePackedTo4dTensor weights, built by hand: no GPU needed to export) likewise, taking the
  weight's parts; its refusals. With CUDA and torchao, also decode of a torchao-quantized model through it == the
  quantized model's qkv-form decode, bit for bit.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def check_decode_op(check, cfg) -> None:
    import torch

    import decode_attention_op  # noqa: F401
    from export_llm import export_methods
    from model import build_model, prompt_tokens, use_decode_attention_op

    op = torch.ops.aoti_cuda.aoti_cuda_decode_attention
    g = torch.Generator().manual_seed(3)
    b, hkv, group, length, d = 2, 2, 4, 40, 16
    q = torch.randn(b, hkv * group, 1, d, generator=g, dtype=torch.float64)
    k = torch.randn(b, hkv, length, d, generator=g, dtype=torch.float64)
    v = torch.randn(b, hkv, length, d, generator=g, dtype=torch.float64)
    worst = 0.0
    for pos in ([0], [17], [39], [5, 33]):
        out = op(q, k, v, torch.tensor(pos), 0.3)
        for bi in range(b):
            n = pos[0 if len(pos) == 1 else bi] + 1
            for h in range(hkv * group):
                kv = h // group
                p = torch.softmax(0.3 * (k[bi, kv, :n] @ q[bi, h, 0]), dim=0)
                worst = max(worst, float((p @ v[bi, kv, :n] - out[bi, h, 0]).abs().max()))
    check(f"decode op == float64 softmax over positions 0..pos (GQA, per-sequence pos; max err {worst:.1e})",
          worst < 1e-12)
    check("decode op output is contiguous [B, H, 1, D]",
          out.shape == (b, hkv * group, 1, d) and out.is_contiguous())
    try:
        op(q.reshape(b, hkv * group // 2, 2, d), k, v, torch.tensor([3]), 0.3)
        check("decode op refuses more than one query row", False)
    except Exception as e:  # noqa: BLE001  (the custom-op wrapper may re-raise it as another type)
        check("decode op refuses more than one query row", "must be [B, H, 1, D]" in str(e))

    m = build_model(cfg, device="cpu", dtype=torch.float32)
    toks = prompt_tokens(12, cfg.vocab)
    with torch.no_grad():
        m.prefill(toks[:, :11])
        masked, _ = m.decode(toks[:, 11:12], torch.tensor([11]))
        use_decode_attention_op(m)
        m.prefill(toks[:, :11])
        through_op, _ = m.decode(toks[:, 11:12], torch.tensor([11]))
        use_decode_attention_op(m, False)
    check("decode through the op == masked decode", torch.allclose(masked, through_op, atol=1e-5, rtol=1e-5))

    bf = build_model(cfg, device="cpu")
    use_decode_attention_op(bf)
    progs = export_methods(bf, cfg, 16, "cpu")
    dec = [str(n.target) for n in progs["decode"].graph.nodes if n.op == "call_function"]
    pre = [str(n.target) for n in progs["prefill"].graph.nodes if n.op == "call_function"]
    check("export with the op: one call per layer in decode, no SDPA left there",
          dec.count("aoti_cuda.aoti_cuda_decode_attention.default") == cfg.n_layers
          and "aten.scaled_dot_product_attention.default" not in dec)
    check("export with the op: prefill keeps its SDPA", "aten.scaled_dot_product_attention.default" in pre)

    # The update form: the step's rows stored at each batch's position (not outside [0, L)), then the same attention.
    upd = torch.ops.aoti_cuda.aoti_cuda_decode_attention_update
    k_new = torch.randn(b, hkv, 1, d, generator=g, dtype=torch.float64)
    v_new = torch.randn(b, hkv, 1, d, generator=g, dtype=torch.float64)
    kc, vc = k.clone(), v.clone()
    out = upd(q, k_new, v_new, kc, vc, torch.tensor([7, 39]), 0.3)
    ke, ve = k.clone(), v.clone()
    ke[0, :, 7], ve[0, :, 7], ke[1, :, 39], ve[1, :, 39] = k_new[0, :, 0], v_new[0, :, 0], k_new[1, :, 0], v_new[1, :, 0]
    check("update op: stores the step's rows at each sequence's position, nothing else",
          torch.equal(kc, ke) and torch.equal(vc, ve))
    check("update op: then attends over the updated caches",
          torch.allclose(out, op(q, ke, ve, torch.tensor([7, 39]), 0.3), atol=1e-12))
    kc, vc = k.clone(), v.clone()
    upd(q, k_new, v_new, kc, vc, torch.tensor([40]), 0.3)
    check("update op: a position past the cache stores nothing", torch.equal(kc, k) and torch.equal(vc, v))
    with torch.no_grad():
        use_decode_attention_op(m, form="update")
        m.prefill(toks[:, :11])
        through_update, _ = m.decode(toks[:, 11:12], torch.tensor([11]))
        use_decode_attention_op(m, False)
    check("decode through the update op == masked decode",
          torch.allclose(masked, through_update, atol=1e-5, rtol=1e-5))
    bu = build_model(cfg, device="cpu")
    use_decode_attention_op(bu, form="update")
    progs = export_methods(bu, cfg, 16, "cpu")
    dec = [str(n.target) for n in progs["decode"].graph.nodes if n.op == "call_function"]
    check("export with the update op: one call per layer in decode, no index_copy and no SDPA left there",
          dec.count("aoti_cuda.aoti_cuda_decode_attention_update.default") == cfg.n_layers
          and not any("index_copy" in t for t in dec) and "aten.scaled_dot_product_attention.default" not in dec)

    # The qkv form: the projection's output and the whole rotary tables; the operator rotates q and k itself.
    import decode_attention_op
    from model import apply_rope

    h = hkv * group  # query heads
    angles = torch.arange(50, dtype=torch.float64)[:, None] / 10000.0 ** (torch.arange(d // 2) / (d // 2))[None, :]
    cos_t, sin_t = torch.cos(angles).float(), torch.sin(angles).float()  # 50 rows: more than the 40-row cache
    qkv_op = torch.ops.aoti_cuda.aoti_cuda_decode_attention_qkv
    width = (h + 2 * hkv) * d
    qkv = torch.randn(b, 1, width, generator=g, dtype=torch.float64).to(torch.bfloat16)
    kb, vb = k.to(torch.bfloat16), v.to(torch.bfloat16)
    pos2 = torch.tensor([7, 39])
    kc, vc = kb.clone(), vb.clone()
    out = qkv_op(qkv, cos_t, sin_t, kc, vc, pos2, h, 0.3)
    qr, kr = [], []
    for i, p in enumerate((7, 39)):  # the model's apply_rope, one sequence at a time with its own row
        rows = qkv[i : i + 1]
        qr.append(apply_rope(rows[..., : h * d].reshape(1, 1, h, d), cos_t[p : p + 1], sin_t[p : p + 1]))
        kr.append(apply_rope(rows[..., h * d : (h + hkv) * d].reshape(1, 1, hkv, d), cos_t[p : p + 1], sin_t[p : p + 1]))
    qr, kr = torch.cat(qr).transpose(1, 2), torch.cat(kr).transpose(1, 2)
    vr = qkv[..., (h + hkv) * d :].reshape(b, 1, hkv, d).transpose(1, 2)
    ke, ve = kb.clone(), vb.clone()
    upd(qr, kr, vr, ke, ve, pos2, 0.3)
    check("qkv op: the model's rotary embeddings at each sequence's position, stored rows bit for bit",
          torch.equal(kc, ke) and torch.equal(vc, ve))
    check("qkv op: the same attention as the update op on the rotated rows",
          torch.equal(out, op(qr, ke, ve, pos2, 0.3)))
    kc, vc = kb[:1].clone(), vb[:1].clone()
    qkv_op(qkv[:1], cos_t, sin_t, kc, vc, torch.tensor([10**6]), h, 0.3)
    check("qkv op: a position past the tables rotates with their last row and stores nothing",
          torch.equal(kc, kb[:1]) and torch.equal(vc, vb[:1]))
    try:
        qkv_op(qkv[..., :-d], cos_t, sin_t, kb.clone(), vb.clone(), pos2, h, 0.3)
        check("qkv op: a qkv of the wrong width is refused", False)
    except ValueError as e:
        check("qkv op: a qkv of the wrong width is refused, naming the width it needs", str(width) in str(e))
    with torch.no_grad():
        use_decode_attention_op(m, form="qkv")
        m.prefill(toks[:, :11])
        through_qkv, _ = m.decode(toks[:, 11:12], torch.tensor([11]))
        use_decode_attention_op(m, False)
    check("decode through the qkv op == masked decode", torch.allclose(masked, through_qkv, atol=1e-5, rtol=1e-5))
    bq = build_model(cfg, device="cpu")
    use_decode_attention_op(bq, form="qkv")
    progs = export_methods(bq, cfg, 16, "cpu")
    dec = [str(n.target) for n in progs["decode"].graph.nodes if n.op == "call_function"]
    check("export with the qkv op: one call per layer in decode; no index_copy, SDPA, cat or index_select left there",
          dec.count("aoti_cuda.aoti_cuda_decode_attention_qkv.default") == cfg.n_layers
          and not any("index_copy" in t or "index_select" in t or "aten.cat" in t for t in dec)
          and "aten.scaled_dot_product_attention.default" not in dec)
    try:
        use_decode_attention_op(bq, form="fused")
        check("use_decode_attention_op: an unknown form is refused", False)
    except ValueError:
        check("use_decode_attention_op: an unknown form is refused", True)
    assert decode_attention_op.SHIM_OF_CHOICE["decode-op-qkv"] == decode_attention_op.QKV_SHIM


def check_fused_linear(check, cfg) -> None:
    """fused_linear_op.py: the operators' eager arithmetic is the model's, so decode through them gives the unfused
    decode's bits in bf16; their refusals; what torch.export keeps of a decode step."""
    import torch
    import torch.nn.functional as F

    import fused_linear_op
    from export_llm import export_methods
    from model import build_model, prompt_tokens, use_decode_attention_op, use_fused_linear

    op = torch.ops.aoti_cuda.aoti_cuda_fused_linear
    g = torch.Generator().manual_seed(5)
    x = torch.randn(1, 1, 64, generator=g).bfloat16()
    norm = (1 + 0.1 * torch.randn(64, generator=g)).bfloat16()
    w = torch.randn(96, 64, generator=g).bfloat16()
    r = torch.randn(1, 1, 48, generator=g).bfloat16()
    y = F.linear(fused_linear_op.rms_norm(x, norm, 1e-5), w)
    check("fused linear: RMSNorm, projection, SwiGLU of its halves, residual == the unfused ops bit for bit",
          torch.equal(op(x, norm, 1e-5, True, w, r), r + F.silu(y[..., :48]) * y[..., 48:]))
    check("fused linear: without SwiGLU, [..., N] (projection + residual)",
          torch.equal(op(x, None, 0.0, False, w, None), F.linear(x, w)))
    fake = torch.library.opcheck(op, (x, norm, 1e-5, True, w, r), test_utils=("test_schema", "test_faketensor"))
    check("fused linear: the fake implementation's [..., N/2] with SwiGLU agrees with eager (opcheck)",
          all(v == "SUCCESS" for v in fake.values()))
    try:
        op(x, None, 0.0, False, w[:, :32], None)
        check("fused linear: a weight of the wrong width is refused", False)
    except ValueError as e:
        check("fused linear: a weight of the wrong width is refused, naming the width", "32 input features" in str(e))
    try:
        op(x, None, 0.0, True, w[:95], None)
        check("fused linear: SwiGLU of an odd number of outputs is refused", False)
    except ValueError as e:
        check("fused linear: SwiGLU of an odd number of outputs is refused", "even" in str(e))

    m = build_model(cfg, device="cpu")  # bf16, as exported
    toks = prompt_tokens(12, cfg.vocab)
    use_decode_attention_op(m, form="qkv")
    with torch.no_grad():
        m.prefill(toks[:, :11])
        plain, _ = m.decode(toks[:, 11:12], torch.tensor([11]))
        use_fused_linear(m)
        m.prefill(toks[:, :11])
        fused, _ = m.decode(toks[:, 11:12], torch.tensor([11]))
        use_fused_linear(m, False)
    check("decode through the fused linear op == the qkv-form decode, bit for bit (bf16)", torch.equal(plain, fused))
    use_decode_attention_op(m, False)
    try:
        use_fused_linear(m)
        check("use_fused_linear needs the qkv form", False)
    except ValueError:
        check("use_fused_linear needs the qkv form", True)
    use_decode_attention_op(m, form="qkv")
    use_fused_linear(m)
    progs = export_methods(m, cfg, 16, "cpu")
    dec = [str(n.target) for n in progs["decode"].graph.nodes if n.op == "call_function"]
    linears = dec.count("aoti_cuda.aoti_cuda_fused_linear.default")
    check(f"export with the fused linear op: 4 per layer + the head ({linears}); no RMSNorm, SiLU or matmul left",
          linears == 4 * cfg.n_layers + 1 and not any(t.startswith(UNFUSED) for t in dec))
    from export_llm import fused_linear_shim

    check("export_llm expects the int4 form's shim with --quant int4, the bf16 form's otherwise",
          fused_linear_shim("int4") == fused_linear_op.INT4_SHIM and fused_linear_shim("bf16") == fused_linear_op.SHIM
          and fused_linear_op.INT4_SHIM == "aoti_torch_cuda_aoti_cuda_fused_linear_int4")
    check_fused_linear_int4(check, cfg)


def check_argmax_op(check, cfg) -> None:
    """aoti_cuda::aoti_cuda_argmax: torch.argmax's indices (ties to the first, NaN first) in every dtype, its fake
    implementation, its refusals, and a decode step through it: the same token, and exported as the op."""
    import torch

    import argmax_op
    from export_llm import export_methods
    from model import build_model, prompt_tokens, use_argmax_op, use_decode_attention_op, use_fused_linear

    op = torch.ops.aoti_cuda.aoti_cuda_argmax
    rows = torch.tensor([[1.0, 3.0, 3.0, -2.0], [float("nan"), 5.0, float("nan"), 9.0],
                         [-float("inf")] * 4, [0.5, 0.25, 0.5, 0.5]])
    ok = True
    for dtype in argmax_op.DTYPES:
        got = op(rows.to(dtype))
        ok = ok and got.dtype == torch.int64 and got.shape == (4, 1) and got.flatten().tolist() == [1, 0, 0, 0]
    check("argmax op: torch.argmax's indices, keepdim, int64 (ties to the first, NaN above every number)", ok)
    fake = torch.library.opcheck(op, (torch.randn(2, 3, 7).bfloat16(),), test_utils=("test_schema", "test_faketensor"))
    check("argmax op: the fake implementation's [..., 1] int64 agrees with eager (opcheck)",
          all(v == "SUCCESS" for v in fake.values()))
    for name, x, needle in (("an int64 x", torch.zeros(2, 3, dtype=torch.int64), "bfloat16, float16 or float32"),
                            ("an empty last dimension", torch.zeros(2, 0), "non-empty last dimension")):
        try:
            op(x)
            check(f"argmax op: {name} is refused", False)
        except ValueError as e:
            check(f"argmax op: {name} is refused, saying why", needle in str(e))

    m = build_model(cfg, device="cpu")  # bf16, as exported
    toks = prompt_tokens(12, cfg.vocab)
    use_decode_attention_op(m, form="qkv")
    use_fused_linear(m)
    with torch.no_grad():
        m.prefill(toks[:, :11])
        logits, plain = m.decode(toks[:, 11:12], torch.tensor([11]))
        use_argmax_op(m)
        m.prefill(toks[:, :11])
        logits_op, token = m.decode(toks[:, 11:12], torch.tensor([11]))
    check("decode through the argmax op: the same logits and token as torch.argmax",
          torch.equal(logits, logits_op) and torch.equal(plain, token) and token.dtype == torch.int64)
    progs = export_methods(m, cfg, 16, "cpu")
    dec = [str(n.target) for n in progs["decode"].graph.nodes if n.op == "call_function"]
    pre = [str(n.target) for n in progs["prefill"].graph.nodes if n.op == "call_function"]
    check("export with the argmax op: decode calls it once and no aten argmax; prefill keeps aten's",
          dec.count("aoti_cuda.aoti_cuda_argmax.default") == 1 and "aten.argmax.default" not in dec
          and "aten.argmax.default" in pre)
    from export_llm import decode_op_shims

    check("export_llm maps the argmax op to its shim declaration",
          decode_op_shims().get(op.default) == [argmax_op.SHIM_DECLARATION]
          and argmax_op.SHIM == "aoti_torch_cuda_aoti_cuda_argmax")


# What a decode step through the fused linear operators must not have left.
UNFUSED = ("aten.rsqrt", "aten.silu", "aten.mm", "aten.linear", "aten.add", "aten.mul", "aten._weight_int4pack_mm")


def int4_weight(torch, n: int, k: int, group: int = 32, device="cpu"):
    """An Int4TilePackedTo4dTensor [n, k] of the shapes torchao packs (qdata [n_padded / 8, K_padded / 128, 32, 4]
    int32, scale_and_zero [K_padded / group, n_padded, 2] bf16; K padded to 1024, n to 8), zeros: its contents do not
    matter to torch.export, and torchao's own packing needs a GPU."""
    from torchao.quantization.quantize_.workflows.int4.int4_tile_packed_to_4d_tensor import Int4TilePackedTo4dTensor

    k_padded, n_padded = -(-k // 1024) * 1024, -(-n // 8) * 8
    qdata = torch.zeros(n_padded // 8, k_padded // 128, 32, 4, dtype=torch.int32, device=device)
    scale_and_zero = torch.zeros(k_padded // group, n_padded, 2, dtype=torch.bfloat16, device=device)
    return Int4TilePackedTo4dTensor(qdata, scale_and_zero, [1, group], torch.Size([n, k]))


def check_fused_linear_int4(check, cfg) -> None:
    """The int4 form: its refusals (before any int4 arithmetic, so on the CPU), and what torch.export keeps of a
    decode step whose Linears hold torchao's int4 weights; with CUDA, decode through it against the quantized model."""
    import torch

    import fused_linear_op
    from export_llm import export_methods
    from model import build_model, is_int4_tile_packed, prompt_tokens, use_decode_attention_op, use_fused_linear

    try:
        import torchao  # noqa: F401
    except ImportError:
        print("  (int4 fused linear checks skipped: torchao is not installed)")
        return
    op = torch.ops.aoti_cuda.aoti_cuda_fused_linear_int4
    w = int4_weight(torch, 48, 64)
    x = torch.zeros(1, 1, 64, dtype=torch.bfloat16)
    for name, args, needle in (
            ("SwiGLU with n not a multiple of 32", (x, None, 0.0, True, w.qdata, w.scale_and_zero, 32, 48, None),
             "multiple of 32"),
            ("an x whose K is not the packed weight's", (torch.zeros(1, 1, 1100, dtype=torch.bfloat16), None, 0.0,
                                                         False, w.qdata, w.scale_and_zero, 32, 48, None), "qdata"),
            ("a norm weight of another length", (x, torch.ones(63, dtype=torch.bfloat16), 1e-5, False, w.qdata,
                                                 w.scale_and_zero, 32, 48, None), "norm_weight"),
            ("n past the packed rows", (x, None, 0.0, False, w.qdata, w.scale_and_zero, 32, 56, None), "1..48"),
            ("a float32 x", (x.float(), None, 0.0, False, w.qdata, w.scale_and_zero, 32, 48, None), "bfloat16")):
        try:
            op(*args)
            check(f"int4 fused linear: {name} is refused", False)
        except ValueError as e:
            check(f"int4 fused linear: {name} is refused", needle in str(e))

    m = build_model(cfg, device="cpu")
    for module in m.modules():
        if isinstance(module, torch.nn.Linear):
            module.weight = torch.nn.Parameter(int4_weight(torch, *module.weight.shape), requires_grad=False)
    use_decode_attention_op(m, form="qkv")
    use_fused_linear(m)
    progs = export_methods(m, cfg, 16, "cpu")
    dec = [str(n.target) for n in progs["decode"].graph.nodes if n.op == "call_function"]
    linears = dec.count("aoti_cuda.aoti_cuda_fused_linear_int4.default")
    check(f"export with int4 weights: the int4 fused linear op 4 per layer + the head ({linears}); no bf16 one, no "
          "RMSNorm, SiLU or matmul left",
          linears == 4 * cfg.n_layers + 1 and "aoti_cuda.aoti_cuda_fused_linear.default" not in dec
          and not any(t.startswith(UNFUSED) for t in dec))
    check("export with int4 weights: the state dict keeps torchao's weights",
          type(progs["decode"].state_dict["model.output.weight"]).__name__ == "Int4TilePackedTo4dTensor")

    if not torch.cuda.is_available():
        print("  (int4 fused linear against torchao's quantized model skipped: no CUDA)")
        return
    from dataclasses import replace

    from export_llm import quantize_int4

    small = replace(cfg, dim=128, ffn=256, n_heads=2, n_kv_heads=1)  # every K a multiple of torchao's group of 128
    q = build_model(small, device="cuda")
    quantize_int4(q)
    linears = [mod for mod in q.modules() if isinstance(mod, torch.nn.Linear)]
    check(f"torchao quantized all {len(linears)} Linears to Int4TilePackedTo4dTensor (CUDA)",
          all(is_int4_tile_packed(mod.weight) for mod in linears))
    w13 = q.layers[0].feed_forward.w13.weight
    g = torch.Generator(device="cuda").manual_seed(7)
    x = torch.randn(1, 1, small.dim, generator=g, device="cuda").bfloat16()
    norm = (1 + 0.1 * torch.randn(small.dim, generator=g, device="cuda")).bfloat16()
    r = torch.randn(1, 1, small.ffn, generator=g, device="cuda").bfloat16()
    y = torch.nn.functional.linear(fused_linear_op.rms_norm(x, norm, 1e-5), w13)  # torchao's int4 linear
    want = r + torch.nn.functional.silu(y[..., : small.ffn]) * y[..., small.ffn :]
    got = op(x, norm, 1e-5, True, w13.qdata, w13.scale_and_zero, w13.block_size[-1], w13.shape[0], r)
    check("int4 fused linear: RMSNorm, torchao's int4 linear, SwiGLU, residual == the unfused ops bit for bit (CUDA)",
          torch.equal(got, want))
    toks = prompt_tokens(12, small.vocab).cuda()
    use_decode_attention_op(q, form="qkv")
    with torch.no_grad():
        q.prefill(toks[:, :11])
        plain, _ = q.decode(toks[:, 11:12], torch.tensor([11], device="cuda"))
        use_fused_linear(q)
        q.prefill(toks[:, :11])
        fused, _ = q.decode(toks[:, 11:12], torch.tensor([11], device="cuda"))
    check("decode of a torchao int4 model through the int4 fused linear op == its qkv-form decode, bit for bit (CUDA)",
          torch.equal(plain, fused) and bool(plain.float().std() > 0))


def main() -> int:
    try:
        import torch
    except ImportError:
        print("llm model tests SKIPPED: torch is not installed")
        return 0
    from dataclasses import replace

    from model import build_model, get_config, prompt_tokens

    cfg = get_config("tiny")
    results = []

    def check(name, ok):
        results.append(ok)
        print(f"  {'ok  ' if ok else 'FAIL'} {name}")

    torch.manual_seed(0)
    m = build_model(cfg, device="cpu", dtype=torch.float32)  # fp32: exact comparisons are meaningful
    toks = prompt_tokens(12, cfg.vocab)
    with torch.no_grad():
        full, full_tok = m.prefill(toks)
        m.prefill(toks[:, :11])
        step, step_tok = m.decode(toks[:, 11:12], torch.tensor([11]))
        check("prefill(12) == prefill(11) + decode", torch.allclose(full, step, atol=1e-4, rtol=1e-4))
        check("next token == argmax(logits)", int(full_tok) == int(full.argmax()) and int(step_tok) == int(full_tok))
        m.prefill(toks[:, :2])
        for i in range(2, 12):
            logits, _ = m.decode(toks[:, i : i + 1], torch.tensor([i]))
        check("step-by-step decode == prefill", torch.allclose(full, logits, atol=1e-4, rtol=1e-4))
        m.reset_cache()
        empty, _ = m.decode(toks[:, 11:12], torch.tensor([11]))
        check("decode reads the cache", not torch.allclose(empty, full, atol=1e-4, rtol=1e-4))
        again, _ = m.prefill(toks)
        check("prefill restarts the sequence", torch.allclose(again, full, atol=1e-5, rtol=1e-5))

    m2 = build_model(cfg, device="cpu", dtype=torch.float32)
    other = build_model(replace(cfg, seed=cfg.seed + 1), device="cpu", dtype=torch.float32)
    w = "layers.0.attention.wqkv.weight"
    check("same seed, same weights", torch.equal(m.state_dict()[w], m2.state_dict()[w]))
    check("other seed, other weights", not torch.equal(m.state_dict()[w], other.state_dict()[w]))
    check("num_params", cfg.num_params() == sum(p.numel() for p in m.parameters()))
    big = get_config("1b")
    check("1b config has >= 1e9 parameters", big.num_params() >= 1_000_000_000)

    from export_llm import REFERENCE_TOP, export_methods, greedy_reference

    tokens, top = greedy_reference(m, toks[:, :8], 5)
    check("reference: eager's highest logits per step, highest first, the first one the greedy token",
          len(tokens) == 5 and len(top) == 5 and all(len(t) == REFERENCE_TOP for t in top)
          and all(t[0][0] == tok for t, tok in zip(top, tokens))
          and all(a[1] >= b[1] for t in top for a, b in zip(t, t[1:])))
    with torch.no_grad():
        first, _ = m.prefill(toks[:, :8])
    check("reference: the first step's logits are prefill's", abs(top[0][0][1] - float(first.max())) < 1e-6)

    bf = build_model(cfg, device="cpu")
    progs = export_methods(bf, cfg, 16, "cpu")
    ops = {str(n.target) for n in progs["decode"].graph.nodes if n.op == "call_function"}
    check("export: prefill and decode", set(progs) == {"prefill", "decode"})
    check("export: attention stays one SDPA op (for the backend's Triton kernel)",
          "aten.scaled_dot_product_attention.default" in ops)
    check_decode_op(check, cfg)
    check_fused_linear(check, cfg)
    check_argmax_op(check, cfg)

    failed = results.count(False)
    print(f"llm model: {len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
