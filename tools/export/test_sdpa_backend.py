#!/usr/bin/env python3
"""Checks of sdpa_backend.py (--sdpa flash) against a fake CudaBackend; stdlib only, no torch or executorch.

    python3 tools/export/test_sdpa_backend.py      # prints "sdpa backend: N passed, M failed"

- a method named in flash_attention() is lowered under the given context and its fallback check accepts the flash
  kernel under both names the check may see (the C shim's, the ATen operator's) (and what the backend already allowed, also through the --gemm cublas wrapper), and is recorded as having
  emitted it; other methods keep the backend's context and list unchanged;
- the three classmethods are restored afterwards, also after an exception in the lowering;
- decode_op() (--sdpa decode-op): the named method's AOTInductor options map the custom operator to its C shim
  (merged with entries the backend already had, without duplicates), its fallback check accepts the operator's names,
  and it is recorded; other methods keep the backend's options and list; everything restored, also after an
  exception, and nested inside --gemm cublas (whose option change survives).
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gemm_backend import cublas_gemms  # noqa: E402
from sdpa_backend import CUSTOM_SHIMS_OPTION, FLASH_KERNEL, decode_op, flash_attention  # noqa: E402

INT4 = "at::_ops::_weight_int4pack_mm::call"
MATH, FLASH = "sdpa_kernel([MATH])", "sdpa_kernel([FLASH_ATTENTION, MATH])"
OP_NAMES = ("aoti_cuda::aoti_cuda_decode_attention", "aoti_torch_cuda_aoti_cuda_decode_attention")
OP, OTHER_OP = "OpOverload(aoti_cuda_decode_attention)", "OpOverload(int4_plain_mm)"  # stand-ins for the OpOverloads
OP_DECL = "AOTITorchError aoti_torch_cuda_aoti_cuda_decode_attention(...)"


class FakeCudaBackend:  # the shape of executorch's AotiBackend + CudaBackend (1.2.0), as preprocess uses them
    seen = []  # per lowered method: (name, compile context, flash kernel accepted?, mm accepted?, bogus accepted?)
    lowered = []  # per lowered method: (name, AOTInductor options, decode op accepted under both names?)
    backend_shims = None  # what the backend itself puts in custom_ops_to_c_shims (ExecuTorch 1.3+ does)

    @classmethod
    def method_name_from_compile_specs(cls, specs):
        return specs[0].split("=", 1)[1]

    @classmethod
    def get_supported_fallback_kernels(cls):
        return {INT4: None}

    @classmethod
    def get_aoti_compile_options(cls, compile_specs):
        options = {"max_autotune_gemm_backends": "TRITON"}
        if cls.backend_shims is not None:
            options[CUSTOM_SHIMS_OPTION] = cls.backend_shims
        return options

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
        cls.lowered.append((name, cls.get_aoti_compile_options(compile_specs), all(n in supported for n in OP_NAMES)))
        return f"{name} lowered"


def check_decode_op(check):
    names = ("preprocess", "get_aoti_compile_options", "get_supported_fallback_kernels")
    originals = {k: FakeCudaBackend.__dict__[k] for k in names}
    FakeCudaBackend.lowered.clear()
    with decode_op(FakeCudaBackend, ["decode"], lambda: {OP: [OP_DECL]}, OP_NAMES) as emitted:
        FakeCudaBackend.preprocess("ep", ["method_name=prefill"])
        check("decode-op: preprocess still returns the backend's result",
              FakeCudaBackend.preprocess("ep", ["method_name=decode"]) == "decode lowered")
    prefill, decode = FakeCudaBackend.lowered
    check("decode-op: decode maps the operator to its C shim", decode[1].get(CUSTOM_SHIMS_OPTION) == {OP: [OP_DECL]})
    check("decode-op: decode keeps the backend's other options", decode[1]["max_autotune_gemm_backends"] == "TRITON")
    check("decode-op: decode accepts the operator under both names", decode[2])
    check("decode-op: prefill unchanged (no shim map, operator not accepted)",
          CUSTOM_SHIMS_OPTION not in prefill[1] and not prefill[2])
    check("decode-op: the methods that asked for the operator recorded", emitted == ["decode"])
    check("decode-op: restored", all(FakeCudaBackend.__dict__[k] is v for k, v in originals.items()))

    # A backend with its own custom-op shims (ExecuTorch 1.3+): merged, not replaced; a repeated declaration once.
    FakeCudaBackend.lowered.clear()
    FakeCudaBackend.backend_shims = {OTHER_OP: ["int4 decl"], OP: [OP_DECL]}
    try:
        with decode_op(FakeCudaBackend, ["decode"], lambda: {OP: [OP_DECL]}, OP_NAMES):
            FakeCudaBackend.preprocess("ep", ["method_name=decode"])
        (decode,) = FakeCudaBackend.lowered
        check("decode-op: merged with the backend's own custom-op shims",
              decode[1][CUSTOM_SHIMS_OPTION] == {OTHER_OP: ["int4 decl"], OP: [OP_DECL]})
        check("decode-op: the backend's dict itself is not modified",
              FakeCudaBackend.backend_shims == {OTHER_OP: ["int4 decl"], OP: [OP_DECL]})
    finally:
        FakeCudaBackend.backend_shims = None

    FakeCudaBackend.lowered.clear()
    FakeCudaBackend.seen.clear()
    with cublas_gemms(FakeCudaBackend, log=lambda s: None):
        with decode_op(FakeCudaBackend, ["decode"], lambda: {OP: [OP_DECL]}, OP_NAMES):
            FakeCudaBackend.preprocess("ep", ["method_name=decode"])
    (decode,), (decode_seen,) = FakeCudaBackend.lowered, FakeCudaBackend.seen
    check("decode-op inside --gemm cublas: ATEN GEMMs and the shim map both set",
          decode[1]["max_autotune_gemm_backends"] == "ATEN" and decode[1][CUSTOM_SHIMS_OPTION] == {OP: [OP_DECL]})
    check("decode-op inside --gemm cublas: operator, mm and int4 accepted, others not",
          decode[2] and decode_seen[3] and decode_seen[5] and not decode_seen[4])

    try:
        with decode_op(FakeCudaBackend, ["decode"], lambda: {OP: [OP_DECL]}, OP_NAMES):
            FakeCudaBackend.preprocess("boom", ["method_name=decode"])
        check("decode-op: an exception propagates", False)
    except RuntimeError:
        check("decode-op: an exception propagates", True)
    check("decode-op: restored after an exception", all(FakeCudaBackend.__dict__[k] is v for k, v in originals.items()))


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

    check_decode_op(check)

    passed = sum(results)
    print(f"sdpa backend: {passed} passed, {len(results) - passed} failed")
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
