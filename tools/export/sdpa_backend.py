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

Stdlib only (the backend class and the context factory are passed in), so test_sdpa_backend.py runs without torch.
"""

from __future__ import annotations

import contextlib
import inspect
from typing import Callable, Iterable, List

from gemm_backend import restore_classmethods

FLASH_KERNEL = "aoti_torch_cuda__scaled_dot_product_flash_attention"
# The names the backend's fallback check may see for it: the C-shim call, and the ATen operator's name, which the
# check is given when Inductor routes the fallback through its runtime-lookup code path (the generated library
# still imports the C shim, as it does for _weight_int4pack_mm, whose name the backend lists in that form).
FLASH_KERNEL_NAMES = (FLASH_KERNEL, "at::_ops::_scaled_dot_product_flash_attention::call")
_PATCHED = ("preprocess", "get_extra_aoti_compile_context_manager", "get_supported_fallback_kernels")


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
def flash_attention(backend_cls, methods: Iterable[str], make_context: Callable[[], object]):
    """Within the block, backend_cls lowers `methods` with PyTorch's flash attention kept as a fallback kernel (see the
    module docstring). All three classmethods are restored on exit, also after an exception."""
    flash_methods = set(methods)
    saved = {name: backend_cls.__dict__[name] for name in _PATCHED if name in backend_cls.__dict__}
    raw = {name: inspect.getattr_static(backend_cls, name) for name in _PATCHED}
    emitted: List[str] = []
    current = {"method": None}  # the method being lowered (preprocess runs one method at a time)

    def preprocess(cls, edge_program, compile_specs):
        current["method"] = cls.method_name_from_compile_specs(compile_specs)
        try:
            return raw["preprocess"].__get__(None, cls)(edge_program, compile_specs)
        finally:
            current["method"] = None

    def get_extra_aoti_compile_context_manager(cls):
        if current["method"] in flash_methods:
            return make_context()
        return raw["get_extra_aoti_compile_context_manager"].__get__(None, cls)()

    def get_supported_fallback_kernels(cls):
        base = raw["get_supported_fallback_kernels"].__get__(None, cls)()
        if current["method"] not in flash_methods:
            return base
        return AlsoAccepts(base, FLASH_KERNEL_NAMES, current["method"], emitted)

    backend_cls.preprocess = classmethod(preprocess)
    backend_cls.get_extra_aoti_compile_context_manager = classmethod(get_extra_aoti_compile_context_manager)
    backend_cls.get_supported_fallback_kernels = classmethod(get_supported_fallback_kernels)
    try:
        yield emitted
    finally:
        restore_classmethods(backend_cls, _PATCHED, saved)
