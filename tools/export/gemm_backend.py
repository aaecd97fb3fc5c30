"""Which GEMMs ExecuTorch 1.2's CudaBackend compiles: its own Triton templates, or cuBLAS calls.

    --gemm triton   ExecuTorch's settings, unchanged: max_autotune with max_autotune_gemm_backends="TRITON"
                    (every matmul is a Triton GEMM template, tuned on the GPU during the export).
    --gemm cublas   cublas_gemms(CudaBackend) around the lowering: the same options but
                    max_autotune_gemm_backends="ATEN", so Inductor emits mm / addmm / bmm as extern kernels,
                    which its C-shim wrapper calls as aoti_torch_cuda_{mm,addmm,bmm}_out (aoti_cuda implements
                    them with cuBLAS); and the backend's list of allowed fallback kernels also accepts those
                    three ops (it rejects any other extern kernel as "missing fallback kernels"). Nothing is
                    tuned for GEMMs then, so the export is also much faster.

Stdlib only (the backend class is passed in), so test_gemm_backend.py runs without torch.
"""

from __future__ import annotations

import contextlib
import inspect
import re
from typing import Callable, Dict, Optional

GEMM_CHOICES = ("triton", "cublas")
GEMM_OPS = ("mm", "addmm", "bmm")

_SPLIT = re.compile(r"::|\.")  # at::_ops::mm_out::call, aten::mm.out, extern_kernels.mm, aten.bmm.default
_SHIM_PREFIX = re.compile(r"^aoti_torch_(cuda_)?")  # aoti_torch_cuda_mm_out
_PLAIN_OVERLOADS = ("out", "default", "call")  # aten.mm.out, aten.mm.default, at::_ops::mm_out::call


def gemm_op(kernel_name) -> Optional[str]:
    """'mm', 'addmm' or 'bmm' if kernel_name names that op's kernel, else None.

    The name is cut at '::' and '.'; a part counts when, less an "aoti_torch_" / "aoti_torch_cuda_" prefix and an
    "_out" suffix, it is exactly one of the three ops, and the part after it (if any) is a plain overload (out,
    default) or "call". So aoti_torch_cuda_mm_out, at::mm_out, at::_ops::addmm_out::call, aten::bmm.out,
    aten.mm.default and extern_kernels.bmm match; _weight_int4pack_mm, baddbmm, _int_mm, _mm_dtype_out_cuda,
    aten.mm.dtype_out, bias_addmm, aoti_torch_cpu_mm_out and mm_plus_mm do not."""
    if not isinstance(kernel_name, str):
        return None
    parts = _SPLIT.split(kernel_name)
    for i, part in enumerate(parts):
        part = _SHIM_PREFIX.sub("", part)
        if part.endswith("_out"):
            part = part[: -len("_out")]
        if part in GEMM_OPS and (i + 1 == len(parts) or parts[i + 1] in _PLAIN_OVERLOADS):
            return part
    return None


class GemmFallbackKernels(dict):
    """The backend's supported fallback kernels, whose `in` also accepts mm / addmm / bmm kernels under any name
    (see gemm_op); each name accepted that way is recorded in `accepted` (name -> op) and logged once."""

    def __init__(self, base, accepted: Dict[str, str], log: Callable[[str], None]):
        super().__init__(base or {})
        self._accepted, self._log = accepted, log

    def __contains__(self, name) -> bool:
        if dict.__contains__(self, name):
            return True
        op = gemm_op(name)
        if op is None:
            return False
        if name not in self._accepted:
            self._accepted[name] = op
            self._log(f"gemm=cublas: accepted extern kernel {name!r} ({op})")
        return True


_PATCHED = ("get_aoti_compile_options", "get_supported_fallback_kernels")


@contextlib.contextmanager
def cublas_gemms(backend_cls, log: Callable[[str], None] = lambda s: print(s, flush=True)):
    """Within the block, backend_cls (ExecuTorch's CudaBackend) compiles GEMMs as cuBLAS extern kernels.

    Yields the dict {kernel name: op} of the names the fallback check accepted as mm / addmm / bmm (filled during the
    lowering); both classmethods are restored on exit. Only max_autotune_gemm_backends changes (to "ATEN"); the
    rest of the backend's options stay, max_autotune included (with one GEMM choice there is nothing to tune)."""
    saved = {name: backend_cls.__dict__[name] for name in _PATCHED if name in backend_cls.__dict__}
    raw_options = inspect.getattr_static(backend_cls, "get_aoti_compile_options")
    raw_fallbacks = inspect.getattr_static(backend_cls, "get_supported_fallback_kernels")
    accepted: Dict[str, str] = {}

    def get_aoti_compile_options(cls, compile_specs):
        options = dict(raw_options.__get__(None, cls)(compile_specs))
        options["max_autotune_gemm_backends"] = "ATEN"
        return options

    def get_supported_fallback_kernels(cls):
        return GemmFallbackKernels(raw_fallbacks.__get__(None, cls)(), accepted, log)

    backend_cls.get_aoti_compile_options = classmethod(get_aoti_compile_options)
    backend_cls.get_supported_fallback_kernels = classmethod(get_supported_fallback_kernels)
    try:
        yield accepted
    finally:
        restore_classmethods(backend_cls, _PATCHED, saved)


