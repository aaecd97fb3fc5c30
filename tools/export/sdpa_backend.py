"""Which attention kernel ExecuTorch 1.2's CudaBackend compiles for scaled_dot_product_attention, per method.

ExecuTorch's CUDA backend either replaces SDPA with its own Triton kernel (triton_kernel_mode ON, the default) or,
with triton_kernel_mode OFF, lowers under `sdpa_kernel([SDPBackend.MATH])`, which decomposes SDPA into matmuls and a
softmax. Neither is PyTorch's flash attention, which is what a libtorch AOTInductor user gets for a prefill.

flash_attention(backend_cls, methods, make_context) patches the backend for the block so that the named methods
(triton_kernel_mode OFF in their compile specs, set by the caller) are lowered under `make_context()` (the caller
passes `lambda: sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.MATH])`): SDPA then becomes
`aten._scaled_dot_product_flash_attention`, which AOTInductor's C-shim wrapper calls as
aoti_torch_cuda__scaled_dot_product_flash_attention (aoti_cuda implements it with its own kernel), and the backend's
list of allowed fallback kernels accepts that kernel (FLASH_KERNEL_NAMES). Other methods keep the backend's MATH context. Yields the
list of methods whose lowering emitted the flash kernel (filled during the lowering), so the caller can say when a
method fell back to MATH (flash attention not applicable to its SDPA, e.g. an explicit mask).

decode_op(backend_cls, methods, make_shims, names) (--sdpa decode-op) patches the backend so that the named methods
(decode), whose model calls aoti_cuda's custom operator aoti_cuda::aoti_cuda_decode_attention
(llm/decode_attention_op.py) instead of a masked SDPA, are compiled with that operator mapped to its C shim:
`aot_inductor.custom_ops_to_c_shims` in their AOTInductor options gets make_shims()'s {OpOverload: [C declaration]}
(merged with any entries the backend sets itself, e.g. ExecuTorch 1.3+'s int4_plain_mm), so AOTInductor writes the
declaration into the generated wrapper and calls aoti_torch_cuda_aoti_cuda_decode_attention directly; and the
backend's list of allowed fallback kernels accepts the operator under `names` (its check sees the operator's schema
name, aoti_cuda::aoti_cuda_decode_attention, on the C-shim code path; the shim's name is listed too, as ExecuTorch
lists both forms for its own custom ops). Yields the methods whose lowering asked for it.

Stdlib only (the backend class, the context factory and the shim map are passed in), so test_sdpa_backend.py runs
without torch.
"""

from __future__ import annotations

import contextlib
import inspect
from typing import Callable, Dict, Iterable, List

from gemm_backend import restore_classmethods

FLASH_KERNEL = "aoti_torch_cuda__scaled_dot_product_flash_attention"
# The names the backend's fallback check may see for it: the C-shim call, and the ATen operator's name, which the
# check is given when Inductor routes the fallback through its runtime-lookup code path (the generated library
# still imports the C shim, as it does for _weight_int4pack_mm, whose name the backend lists in that form).
FLASH_KERNEL_NAMES = (FLASH_KERNEL, "at::_ops::_scaled_dot_product_flash_attention::call")


class AlsoAccepts:
    """The backend's supported fallback kernels (any container with `in`), plus the names of one more kernel; records
    the methods whose lowering asked for it."""

    def __init__(self, base, names, method: str, emitted: List[str]):
        self._base, self._names, self._method, self._emitted = base, tuple(names), method, emitted

    def __contains__(self, kernel) -> bool:
        if kernel in self._names:
            if self._method not in self._emitted:
                self._emitted.append(self._method)
            return True
        return kernel in self._base

    def __iter__(self):
        return iter(self._base)


@contextlib.contextmanager
def _lowering_patch(backend_cls, methods: Iterable[str], names: Iterable[str], option_name: str, make_option):
    """What both patches share. Within the block, while backend_cls lowers one of `methods`, its fallback check also
    accepts the kernel `names` (the methods that asked for them are recorded in the yielded list), and its classmethod
    `option_name` is make_option(raw, current, selected): `raw` the original (static) attribute, `current` a dict whose
    "method" is the method being lowered (preprocess runs one at a time), `selected` the set of `methods`. The three
    classmethods are restored on exit, also after an exception."""
    patched = ("preprocess", option_name, "get_supported_fallback_kernels")
    selected = set(methods)
    saved = {name: backend_cls.__dict__[name] for name in patched if name in backend_cls.__dict__}
    raw = {name: inspect.getattr_static(backend_cls, name) for name in patched}
    emitted: List[str] = []
    current = {"method": None}

    def preprocess(cls, edge_program, compile_specs):
        current["method"] = cls.method_name_from_compile_specs(compile_specs)
        try:
            return raw["preprocess"].__get__(None, cls)(edge_program, compile_specs)
        finally:
            current["method"] = None

    def get_supported_fallback_kernels(cls):
        base = raw["get_supported_fallback_kernels"].__get__(None, cls)()
        if current["method"] not in selected:
            return base
        return AlsoAccepts(base, names, current["method"], emitted)

    backend_cls.preprocess = classmethod(preprocess)
    setattr(backend_cls, option_name, classmethod(make_option(raw[option_name], current, selected)))
    backend_cls.get_supported_fallback_kernels = classmethod(get_supported_fallback_kernels)
    try:
        yield emitted
    finally:
        restore_classmethods(backend_cls, patched, saved)


@contextlib.contextmanager
def flash_attention(backend_cls, methods: Iterable[str], make_context: Callable[[], object]):
    """Within the block, backend_cls lowers `methods` with PyTorch's flash attention kept as a fallback kernel (see the
    module docstring). All three classmethods are restored on exit, also after an exception."""

    def make_option(raw, current, selected):
        def get_extra_aoti_compile_context_manager(cls):
            if current["method"] in selected:
                return make_context()
            return raw.__get__(None, cls)()
        return get_extra_aoti_compile_context_manager

    with _lowering_patch(backend_cls, methods, FLASH_KERNEL_NAMES, "get_extra_aoti_compile_context_manager",
                         make_option) as emitted:
        yield emitted


CUSTOM_SHIMS_OPTION = "aot_inductor.custom_ops_to_c_shims"


@contextlib.contextmanager
def decode_op(backend_cls, methods: Iterable[str], make_shims: Callable[[], Dict[object, List[str]]],
              names: Iterable[str]):
    """Within the block, backend_cls lowers `methods` with a custom operator mapped to its C shim (see the module
    docstring): make_shims() (called per lowering) is merged into their `aot_inductor.custom_ops_to_c_shims`, and
    their fallback check also accepts `names`. Other methods are lowered unchanged. The three classmethods are restored
    on exit, also after an exception."""

    def make_option(raw, current, selected):
        def get_aoti_compile_options(cls, compile_specs):
            options = dict(raw.__get__(None, cls)(compile_specs))
            if cls.method_name_from_compile_specs(compile_specs) in selected:
                shims = dict(options.get(CUSTOM_SHIMS_OPTION) or {})
                for op, declarations in make_shims().items():
                    shims[op] = list(shims.get(op, [])) + [d for d in declarations if d not in shims.get(op, [])]
                options[CUSTOM_SHIMS_OPTION] = shims
            return options
        return get_aoti_compile_options

    with _lowering_patch(backend_cls, methods, names, "get_aoti_compile_options", make_option) as emitted:
        yield emitted
