"""aoti_cuda's argmax operator: a decode step's greedy token as one kernel of aoti_cuda's own.

    aoti_cuda::aoti_cuda_argmax(Tensor x) -> Tensor

computes torch.argmax(x, dim=-1, keepdim=True): per row of x's last dimension, the int64 index of the largest
element, the first one of equal ones, and a NaN above every number (the first NaN's index). x is bf16, fp16 or
float32; the output is contiguous, x's sizes with the last one 1. Eager runs torch.argmax itself, so eager gives
the same indices.

Why: Inductor makes the argmax over a vocabulary of logits one reduction kernel that walks the row in steps, each
step a memory latency: 6.0-6.5 µs a decode step on the H200 for the 1.1 B model's 32,000 logits
(docs/benchmarks/llm.md). The SDK's kernel (src/shim/ops/argmax.cu) has every load of the row in flight at once.

The C call AOTInductor emits (aot_inductor.custom_ops_to_c_shims = the declaration below; checked by
test_decode_op_codegen.py with torch 2.11):

    aoti_torch_cuda_aoti_cuda_argmax(x, &out)
"""

from __future__ import annotations

import torch

NAMESPACE = "aoti_cuda"
NAME = "aoti_cuda_argmax"
QUALIFIED = f"{NAMESPACE}::{NAME}"
SHIM = "aoti_torch_cuda_" + NAME
SHIM_DECLARATION = f"AOTITorchError {SHIM}(AtenTensorHandle x, AtenTensorHandle* ret0)"
DTYPES = (torch.bfloat16, torch.float16, torch.float32)


def _check(x: torch.Tensor) -> None:
    """What the shim refuses, refused at export already (the fake implementation calls it too)."""
    if x.dtype not in DTYPES:
        raise ValueError(f"{QUALIFIED}: x must be bfloat16, float16 or float32, got {x.dtype}")
    if x.dim() < 1 or x.shape[-1] < 1:
        raise ValueError(f"{QUALIFIED}: x {tuple(x.shape)} must have a non-empty last dimension (the one reduced)")


@torch.library.custom_op(QUALIFIED, mutates_args=())
def argmax(x: torch.Tensor) -> torch.Tensor:
    _check(x)
    return torch.argmax(x, dim=-1, keepdim=True)


@argmax.register_fake
def _(x):
    _check(x)
    return torch.empty((*x.shape[:-1], 1), dtype=torch.int64, device=x.device)


def custom_ops_to_c_shims():
    """The operator's aot_inductor.custom_ops_to_c_shims entry: {OpOverload: [C declaration]}."""
    return {torch.ops.aoti_cuda.aoti_cuda_argmax.default: [SHIM_DECLARATION]}
