"""aoti_cuda's fused linear operator (work in progress: its C shim is not in the SDK yet; see the end).

    aoti_cuda::aoti_cuda_fused_linear(Tensor x, Tensor? norm_weight, float eps, bool swiglu, Tensor weight,
                                      Tensor? residual) -> Tensor

One projection of a decode step with the pointwise work around it folded in, in this order:
  1. swiglu: x [..., 2F] holds the gate and up projections side by side; a = silu(gate) * up [..., F];
  2. norm_weight given: a = RMSNorm(a) with eps and that weight, as the model computes it (float32 sum of squares,
     rounded to a's dtype, times the weight);
  3. y = a @ weight^T, weight [N, K];
  4. residual given: y = residual + y.
Each step rounds to x's dtype where the model's unfused code rounds, so eager gives the model's bits. Returns a new
contiguous [..., N] tensor.

Why: after the decode attention operator (decode_attention_op.py, qkv form), a step of the 1.1 B model still runs two
RMSNorm kernels (each with the residual add) and one SwiGLU kernel per layer between its four projections: 67 of
the 205 kernels of a replay, about 100 µs of kernel time (docs/benchmarks/llm.md, BC job of 2026-12-04 13:51). With
this operator a layer is four projections and the attention's two passes.

The C call AOTInductor emits for it (aot_inductor.custom_ops_to_c_shims = SHIM_DECLARATION; checked by
test_fused_linear_codegen.py with torch 2.11): an absent optional tensor is nullptr, a present one the address of a
handle, the bool an int32_t, the float a double:

    aoti_torch_cuda_aoti_cuda_fused_linear(x, &norm_weight or nullptr, eps, swiglu, weight, &residual or nullptr,
                                           &out)

Not done yet (so no exporter flag uses it): the SDK's shim and its one-row kernel (the few-row GEMV with the
activation staged in shared memory by a prologue, and the residual added in its epilogue), its fallback for more rows,
and an int4 variant taking torchao's packed weights (qdata, group size, scale_and_zero) instead of `weight`.
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


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """model.RMSNorm's arithmetic."""
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * weight


@torch.library.custom_op(QUALIFIED, mutates_args=())
def fused_linear(x: torch.Tensor, norm_weight: Optional[torch.Tensor], eps: float, swiglu: bool,
                 weight: torch.Tensor, residual: Optional[torch.Tensor]) -> torch.Tensor:
    a = x
    if swiglu:
        width = x.shape[-1]
        if width % 2:
            raise ValueError(f"{QUALIFIED}: with swiglu, x's last dimension must be even (gate and up), got {width}")
        a = F.silu(x[..., : width // 2]) * x[..., width // 2 :]
    if a.shape[-1] != weight.shape[1]:
        raise ValueError(f"{QUALIFIED}: weight {tuple(weight.shape)} must be [N, {a.shape[-1]}] for x "
                         f"{tuple(x.shape)}{' (swiglu halves it)' if swiglu else ''}")
    if norm_weight is not None:
        a = rms_norm(a, norm_weight, eps)
    y = F.linear(a, weight)
    if residual is not None:
        y = residual + y
    return y.contiguous()


@fused_linear.register_fake
def _(x, norm_weight, eps, swiglu, weight, residual):
    # Contiguous, as the shim will allocate it.
    return torch.empty((*x.shape[:-1], weight.shape[0]), dtype=x.dtype, device=x.device)


def custom_ops_to_c_shims():
    """The aot_inductor.custom_ops_to_c_shims entry: {OpOverload: [C declaration]}."""
    return {torch.ops.aoti_cuda.aoti_cuda_fused_linear.default: [SHIM_DECLARATION]}
