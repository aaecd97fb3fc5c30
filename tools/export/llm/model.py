"""A Llama-style decoder with a static KV cache, shared by the exporter and every peer.

One definition serves all contenders of the LLM benchmark (aoti_cuda through ExecuTorch's CUDA
backend, eager PyTorch, eager + CUDA graph, torch.compile, libtorch's AOTInductor runner), so they
run the same arithmetic on the same weights.

Architecture (Llama 2 / TinyLlama family): token embedding, N x [RMSNorm -> grouped-query attention
with rotary embeddings -> residual, RMSNorm -> SwiGLU MLP -> residual], final RMSNorm, untied output
projection. bf16 weights and activations; RMSNorm, rotary embeddings and softmax statistics in fp32.

Two entry points, exported as two methods of one program:

    prefill(tokens: i64[1, T])        -> (logits bf16[1, vocab], next_token i64[1, 1])
        T in 2..max_prefill (dynamic). Writes K/V of positions 0..T-1 into the cache (a prompt
        always starts a new sequence) and returns the logits of the LAST position only (the
        only ones greedy generation needs; skipping the other T-1 rows saves a T x vocab GEMM).
    decode(token: i64[1, 1], pos: i64[1]) -> (logits bf16[1, vocab], next_token i64[1, 1])
        Writes K/V at `pos` and attends over positions 0..pos.

`next_token` is the argmax of `logits`, computed inside the program so that a greedy loop can feed
each step's output straight back as the next input without leaving the GPU.

The KV cache is a pair of module buffers per layer, k_cache/v_cache bf16[1, n_kv_heads, max_ctx,
head_dim], mutated in place (index_copy_). Exported separately, `prefill` and `decode` hold the
same buffer names; a runtime that binds equal names to one copy (aoti_cuda's default,
LoadOptions::share_constants_across_methods) gets decode reading what prefill wrote.

Attention: ExecuTorch 1.2's CUDA backend replaces aten SDPA by its own Triton kernel, which needs
bf16, equal head counts for q/k/v (no enable_gqa) and a boolean mask [B, 1, L_q, L_kv]. So:
  - prefill repeats each KV head n_rep times (expand + reshape) and uses is_causal=True;
  - decode folds the n_rep query heads of each KV head into the query-length axis
    (q [1, H, 1, D] -> [1, H_kv, n_rep, D]) and attends straight over the cache with the mask
    `position <= pos`: no copy of the cache per step.
use_decode_attention_op(model) makes decode call aoti_cuda's custom operator
aoti_cuda::aoti_cuda_decode_attention instead (decode_attention_op.py: the same masked attention in eager; in a
program exported with --sdpa decode-op, a kernel whose cost grows with pos, not max_ctx). use_fused_linear(model)
then makes every decode projection a call of aoti_cuda::aoti_cuda_fused_linear (or its int4 form for a Linear that
torchao quantized), with the RMSNorms, residual adds and SwiGLU folded in (fused_linear_op.py).

Weights: random, from a fixed seed, generated per tensor (seed derived from the config seed and the
parameter name), independent of construction order. They depend on the device's generator: every
contender of a benchmark generates (or loads a file generated) on the same GPU.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import asdict, dataclass, replace
from typing import Dict, Tuple

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class LlamaConfig:
    vocab: int = 32000
    dim: int = 2048
    n_layers: int = 22
    n_heads: int = 16
    n_kv_heads: int = 4
    ffn: int = 5632
    max_ctx: int = 1024
    max_prefill: int = 512
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    seed: int = 20261202

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads

    @property
    def n_rep(self) -> int:
        return self.n_heads // self.n_kv_heads

    def validate(self) -> None:
        if self.dim % self.n_heads or self.n_heads % self.n_kv_heads:
            raise ValueError(f"dim {self.dim} / heads {self.n_heads} / kv heads {self.n_kv_heads} do not divide")
        if self.head_dim % 2:
            raise ValueError("head_dim must be even (rotary embeddings)")
        if not 2 <= self.max_prefill <= self.max_ctx:
            raise ValueError(f"need 2 <= max_prefill ({self.max_prefill}) <= max_ctx ({self.max_ctx})")

    def num_params(self) -> int:
        d, hd = self.dim, self.head_dim
        qkv = d * (self.n_heads + 2 * self.n_kv_heads) * hd
        per_layer = qkv + self.n_heads * hd * d + d * 2 * self.ffn + self.ffn * d + 2 * d
        return self.n_layers * per_layer + 2 * self.vocab * d + d

    def to_dict(self) -> Dict:
        return dict(asdict(self), head_dim=self.head_dim, params=self.num_params())


# "1b": TinyLlama-1.1B's shape with 16 heads of 128 (1.12e9 parameters; the example of 16
# layers would be 0.85e9, under the >= 1e9 asked for). "small" keeps the full vocabulary and the
# int4-compatible sizes (multiples of 128) for fast end-to-end checks; "tiny" is for CPU tests.
CONFIGS: Dict[str, LlamaConfig] = {
    "1b": LlamaConfig(),
    "small": LlamaConfig(dim=256, n_layers=2, n_heads=4, n_kv_heads=2, ffn=768, max_ctx=1024, max_prefill=512),
    "tiny": LlamaConfig(vocab=512, dim=64, n_layers=2, n_heads=2, n_kv_heads=1, ffn=128, max_ctx=64, max_prefill=32),
}


def get_config(name: str, **overrides) -> LlamaConfig:
    """A named config, optionally with fields overridden (e.g. n_layers=4)."""
    if name not in CONFIGS:
        raise ValueError(f"unknown config {name!r}; known: {', '.join(CONFIGS)}")
    cfg = replace(CONFIGS[name], **{k: v for k, v in overrides.items() if v is not None})
    cfg.validate()
    return cfg


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return y.to(x.dtype) * self.weight


def apply_rope(x, cos, sin):
    """x: [1, T, h, D]; cos/sin: fp32 [T, D/2]. Rotates the two halves of each head (Llama/HF
    layout). Slices and cat, not split/chunk: ExecuTorch's edge dialect turns split into
    split_copy, a fallback kernel its CUDA backend refuses."""
    half = x.shape[-1] // 2
    c = cos[None, :, None, :]
    s = sin[None, :, None, :]
    x1 = x[..., :half].float()
    x2 = x[..., half:].float()
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).to(x.dtype)


class Attention(nn.Module):
    def __init__(self, cfg: LlamaConfig, dtype):
        super().__init__()
        self.cfg = cfg
        hd = cfg.head_dim
        self.wqkv = nn.Linear(cfg.dim, (cfg.n_heads + 2 * cfg.n_kv_heads) * hd, bias=False)
        self.wo = nn.Linear(cfg.n_heads * hd, cfg.dim, bias=False)
        cache = (1, cfg.n_kv_heads, cfg.max_ctx, hd)
        self.register_buffer("k_cache", torch.zeros(cache, dtype=dtype))
        self.register_buffer("v_cache", torch.zeros(cache, dtype=dtype))
        # Decode through aoti_cuda's operator (use_decode_attention_op): False, True, "update" (the operator that
        # also stores the step's K and V rows, instead of index_copy_ before it) or "qkv" (the operator that takes
        # the projection's output and the whole rotary tables, and rotates q and k itself).
        self.decode_op = False

    def forward(self, x, cos, sin, pos, mask):
        """x: [1, T, dim]; pos: i64[T] cache positions; mask: None for prefill (causal over the
        T new tokens, which start at position 0), bool [1, 1, n_rep, max_ctx] for decode (T=1)."""
        cfg = self.cfg
        t = x.shape[1]
        h, hkv, hd = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        qkv = self.wqkv(x)
        if mask is not None and self.decode_op == "qkv":
            # cos / sin are the whole tables here (Llama.decode): the operator picks row pos and rotates q and k.
            y = torch.ops.aoti_cuda.aoti_cuda_decode_attention_qkv(
                qkv, cos, sin, self.k_cache, self.v_cache, pos, h, 1.0 / math.sqrt(hd))
            return self.wo(y.reshape(1, 1, h * hd))
        q = qkv[..., : h * hd].reshape(1, t, h, hd)
        k = qkv[..., h * hd : (h + hkv) * hd].reshape(1, t, hkv, hd)
        v = qkv[..., (h + hkv) * hd :].reshape(1, t, hkv, hd)
        q = apply_rope(q, cos, sin)  # [1, T, h, hd]
        k = apply_rope(k, cos, sin)  # [1, T, hkv, hd], contiguous (cat)
        q = q.transpose(1, 2)  # [1, h, T, hd]
        if mask is not None and self.decode_op == "update":
            # The operator stores the step's K and V rows at pos, then attends over positions 0..pos.
            y = torch.ops.aoti_cuda.aoti_cuda_decode_attention_update(
                q, k.transpose(1, 2), v.transpose(1, 2), self.k_cache, self.v_cache, pos, 1.0 / math.sqrt(hd))
            return self.wo(y.reshape(1, 1, h * hd))
        self.k_cache.index_copy_(2, pos, k.transpose(1, 2))
        self.v_cache.index_copy_(2, pos, v.transpose(1, 2))
        if mask is None:
            # Each KV head repeated n_rep times. Expanded in the [1, T, hkv, n_rep, hd] layout of a
            # contiguous tensor: expanding the transposed view instead makes torch.export emit a
            # stride guard (min(64*T, 128*T) == 64*T) that it then cannot prove for all T.
            kr = k[:, :, :, None].expand(1, t, hkv, cfg.n_rep, hd).reshape(1, t, h, hd).transpose(1, 2)
            vr = v.contiguous()[:, :, :, None].expand(1, t, hkv, cfg.n_rep, hd).reshape(1, t, h, hd).transpose(1, 2)
            y = F.scaled_dot_product_attention(q, kr, vr, is_causal=True)  # [1, h, T, hd]
            y = y.transpose(1, 2).reshape(1, t, h * hd)
        elif self.decode_op:
            # One row per query head over the cache, positions 0..pos; the operator serves each group's heads.
            y = torch.ops.aoti_cuda.aoti_cuda_decode_attention(q, self.k_cache, self.v_cache, pos, 1.0 / math.sqrt(hd))
            y = y.reshape(1, 1, h * hd)
        else:
            qg = q.reshape(1, hkv, cfg.n_rep, hd)  # T == 1: query heads of a group as rows
            y = F.scaled_dot_product_attention(qg, self.k_cache, self.v_cache, attn_mask=mask)
            y = y.reshape(1, 1, h * hd)
        return self.wo(y)


class FeedForward(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.ffn = cfg.ffn
        self.w13 = nn.Linear(cfg.dim, 2 * cfg.ffn, bias=False)  # gate and up projections, fused
        self.w2 = nn.Linear(cfg.ffn, cfg.dim, bias=False)

    def forward(self, x):
        h = self.w13(x)
        return self.w2(F.silu(h[..., : self.ffn]) * h[..., self.ffn :])


def is_int4_tile_packed(weight) -> bool:
    """Whether `weight` is torchao's Int4TilePackedTo4dTensor (export_llm.py --quant int4). By class name, so that
    this module needs no torchao: only torchao makes a tensor of that class."""
    return type(weight).__name__ == "Int4TilePackedTo4dTensor"


def fused_projection(x, norm_weight, eps: float, swiglu: bool, linear: nn.Linear, residual):
    """linear's projection of x through aoti_cuda's fused linear operator (fused_linear_op.py): the bf16 form, or for
    a weight torchao quantized, the int4 form on the weight's parts (torch.export records reading them from the
    parameter, which keeps its class in the state dict)."""
    w = linear.weight
    if not is_int4_tile_packed(w):
        return torch.ops.aoti_cuda.aoti_cuda_fused_linear(x, norm_weight, eps, swiglu, w, residual)
    if w.block_size[0] != 1 or getattr(w, "act_pre_scale", None) is not None:
        raise ValueError(f"fused linear: int4 weight with block_size {w.block_size} / an activation pre-scale: the "
                         "int4 operator takes group-wise weights without one")
    return torch.ops.aoti_cuda.aoti_cuda_fused_linear_int4(x, norm_weight, eps, swiglu, w.qdata, w.scale_and_zero,
                                                           w.block_size[-1], w.shape[0], residual)


class Block(nn.Module):
    def __init__(self, cfg: LlamaConfig, dtype):
        super().__init__()
        self.attention_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.attention = Attention(cfg, dtype)
        self.ffn_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.feed_forward = FeedForward(cfg)
        # Decode through aoti_cuda::aoti_cuda_fused_linear(_int4) (use_fused_linear, fused_linear_op.py).
        self.fused_linear = False

    def forward(self, x, cos, sin, pos, mask):
        if mask is not None and self.fused_linear:
            return self._decode_fused(x, cos, sin, pos)
        x = x + self.attention(self.attention_norm(x), cos, sin, pos, mask)
        return x + self.feed_forward(self.ffn_norm(x))

    def _decode_fused(self, x, cos, sin, pos):
        """One decode step as four fused projections around the qkv-form attention: the RMSNorms ride in the
        prologues of the projections after them, SwiGLU in the epilogue of the gate/up projection, the residual adds
        in the epilogues of wo and w2; the same arithmetic as forward()."""
        att, ffn = self.attention, self.feed_forward
        cfg = att.cfg
        qkv = fused_projection(x, self.attention_norm.weight, self.attention_norm.eps, False, att.wqkv, None)
        y = torch.ops.aoti_cuda.aoti_cuda_decode_attention_qkv(
            qkv, cos, sin, att.k_cache, att.v_cache, pos, cfg.n_heads, 1.0 / math.sqrt(cfg.head_dim))
        h = fused_projection(y.reshape(1, 1, cfg.n_heads * cfg.head_dim), None, 0.0, False, att.wo, x)
        a = fused_projection(h, self.ffn_norm.weight, self.ffn_norm.eps, True, ffn.w13, None)
        return fused_projection(a, None, 0.0, False, ffn.w2, h)


class Llama(nn.Module):
    def __init__(self, cfg: LlamaConfig, dtype=torch.bfloat16):
        super().__init__()
        self.cfg = cfg
        self.tok_embeddings = nn.Embedding(cfg.vocab, cfg.dim)
        self.layers = nn.ModuleList(Block(cfg, dtype) for _ in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.output = nn.Linear(cfg.dim, cfg.vocab, bias=False)
        # Constants as buffers, not computed in forward, so they travel with the program.
        self.register_buffer("positions", torch.arange(cfg.max_ctx, dtype=torch.int64))
        cos, sin = rope_tables(cfg)
        self.register_buffer("rope_cos", cos)
        self.register_buffer("rope_sin", sin)
        # Decode's greedy token through aoti_cuda::aoti_cuda_argmax (use_argmax_op, argmax_op.py).
        self.argmax_op = False

    def _head(self, x, fused: bool = False, argmax_op: bool = False):
        if fused:  # the final RMSNorm folded into the output projection
            logits = fused_projection(x, self.norm.weight, self.norm.eps, False, self.output, None)
        else:
            logits = self.output(self.norm(x))  # [1, vocab]
        if argmax_op:  # aoti_cuda's argmax kernel (argmax_op.py): the same indices
            return logits, torch.ops.aoti_cuda.aoti_cuda_argmax(logits)
        return logits, torch.argmax(logits, dim=-1, keepdim=True)

    def prefill(self, tokens):
        t = tokens.shape[1]
        pos = self.positions[:t]
        cos, sin = self.rope_cos[:t], self.rope_sin[:t]
        x = self.tok_embeddings(tokens)
        for layer in self.layers:
            x = layer(x, cos, sin, pos, None)
        return self._head(x[:, -1, :])

    def decode(self, token, pos):
        cfg = self.cfg
        if self.layers[0].attention.decode_op == "qkv":  # the operator reads the tables' row itself
            cos, sin = self.rope_cos, self.rope_sin
        else:
            cos = self.rope_cos.index_select(0, pos)
            sin = self.rope_sin.index_select(0, pos)
        mask = (self.positions <= pos).reshape(1, 1, 1, cfg.max_ctx).expand(1, 1, cfg.n_rep, cfg.max_ctx)
        x = self.tok_embeddings(token)
        for layer in self.layers:
            x = layer(x, cos, sin, pos, mask)
        return self._head(x[:, -1, :], fused=self.layers[0].fused_linear, argmax_op=self.argmax_op)

    def reset_cache(self) -> None:
        for layer in self.layers:
            layer.attention.k_cache.zero_()
            layer.attention.v_cache.zero_()


def use_decode_attention_op(model: Llama, enabled: bool = True, form: str = "") -> None:
    """Decode's attention through aoti_cuda::aoti_cuda_decode_attention (registered on first use) instead of a
    masked SDPA over the whole cache; with form "update", through
    aoti_cuda::aoti_cuda_decode_attention_update, which also stores the step's K and V rows (no index_copy_ in
    decode); with form "qkv", through aoti_cuda::aoti_cuda_decode_attention_qkv, which also rotates q and k (no
    kernel between the q/k/v projection and the attention). Prefill is unchanged."""
    if form not in ("", "update", "qkv"):
        raise ValueError(f"decode attention operator form {form!r}: expected '', 'update' or 'qkv'")
    if enabled:
        import decode_attention_op  # noqa: F401  (defines the operators)
    mode = form or True
    for layer in model.layers:
        layer.attention.decode_op = mode if enabled else False


def use_fused_linear(model: Llama, enabled: bool = True) -> None:
    """Decode's projections through aoti_cuda::aoti_cuda_fused_linear, or aoti_cuda::aoti_cuda_fused_linear_int4 for
    a Linear whose weight torchao quantized (fused_linear_op.py), with the RMSNorms, residual adds and SwiGLU folded
    into them. Needs the qkv form of the decode attention operator (use_decode_attention_op(model, form="qkv")).
    Prefill is unchanged."""
    if enabled:
        if any(layer.attention.decode_op != "qkv" for layer in model.layers):
            raise ValueError("use_fused_linear needs the decode attention operator's qkv form first")
        import fused_linear_op  # noqa: F401  (defines the operators)
    for layer in model.layers:
        layer.fused_linear = enabled


def use_argmax_op(model: Llama, enabled: bool = True) -> None:
    """Decode's greedy token through aoti_cuda::aoti_cuda_argmax (argmax_op.py) instead of torch.argmax: the same
    indices, one kernel of aoti_cuda's. Prefill is unchanged."""
    if enabled:
        import argmax_op  # noqa: F401  (defines the operator)
    model.argmax_op = enabled


