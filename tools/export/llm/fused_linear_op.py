"""aoti_cuda's fused linear operators: one decode projection with the pointwise work around it folded in.

    aoti_cuda::aoti_cuda_fused_linear(Tensor x, Tensor? norm_weight, float eps, bool swiglu, Tensor weight,
                                      Tensor? residual) -> Tensor
    aoti_cuda::aoti_cuda_fused_linear_int4(Tensor x, Tensor? norm_weight, float eps, bool swiglu, Tensor qdata,
                                           Tensor scale_and_zero, int group_size, int n, Tensor? residual) -> Tensor

Both compute, in this order:
  1. norm_weight given: a = RMSNorm(x) with eps and that weight, as the model computes it (float32 sum of squares,
     rounded to x's dtype, times the weight); else a = x;
  2. y = a @ W^T [..., N], rounded to x's dtype as F.linear rounds it. The bf16 form's W is `weight` [N, K]; the int4
     form's is torchao's Int4TilePackedTo4dTensor taken apart (qdata, scale_and_zero, group_size = its block_size[-1],
     n = its logical out features): torchao's own linear for that tensor, i.e. a zero-padded on K to a multiple of
     1024, aten._weight_int4pack_mm (the tinygemm layout, CUDA's), the first n columns;
  3. swiglu: the projection's N outputs are the gate's, then the up projection's; y = silu(y[..., :N/2]) *
     y[..., N/2:] [..., N/2], each rounded as the model's FeedForward rounds (F.silu of the rounded gate, then the
     rounded product). N must be even; the int4 form needs n a multiple of 32 (its kernel pairs the gate's and the
     up projection's n-tiles);
  4. residual given: y = residual + y.
So eager gives the unfused model's bits. Returns a new contiguous [..., N/2 if swiglu else N] tensor.

Why: after the decode attention operator (decode_attention_op.py, qkv form), a step of the 1.1 B model still runs two
RMSNorm kernels (each with the residual add) and one SwiGLU kernel per layer between its four projections: 67 of
the 205 kernels of a replay, about 100 µs of kernel time (docs/benchmarks/llm.md, BC job of 2026-12-04 13:51). With
these operators a decode layer is four projections and the attention (model.py, Block._decode_fused):

    qkv = op(x, attention_norm, eps, False, wqkv, None)     # the RMSNorm in the prologue
    y   = attention(qkv)                                      # aoti_cuda_decode_attention_qkv
    h   = op(y, None, 0, False, wo, x)                        # the residual add in the epilogue
    a   = op(h, ffn_norm, eps, True, w13, None)               # RMSNorm in the prologue, SwiGLU in the epilogue
    out = op(a, None, 0, False, w2, h)

SwiGLU sits in the epilogue of the gate/up projection rather than in the prologue of the down projection: the kernel
pairs each gate column with its up column in one warp (int4: one block) and writes F values instead of 2F, and the
down projection then reads F values per row, not 2F to combine (and computes no SiLU in every block).

The SDK implements both C shims (src/shim/ops/fused_linear.cpp; the kernels stream the weights as the few-row GEMVs
do; with a norm weight they stage the normalized row in shared memory while the first weight loads are in flight,
without one the bf16 kernel reads the row next to the weights and the int4 kernel stages it; they add the residual
on store;
the int4 form on weight_int4pack_gemv.cu's kernel). The C calls AOTInductor emits (aot_inductor.custom_ops_to_c_shims
= the declarations below; checked by test_decode_op_codegen.py with torch 2.11): an absent optional tensor is
nullptr, a present one the address of a handle, the bool an int32_t, the float a double, an int an int64_t:

    aoti_torch_cuda_aoti_cuda_fused_linear(x, &norm_weight or nullptr, eps, swiglu, weight, &residual or nullptr,
                                           &out)
    aoti_torch_cuda_aoti_cuda_fused_linear_int4(x, &norm_weight or nullptr, eps, swiglu, qdata, scale_and_zero,
                                                group_size, n, &residual or nullptr, &out)
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

NAMESPACE = "aoti_cuda"
NAME = "aoti_cuda_fused_linear"
QUALIFIED = f"{NAMESPACE}::{NAME}"
SHIM = "aoti_torch_cuda_" + NAME
SHIM_DECLARATION = (f"AOTITorchError {SHIM}(AtenTensorHandle x, AtenTensorHandle* norm_weight, double eps, "
                    "int32_t swiglu, AtenTensorHandle weight, AtenTensorHandle* residual, AtenTensorHandle* ret0)")

INT4_NAME = "aoti_cuda_fused_linear_int4"
INT4_QUALIFIED = f"{NAMESPACE}::{INT4_NAME}"
INT4_SHIM = "aoti_torch_cuda_" + INT4_NAME
INT4_SHIM_DECLARATION = (f"AOTITorchError {INT4_SHIM}(AtenTensorHandle x, AtenTensorHandle* norm_weight, double eps, "
                         "int32_t swiglu, AtenTensorHandle qdata, AtenTensorHandle scale_and_zero, int64_t group_size, "
                         "int64_t n, AtenTensorHandle* residual, AtenTensorHandle* ret0)")
# The int4 form's K padding: torchao packs the weight padded to a multiple of 1024 input features, and its linear
# pads the activation alike (Int4TilePackedTo4dTensor).
INT4_K_MULTIPLE = 1024


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """model.RMSNorm's arithmetic."""
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * weight


