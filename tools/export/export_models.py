#!/usr/bin/env python3
"""Export aoti_cuda's reference programs with ExecuTorch's CUDA backend.

For every model this writes DIR/<name>/ in the layout of shared/fixtures (see its README.md):

    <name>.pte               program; each method's AOTInductor .so is named data "<method>_so_blob"
    aoti_cuda_blob.ptd       "<method>_weights_blob" for every method
    manifest.json            methods -> inputs/outputs (file, dtype, shape, atol/rtol), alt_case for
                             dynamic models, pte, data_files, so_sizes (+ notes / flags for new models)
    <method>.in<i>.bin       raw contiguous little-endian inputs (bfloat16/float16 as 16-bit patterns)
    <method>.out<i>.bin      expected outputs, computed by eager PyTorch on the GPU
    imports.txt              aoti_torch_* / cu* / cuda* undefined symbols of the embedded .so files

Pipeline (ExecuTorch 1.2.0 + PyTorch 2.11): torch.export.export on CPU ->
to_edge_transform_and_lower(partitioner=CudaPartitioner([method_name spec])) -> to_executorch().
The CUDA backend moves the program to the GPU and AOT-compiles it with Triton-only kernels
(max_autotune is forced on by the backend), so a GPU is required.

Usage:
    python3 tools/export/export_models.py --list
    python3 tools/export/export_models.py --out DIR [--models a,b,...] [--jobs N] [--gemm triton|cublas]
    python3 tools/export/export_models.py --self-test [FIXTURES_DIR]      # no torch needed

Only the standard library is imported at module level; torch/executorch load when exporting.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
import subprocess
import sys
import time
import traceback
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gemm_backend  # noqa: E402  (sibling module, stdlib only)
import pte_inspect  # noqa: E402  (sibling module, stdlib only)

# --------------------------------------------------------------------------------------------
# Model descriptions
# --------------------------------------------------------------------------------------------


@dataclass
class Method:
    """One exported method: the module to export and how to check it."""

    name: str
    module: Any  # torch.nn.Module whose forward() is the method
    inputs: Tuple[Any, ...]  # example inputs (CPU tensors); also the recorded test case
    atol: float
    rtol: float
    dynamic_shapes: Any = None  # as passed to torch.export.export
    alt_inputs: Optional[Tuple[Any, ...]] = None  # a second shape for dynamic methods


@dataclass
class Model:
    methods: List[Method]
    notes: Optional[str] = None
    # Which partitioner lowers the methods: "cuda" = ExecuTorch's CudaPartitioner (everything in
    # one delegate); "partial" = our subclass that leaves `keep_out_ops` to the portable CPU kernels.
    partitioner: str = "cuda"
    keep_out_ops: Tuple[str, ...] = ()
    expect_not_runnable: bool = False
    # Extra expected results computed from eager call sequences (see lm).
    sequences: Optional[Callable[[str], Dict[str, Any]]] = None
    inductor_config: Dict[str, Any] = field(default_factory=dict)
    # Where torch.export runs: "cpu", or "cuda" for models whose weights only exist on the GPU
    # (torchao int4 packing, see int4_models.py).
    export_device: str = "cpu"


@dataclass
class Entry:
    name: str
    build: Callable[[], Model]
    summary: str
    default: bool = True


REGISTRY: Dict[str, Entry] = {}


def register(name: str, summary: str, default: bool = True):
    def wrap(fn: Callable[[], Model]) -> Callable[[], Model]:
        REGISTRY[name] = Entry(name, fn, summary, default)
        return fn

    return wrap


def _gen(name: str):
    """A CPU generator seeded from the model name, so every run writes the same files."""
    import torch

    g = torch.Generator()
    g.manual_seed(zlib.crc32(name.encode()))
    return g


def _seed(name: str) -> None:
    import torch

    torch.manual_seed(zlib.crc32(name.encode()))


def _randn(g, *shape, dtype=None):
    import torch

    t = torch.randn(*shape, generator=g)
    return t if dtype is None else t.to(dtype)


# The ten fixture models.  Shapes, dtypes and tolerances match shared/fixtures/*/manifest.json.


@register("add", "f32[3,4] + f32[3,4]: smallest program, empty weights blob")
def _add() -> Model:
    import torch

    class Add(torch.nn.Module):
        def forward(self, x, y):
            return x + y

    g = _gen("add")
    return Model([Method("forward", Add(), (_randn(g, 3, 4), _randn(g, 3, 4)), 1e-5, 1e-5)])


def _mlp_module(in_f=64, hidden=128, out_f=10):
    import torch

    return torch.nn.Sequential(
        torch.nn.Linear(in_f, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, out_f)
    )


@register("mlp", "f32[8,64] -> f32[8,10]: Linear/ReLU/Linear, Triton GEMM")
def _mlp() -> Model:
    _seed("mlp")
    g = _gen("mlp")
    return Model([Method("forward", _mlp_module().eval(), (_randn(g, 8, 64),), 1e-3, 1e-3)])


@register("conv", "f32[2,3,32,32] -> f32[2,10]: conv + batchnorm + pooling")
def _conv() -> Model:
    import torch

    class Conv(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = torch.nn.Conv2d(3, 16, 3, padding=1)
            self.pool = torch.nn.MaxPool2d(2)
            self.conv2 = torch.nn.Conv2d(16, 32, 3, padding=1)
            self.bn = torch.nn.BatchNorm2d(32)
            self.fc = torch.nn.Linear(32, 10)

        def forward(self, x):
            x = self.pool(torch.relu(self.conv1(x)))
            x = torch.relu(self.bn(self.conv2(x)))
            x = torch.nn.functional.adaptive_avg_pool2d(x, 1).flatten(1)
            return self.fc(x)

    _seed("conv")
    m = Conv()
    with torch.no_grad():  # non-trivial running stats so batchnorm is not an identity
        m.bn.running_mean.uniform_(-0.5, 0.5)
        m.bn.running_var.uniform_(0.5, 1.5)
    g = _gen("conv")
    return Model([Method("forward", m.eval(), (_randn(g, 2, 3, 32, 32),), 1e-3, 1e-3)])


@register("dynamic_mlp", "f32[B,64] -> f32[B,10], B in 1..64 (alt_case B=17)")
def _dynamic_mlp() -> Model:
    from torch.export import Dim

    _seed("dynamic_mlp")
    g = _gen("dynamic_mlp")
    batch = Dim("batch", min=1, max=64)
    return Model(
        [
            Method(
                "forward",
                _mlp_module().eval(),
                (_randn(g, 4, 64),),
                1e-3,
                1e-3,
                dynamic_shapes=({0: batch},),
                alt_inputs=(_randn(g, 17, 64),),
            )
        ]
    )


@register("bf16_mlp", "bf16[8,64] -> bf16[8,10]")
def _bf16_mlp() -> Model:
    import torch

    _seed("bf16_mlp")
    g = _gen("bf16_mlp")
    m = _mlp_module().to(torch.bfloat16).eval()
    return Model([Method("forward", m, (_randn(g, 8, 64, dtype=torch.bfloat16),), 0.05, 0.05)])


@register("embed", "i64[4,7] -> f32[4,32]: embedding, mean, layer norm")
def _embed() -> Model:
    import torch

    class Embed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(100, 32)
            self.norm = torch.nn.LayerNorm(32)

        def forward(self, ids):
            return self.norm(self.emb(ids).mean(dim=1))

    _seed("embed")
    g = _gen("embed")
    ids = torch.randint(0, 100, (4, 7), generator=g, dtype=torch.int64)
    return Model([Method("forward", Embed().eval(), (ids,), 1e-4, 1e-4)])


@register("multi_out", "f32[5,6] -> f32[5,6], f32[5], i32[5,6]")
def _multi_out() -> Model:
    import torch

    class MultiOut(torch.nn.Module):
        def forward(self, x):
            return x * 2.0 + 1.0, x.sum(dim=1), (x * 10.0).to(torch.int32)

    g = _gen("multi_out")
    return Model([Method("forward", MultiOut(), (_randn(g, 5, 6),), 1e-5, 1e-5)])


@register("encdec", "two methods encode f32[4,32]->f32[4,16], decode f32[4,16]->f32[4,32]")
def _encdec() -> Model:
    import torch

    class Encoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(32, 16)

        def forward(self, x):
            return torch.tanh(self.fc(x))

    class Decoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(16, 32)

        def forward(self, z):
            return self.fc(z)

    _seed("encdec")
    g = _gen("encdec")
    return Model(
        [
            Method("encode", Encoder().eval(), (_randn(g, 4, 32),), 1e-3, 1e-3),
            Method("decode", Decoder().eval(), (_randn(g, 4, 16),), 1e-3, 1e-3),
        ]
    )


@register("kv_cache", "state: cache[pos] = x, returns cache.sum(0) (f32[1,32], i64[1] -> f32[32])")
def _kv_cache() -> Model:
    import torch

    class KVCache(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("cache", torch.zeros(16, 32))

        def forward(self, x, pos):
            self.cache[pos] = x
            return self.cache.sum(dim=0)

    g = _gen("kv_cache")
    return Model(
        [
            Method(
                "forward",
                KVCache().eval(),
                (_randn(g, 1, 32), torch.tensor([3], dtype=torch.int64)),
                1e-5,
                1e-5,
            )
        ]
    )


def _attention_block(dim=64, heads=4, hidden=256):
    import torch
    import torch.nn.functional as F

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.heads = heads
            self.ln1 = torch.nn.LayerNorm(dim)
            self.qkv = torch.nn.Linear(dim, 3 * dim)
            self.proj = torch.nn.Linear(dim, dim)
            self.ln2 = torch.nn.LayerNorm(dim)
            self.fc1 = torch.nn.Linear(dim, hidden)
            self.fc2 = torch.nn.Linear(hidden, dim)

        def forward(self, x):
            b, t, c = x.shape
            # Slices, not .split(): the edge dialect turns split into
            # aten::split_copy, a fallback kernel ExecuTorch 1.2's CUDA backend
            # does not allow (seen on the H200: "missing fallback kernels").
            qkv = self.qkv(self.ln1(x))
            q, k, v = qkv[..., :c], qkv[..., c : 2 * c], qkv[..., 2 * c :]
            q = q.reshape(b, t, self.heads, c // self.heads).transpose(1, 2)
            k = k.reshape(b, t, self.heads, c // self.heads).transpose(1, 2)
            v = v.reshape(b, t, self.heads, c // self.heads).transpose(1, 2)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(b, t, c))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    return Block()


@register("block", "bf16[1,16,64]: layer norm, causal SDPA (Triton), GELU MLP")
def _block() -> Model:
    import torch

    _seed("block")
    g = _gen("block")
    m = _attention_block().to(torch.bfloat16).eval()
    return Model([Method("forward", m, (_randn(g, 1, 16, 64, dtype=torch.bfloat16),), 0.06, 0.06)])


# New models.


@register("fp16_mlp", "f16[8,64] -> f16[8,10]: float16 Linear/GELU/Linear")
def _fp16_mlp() -> Model:
    import torch

    _seed("fp16_mlp")
    g = _gen("fp16_mlp")
    m = torch.nn.Sequential(
        torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 10)
    ).to(torch.float16)
    return Model([Method("forward", m.eval(), (_randn(g, 8, 64, dtype=torch.float16),), 1e-2, 1e-2)])


@register(
    "sdpa_bf16_dynamic",
    "bf16 q,k,v[1,2,L,32] -> causal SDPA, L dynamic in 2..128 (alt_case L=37)",
)
def _sdpa_bf16_dynamic() -> Model:
    import torch
    import torch.nn.functional as F
    from torch.export import Dim

    class Attention(torch.nn.Module):
        def forward(self, q, k, v):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    g = _gen("sdpa_bf16_dynamic")
    bf16 = torch.bfloat16

    def qkv(length):
        return tuple(_randn(g, 1, 2, length, 32, dtype=bf16) for _ in range(3))

    seq = Dim("seq", min=2, max=128)
    return Model(
        [
            Method(
                "forward",
                Attention(),
                qkv(16),
                0.06,
                0.06,
                dynamic_shapes=({2: seq}, {2: seq}, {2: seq}),
                alt_inputs=qkv(37),
            )
        ],
        notes="SDPA is replaced by ExecuTorch's Triton SDPA kernel (bf16 only) inside the .so.",
    )


def _small_cnn():
    """Hand-written stand-in for a torchvision classifier (used when torchvision is missing)."""
    import torch

    def fire(cin, squeeze, expand):
        class Fire(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.squeeze = torch.nn.Conv2d(cin, squeeze, 1)
                self.e1 = torch.nn.Conv2d(squeeze, expand, 1)
                self.e3 = torch.nn.Conv2d(squeeze, expand, 3, padding=1)

            def forward(self, x):
                s = torch.relu(self.squeeze(x))
                return torch.cat([torch.relu(self.e1(s)), torch.relu(self.e3(s))], dim=1)

        return Fire()

    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, stride=2),
        torch.nn.BatchNorm2d(32),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(3, stride=2, ceil_mode=True),
        fire(32, 16, 32),
        fire(64, 16, 64),
        torch.nn.MaxPool2d(3, stride=2, ceil_mode=True),
        fire(128, 32, 64),
        torch.nn.Conv2d(128, 10, 1),  # no ReLU after it (unlike squeezenet): signed logits
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
    )


def _liven_up(net) -> None:
    """Random batch-norm statistics/affine and default Linear init for a torchvision net.

    torchvision's own init (BN identity, classifier N(0, 0.01)) gives near-constant, tiny logits,
    which makes a poor test: non-identity batch norms also exercise the folded-constant path."""
    import torch

    with torch.no_grad():
        for mod in net.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.2, 0.2)
                mod.running_var.uniform_(0.5, 1.5)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.2, 0.2)
            elif isinstance(mod, torch.nn.Linear):
                mod.reset_parameters()


# 1x1 convolutions: with max_autotune, Inductor may pick an "aten conv1x1 via mm" extern choice,
# which the CUDA backend rejects as a missing fallback kernel.  conv_1x1_as_mm lowers them to
# plain GEMMs that go through the Triton templates instead.
_CNN_INDUCTOR_CONFIG = {"conv_1x1_as_mm": True}


@register("cnn", "torchvision squeezenet1_1 (random weights, 10 classes), f32[1,3,64,64] -> f32[1,10]")
def _cnn() -> Model:
    import torch

    _seed("cnn")
    g = _gen("cnn")
    try:
        import torchvision

        net = torchvision.models.squeezenet1_1(weights=None, num_classes=10)
        notes = f"torchvision {torchvision.__version__} squeezenet1_1(weights=None, num_classes=10)"
    except Exception as exc:  # torchvision absent or broken: keep the model, say so
        net = _small_cnn()
        notes = f"torchvision unavailable ({type(exc).__name__}: {exc}); hand-written fire-module CNN"
    _liven_up(net)
    return Model(
        [Method("forward", net.eval(), (_randn(g, 1, 3, 64, 64),), 2e-3, 2e-3)],
        notes=notes + "; Inductor conv_1x1_as_mm=True during lowering",
        inductor_config=dict(_CNN_INDUCTOR_CONFIG),
    )


@register(
    "cnn_mobilenet",
    "torchvision mobilenet_v3_small(width_mult=0.5): depthwise conv, hardswish, SE (optional)",
    default=False,
)
def _cnn_mobilenet() -> Model:
    import torch
    import torchvision

    _seed("cnn_mobilenet")
    g = _gen("cnn_mobilenet")
    net = torchvision.models.mobilenet_v3_small(weights=None, num_classes=10, width_mult=0.5)
    _liven_up(net)  # without it the logits are ~1e-8 and any result would pass
    return Model(
        [Method("forward", net.eval(), (_randn(g, 1, 3, 64, 64),), 5e-4, 2e-3)],
        notes=f"torchvision {torchvision.__version__} mobilenet_v3_small(width_mult=0.5, num_classes=10); "
        "Inductor conv_1x1_as_mm=True during lowering",
        inductor_config=dict(_CNN_INDUCTOR_CONFIG),
    )


@register(
    "mlp_wide",
    "f32[4,4096] -> f32[4,1024]: 80 MiB of weights, for upload rate and staging checks (optional)",
    default=False,
)
def _mlp_wide() -> Model:
    _seed("mlp_wide")
    g = _gen("mlp_wide")
    net = _mlp_module(4096, 4096, 1024).eval()  # 4096*4096 + 4096*1024 floats = 80 MiB
    return Model([Method("forward", net, (_randn(g, 4, 4096),), 2e-3, 2e-3)],
                 notes="optional: large enough (>= 64 MiB) that the weights go through pinned staging")


@register(
    "partial",
    "f32[4,16] -> f32[4,8]: Linear/ReLU/Linear in the delegate, sigmoid left to a CPU KernelCall",
)
def _partial() -> Model:
    import torch

    class Partial(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = torch.nn.Linear(16, 32)
            self.fc2 = torch.nn.Linear(32, 8)

        def forward(self, x):
            return torch.sigmoid(self.fc2(torch.relu(self.fc1(x))))

    _seed("partial")
    g = _gen("partial")
    return Model(
        [Method("forward", Partial().eval(), (_randn(g, 4, 16),), 1e-4, 1e-4)],
        notes="The final sigmoid is kept out of the CudaBackend delegate, so the program holds a "
        "KernelCall (aten::sigmoid.out) for the portable CPU kernels: aoti_cuda must refuse "
        "to run it with a clear error. Expected outputs are eager PyTorch anyway.",
        partitioner="partial",
        keep_out_ops=("sigmoid",),
        expect_not_runnable=True,
    )


# lm: a one-layer causal LM with a KV cache used by two methods.
LM_VOCAB, LM_DIM, LM_MAX_LEN, LM_PROMPT = 64, 32, 16, 8


def _lm_module():
    import torch

    class TinyLM(torch.nn.Module):
        """Single-head attention over a [max_len, dim] K/V cache, fp32 explicit softmax."""

        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(LM_VOCAB, LM_DIM)
            self.wq = torch.nn.Linear(LM_DIM, LM_DIM, bias=False)
            self.wk = torch.nn.Linear(LM_DIM, LM_DIM, bias=False)
            self.wv = torch.nn.Linear(LM_DIM, LM_DIM, bias=False)
            self.wo = torch.nn.Linear(LM_DIM, LM_DIM, bias=False)
            self.norm = torch.nn.LayerNorm(LM_DIM)
            self.head = torch.nn.Linear(LM_DIM, LM_VOCAB, bias=False)
            self.register_buffer("k_cache", torch.zeros(LM_MAX_LEN, LM_DIM))
            self.register_buffer("v_cache", torch.zeros(LM_MAX_LEN, LM_DIM))
            # Constants as buffers (not torch.arange in forward) so they move to the GPU with
            # the rest of the program.
            self.register_buffer("positions", torch.arange(LM_MAX_LEN))
            self.register_buffer(
                "causal", torch.tril(torch.ones(LM_PROMPT, LM_PROMPT, dtype=torch.bool))
            )
            self.scale = LM_DIM**-0.5

        def _logits(self, x, attn):
            return self.head(self.norm(x + self.wo(attn)))

        def prefill(self, tokens):  # tokens: i64[PROMPT] -> logits f32[PROMPT, VOCAB]
            x = self.emb(tokens)
            q, k, v = self.wq(x), self.wk(x), self.wv(x)
            self.k_cache[:LM_PROMPT] = k
            self.v_cache[:LM_PROMPT] = v
            scores = (q @ k.transpose(0, 1)) * self.scale
            scores = scores.masked_fill(~self.causal, -1e9)
            return self._logits(x, torch.softmax(scores, dim=-1) @ v)

        def decode(self, token, pos):  # token: i64[1], pos: i64[1] -> logits f32[1, VOCAB]
            x = self.emb(token)
            q = self.wq(x)
            self.k_cache[pos] = self.wk(x)
            self.v_cache[pos] = self.wv(x)
            scores = (q @ self.k_cache.transpose(0, 1)) * self.scale
            scores = scores.masked_fill(self.positions > pos, -1e9)
            return self._logits(x, torch.softmax(scores, dim=-1) @ self.v_cache)

    class Prefill(torch.nn.Module):
        def __init__(self, lm):
            super().__init__()
            self.lm = lm

        def forward(self, tokens):
            return self.lm.prefill(tokens)

    class Decode(torch.nn.Module):
        def __init__(self, lm):
            super().__init__()
            self.lm = lm

        def forward(self, token, pos):
            return self.lm.decode(token, pos)

    return TinyLM, Prefill, Decode


@register("lm", "two methods prefill i64[8] -> f32[8,64], decode (i64[1], i64[1]) -> f32[1,64], KV cache")
def _lm() -> Model:
    import torch

    TinyLM, Prefill, Decode = _lm_module()
    _seed("lm")
    g = _gen("lm")
    lm = TinyLM().eval()
    prompt = torch.randint(0, LM_VOCAB, (LM_PROMPT,), generator=g, dtype=torch.int64)
    token = torch.randint(0, LM_VOCAB, (1,), generator=g, dtype=torch.int64)
    pos = torch.tensor([LM_PROMPT], dtype=torch.int64)

    def sequences(device: str) -> Dict[str, Any]:
        # decode right after prefill on ONE module: the result if the cache were shared.
        shared = copy.deepcopy(lm).to(device)
        with torch.no_grad():
            shared.prefill(prompt.to(device))
            out = shared.decode(token.to(device), pos.to(device))
        return {"decode": [out]}

    return Model(
        [
            Method("prefill", Prefill(lm), (prompt,), 1e-4, 1e-4),
            Method("decode", Decode(lm), (token, pos), 1e-4, 1e-4),
        ],
        notes=(
            "prefill and decode are exported separately from one module that owns k_cache/v_cache. "
            "ExecuTorch 1.2 lowers each method to its own CudaBackend delegate (.so + weights blob); "
            "the mutated caches become constants inside each delegate, so every method has a private "
            "copy and state is NOT shared between methods. methods.decode.outputs are therefore decode "
            "on a fresh (zero) cache, which is what this program is expected to return even right after "
            "prefill (expectation from the 1.2 exporter's code, to be confirmed on a GPU). "
            "methods.decode.after_prefill holds eager PyTorch's decode after prefill on one shared "
            "module: a runtime that shares the cache across methods would produce that instead."
        ),
        sequences=sequences,
    )


import int4_models  # noqa: E402  (sibling module: int4 weight-only models, need torchao)

int4_models.add_to(sys.modules[__name__])


# --------------------------------------------------------------------------------------------
# Writing tensors and manifests
# --------------------------------------------------------------------------------------------

DTYPE_NAMES = {
    "torch.float32": "float32",
    "torch.float16": "float16",
    "torch.bfloat16": "bfloat16",
    "torch.float64": "float64",
    "torch.int64": "int64",
    "torch.int32": "int32",
    "torch.int16": "int16",
    "torch.int8": "int8",
    "torch.uint8": "uint8",
    "torch.bool": "bool",
}


def dtype_name(t) -> str:
    name = DTYPE_NAMES.get(str(t.dtype))
    if name is None:
        raise ValueError(f"dtype {t.dtype} has no manifest name")
    return name


def tensor_bytes(t) -> bytes:
    """Raw contiguous little-endian bytes; 16-bit floats as their bit patterns."""
    import torch

    if sys.byteorder != "little":
        raise RuntimeError("tensor files are little-endian; this host is not")
    t = t.detach().to("cpu").contiguous()
    if t.dtype in (torch.bfloat16, torch.float16):
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def flatten_outputs(out) -> List[Any]:
    if isinstance(out, (tuple, list)):
        result: List[Any] = []
        for item in out:
            result.extend(flatten_outputs(item))
        return result
    return [out]


def write_case(out_dir: str, prefix: str, inputs, outputs, atol: float, rtol: float) -> Dict[str, Any]:
    """Write <prefix>.in<i>.bin / <prefix>.out<i>.bin and return their manifest records."""
    record: Dict[str, Any] = {"inputs": [], "outputs": []}
    for i, t in enumerate(inputs):
        name = f"{prefix}.in{i}.bin"
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(tensor_bytes(t))
        record["inputs"].append({"file": name, "dtype": dtype_name(t), "shape": list(t.shape)})
    for i, t in enumerate(outputs):
        name = f"{prefix}.out{i}.bin"
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(tensor_bytes(t))
        record["outputs"].append(
            {"file": name, "dtype": dtype_name(t), "shape": list(t.shape), "atol": atol, "rtol": rtol}
        )
    return record


def write_manifest(path: str, manifest: Dict[str, Any]) -> None:
    # Same formatting as shared/fixtures: one-space indent, no trailing newline.
    with open(path, "w") as f:
        f.write(json.dumps(manifest, indent=1))


def write_imports(path: str, so_blobs: List[bytes]) -> List[str]:
    names = pte_inspect.filtered_imports(so_blobs)
    with open(path, "w") as f:
        f.write("".join(n + "\n" for n in names))
    return names


# --------------------------------------------------------------------------------------------
# Export
# --------------------------------------------------------------------------------------------


def _eager(module, inputs, device: str):
    """Run a fresh copy of `module` (state untouched for the export) on `device`."""
    import torch

    m = copy.deepcopy(module).to(device).eval()
    with torch.no_grad():
        out = m(*[t.to(device) for t in inputs])
    return [t.detach().to("cpu") for t in flatten_outputs(out)]


def _make_partitioner(model: Model, method_name: str):
    from executorch.backends.cuda.cuda_backend import CudaBackend
    from executorch.backends.cuda.cuda_partitioner import CudaPartitioner

    specs = [CudaBackend.generate_method_name_compile_spec(method_name)]
    if model.partitioner == "cuda":
        return CudaPartitioner(specs)

    from executorch.backends.aoti.aoti_partitioner import AotiPartitioner

    keep_out = model.keep_out_ops

    class KeepOutCudaPartitioner(AotiPartitioner):
        """CudaPartitioner, minus ops named in keep_out (they stay portable-kernel KernelCalls).

        Only ops at the end of the graph can be kept out: an untagged node between tagged ones
        would split the single "tag0" partition into a cycle.
        """

        def __init__(self):
            super().__init__(CudaBackend.__name__, specs)

        @staticmethod
        def _kept_out(node) -> bool:
            return node.op == "call_function" and any(k in str(node.target) for k in keep_out)

        def partition(self, exported_program):
            result = super().partition(exported_program)
            for node in result.tagged_exported_program.graph.nodes:
                if self._kept_out(node):
                    node.meta.pop("delegation_tag", None)
            return result

        def ops_to_not_decompose(self, ep):
            ops, check = super().ops_to_not_decompose(ep)
            return [op for op in ops if not any(k in str(op) for k in keep_out)], check

    return KeepOutCudaPartitioner()


def _install_stub_backend(so_path: str) -> None:
    """Testing aid without a GPU: replace CudaBackend.preprocess by a stub that stores the given
    ELF file as the .so and a few bytes as weights, under the same keys and tags as 1.2.0."""
    from executorch.backends.cuda.cuda_backend import CudaBackend
    from executorch.exir._serialize._named_data_store import NamedDataStore
    from executorch.exir.backend.backend_details import PreprocessResult

    with open(so_path, "rb") as f:
        so_bytes = f.read()

    def preprocess(cls, edge_program, compile_specs):
        method = cls.method_name_from_compile_specs(compile_specs)
        store = NamedDataStore()
        store.add_named_data(method + "_so_blob", so_bytes, 1, None)
        store.add_named_data(method + "_weights_blob", method.encode() * 4, 1, "aoti_cuda_blob")
        return PreprocessResult(b"", {}, store.get_named_data_store_output())

    CudaBackend.preprocess = classmethod(preprocess)


def export_model(name: str, out_root: str, device: str, gemm: str = "triton") -> Dict[str, Any]:
    """Export one model into out_root/name; returns a summary dict. Raises on failure."""
    # Build in OUT/_work/<name>; only a complete export is moved to OUT/<name>, a failed one
    # goes to OUT/_failed/<name> for inspection.  A stale OUT/<name> is removed first so an old
    # result can never pass for a new one.
    final_dir = os.path.join(out_root, name)
    out_dir = os.path.join(out_root, "_work", name)
    failed_dir = os.path.join(out_root, "_failed", name)
    for d in (final_dir, out_dir, failed_dir):
        if os.path.isdir(d):
            shutil.rmtree(d)
    os.makedirs(out_dir)
    try:
        info = _export_into(name, out_dir, device, gemm)
    except BaseException:
        os.makedirs(os.path.dirname(failed_dir), exist_ok=True)
        os.replace(out_dir, failed_dir)
        raise
    os.replace(out_dir, final_dir)
    try:
        os.rmdir(os.path.dirname(out_dir))  # OUT/_work, once nothing else is being built there
    except OSError:
        pass
    return info


def _export_into(name: str, out_dir: str, device: str, gemm: str = "triton") -> Dict[str, Any]:
    import torch
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

    model = REGISTRY[name].build()

    # 1. Expected outputs, from copies so that buffers (kv caches) keep their initial values
    #    for the export.
    t0 = time.time()
    methods_manifest: Dict[str, Any] = {}
    extra = model.sequences(device) if model.sequences else {}
    for m in model.methods:
        rec = write_case(out_dir, m.name, m.inputs, _eager(m.module, m.inputs, device), m.atol, m.rtol)
        if m.dynamic_shapes is not None:
            rec["dynamic_shapes"] = repr(m.dynamic_shapes)
        if m.alt_inputs is not None:
            rec["alt_case"] = write_case(
                out_dir, f"{m.name}.alt", m.alt_inputs, _eager(m.module, m.alt_inputs, device), m.atol, m.rtol
            )
        if m.name in extra:
            after = write_case(out_dir, f"{m.name}.after_prefill", m.inputs, extra[m.name], m.atol, m.rtol)
            after["inputs"] = rec["inputs"]  # same inputs as the plain case; don't duplicate files
            for i in range(len(m.inputs)):
                os.remove(os.path.join(out_dir, f"{m.name}.after_prefill.in{i}.bin"))
            rec["after_prefill"] = after
        methods_manifest[m.name] = rec
    t_eager = time.time() - t0

    # 2. torch.export on CPU (the backend moves the program to the GPU itself).
    t0 = time.time()
    programs = {}
    with torch.no_grad():
        for m in model.methods:
            inputs = tuple(t.to(model.export_device) for t in m.inputs)
            programs[m.name] = torch.export.export(
                copy.deepcopy(m.module).to(model.export_device).eval(), inputs, dynamic_shapes=m.dynamic_shapes
            )
    t_export = time.time() - t0

    # 3. Lower with the CUDA backend (AOTInductor + Triton autotuning; --gemm cublas: GEMMs as
    #    aoti_torch_cuda_{mm,addmm,bmm}_out calls, see gemm_backend.py) and serialize.
    from executorch.backends.cuda.cuda_backend import CudaBackend

    t0 = time.time()
    partitioners = {m.name: [_make_partitioner(model, m.name)] for m in model.methods}
    config = EdgeCompileConfig(_check_ir_validity=False, _skip_dim_order=True)
    with torch._inductor.config.patch(model.inductor_config), gemm_backend.gemm_context(gemm, CudaBackend) as accepted:
        edge = to_edge_transform_and_lower(programs, partitioner=partitioners, compile_config=config)
        et_program = edge.to_executorch()
    t_lower = time.time() - t0

    pte_name = f"{name}.pte"
    with open(os.path.join(out_dir, pte_name), "wb") as f:
        et_program.write_to_file(f)
    et_program.write_tensor_data_to_file(out_dir)
    data_files = sorted(f for f in os.listdir(out_dir) if f.endswith(".ptd"))

    # 4. Inspect what we wrote: .so sizes and imports, delegation as intended.
    pte = pte_inspect.PteFile.load(os.path.join(out_dir, pte_name))
    so_keys = pte.so_keys()
    so_blobs = [pte.blob(k) for k in so_keys]
    imports = write_imports(os.path.join(out_dir, "imports.txt"), so_blobs)
    kernel_ops = sorted({op for mi in pte.methods for op in mi.kernel_ops})
    if model.expect_not_runnable and not kernel_ops:
        raise RuntimeError(f"{name}: expected a KernelCall outside the delegate, found none")
    if not model.expect_not_runnable and kernel_ops:
        raise RuntimeError(f"{name}: unexpected KernelCalls {kernel_ops} (not fully delegated)")
    if sorted(mi.name for mi in pte.methods) != sorted(methods_manifest):
        raise RuntimeError(f"{name}: program methods {[mi.name for mi in pte.methods]} != {list(methods_manifest)}")

    manifest: Dict[str, Any] = {
        "name": name,
        "methods": methods_manifest,
        "pte": pte_name,
        "data_files": data_files,
        "so_sizes": [len(b) for b in so_blobs],
    }
    if model.expect_not_runnable:
        manifest["expect_not_runnable"] = True
        manifest["kernel_calls"] = kernel_ops
    if model.notes:
        manifest["notes"] = model.notes
    if gemm != "triton":  # the fixtures' manifests (Triton GEMMs) stay as they were
        manifest["gemm"] = gemm
        manifest["gemm_kernels"] = dict(accepted)
    write_manifest(os.path.join(out_dir, "manifest.json"), manifest)

    total_bytes = sum(os.path.getsize(os.path.join(out_dir, f)) for f in os.listdir(out_dir))
    return {
        "eager_s": t_eager,
        "export_s": t_export,
        "lower_s": t_lower,
        "so": len(so_blobs),
        "imports": len(imports),
        "kernel_calls": ",".join(kernel_ops) or "-",
        "bytes": total_bytes,
    }


def _prepare_environment() -> None:
    """Point ExecuTorch's .ptd serializer at the flatc shipped in the executorch wheel.

    pip --target puts the console-script wrapper in <target>/bin, which is not on PATH; the real
    binary lives in executorch/data/bin."""
    if os.environ.get("FLATC_EXECUTABLE"):
        return
    try:
        import importlib.util

        spec = importlib.util.find_spec("executorch")
    except Exception:
        return
    if spec and spec.submodule_search_locations:
        for loc in spec.submodule_search_locations:
            flatc = os.path.join(loc, "data", "bin", "flatc")
            if os.path.isfile(flatc):
                if not os.access(flatc, os.X_OK):
                    os.chmod(flatc, 0o755)
                os.environ["FLATC_EXECUTABLE"] = flatc
                return


# --------------------------------------------------------------------------------------------
# Self-test (no torch): re-derive so_sizes / imports / delegation from existing fixtures
# --------------------------------------------------------------------------------------------


def self_test(fixtures: str) -> int:
    failures = 0
    names = sorted(d for d in os.listdir(fixtures) if os.path.isfile(os.path.join(fixtures, d, "manifest.json")))
    if not names:
        print(f"self-test: no <model>/manifest.json under {fixtures}")
        return 1
    nm = shutil.which("nm")
    for d in names:
        folder = os.path.join(fixtures, d)
        with open(os.path.join(folder, "manifest.json")) as f:
            text = f.read()
        manifest = json.loads(text)
        problems = []
        if json.dumps(manifest, indent=1) != text:
            problems.append("manifest formatting differs from json.dumps(indent=1)")
        pte = pte_inspect.PteFile.load(os.path.join(folder, manifest["pte"]))
        blobs = [pte.blob(k) for k in pte.so_keys()]
        if [len(b) for b in blobs] != manifest["so_sizes"]:
            problems.append(f"so_sizes {[len(b) for b in blobs]} != {manifest['so_sizes']}")
        derived = pte_inspect.filtered_imports(blobs)
        with open(os.path.join(folder, "imports.txt")) as f:
            recorded = f.read()
        if "".join(n + "\n" for n in derived) != recorded:
            problems.append("imports.txt differs from the ELF reader's result")
        if nm:  # cross-check the pure-Python ELF reader against binutils
            import tempfile

            nm_names = set()
            for blob in blobs:
                with tempfile.NamedTemporaryFile(suffix=".so") as tmp:
                    tmp.write(blob)
                    tmp.flush()
                    out = subprocess.run([nm, "-D", "--undefined-only", tmp.name], capture_output=True, text=True, check=True).stdout
                for line in out.splitlines():
                    sym = line.split()[-1].split("@")[0]
                    if pte_inspect.IMPORT_FILTER.match(sym):
                        nm_names.add(sym)
            if sorted(nm_names) != derived:
                problems.append("nm -D --undefined-only disagrees with the ELF reader")
        expect_kernel_calls = bool(manifest.get("expect_not_runnable"))
        for mi in pte.methods:
            if expect_kernel_calls:
                if not mi.kernel_ops:
                    problems.append(f"method {mi.name} was expected to hold a KernelCall")
            elif not mi.fully_delegated:
                problems.append(f"method {mi.name} is not fully delegated: {mi.instruction_kinds}")
            if mi.delegate_method_names != [mi.name]:
                problems.append(f"method {mi.name} delegate method_name specs {mi.delegate_method_names}")
        if sorted(mi.name for mi in pte.methods) != sorted(manifest["methods"]):
            problems.append("program methods differ from manifest methods")
        for method, rec in manifest["methods"].items():
            cases = [rec] + [rec[k] for k in ("alt_case", "after_prefill") if k in rec]
            for case in cases:
                for io in case["inputs"] + case["outputs"]:
                    size = os.path.getsize(os.path.join(folder, io["file"]))
                    elems = 1
                    for s in io["shape"]:
                        elems *= s
                    width = {"float32": 4, "int32": 4, "int64": 8, "bfloat16": 2, "float16": 2, "bool": 1}[io["dtype"]]
                    if size != elems * width:
                        problems.append(f"{io['file']}: {size} bytes != {elems}x{width}")
        status = "ok" if not problems else "FAIL"
        failures += bool(problems)
        print(f"  {d:14s} {status}  so={len(blobs)} imports={len(derived)}" + "".join(f"\n      - {p}" for p in problems))
    print(f"self-test: {len(names) - failures} passed, {failures} failed" + ("" if nm else " (nm not found: ELF reader not cross-checked)"))
    return 1 if failures else 0


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------


def _select(models_arg: Optional[str]) -> List[str]:
    if not models_arg or models_arg == "default":
        return [n for n, e in REGISTRY.items() if e.default]
    if models_arg == "all":
        return list(REGISTRY)
    names = [n.strip() for n in models_arg.split(",") if n.strip()]
    unknown = [n for n in names if n not in REGISTRY]
    if unknown:
        raise SystemExit(f"unknown model(s): {', '.join(unknown)} (see --list)")
    return names


def _print_summary(results: List[Tuple[str, str, float, str]]) -> None:
    print("\n" + "=" * 78)
    print(f"{'model':18s} {'status':7s} {'seconds':>8s}  detail")
    print("-" * 78)
    for name, status, secs, detail in results:
        print(f"{name:18s} {status:7s} {secs:8.1f}  {detail}")
    failed = sum(1 for r in results if r[1] != "ok")
    print("-" * 78)
    print(f"{len(results) - failed} passed, {failed} failed")


def _detail(info: Dict[str, Any]) -> str:
    return (
        f"so={info['so']} imports={info['imports']} kernel_calls={info['kernel_calls']} "
        f"{info['bytes'] / 1e6:.1f}MB (eager {info['eager_s']:.1f}s, export {info['export_s']:.1f}s, "
        f"lower {info['lower_s']:.1f}s)"
    )


def _run_in_process(names: List[str], out: str, device: str, gemm: str = "triton") -> List[Tuple[str, str, float, str]]:
    results = []
    for i, name in enumerate(names, 1):
        print(f"[{i}/{len(names)}] {name}: exporting ...", flush=True)
        t0 = time.time()
        try:
            info = export_model(name, out, device, gemm)
            secs = time.time() - t0
            results.append((name, "ok", secs, _detail(info)))
            print(f"[{i}/{len(names)}] {name}: ok in {secs:.1f}s  {_detail(info)}", flush=True)
        except Exception as exc:
            secs = time.time() - t0
            traceback.print_exc()
            msg = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
            results.append((name, "FAILED", secs, msg[:200]))
            print(f"[{i}/{len(names)}] {name}: FAILED after {secs:.1f}s  {msg[:200]}", flush=True)
        # JSON line for the parent process in --jobs mode.
        print("@@RESULT " + json.dumps(results[-1]), flush=True)
    return results


def _run_parallel(
    names: List[str], out: str, jobs: int, passthrough: List[str], budget: Optional[float]
) -> List[Tuple[str, str, float, str]]:
    """One child process per model (isolates crashes and Inductor state), `jobs` at a time.

    With a time budget, no model starts after it is spent and running ones are killed, so the
    caller still gets the summary and whatever finished."""
    deadline = None if budget is None else time.time() + budget
    log_dir = os.path.join(out, "_logs")
    os.makedirs(log_dir, exist_ok=True)
    pending = list(names)
    running: Dict[str, Tuple[subprocess.Popen, float, Any]] = {}
    results: Dict[str, Tuple[str, str, float, str]] = {}
    done = 0
    while pending or running:
        out_of_time = deadline is not None and time.time() >= deadline
        if out_of_time:
            for name in pending:
                results[name] = (name, "SKIPPED", 0.0, "time budget spent before it started")
                print(f"  skipped {name}: time budget spent", flush=True)
            pending = []
            for name, (proc, started, log) in running.items():
                if proc.poll() is None:
                    proc.kill()
                    print(f"  killed {name}: time budget spent after {time.time() - started:.0f}s", flush=True)
        while pending and len(running) < jobs:
            name = pending.pop(0)
            log = open(os.path.join(log_dir, f"{name}.log"), "w")
            cmd = [sys.executable, os.path.abspath(__file__), "--out", out, "--models", name, "--jobs", "1"] + passthrough
            # Own session: a kill on timeout also takes the child's Inductor compile workers.
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            running[name] = (proc, time.time(), log)
            print(f"  started {name} (log: {log.name})", flush=True)
        time.sleep(0.5)
        for name in list(running):
            proc, started, log = running[name]
            if proc.poll() is None:
                continue
            log.close()
            del running[name]
            done += 1
            secs = time.time() - started
            if out_of_time:
                try:  # the compile-worker pool of a killed child
                    os.killpg(proc.pid, 9)
                except (ProcessLookupError, PermissionError):
                    pass
            status = "TIMEOUT" if out_of_time and proc.returncode < 0 else "FAILED"
            last_line = ""
            found = None
            with open(log.name, errors="replace") as f:
                for line in f:
                    if line.startswith("@@RESULT "):
                        found = tuple(json.loads(line[len("@@RESULT "):]))
                    elif line.strip():
                        last_line = line.strip()
            result = found or (
                name, status, secs, f"child exited with {proc.returncode} ({last_line[:120]}); see {log.name}"
            )
            results[name] = result
            print(f"[{done}/{len(names)}] {name}: {result[1]} in {result[2]:.1f}s  {result[3]}", flush=True)
    return [results[n] for n in names]


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="output directory; each model goes to OUT/<name>/")
    parser.add_argument("--models", help="comma-separated names, 'default' (the default) or 'all'")
    parser.add_argument("--list", action="store_true", help="list the models and exit")
    parser.add_argument("--jobs", type=int, default=1, help="export N models at once in child processes")
    parser.add_argument("--device", default="cuda", help="device for the eager reference outputs (default cuda)")
    parser.add_argument(
        "--time-budget",
        type=float,
        metavar="SECONDS",
        help="stop starting models after this long and kill running ones (runs models in child processes)",
    )
    parser.add_argument(
        "--self-test",
        nargs="?",
        const=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "fixtures"),
        metavar="FIXTURES",
        help="re-derive so_sizes/imports/delegation of existing fixtures (no torch needed)",
    )
    parser.add_argument(
        "--gemm",
        choices=gemm_backend.GEMM_CHOICES,
        default="triton",
        help="triton: the backend's Triton GEMM templates (its own settings); cublas: GEMMs as "
        "aoti_torch_cuda_{mm,addmm,bmm}_out calls (manifest.json records \"gemm\")",
    )
    parser.add_argument(
        "--stub-backend",
        metavar="ELF_SO",
        help="testing without a GPU: skip AOTInductor and embed this ELF file as every .so",
    )
    args = parser.parse_args(argv)

    if args.list:
        for name, entry in REGISTRY.items():
            print(f"{name:18s} {'' if entry.default else '(not default) '}{entry.summary}")
        return 0
    if args.self_test is not None:
        return self_test(os.path.abspath(args.self_test))
    if not args.out:
        parser.error("--out is required (or use --list / --self-test)")

    names = _select(args.models)
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    passthrough = ["--device", args.device, "--gemm", args.gemm] + (
        ["--stub-backend", args.stub_backend] if args.stub_backend else []
    )

    t0 = time.time()
    if (args.jobs > 1 and len(names) > 1) or args.time_budget is not None:
        jobs = max(1, args.jobs)
        print(f"exporting {len(names)} models, {jobs} at a time, into {out}", flush=True)
        results = _run_parallel(names, out, jobs, passthrough, args.time_budget)
    else:
        _prepare_environment()
        import torch

        # Full fp32 precision for both sides: eager cuDNN convs default to TF32, and Inductor's
        # Triton conv/GEMM templates follow these same flags.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        if args.stub_backend:
            _install_stub_backend(args.stub_backend)
        elif not torch.cuda.is_available():
            print("error: CUDA is not available; the CUDA backend compiles on the GPU", file=sys.stderr)
            return 2
        if args.device.startswith("cuda") and not torch.cuda.is_available():
            print("error: --device cuda but CUDA is not available (use --device cpu with --stub-backend)", file=sys.stderr)
            return 2
        import executorch

        try:
            from executorch.version import __version__ as et_version
        except ImportError:
            et_version = "?"
        print(
            f"torch {torch.__version__} (CUDA {torch.version.cuda}), executorch "
            f"{et_version} from {list(executorch.__path__)}; "
            f"device {torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'none'}",
            flush=True,
        )
        results = _run_in_process(names, out, args.device, args.gemm)
    if len(names) > 1:
        _print_summary(results)
        print(f"total {time.time() - t0:.1f}s, output in {out}")
    return 0 if all(r[1] == "ok" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
