"""aoti_cuda's decode attention operator: torch.ops.aoti_cuda.aoti_cuda_decode_attention.

    aoti_cuda::aoti_cuda_decode_attention(Tensor q, Tensor k_cache, Tensor v_cache, Tensor input_pos, float scale)
        -> Tensor

q [B, H, 1, D] (one query row per head), k_cache / v_cache [B, Hkv, L, D] with H a multiple of Hkv (grouped-query
attention: query head h reads KV head h // (H / Hkv)), input_pos int64 [1] (or [B]) on q's device. The row attends
over cache positions 0..pos inclusive (all of them for pos >= L - 1). Returns a new contiguous [B, H, 1, D] tensor.

Eager (any device): the masked attention the model computes without the operator, so a program or a test that runs
the model in PyTorch gets the same arithmetic. Exported (tools/export/llm --sdpa decode-op): the node stays opaque
(a custom operator is neither decomposed by torch.export nor by ExecuTorch's partitioner), and AOTInductor, given
the operator in `aot_inductor.custom_ops_to_c_shims` (SHIM_DECLARATION), emits a direct call

    aoti_torch_cuda_aoti_cuda_decode_attention(q, k_cache, v_cache, input_pos, scale, &out)

which aoti_cuda implements with a kernel whose work grows with pos rather than L (src/shim/ops/decode_attention.cu).
Inductor names a custom op's shim aoti_torch_<device>_<operator name> without the namespace, hence the name's
repeated "aoti_cuda": a decode_attention of another project cannot take the same C symbol. Only aoti_cuda provides
that shim; `aoti_cuda inspect` labels programs that import it.

Difference from eager, on purpose: for pos < 0 the eager mask hides every position (softmax of nothing: NaN), the
shim returns zeros.

    aoti_cuda::aoti_cuda_decode_attention_update(Tensor q, Tensor k_new, Tensor v_new, Tensor(a!) k_cache,
                                                 Tensor(b!) v_cache, Tensor input_pos, float scale) -> Tensor

The same with the step's own K and V rows stored in the caches first (tools/export/llm --sdpa decode-op-update):
its C shim aoti_torch_cuda_aoti_cuda_decode_attention_update does both in one kernel pass.

    aoti_cuda::aoti_cuda_decode_attention_qkv(Tensor qkv, Tensor rope_cos, Tensor rope_sin, Tensor(a!) k_cache,
                                              Tensor(b!) v_cache, Tensor input_pos, int n_heads, float scale) -> Tensor

The qkv form (tools/export/llm --sdpa decode-op-qkv): the fused q/k/v projection's output itself, qkv [B, 1,
(n_heads + 2 Hkv) D] (q's heads, then k's, then v's), and the whole rotary tables rope_cos / rope_sin [R, D/2]
(float32, row p for position p). q and the step's K row are rotated with row input_pos[b] (clamped to [0, R)), as
the model's apply_rope does it (float32, the halves' products rounded separately, then rounded to qkv's dtype), and
then the update form runs. An exported decode step then has no kernel between the projection and the attention:
no rotary embeddings of q and k, no copy of v into its own buffer.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

NAMESPACE = "aoti_cuda"
NAME = "aoti_cuda_decode_attention"
QUALIFIED = f"{NAMESPACE}::{NAME}"
SHIM = "aoti_torch_cuda_" + NAME
# The declaration Inductor writes into the generated wrapper (extern "C"): arguments in schema order (Tensor ->
# AtenTensorHandle, float -> double), then one AtenTensorHandle* per returned tensor.
SHIM_DECLARATION = (f"AOTITorchError {SHIM}(AtenTensorHandle q, AtenTensorHandle k_cache, AtenTensorHandle v_cache, "
                    "AtenTensorHandle input_pos, double scale, AtenTensorHandle* ret0)")


@torch.library.custom_op(QUALIFIED, mutates_args=())
def decode_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, input_pos: torch.Tensor,
                     scale: float) -> torch.Tensor:
    b, h, rows, d = q.shape
    hkv, length = k_cache.shape[1], k_cache.shape[2]
    if rows != 1 or h % hkv:
        raise ValueError(f"{QUALIFIED}: q {tuple(q.shape)} must be [B, H, 1, D] with H a multiple of "
                         f"k_cache's {hkv} heads")
    g = h // hkv
    # The model's folding: the g query heads of a KV head become g rows attending to that head's cache.
    qg = q.reshape(b, hkv, g, d)
    visible = torch.arange(length, device=q.device)[None, :] <= input_pos.reshape(-1, 1).to(q.device)  # [1 or B, L]
    mask = visible[:, None, None, :]  # [1 or B, 1, 1, L]
    y = F.scaled_dot_product_attention(qg, k_cache, v_cache, attn_mask=mask, scale=scale)
    return y.reshape(b, h, 1, d).contiguous()


@decode_attention.register_fake
def _(q, k_cache, v_cache, input_pos, scale):
    # Contiguous, as the shim allocates it (Inductor trusts these strides for the buffer the shim returns).
    return torch.empty(q.shape, dtype=q.dtype, device=q.device)


UPDATE_NAME = "aoti_cuda_decode_attention_update"
UPDATE_QUALIFIED = f"{NAMESPACE}::{UPDATE_NAME}"
UPDATE_SHIM = "aoti_torch_cuda_" + UPDATE_NAME
UPDATE_SHIM_DECLARATION = (f"AOTITorchError {UPDATE_SHIM}(AtenTensorHandle q, AtenTensorHandle k_new, "
                           "AtenTensorHandle v_new, AtenTensorHandle k_cache, AtenTensorHandle v_cache, "
                           "AtenTensorHandle input_pos, double scale, AtenTensorHandle* ret0)")


@torch.library.custom_op(UPDATE_QUALIFIED, mutates_args=("k_cache", "v_cache"))
def decode_attention_update(q: torch.Tensor, k_new: torch.Tensor, v_new: torch.Tensor, k_cache: torch.Tensor,
                            v_cache: torch.Tensor, input_pos: torch.Tensor, scale: float) -> torch.Tensor:
    """The update form: the step's K and V rows (k_new / v_new [B, Hkv, 1, D]) stored at each batch's position
    (when it lies in [0, L)), then decode_attention over the updated caches. One operator instead of the model's
    index_copy_ + attention, so that the exported program has no separate kernels writing the cache: AOTInductor
    passes the cache buffers themselves to the shim (the mutation is declared, so it is not functionalized away)."""
    length = k_cache.shape[2]
    pos = input_pos.reshape(-1).to(k_cache.device)
    for b in range(k_cache.shape[0]):
        p = pos[b if pos.numel() > 1 else 0]
        if 0 <= int(p) < length:
            k_cache[b, :, int(p)] = k_new[b, :, 0]
            v_cache[b, :, int(p)] = v_new[b, :, 0]
    return decode_attention(q, k_cache, v_cache, input_pos, scale)


@decode_attention_update.register_fake
def _(q, k_new, v_new, k_cache, v_cache, input_pos, scale):
    return torch.empty(q.shape, dtype=q.dtype, device=q.device)


QKV_NAME = "aoti_cuda_decode_attention_qkv"
QKV_QUALIFIED = f"{NAMESPACE}::{QKV_NAME}"
QKV_SHIM = "aoti_torch_cuda_" + QKV_NAME
QKV_SHIM_DECLARATION = (f"AOTITorchError {QKV_SHIM}(AtenTensorHandle qkv, AtenTensorHandle rope_cos, "
                        "AtenTensorHandle rope_sin, AtenTensorHandle k_cache, AtenTensorHandle v_cache, "
                        "AtenTensorHandle input_pos, int64_t n_heads, double scale, AtenTensorHandle* ret0)")


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [B, 1, h, D] rotated by cos / sin [B or 1, D/2] (float32): the model's apply_rope, one row per batch."""
    half = x.shape[-1] // 2
    c = cos[:, None, None, :]
    s = sin[:, None, None, :]
    x1 = x[..., :half].float()
    x2 = x[..., half:].float()
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).to(x.dtype)


