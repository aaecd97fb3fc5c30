#!/usr/bin/env python3
"""Checks of gemm_backend.py (--gemm cublas) against a fake CudaBackend; stdlib only, no torch or executorch.

    python3 tools/export/test_gemm_backend.py      # prints "gemm backend: N passed, M failed"

- gemm_op: the names Inductor / ExecuTorch may give mm, addmm and bmm kernels match, look-alikes do not;
- cublas_gemms: the options keep everything but max_autotune_gemm_backends (ATEN); the fallback check accepts the
  three GEMMs under any of those names (and what the backend already allowed), rejects the rest the way
  aoti_backend.py asks (`kernel not in supported`), logs each accepted name once; the classmethods are restored
  afterwards, also after an exception and when they were inherited;
- gemm_context("triton") changes nothing;
- fusion_context("inductor") overrides the two fusion options alone, composes with cublas_gemms, is restored
  (also after an exception); "executorch" changes nothing; an unknown choice is refused.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gemm_backend import (INDUCTOR_FUSION, NO_AUTOTUNE, autotune_context, cublas_gemms, fusion_context,  # noqa: E402
                          gemm_context, gemm_op)

INT4 = "at::_ops::_weight_int4pack_mm::call"


class FakeAotiBackend:
    @classmethod
    def get_device_name(cls):
        return "cuda"


OPTIONS = {"max_autotune": True, "max_autotune_gemm_backends": "TRITON", "max_autotune_conv_backends": "TRITON",
           "aot_inductor.link_libtorch": False}
CALLED_ON = []  # the class each get_aoti_compile_options call was bound to


class FakeCudaBackend(FakeAotiBackend):  # the shape of executorch/backends/cuda/cuda_backend.py (1.2.0)
    @classmethod
    def get_supported_fallback_kernels(cls):
        return {INT4: None}

    @classmethod
    def get_aoti_compile_options(cls, compile_specs):
        CALLED_ON.append(cls)
        return OPTIONS  # one shared dict: the patch must not change it


class FakeSubBackend(FakeCudaBackend):  # both methods inherited
    pass


def missing(backend, names):
    """What aoti_backend.collect_unsupported_fallback_kernels would report for these extern kernel names."""
    supported = backend.get_supported_fallback_kernels()
    return sorted(n for n in names if n not in supported)


def main() -> int:
    results = []

    def check(name, ok):
        results.append(bool(ok))
        print(f"  {'ok  ' if ok else 'FAIL'} {name}")

    matching = {
        "aoti_torch_cuda_mm_out": "mm", "aoti_torch_cuda_addmm_out": "addmm", "aoti_torch_cuda_bmm_out": "bmm",
        "aoti_torch_mm_out": "mm", "at::mm_out": "mm", "at::addmm_out": "addmm", "at::bmm_out": "bmm",
        "at::_ops::mm_out::call": "mm", "at::_ops::addmm::call": "addmm", "aten::bmm.out": "bmm",
        "aten.mm.out": "mm", "aten.addmm.default": "addmm", "torch.ops.aten.bmm.default": "bmm",
        "extern_kernels.mm": "mm", "extern_kernels.addmm": "addmm", "extern_kernels.bmm": "bmm", "mm": "mm",
    }
    for name, op in matching.items():
        check(f"gemm_op({name!r}) == {op!r}", gemm_op(name) == op)
    for name in [INT4, "aoti_torch_cuda__weight_int4pack_mm", "aten._weight_int4pack_mm.default", "at::baddbmm_out",
                 "aoti_torch_cuda_baddbmm_out", "aten.baddbmm.default", "at::_int_mm_out", "aoti_torch_cuda__int_mm",
                 "at::_mm_dtype_out_cuda", "aoti_torch_cuda__mm_dtype_out_cuda", "aten.mm.dtype_out",
                 "aten::addmm.dtype_out",
                 "extern_kernels.bias_addmm", "mm_plus_mm", "aoti_torch_cpu_mm_out", "at::_ops::mmm::call",
                 "addmm_activation", "aten._addmm_activation.default", "at::mv_out", "aten.matmul.default",
                 "aoti_torch_cuda_convolution", "", None, 3]:
        check(f"gemm_op({name!r}) is None", gemm_op(name) is None)

    specs = ["method_name=decode"]
    before = dict(FakeCudaBackend.get_aoti_compile_options(specs))
    gemms = ["aoti_torch_cuda_mm_out", "aoti_torch_cuda_addmm_out", "aoti_torch_cuda_bmm_out", "aten::mm.out"]
    others = ["aoti_torch_cuda_baddbmm_out", "at::_ops::_int_mm::call", "aten::split_copy.Tensor"]
    check("triton: ExecuTorch's list rejects the GEMMs", missing(FakeCudaBackend, gemms) == sorted(gemms))

    logged = []
    with cublas_gemms(FakeCudaBackend, log=logged.append) as accepted:
        opts = FakeCudaBackend.get_aoti_compile_options(specs)
        check("cublas: max_autotune_gemm_backends = ATEN", opts["max_autotune_gemm_backends"] == "ATEN")
        check("cublas: every other option kept",
              {k: v for k, v in opts.items() if k != "max_autotune_gemm_backends"}
              == {k: v for k, v in before.items() if k != "max_autotune_gemm_backends"})
        check("cublas: the backend's own dict not modified", OPTIONS["max_autotune_gemm_backends"] == "TRITON")
        check("cublas: mm/addmm/bmm accepted, int4 still accepted", missing(FakeCudaBackend, gemms + [INT4]) == [])
        check("cublas: other extern kernels still missing", missing(FakeCudaBackend, gemms + others) == sorted(others))
        missing(FakeCudaBackend, gemms)  # a second method: names already logged are not logged again
        supported = FakeCudaBackend.get_supported_fallback_kernels()
        check("cublas: still a dict holding the backend's own entries",
              isinstance(supported, dict) and list(supported) == [INT4])
    check("accepted names recorded with their op",
          accepted == {"aoti_torch_cuda_mm_out": "mm", "aoti_torch_cuda_addmm_out": "addmm",
                       "aoti_torch_cuda_bmm_out": "bmm", "aten::mm.out": "mm"})
    check("each accepted name logged once",
          len(logged) == 4 and all("gemm=cublas: accepted extern kernel" in s for s in logged))
    check("restored: options", FakeCudaBackend.get_aoti_compile_options(specs) == before)
    check("restored: fallback kernels", FakeCudaBackend.get_supported_fallback_kernels() == {INT4: None}
          and type(FakeCudaBackend.get_supported_fallback_kernels()) is dict)

    try:
        with cublas_gemms(FakeCudaBackend, log=lambda s: None):
            raise KeyError("lowering failed")
    except KeyError:
        pass
    check("restored after an exception", missing(FakeCudaBackend, gemms) == sorted(gemms)
          and FakeCudaBackend.get_aoti_compile_options(specs)["max_autotune_gemm_backends"] == "TRITON")

    with cublas_gemms(FakeSubBackend, log=lambda s: None):
        CALLED_ON.clear()
        check("subclass: patched on it, the original bound to it",
              FakeSubBackend.get_aoti_compile_options(specs)["max_autotune_gemm_backends"] == "ATEN"
              and CALLED_ON == [FakeSubBackend])
        check("subclass: the base class untouched", missing(FakeCudaBackend, gemms) == sorted(gemms))
    check("subclass: inherited methods again, no own copies left",
          "get_aoti_compile_options" not in FakeSubBackend.__dict__
          and "get_supported_fallback_kernels" not in FakeSubBackend.__dict__)

    with gemm_context("triton", FakeCudaBackend) as accepted:
        check("triton: options unchanged", FakeCudaBackend.get_aoti_compile_options(specs) == before)
        check("triton: fallback list unchanged", missing(FakeCudaBackend, gemms) == sorted(gemms))
    check("triton: yields an empty record", accepted == {})
    try:
        gemm_context("cutlass", FakeCudaBackend)
        check("unknown --gemm rejected", False)
    except ValueError:
        check("unknown --gemm rejected", True)

    with fusion_context("inductor", FakeCudaBackend) as applied:
        opts = FakeCudaBackend.get_aoti_compile_options(specs)
        check("fusion inductor: the two options overridden", all(opts[k] == v for k, v in INDUCTOR_FUSION.items())
              and applied == INDUCTOR_FUSION)
        check("fusion inductor: every other option kept",
              {k: v for k, v in opts.items() if k not in INDUCTOR_FUSION} == before)
        with cublas_gemms(FakeCudaBackend, log=lambda s: None):
            both = FakeCudaBackend.get_aoti_compile_options(specs)
            check("fusion inductor + cublas: both applied", both["max_autotune_gemm_backends"] == "ATEN"
                  and both["emulate_precision_casts"] is False)
        check("fusion inductor: still applied after cublas's block",
              FakeCudaBackend.get_aoti_compile_options(specs)["loop_ordering_after_fusion"] is True
              and FakeCudaBackend.get_aoti_compile_options(specs)["max_autotune_gemm_backends"] == "TRITON")
    check("fusion inductor: restored", FakeCudaBackend.get_aoti_compile_options(specs) == before
          and "emulate_precision_casts" not in OPTIONS)
    try:
        with fusion_context("inductor", FakeSubBackend):
            raise KeyError("lowering failed")
    except KeyError:
        pass
    check("fusion inductor: restored after an exception (inherited again)",
          "get_aoti_compile_options" not in FakeSubBackend.__dict__)
    with fusion_context("executorch", FakeCudaBackend) as applied:
        check("fusion executorch: options unchanged", FakeCudaBackend.get_aoti_compile_options(specs) == before
              and applied == {})
    try:
        fusion_context("fast", FakeCudaBackend)
        check("unknown --fusion rejected", False)
    except ValueError:
        check("unknown --fusion rejected", True)

    with autotune_context("off", FakeCudaBackend) as applied, cublas_gemms(FakeCudaBackend, log=lambda s: None):
        opts = FakeCudaBackend.get_aoti_compile_options(specs)
        check("autotune off: max_autotune and coordinate descent off, the cuBLAS GEMMs kept",
              opts["max_autotune"] is False and opts["coordinate_descent_tuning"] is False
              and opts["max_autotune_gemm_backends"] == "ATEN" and applied == NO_AUTOTUNE)
    check("autotune off: restored", FakeCudaBackend.get_aoti_compile_options(specs) == before)
    with autotune_context("on", FakeCudaBackend) as applied:
        check("autotune on: options unchanged (the backend's max_autotune)",
              FakeCudaBackend.get_aoti_compile_options(specs) == before and before["max_autotune"] is True
              and applied == {})
    try:
        autotune_context("fast", FakeCudaBackend)
        check("unknown --autotune rejected", False)
    except ValueError:
        check("unknown --autotune rejected", True)

    failed = results.count(False)
    print(f"gemm backend: {len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