class PrefillMethod(nn.Module):
    """`prefill` as a forward(), for torch.export; FQNs are model.<...> in both methods."""

    def __init__(self, model: Llama):
        super().__init__()
        self.model = model

    def forward(self, tokens):
        return self.model.prefill(tokens)


class DecodeMethod(nn.Module):
    def __init__(self, model: Llama):
        super().__init__()
        self.model = model

    def forward(self, token, pos):
        return self.model.decode(token, pos)


def rope_tables(cfg: LlamaConfig) -> Tuple[torch.Tensor, torch.Tensor]:
    half = cfg.head_dim // 2
    inv = 1.0 / (cfg.rope_theta ** (torch.arange(half, dtype=torch.float64) / half))
    ang = torch.arange(cfg.max_ctx, dtype=torch.float64)[:, None] * inv[None, :]
    return ang.cos().float(), ang.sin().float()


def _tensor_seed(cfg_seed: int, name: str) -> int:
    return (cfg_seed * 1_000_003 + zlib.crc32(name.encode())) % (2**62)


def init_weights(model: Llama, device) -> None:
    """Fill every parameter from the config seed (per-name seeds: order-independent).

    Linear weights ~ N(0, 0.02), the residual output projections (wo, w2) scaled by
    1/sqrt(2 * n_layers) as in GPT-2, embeddings ~ N(0, 1), norms = 1. The residual stream then
    stays O(1) through the layers, so the logits are neither flat nor saturated."""
    cfg = model.cfg
    device = torch.device(device)
    out_scale = 1.0 / math.sqrt(2 * cfg.n_layers)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.fill_(1.0)
                continue
            g = torch.Generator(device=device)
            g.manual_seed(_tensor_seed(cfg.seed, name))
            std = 1.0 if "tok_embeddings" in name else 0.02
            if name.endswith(("wo.weight", "w2.weight")):
                std *= out_scale
            p.copy_(torch.randn(p.shape, generator=g, device=device, dtype=torch.float32).mul_(std))