def restore_classmethods(backend_cls, names, saved: Dict[str, object]) -> None:
    """Undoes a patch of backend_cls's classmethods `names`: those the class defined itself (`saved`, from its
    __dict__) are put back, those it inherited are deleted again."""
    for name in names:
        if name in saved:
            setattr(backend_cls, name, saved[name])
        else:
            delattr(backend_cls, name)


def gemm_context(gemm: str, backend_cls):
    """cublas_gemms(backend_cls) for "cublas"; for "triton", a block that changes nothing and yields {}."""
    if gemm not in GEMM_CHOICES:
        raise ValueError(f"gemm must be one of {GEMM_CHOICES}, not {gemm!r}")
    return cublas_gemms(backend_cls) if gemm == "cublas" else contextlib.nullcontext({})


# --fusion: how Inductor fuses and rounds the non-GEMM kernels.
#   executorch  the backend's settings, unchanged (it asks Inductor to round every intermediate to bf16 as eager
#               does, emulate_precision_casts, and turns loop reordering after fusion off).
#   inductor    AOTInductor's own defaults for those two options (what `torch._inductor.aoti_compile_and_package`
#               users get): intermediates of a fused kernel stay in float32, and Inductor may reorder loops to fuse
#               more. Numerics differ from eager by rounding only (fewer bf16 roundings, not more).
FUSION_CHOICES = ("executorch", "inductor")
INDUCTOR_FUSION = {"emulate_precision_casts": False, "loop_ordering_after_fusion": True}


@contextlib.contextmanager
def compile_overrides(backend_cls, overrides: Dict[str, object]):
    """Within the block, backend_cls.get_aoti_compile_options returns its options updated with `overrides`
    (a copy: the backend's dict is not changed). Restored on exit, also after an exception. Composes with
    cublas_gemms in either order (each wraps what it finds)."""
    saved = backend_cls.__dict__.get("get_aoti_compile_options")
    raw_options = inspect.getattr_static(backend_cls, "get_aoti_compile_options")

    def get_aoti_compile_options(cls, compile_specs):
        options = dict(raw_options.__get__(None, cls)(compile_specs))
        options.update(overrides)
        return options

    backend_cls.get_aoti_compile_options = classmethod(get_aoti_compile_options)
    try:
        yield dict(overrides)
    finally:
        if saved is not None:
            backend_cls.get_aoti_compile_options = saved
        else:
            delattr(backend_cls, "get_aoti_compile_options")


# --autotune: whether Inductor benchmarks the non-GEMM kernels' launch configurations while lowering.
#   on   the backend's setting (max_autotune): every pointwise and reduction kernel is timed over its candidate
#        configurations on the GPU, one compile after another; minutes per method on a cold machine.
#   off  Inductor's heuristic configuration for each kernel, nothing timed (coordinate descent off too). Meant for
#        exports whose matmuls and attention are not Triton kernels (--gemm cublas, aoti_cuda's operators): what
#        is left to tune there is a few pointwise kernels a step.
AUTOTUNE_CHOICES = ("on", "off")
NO_AUTOTUNE = {"max_autotune": False, "coordinate_descent_tuning": False}


def autotune_context(autotune: str, backend_cls):
    """compile_overrides(backend_cls, NO_AUTOTUNE) for "off"; for "on", a block that changes nothing (yields {})."""
    if autotune not in AUTOTUNE_CHOICES:
        raise ValueError(f"autotune must be one of {AUTOTUNE_CHOICES}, not {autotune!r}")
    return compile_overrides(backend_cls, NO_AUTOTUNE) if autotune == "off" else contextlib.nullcontext({})


def fusion_context(fusion: str, backend_cls):
    """compile_overrides(backend_cls, INDUCTOR_FUSION) for "inductor"; for "executorch", a block that changes
    nothing (yields {})."""
    if fusion not in FUSION_CHOICES:
        raise ValueError(f"fusion must be one of {FUSION_CHOICES}, not {fusion!r}")
    return compile_overrides(backend_cls, INDUCTOR_FUSION) if fusion == "inductor" else contextlib.nullcontext({})