def swiglu_halves(y: torch.Tensor, qualified: str) -> torch.Tensor:
    """model.FeedForward's activation of a gate|up projection output: silu(gate) * up, both halves of y's last
    dimension."""
    width = y.shape[-1]
    if width % 2:
        raise ValueError(f"{qualified}: with swiglu, the projection's outputs (gate, then up) must be even in number, "
                         f"got {width}")
    return F.silu(y[..., : width // 2]) * y[..., width // 2 :]


def _prologue(x, norm_weight, eps, k, qualified):
    """Step 1, after checking that x's last dimension (and the norm weight's length) is the weight's K."""
    if x.shape[-1] != k:
        raise ValueError(f"{qualified}: x {tuple(x.shape)} must have the weight's {k} input features last")
    if norm_weight is None:
        return x
    if norm_weight.shape != (k,):
        raise ValueError(f"{qualified}: norm_weight {tuple(norm_weight.shape)} must be [{k}], the weight's input "
                         "features")
    return rms_norm(x, norm_weight, eps)


def _epilogue(y, swiglu, residual, qualified):
    """Steps 3 and 4."""
    if swiglu:
        y = swiglu_halves(y, qualified)
    if residual is not None:
        y = residual + y
    return y.contiguous()


@torch.library.custom_op(QUALIFIED, mutates_args=())
def fused_linear(x: torch.Tensor, norm_weight: Optional[torch.Tensor], eps: float, swiglu: bool,
                 weight: torch.Tensor, residual: Optional[torch.Tensor]) -> torch.Tensor:
    if weight.dim() != 2:
        raise ValueError(f"{QUALIFIED}: weight {tuple(weight.shape)} must be [N, K]")
    a = _prologue(x, norm_weight, eps, weight.shape[1], QUALIFIED)
    return _epilogue(F.linear(a, weight), swiglu, residual, QUALIFIED)


@fused_linear.register_fake
def _(x, norm_weight, eps, swiglu, weight, residual):
    # Contiguous, as the shim allocates it.
    n = weight.shape[0]
    if swiglu and n % 2:  # eager's refusal (swiglu_halves), at export already
        raise ValueError(f"{QUALIFIED}: with swiglu, the projection's outputs (gate, then up) must be even in number, "
                         f"got {n}")
    return torch.empty((*x.shape[:-1], n // 2 if swiglu else n), dtype=x.dtype, device=x.device)


def int4_linear(x: torch.Tensor, qdata: torch.Tensor, scale_and_zero: torch.Tensor, group_size: int,
                n: int) -> torch.Tensor:
    """Int4TilePackedTo4dTensor's linear (torchao 0.17) on its parts: x [..., K] bf16 -> [..., n] bf16."""
    rows = x.reshape(-1, x.shape[-1]).to(torch.bfloat16)
    k = rows.shape[-1]
    rows = F.pad(rows, (0, _padded_k(k) - k))
    y = torch.ops.aten._weight_int4pack_mm(rows, qdata, group_size, scale_and_zero)
    return y[:, :n].reshape(*x.shape[:-1], n)


def _padded_k(k: int) -> int:
    return -(-k // INT4_K_MULTIPLE) * INT4_K_MULTIPLE


def _check_int4(x, swiglu, qdata, scale_and_zero, group_size, n):
    """What the shim refuses, refused at export already (the fake implementation calls it too): qdata
    [n_padded / 8, K_padded / 128, 32, 4] int32 (torchao's 8 inner k-tiles of 16), scale_and_zero
    [K_padded / group_size, n_padded, 2], x bf16 with K_padded = K rounded up to a multiple of 1024."""
    k_padded = _padded_k(x.shape[-1])
    if x.dtype != torch.bfloat16:
        raise ValueError(f"{INT4_QUALIFIED}: x must be bfloat16 (the int4 form's dtype), got {x.dtype}")
    if qdata.dim() != 4 or qdata.shape[1] * 128 != k_padded or qdata.shape[2:] != (32, 4):
        raise ValueError(f"{INT4_QUALIFIED}: qdata {tuple(qdata.shape)} must be [n_padded / 8, {k_padded // 128}, 32, "
                         f"4] for x {tuple(x.shape)} (its K padded to {k_padded})")
    if group_size <= 0 or scale_and_zero.dim() != 3 or scale_and_zero.shape[0] * group_size != k_padded:
        raise ValueError(f"{INT4_QUALIFIED}: scale_and_zero {tuple(scale_and_zero.shape)} must be [{k_padded} / "
                         f"group_size {group_size}, n_padded, 2]")
    if not 1 <= n <= qdata.shape[0] * 8:
        raise ValueError(f"{INT4_QUALIFIED}: n {n} must be in 1..{qdata.shape[0] * 8} (qdata's packed rows)")
    if swiglu and n % 32:
        raise ValueError(f"{INT4_QUALIFIED}: with swiglu, n must be a multiple of 32 (the shim pairs the gate's and "
                         f"the up projection's n-tiles), got {n}")


@torch.library.custom_op(INT4_QUALIFIED, mutates_args=())
def fused_linear_int4(x: torch.Tensor, norm_weight: Optional[torch.Tensor], eps: float, swiglu: bool,
                      qdata: torch.Tensor, scale_and_zero: torch.Tensor, group_size: int, n: int,
                      residual: Optional[torch.Tensor]) -> torch.Tensor:
    """The int4 form. Eager runs where aten._weight_int4pack_mm takes this packing (CUDA)."""
    _check_int4(x, swiglu, qdata, scale_and_zero, group_size, n)
    a = _prologue(x, norm_weight, eps, x.shape[-1], INT4_QUALIFIED)
    return _epilogue(int4_linear(a, qdata, scale_and_zero, group_size, n), swiglu, residual, INT4_QUALIFIED)


@fused_linear_int4.register_fake
def _(x, norm_weight, eps, swiglu, qdata, scale_and_zero, group_size, n, residual):
    _check_int4(x, swiglu, qdata, scale_and_zero, group_size, n)
    return torch.empty((*x.shape[:-1], n // 2 if swiglu else n), dtype=torch.bfloat16, device=x.device)


def custom_ops_to_c_shims():
    """The aot_inductor.custom_ops_to_c_shims entries of both operators: {OpOverload: [C declaration]}."""
    return {torch.ops.aoti_cuda.aoti_cuda_fused_linear.default: [SHIM_DECLARATION],
            torch.ops.aoti_cuda.aoti_cuda_fused_linear_int4.default: [INT4_SHIM_DECLARATION]}