def reset_buffers(model: Llama) -> None:
    """(Re)compute the non-persistent-looking buffers: positions, rope tables, zero caches."""
    cfg = model.cfg
    with torch.no_grad():
        model.positions.copy_(torch.arange(cfg.max_ctx, dtype=torch.int64))
        cos, sin = rope_tables(cfg)
        model.rope_cos.copy_(cos)
        model.rope_sin.copy_(sin)
        model.reset_cache()


def build_model(cfg: LlamaConfig, device="cuda", dtype=torch.bfloat16, init: bool = True) -> Llama:
    """Construct directly on `device` (no CPU init pass over 1e9 parameters) and fill from the seed.
    init=False leaves the parameters uninitialized (for load_state_dict)."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # parameters are created in `dtype`; buffers set theirs explicitly
    try:
        with torch.device("meta"):
            model = Llama(cfg, dtype)
    finally:
        torch.set_default_dtype(previous)
    model = model.to_empty(device=device)
    reset_buffers(model)
    if init:
        init_weights(model, device)
    return model.eval()


def prompt_tokens(length: int, vocab: int):
    """The benchmark's prompt: a fixed, reproducible id sequence (also computed by the C++ programs:
    id_i = (7919 * i + 13) mod vocab)."""
    return torch.tensor([[(7919 * i + 13) % vocab for i in range(length)]], dtype=torch.int64)