@torch.library.custom_op(QKV_QUALIFIED, mutates_args=("k_cache", "v_cache"))
def decode_attention_qkv(qkv: torch.Tensor, rope_cos: torch.Tensor, rope_sin: torch.Tensor, k_cache: torch.Tensor,
                         v_cache: torch.Tensor, input_pos: torch.Tensor, n_heads: int, scale: float) -> torch.Tensor:
    """The qkv form: q and the step's K row rotated with the tables' row at each batch's position, then the
    update form with the step's V row as it is."""
    b, rows, width = qkv.shape
    hkv, d = k_cache.shape[1], k_cache.shape[3]
    if rows != 1 or width != (n_heads + 2 * hkv) * d:
        raise ValueError(f"{QKV_QUALIFIED}: qkv {tuple(qkv.shape)} must be [B, 1, (n_heads + 2 * kv_heads) * "
                         f"head_dim] = [B, 1, {(n_heads + 2 * hkv) * d}]")
    row = input_pos.reshape(-1).to(qkv.device).clamp(0, rope_cos.shape[0] - 1)
    cos, sin = rope_cos.index_select(0, row), rope_sin.index_select(0, row)
    q = rotate(qkv[..., : n_heads * d].reshape(b, 1, n_heads, d), cos, sin)
    k = rotate(qkv[..., n_heads * d : (n_heads + hkv) * d].reshape(b, 1, hkv, d), cos, sin)
    v = qkv[..., (n_heads + hkv) * d :].reshape(b, 1, hkv, d)
    return decode_attention_update(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), k_cache, v_cache,
                                   input_pos, scale)


@decode_attention_qkv.register_fake
def _(qkv, rope_cos, rope_sin, k_cache, v_cache, input_pos, n_heads, scale):
    return torch.empty((qkv.shape[0], n_heads, 1, k_cache.shape[3]), dtype=qkv.dtype, device=qkv.device)


def custom_ops_to_c_shims():
    """The aot_inductor.custom_ops_to_c_shims entries for the three operators: {OpOverload: [C declaration]}."""
    return {torch.ops.aoti_cuda.aoti_cuda_decode_attention.default: [SHIM_DECLARATION],
            torch.ops.aoti_cuda.aoti_cuda_decode_attention_update.default: [UPDATE_SHIM_DECLARATION],
            torch.ops.aoti_cuda.aoti_cuda_decode_attention_qkv.default: [QKV_SHIM_DECLARATION]}


# The shim each exporter choice (export_llm.py --sdpa) makes decode call.
SHIM_OF_CHOICE = {"decode-op": SHIM, "decode-op-update": UPDATE_SHIM, "decode-op-qkv": QKV_SHIM,
                  "decode-op-fused": QKV_SHIM}
