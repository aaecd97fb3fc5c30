#!/usr/bin/env python3
"""Checks of sdpa_backend.py (--sdpa flash) against a fake CudaBackend; stdlib only, no torch or executorch.

    python3 tools/export/test_sdpa_backend.py      # prints "sdpa backend: N passed, M failed"

- a method named in flash_attention() is lowered under the given context and its fallback check accepts the flash
  kernel under both names the check may see (the C shim's, the ATen operator's) (and what the backend already allowed, also through the --gemm cublas wrapper), and is recorded as having
  emitted it; other methods keep the backend's context and list unchanged;
- the three classmethods are restored afterwards, also after an exception in the lowering.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gemm_backend import cublas_gemms  # noqa: E402
from sdpa_backend import FLASH_KERNEL, flash_attention  # noqa: E402

INT4 = "at::_ops::_weight_int4pack_mm::call"
MATH, FLASH = "sdpa_kernel([MATH])", "sdpa_kernel([FLASH_ATTENTION, MATH])"


class FakeCudaBackend:  # the shape of executorch's AotiBackend + CudaBackend (1.2.0), as preprocess uses them
    seen = []  # per lowered method: (name, compile context, flash kernel accepted?, mm accepted?, bogus accepted?)

    @classmethod
    def method_name_from_compile_specs(cls, specs):
        return specs[0].split("=", 1)[1]

    @classmethod
    def get_supported_fallback_kernels(cls):
        return {INT4: None}

    @classmethod
    def get_aoti_compile_options(cls, compile_specs):
        return {"max_autotune_gemm_backends": "TRITON"}

    @classmethod
    def get_extra_aoti_compile_context_manager(cls):
        return MATH

    @classmethod
    def preprocess(cls, edge_program, compile_specs):
        if edge_program == "boom":
            raise RuntimeError("lowering failed")
        supported = cls.get_supported_fallback_kernels()
        name = cls.method_name_from_compile_specs(compile_specs)
        cls.seen.append((name, cls.get_extra_aoti_compile_context_manager(),
                         FLASH_KERNEL in supported and "at::_ops::_scaled_dot_product_flash_attention::call" in supported,
                         "aoti_torch_cuda_mm_out" in supported, "aoti_torch_cuda_bogus" in supported,
                         INT4 in supported))
        return f"{name} lowered"


def main() -> int:
    results = []

    def check(name, ok):
        results.append(bool(ok))
        print(f"  {'ok  ' if ok else 'FAIL'} {name}")

    originals = {k: FakeCudaBackend.__dict__[k] for k in
                 ("preprocess", "get_extra_aoti_compile_context_manager", "get_supported_fallback_kernels")}
    with flash_attention(FakeCudaBackend, ["prefill"], lambda: FLASH) as emitted:
        check("preprocess still returns the backend's result",
              FakeCudaBackend.preprocess("ep", ["method_name=prefill"]) == "prefill lowered")
        FakeCudaBackend.preprocess("ep", ["method_name=decode"])
    prefill, decode = FakeCudaBackend.seen
    check("prefill: lowered under the flash context", prefill[1] == FLASH)
    check("prefill: the flash kernel accepted, int4 still accepted, others not",
          prefill[2] and prefill[5] and not prefill[3] and not prefill[4])
    check("decode: the backend's own context", decode[1] == MATH)
    check("decode: the flash kernel not accepted", not decode[2] and decode[5])
    check("the methods that emitted the kernel recorded", emitted == ["prefill"])
    check("restored: every classmethod", all(FakeCudaBackend.__dict__[k] is v for k, v in originals.items()))
    check("restored: context outside the block", FakeCudaBackend.get_extra_aoti_compile_context_manager() == MATH)

    FakeCudaBackend.seen.clear()
    with cublas_gemms(FakeCudaBackend, log=lambda s: None):
        with flash_attention(FakeCudaBackend, ["prefill"], lambda: FLASH):
            FakeCudaBackend.preprocess("ep", ["method_name=prefill"])
    (prefill,) = FakeCudaBackend.seen
    check("inside --gemm cublas: flash, mm and int4 accepted, others not",
          prefill[2] and prefill[3] and prefill[5] and not prefill[4])

    try:
        with flash_attention(FakeCudaBackend, ["prefill"], lambda: FLASH):
            FakeCudaBackend.preprocess("boom", ["method_name=prefill"])
        check("an exception propagates", False)
    except RuntimeError:
        check("an exception propagates", True)
    check("restored after an exception", all(FakeCudaBackend.__dict__[k] is v for k, v in originals.items()))

    passed = sum(results)
    print(f"sdpa backend: {passed} passed, {len(results) - passed} failed")
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
