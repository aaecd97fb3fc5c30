#!/usr/bin/env python3
"""Export the benchmark LLM (model.py) with ExecuTorch 1.2's CUDA backend: prefill + decode.

    python3 tools/export/llm/export_llm.py --out DIR [--config 1b|small|tiny] [--quant bf16|int4]
        [--gemm triton|cublas]
        [--sdpa triton|decomposed|mixed|flash|decode-op|decode-op-update|decode-op-qkv|decode-op-fused]
        [--fusion executorch|inductor] [--autotune on|off] [--layers N]
        [--max-ctx N] [--prefill-hint T] [--reference-tokens N] [--split-lowering] [--stub-backend ELF]

Writes DIR/llm.pte, DIR/aoti_cuda_blob.ptd and DIR/manifest.json (config, methods, timings by
phase, sizes, and `reference`: the greedy tokens eager PyTorch generates on the same weights for the
benchmark prompt, to check a runtime's output against). Prints one line starting with
"EXPORT_TIME" with the phases in seconds.

Pipeline, as tools/export/export_models.py: build the model on the GPU from the seed ->
(int4: torchao quantize_ with Int4WeightOnlyConfig(group_size=128, int4_packing_format=
"tile_packed_to_4d"), whose linear is aten._weight_int4pack_mm, the one fallback kernel the 1.2
backend allows) -> torch.export of prefill (T dynamic in 2..max_prefill) and decode ->
to_edge_transform_and_lower(partitioner={method: [CudaPartitioner([method spec])]}) ->
to_executorch().

GEMMs (--gemm, recorded in the manifest as "gemm"): `triton` (default) keeps the backend's settings,
every matmul a Triton GEMM template; `cublas` lowers with ../gemm_backend.py's patch of CudaBackend,
so matmuls become aoti_torch_cuda_{mm,addmm,bmm}_out calls (cuBLAS in aoti_cuda); the extern kernel
names the backend's check accepted that way are logged and listed in the manifest ("gemm_kernels").

Time: the backend compiles each method with max_autotune (Triton GEMM templates benchmarked on the
GPU). All layers share one set of GEMM shapes and Inductor deduplicates identical kernels, so the
tuning cost grows with the number of distinct shapes (about 5 per method), not with the layers.
TORCHINDUCTOR_CACHE_DIR / TRITON_CACHE_DIR kept between runs make a repeat export much faster.
With --gemm cublas no GEMM is tuned.

Fusion (--fusion, in the manifest as "fusion"): `executorch` (default) keeps the backend's Inductor settings;
`inductor` lowers with AOTInductor's own defaults for the two options the backend changes (intermediates of a
fused kernel kept in float32 instead of rounded to bf16 as eager does, loop reordering after fusion on), as a
`torch._inductor.aoti_compile_and_package` user gets them.

Attention (--sdpa, in the manifest as "sdpa"; "flash_methods" lists the methods that kept flash attention):
`triton` keeps the backend's Triton SDPA kernel; `decomposed` lowers SDPA as matmuls + softmax; `mixed` does that
for decode only; `flash` decomposes decode's SDPA as `mixed` and keeps prefill's as PyTorch's flash attention
(../sdpa_backend.py), called through aoti_torch_cuda__scaled_dot_product_flash_attention, which aoti_cuda runs
with its own kernel (a runtime without that shim cannot run such a program). `decode-op`: decode's attention calls
aoti_cuda's custom operator aoti_cuda::aoti_cuda_decode_attention (decode_attention_op.py; eager: the same masked
SDPA), mapped to its C shim aoti_torch_cuda_aoti_cuda_decode_attention through AOTInductor's
aot_inductor.custom_ops_to_c_shims (../sdpa_backend.py, decode_op), a kernel whose cost grows with the position, not
the cache size; prefill as `mixed` (the backend's Triton SDPA). Only aoti_cuda runs such a program ("decode_op_methods"
in the manifest; `aoti_cuda inspect` says so). `decode-op-update`: the same with the operator's update form,
aoti_cuda::aoti_cuda_decode_attention_update, which also stores the step's K and V rows in the cache (its shim
aoti_torch_cuda_aoti_cuda_decode_attention_update), so decode has no separate kernels writing the cache.
`decode-op-qkv`: the qkv form, aoti_cuda::aoti_cuda_decode_attention_qkv (shim
aoti_torch_cuda_aoti_cuda_decode_attention_qkv), which takes the q/k/v projection's output and the rotary tables and
rotates q and k itself, so decode has no kernel between the projection and the attention. `decode-op-fused`: the qkv
form, and every decode projection through aoti_cuda::aoti_cuda_fused_linear (fused_linear_op.py, shim
aoti_torch_cuda_aoti_cuda_fused_linear) or, for a Linear that --quant int4 quantized, its int4 form
aoti_cuda::aoti_cuda_fused_linear_int4 (shim aoti_torch_cuda_aoti_cuda_fused_linear_int4, on the torchao weight's
packed data and scales), with the RMSNorms in the projections' prologues and SwiGLU and the residual adds in their
epilogues, so a decode layer is four projections and the attention. --max-ctx sets the cache length (e.g. 4096 for
the position sweep of issue 32).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))  # tools/export: export_models, gemm_backend (stdlib-only at import)

import gemm_backend  # noqa: E402
import sdpa_backend  # noqa: E402
import split_lowering  # noqa: E402
import timeline  # noqa: E402


def quantize_int4(model, group_size: int = 128) -> int:
    """torchao int4 weight-only, tile_packed_to_4d (tinygemm layout, _weight_int4pack_mm).
    Returns how many Linear layers were quantized (needs the weights on a CUDA device)."""
    import torch
    from torchao.quantization import Int4WeightOnlyConfig, quantize_

    config = Int4WeightOnlyConfig(group_size=group_size, int4_packing_format="tile_packed_to_4d")
    count = sum(1 for m in model.modules() if isinstance(m, torch.nn.Linear) and m.in_features % group_size == 0)
    quantize_(model, config)
    return count


REFERENCE_TOP = 8  # eager's highest logits recorded per reference step


def top_logits(logits, k: int = REFERENCE_TOP):
    """[[id, logit], ...]: the k highest of a [1, V] logits row, highest first, logits as float32 values."""
    import torch

    values, ids = torch.topk(logits.reshape(-1).float(), k)
    return [[int(i), float(v)] for i, v in zip(ids.tolist(), values.tolist())]


def greedy_reference(model, prompt, new_tokens: int):
    """Eager greedy generation on `model` (its cache is reset before and after): the tokens, and eager's highest
    logits at each step, so that a runtime's teacher-forced miss can be told apart into a near tie or a clear miss
    (examples/generate/reference_check.hpp)."""
    import torch

    model.reset_cache()
    out, top = [], []
    with torch.no_grad():
        logits, tok = model.prefill(prompt)
        out.append(int(tok))
        top.append(top_logits(logits))
        pos = prompt.shape[1]
        for _ in range(new_tokens - 1):
            logits, tok = model.decode(tok, torch.tensor([pos], device=prompt.device))
            out.append(int(tok))
            top.append(top_logits(logits))
            pos += 1
    model.reset_cache()
    return out, top


def export_methods(model, cfg, hint: int, device):
    """torch.export of the two methods; returns {name: ExportedProgram}."""
    import torch
    from torch.export import Dim

    from model import DecodeMethod, PrefillMethod

    t = Dim("T", min=2, max=cfg.max_prefill)
    tokens = torch.zeros(1, hint, dtype=torch.int64, device=device)
    token = torch.zeros(1, 1, dtype=torch.int64, device=device)
    pos = torch.tensor([hint], dtype=torch.int64, device=device)
    with torch.no_grad():
        return {
            "prefill": torch.export.export(PrefillMethod(model), (tokens,), dynamic_shapes=({1: t},), strict=False),
            "decode": torch.export.export(DecodeMethod(model), (token, pos), strict=False),
        }


METHOD_ORDER = ("prefill", "decode")  # export_methods' keys, in its order
SDPA_CHOICES = ("triton", "decomposed", "mixed", "flash", "decode-op", "decode-op-update", "decode-op-qkv",
                "decode-op-fused")
# --sdpa choice -> the decode attention operator's form (model.use_decode_attention_op).
DECODE_OP_FORM = {"decode-op": "", "decode-op-update": "update", "decode-op-qkv": "qkv", "decode-op-fused": "qkv"}
DECODE_OP_CHOICES = tuple(DECODE_OP_FORM)
ARGMAX_CHOICES = ("aten", "op")


def sdpa_decomposed(method: str, sdpa: str) -> bool:
    """Whether `method` is lowered with SDPA decomposed (the backend's triton_kernel_mode=OFF).

    "mixed": decode only. Decode attends with one query row, where bf16 matmuls + softmax beat the backend's
    Triton SDPA kernel (one block per KV head); prefill's many rows keep that fused kernel."""
    if sdpa not in SDPA_CHOICES:
        raise ValueError(f"--sdpa {sdpa!r}: expected one of {', '.join(SDPA_CHOICES)}")
    return sdpa == "decomposed" or (sdpa in ("mixed", "flash") and method == "decode")


def sdpa_flash(method: str, sdpa: str) -> bool:
    """Whether `method` keeps PyTorch's flash attention (--sdpa flash: prefill, whose causal SDPA without a mask is
    what flash attention computes; decode attends through a mask and is decomposed as in "mixed")."""
    if sdpa not in SDPA_CHOICES:
        raise ValueError(f"--sdpa {sdpa!r}: expected one of {', '.join(SDPA_CHOICES)}")
    return sdpa == "flash" and method != "decode"


def sdpa_decode_op(method: str, sdpa: str) -> bool:
    """Whether `method` attends through aoti_cuda's decode attention operator (--sdpa decode-op or its update form
    decode-op-update: decode only; its SDPA is gone from the graph, so prefill is lowered as in "mixed")."""
    if sdpa not in SDPA_CHOICES:
        raise ValueError(f"--sdpa {sdpa!r}: expected one of {', '.join(SDPA_CHOICES)}")
    return sdpa in DECODE_OP_CHOICES and method == "decode"


def fused_linear_shim(quant: str) -> str:
    """The fused linear shim a --sdpa decode-op-fused program must import for --quant `quant`: the int4 form's when
    the weights are int4 (a Linear torchao left in bf16 would call the bf16 form's too, which is not checked)."""
    import fused_linear_op

    return fused_linear_op.INT4_SHIM if quant == "int4" else fused_linear_op.SHIM


def decode_op_shims():
    """{OpOverload: [C declaration]} of aoti_cuda's decode operators: the attention's, the fused linear's and the
    argmax's (imported with torch)."""
    import argmax_op
    import decode_attention_op
    import fused_linear_op

    return {**decode_attention_op.custom_ops_to_c_shims(), **fused_linear_op.custom_ops_to_c_shims(),
            **argmax_op.custom_ops_to_c_shims()}


def register_operator_fallbacks(ops) -> int:
    """aoti_cuda's operators registered as Inductor fallbacks before the lowering meets them, with the layout
    constraint Inductor's implicit fallback gives them, but without its INFO log. That log's text is built even when
    nothing prints it (torch 2.11, graph.py), and it holds the operator's arguments: IR nodes whose text holds their
    inputs' text, down the whole chain of extern kernels before them. Each value of the residual stream reaches two
    calls (the next projection's x and a later one's residual), so for the argmax operator at the end of a 22-layer
    fused decode that text doubles twice a layer: no fused-form export with it finished (2026-12-05), while 2 layers
    lowered in seconds.
    Operators already registered are left alone. Returns how many were registered."""
    import torch._inductor.lowering as lowering
    from torch._library.utils import get_layout_constraint_tag

    registered = 0
    for op in ops:
        if op in lowering.lowerings:
            continue
        constraint = lowering.tag_to_layout_constraint(get_layout_constraint_tag(op, with_default=True))
        lowering.make_fallback(op, layout_constraint=constraint)
        registered += 1
    return registered


@contextlib.contextmanager
def bf16_math_sdpa(enabled: bool, backends=None):
    """Within the block (when enabled), PyTorch's math SDPA keeps bf16/fp16 inputs in their dtype.

    By default it upcasts them to float32 (torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp is
    off), so a decomposed SDPA would convert the whole KV cache to float32 at every decode step and
    multiply in float32. Softmax still reduces in float32: Inductor computes bf16 reductions in
    float32. Restored on exit; without the switch (older torch) nothing changes, and it says so.
    `backends` stands in for torch.backends.cuda (tests)."""
    if backends is None and enabled:
        import torch

        backends = torch.backends.cuda
    setter = getattr(backends, "allow_fp16_bf16_reduction_math_sdp", None)
    getter = getattr(backends, "fp16_bf16_reduction_math_sdp_allowed", None)
    if not enabled or setter is None or getter is None:
        if enabled:
            print("sdpa=decomposed: this torch has no allow_fp16_bf16_reduction_math_sdp; math SDPA upcasts to "
                  "float32", flush=True)
        yield
        return
    before = getter()
    setter(True)
    print("sdpa=decomposed: math SDPA in bf16 (allow_fp16_bf16_reduction_math_sdp)", flush=True)
    try:
        yield
    finally:
        setter(before)


def split_context(split, backend_cls, records):
    """--split-lowering's patch of the lowering (../split_lowering.py), entered after every other patch so that it
    sees their records: `split` None (no split, yields None), ("helper", method, cache_dir) or
    ("main", method, cache_dir, helper_alive) (yields what happened)."""
    if split is None:
        return contextlib.nullcontext(None)
    role, method, cache_dir = split[:3]
    if role == "helper":
        return split_lowering.helper_lowering(backend_cls, method, cache_dir, records)
    return split_lowering.main_lowering(backend_cls, method, cache_dir, records, split[3],
                                        log=lambda m: print(m, flush=True))


def lower(programs, gemm="triton", sdpa="triton", fusion="executorch", autotune="on", split=None):
    """ExecuTorch 1.2 CUDA backend, one delegate per method (as export_models.py). Returns the program, {extern kernel
    name: op} of the GEMM kernels accepted for --gemm cublas (empty for triton), the methods that kept PyTorch's
    flash attention (--sdpa flash), those that call aoti_cuda's decode attention shim (--sdpa decode-op), and what
    --split-lowering did (None without it; see split_context).

    sdpa "triton" keeps the backend's default (its own Triton SDPA kernel replaces aten SDPA);
    "decomposed" sets the backend's compile spec triton_kernel_mode=OFF, so SDPA is decomposed into
    matmuls + softmax (math backend) and compiled with the rest, in bf16 (see bf16_math_sdpa); "mixed"
    does that for decode only (sdpa_decomposed); "flash" decomposes decode's as "mixed" and lowers prefill
    with triton_kernel_mode=OFF under flash attention (../sdpa_backend.py). fusion "inductor" lowers with
    AOTInductor's defaults for the two fusion options ExecuTorch changes (../gemm_backend.py, fusion_context).
    autotune "off" lowers without timing the non-GEMM kernels' configurations (../gemm_backend.py, autotune_context)."""
    from executorch.backends.cuda.cuda_backend import CudaBackend
    from executorch.backends.cuda.cuda_partitioner import CudaPartitioner
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower
    from executorch.exir.backend.compile_spec_schema import CompileSpec

    def specs(name):
        out = [CudaBackend.generate_method_name_compile_spec(name)]
        if sdpa_decomposed(name, sdpa) or sdpa_flash(name, sdpa) or sdpa_decode_op(name, sdpa):
            # decode-op: no SDPA is left in decode; OFF keeps the backend's SDPA replacement pass out of it.
            out.append(CompileSpec("triton_kernel_mode", b"OFF"))
        return out

    partitioners = {name: [CudaPartitioner(specs(name))] for name in programs}
    config = EdgeCompileConfig(_check_ir_validity=False, _skip_dim_order=True)
    flash_methods = [n for n in programs if sdpa_flash(n, sdpa)]
    op_methods = [n for n in programs if sdpa_decode_op(n, sdpa)]
    import argmax_op  # the operators must be registered before the lowering meets them
    import decode_attention_op
    import fused_linear_op

    register_operator_fallbacks(decode_op_shims())

    # Entered after gemm_context: the flash and decode-op patches wrap the GEMM patch's options and allowed kernels.
    with gemm_backend.autotune_context(autotune, CudaBackend), gemm_backend.fusion_context(fusion, CudaBackend), \
            gemm_backend.gemm_context(gemm, CudaBackend) as accepted, \
            sdpa_backend.flash_attention(CudaBackend, flash_methods, flash_sdpa_context) as emitted, \
            sdpa_backend.decode_op(CudaBackend, op_methods, decode_op_shims,
                                   (decode_attention_op.QUALIFIED, decode_attention_op.SHIM,
                                    decode_attention_op.UPDATE_QUALIFIED, decode_attention_op.UPDATE_SHIM,
                                    decode_attention_op.QKV_QUALIFIED, decode_attention_op.QKV_SHIM,
                                    fused_linear_op.QUALIFIED, fused_linear_op.SHIM,
                                    fused_linear_op.INT4_QUALIFIED, fused_linear_op.INT4_SHIM,
                                    argmax_op.QUALIFIED, argmax_op.SHIM)) as op_emitted, \
            bf16_math_sdpa(any(sdpa_decomposed(n, sdpa) for n in programs)), \
            split_context(split, CudaBackend, [accepted, emitted, op_emitted]) as split_outcome:
        edge = to_edge_transform_and_lower(programs, partitioner=partitioners, compile_config=config)
        et_program = edge.to_executorch()
    shim = decode_attention_op.SHIM_OF_CHOICE.get(sdpa, decode_attention_op.SHIM)
    for name in op_methods:
        if name in op_emitted:
            print(f"sdpa={sdpa}: {name} calls {shim}", flush=True)
        else:
            print(f"sdpa={sdpa}: warning: {name}'s lowering never asked for the operator", flush=True)
    for name in flash_methods:
        if name in emitted:
            print(f"sdpa=flash: {name} calls {sdpa_backend.FLASH_KERNEL}", flush=True)
        else:
            print(f"sdpa=flash: warning: {name} did not keep flash attention (its SDPA was decomposed)", flush=True)
    return et_program, dict(accepted), list(emitted), list(op_emitted), split_outcome


def flash_sdpa_context():
    """Flash attention where PyTorch can use it, else the math decomposition the backend would use."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.MATH])


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--config", default="1b")
    ap.add_argument("--quant", choices=["bf16", "int4"], default="bf16")
    ap.add_argument("--gemm", choices=gemm_backend.GEMM_CHOICES, default="triton",
                    help="triton: the backend's Triton GEMM templates (its own settings); cublas: "
                         "aoti_torch_cuda_{mm,addmm,bmm}_out calls (see ../gemm_backend.py)")
    ap.add_argument("--sdpa", choices=SDPA_CHOICES, default="triton",
                    help="triton: the backend's own Triton SDPA kernel (its default); decomposed: the backend's "
                         "triton_kernel_mode=OFF, SDPA as matmuls + softmax (with --gemm cublas: cuBLAS bmm); "
                         "mixed: decomposed in decode only, prefill keeps the Triton SDPA kernel; flash: decode "
                         "decomposed, prefill calls PyTorch's flash attention (aoti_cuda's kernel; see ../sdpa_backend.py); "
                         "decode-op: decode calls aoti_cuda's own decode attention shim (cost grows with the position), "
                         "prefill as mixed; only aoti_cuda runs it; decode-op-update: the same, the operator "
                         "also storing the step's K and V rows (no separate cache-write kernels); decode-op-qkv: "
                         "the same, the operator also rotating q and k (no kernel between projection and attention); "
                         "decode-op-fused: decode-op-qkv with every decode projection through aoti_cuda's fused linear "
                         "operator, its int4 form for int4 weights (RMSNorm, SwiGLU and residual adds folded in)")
    ap.add_argument("--argmax", choices=ARGMAX_CHOICES,
                    help="decode's greedy token: aten (torch.argmax, an Inductor reduction kernel) or op "
                         "(aoti_cuda::aoti_cuda_argmax, aoti_cuda's own shim; needs a decode-op --sdpa). Default: op "
                         "with --sdpa decode-op-fused, else aten")
    ap.add_argument("--fusion", choices=gemm_backend.FUSION_CHOICES, default="executorch",
                    help="executorch: the backend's Inductor settings; inductor: AOTInductor's defaults for "
                         "emulate_precision_casts and loop_ordering_after_fusion (see ../gemm_backend.py)")
    ap.add_argument("--autotune", choices=gemm_backend.AUTOTUNE_CHOICES, default="on",
                    help="on: the backend's max_autotune (every non-GEMM kernel's configurations timed while "
                         "lowering); off: Inductor's heuristic configurations, nothing timed: a cold export in "
                         "a fraction of the time (see ../gemm_backend.py)")
    ap.add_argument("--layers", type=int, help="override n_layers")
    ap.add_argument("--max-prefill", type=int, help="override max_prefill (dynamic bound of T)")
    ap.add_argument("--max-ctx", type=int, help="override max_ctx, the KV cache's length (e.g. 4096 for the long-context "
                                                "decode measurement; the weights do not depend on it)")
    ap.add_argument("--prefill-hint", type=int, default=128, help="example T: Inductor tunes prefill GEMMs for it")
    ap.add_argument("--reference-prompt", type=int, default=128, help="prompt length of the recorded reference")
    ap.add_argument("--reference-tokens", type=int, default=32, help="greedy tokens recorded from eager (0: none)")
    ap.add_argument("--methods", default="prefill,decode", help="export only these (e.g. to warm caches)")
    ap.add_argument(split_lowering.SPLIT_FLAG, action="store_true",
                    help="lower the last method in a second process, beside the others (../split_lowering.py): the "
                         "export then takes about the longest lowering instead of their sum, on a second core")
    # The helper's side of --split-lowering, set by the main process only.
    ap.add_argument("--lower-only", help=argparse.SUPPRESS)
    ap.add_argument("--lower-cache", help=argparse.SUPPRESS)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--stub-backend", metavar="ELF_SO", help="testing without a GPU: see export_models.py")
    args = ap.parse_args(argv)
    if args.argmax is None:
        args.argmax = "op" if args.sdpa == "decode-op-fused" else "aten"
    if args.argmax == "op" and args.sdpa not in DECODE_OP_CHOICES:
        ap.error("--argmax op needs a decode-op --sdpa (the program calls aoti_cuda's own shims), got --sdpa "
                 f"{args.sdpa}")
    if args.split_lowering and len(exported_methods(args)) < 2:
        ap.error(f"{split_lowering.SPLIT_FLAG} needs two methods to lower, got --methods {args.methods}")
    if (args.lower_only is None) != (args.lower_cache is None):
        ap.error("--lower-only and --lower-cache go together (the main process of --split-lowering sets both)")
    return args


def exported_methods(args):
    """The methods the export makes, in the order they are lowered (export_methods' order)."""
    wanted = args.methods.split(",")
    return [m for m in METHOD_ORDER if m in wanted]


def timed(times, key, fn, *a):
    t0 = time.time()
    out = fn(*a)
    times[key] = time.time() - t0
    return out


def prepare_model(args, cfg, device, times):
    """The model from the seed (int4: quantized), and the eager greedy reference for the manifest."""
    from model import build_model, prompt_tokens

    model = timed(times, "build_s", build_model, cfg, device)
    if args.quant == "int4":
        n = timed(times, "quantize_s", quantize_int4, model)
        print(f"int4: quantized {n} Linear layers in {times['quantize_s']:.1f}s", flush=True)
    reference = None
    if args.reference_tokens > 0:
        plen = min(args.reference_prompt, cfg.max_prefill)
        prompt = prompt_tokens(plen, cfg.vocab).to(device)
        tokens, top = timed(times, "reference_s", greedy_reference, model, prompt, args.reference_tokens)
        reference = {"prompt_len": plen, "tokens": tokens, "top": top}
        print(f"eager reference ({plen}-token prompt): {tokens[:16]} ...", flush=True)
    return model, reference


def write_manifest(args, cfg, programs, reference, times, gemm_kernels, flash_methods, op_methods, split=None):
    import pte_inspect  # the .so files' aoti_torch_* / CUDA imports: what a runtime must provide
    import torch

    pte = pte_inspect.PteFile.load(os.path.join(args.out, "llm.pte"))
    imports = pte_inspect.filtered_imports([pte.blob(k) for k in pte.so_keys()])
    files = {f: os.path.getsize(os.path.join(args.out, f)) for f in sorted(os.listdir(args.out)) if f.endswith((".pte", ".ptd"))}
    signatures = {
        "prefill": {"inputs": ["tokens i64[1,T], T in 2..%d" % cfg.max_prefill],
                    "outputs": ["logits bf16[1,%d] (last position)" % cfg.vocab, "next_token i64[1,1]"]},
        "decode": {"inputs": ["token i64[1,1]", "pos i64[1]"],
                   "outputs": ["logits bf16[1,%d]" % cfg.vocab, "next_token i64[1,1]"]},
    }
    manifest = {
        "name": "llm",
        "config_name": args.config,
        "config": cfg.to_dict(),
        "quant": args.quant,
        "gemm": args.gemm,
        "gemm_kernels": gemm_kernels,
        "sdpa": args.sdpa,
        "flash_methods": flash_methods,
        "decode_op_methods": op_methods,  # these call aoti_cuda's own shim: only aoti_cuda runs the program
        "argmax": args.argmax,
        "fusion": args.fusion,
        "autotune": args.autotune,
        "split_lowering": split,  # None: one process lowered every method
        "methods": {k: v for k, v in signatures.items() if k in programs},
        "prefill_hint": min(args.prefill_hint, cfg.max_prefill),
        "prompt_formula": "id_i = (7919 * i + 13) mod vocab",
        "reference": reference,
        "files": files,
        "export_times": {k: round(v, 2) for k, v in times.items()},
        "imports": imports,
        "stub_backend": bool(args.stub_backend),
        "torch": torch.__version__,
    }
    if args.sdpa in DECODE_OP_CHOICES:
        import decode_attention_op

        text = json.dumps(imports)
        shims = [decode_attention_op.SHIM_OF_CHOICE[args.sdpa]]
        if args.sdpa == "decode-op-fused":
            shims.append(fused_linear_shim(args.quant))
        if args.argmax == "op":
            import argmax_op

            shims.append(argmax_op.SHIM)
        for shim in shims:
            if shim not in imports:  # the names, not `text`: one shim's name begins another's
                print(f"sdpa={args.sdpa}: warning: the libraries do not import {shim}", flush=True)
        if "proxy_executor" in text:  # Inductor's runtime-dispatch path, which needs libtorch: not runnable here
            print(f"sdpa={args.sdpa}: warning: the libraries call the operator through AOTInductor's proxy executor",
                  flush=True)
    if flash_methods and sdpa_backend.FLASH_KERNEL not in json.dumps(imports):
        print(f"sdpa=flash: warning: the libraries do not import {sdpa_backend.FLASH_KERNEL}", flush=True)
    with open(os.path.join(args.out, "manifest.json"), "w") as f:  # written last: marks a complete export
        json.dump(manifest, f, indent=1)
    print("files: " + ", ".join(f"{k} {v / 2**20:.1f} MiB" for k, v in files.items()), flush=True)


def start_split_helper(raw_argv, args):
    """--split-lowering: the last method lowered by a second run of this script, started now (../split_lowering.py),
    its files in OUT/.split-lowering."""
    return split_lowering.HelperProcess(os.path.abspath(__file__), raw_argv, exported_methods(args)[-1],
                                        os.path.join(args.out, ".split-lowering"))


def main(argv=None) -> int:
    raw_argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(raw_argv)
    timeline.start_from_env()  # AOTI_EXPORT_TIMELINE=N: where the time goes, every N s (the helper inherits it)
    helper = start_split_helper(raw_argv, args) if args.split_lowering else None
    try:
        return export(args, helper)
    finally:
        if helper is not None:
            helper.close()


def export(args, helper) -> int:
    import export_models  # sibling tool: flatc discovery and the GPU-less stub backend

    export_models._prepare_environment()
    import torch

    from model import get_config

    cfg = get_config(args.config, n_layers=args.layers, max_prefill=args.max_prefill, max_ctx=args.max_ctx)
    if args.stub_backend:
        export_models._install_stub_backend(args.stub_backend)
    elif not torch.cuda.is_available():
        print("error: CUDA is not available; the CUDA backend compiles on the GPU", file=sys.stderr)
        return 2
    device = torch.device(args.device)
    os.makedirs(args.out, exist_ok=True)
    times = {}
    t_all = time.time()
    print(f"config {args.config}: {json.dumps(cfg.to_dict())}, quant {args.quant}, gemm {args.gemm}, device {device}",
          flush=True)
    model, reference = prepare_model(args, cfg, device, times)

    if args.sdpa in DECODE_OP_CHOICES:
        from model import use_decode_attention_op

        # Before torch.export; after the eager reference, which stays plain PyTorch.
        use_decode_attention_op(model, form=DECODE_OP_FORM[args.sdpa])
        if args.sdpa == "decode-op-fused":
            from model import use_fused_linear

            use_fused_linear(model)
        if args.argmax == "op":
            from model import use_argmax_op

            use_argmax_op(model)
    programs = timed(times, "torch_export_s", export_methods, model, cfg, min(args.prefill_hint, cfg.max_prefill), device)
    programs = {k: v for k, v in programs.items() if k in args.methods.split(",")}
    print(f"torch.export: {times['torch_export_s']:.1f}s", flush=True)
    split = helper.split() if helper is not None else None
    if args.lower_only is not None:
        split = ("helper", args.lower_only, args.lower_cache)
    try:
        et_program, gemm_kernels, flash_methods, op_methods, split_outcome = timed(
            times, "lower_s", lower, programs, args.gemm, args.sdpa, args.fusion, args.autotune, split)
    except split_lowering.LoweredElsewhere as done:  # the helper's work ends here
        print(f"split lowering helper: {done}", flush=True)
        return 0
    print(f"to_edge_transform_and_lower + to_executorch: {times['lower_s']:.1f}s", flush=True)
    split_result = None
    if helper is not None:
        if not split_outcome["from_helper"]:
            print(f"split lowering: the helper's log ends:\n{helper.log_tail()}", flush=True)
        times["split_wait_s"] = split_outcome["wait_s"]
        split_result = {"helper_method": helper.method, "from_helper": split_outcome["from_helper"]}
    if args.gemm == "cublas":
        print(f"gemm=cublas: extern GEMM kernels accepted: {json.dumps(gemm_kernels)}", flush=True)

    t0 = time.time()
    with open(os.path.join(args.out, "llm.pte"), "wb") as f:
        et_program.write_to_file(f)
    et_program.write_tensor_data_to_file(args.out)
    times["write_s"] = time.time() - t0
    times["total_s"] = time.time() - t_all
    print("EXPORT_TIME " + " ".join(f"{k}={v:.1f}" for k, v in times.items()), flush=True)
    write_manifest(args, cfg, programs, reference, times, gemm_kernels, flash_methods, op_methods, split_result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
