#!/usr/bin/env python3
"""What AOTInductor generates for aoti_cuda's decode attention operator; needs torch (skips without it), no GPU.

    python3 tools/export/llm/test_decode_op_codegen.py   # prints "decode op codegen: N passed, M failed" (~1-2 min)

A small program calling torch.ops.aoti_cuda.aoti_cuda_decode_attention is compiled by AOTInductor for the CPU with
the operator in aot_inductor.custom_ops_to_c_shims (package_cpp_only: the C++ is generated, not built). The CPU is the
only device here; Inductor names the shim aoti_torch_<device>_<operator name>, so a CUDA program calls
aoti_torch_cuda_aoti_cuda_decode_attention with the same arguments. Checks, in the generated wrapper:
- the declaration given in the option is written as an extern "C" declaration;
- the operator is one direct call: (q, k_cache, v_cache, input_pos, scale as a double literal, &output handle),
  not AOTInductor's proxy executor (which needs libtorch);
- the output's strides it asserts are contiguous (what the shim allocates);
- the update form on a module whose caches are buffers: one direct call that passes the buffers themselves, and no
  other code writes them;
- the qkv form after a projection: one direct call that takes the projection's output, the rotary tables and the
  caches as they are (no generated kernel at all: nothing left between the projection and the attention);
- the fused linear operator (fused_linear_op.py): an absent optional tensor is passed as nullptr and a present one as
  the address of its handle, the bool as 0 / 1, and no kernel is generated around the calls;
- its int4 form on Linears holding torchao's Int4TilePackedTo4dTensor (built by hand; skipped without torchao): the
  weight's qdata and scale_and_zero are passed as the program's constants, group_size and n as int64 literals, and
  again no kernel is generated around the calls;
- the argmax operator (argmax_op.py) on a head's logits: one direct call on the projection's output buffer, no
  generated kernel;
- export_llm.register_operator_fallbacks: a 40-call chain of fused projections ending in the argmax operator lowers
  in a fresh process (without it, torch 2.11 builds a log text that doubles with every call).
"""

from __future__ import annotations

import glob
import os
import re
import sys
import tempfile
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def generated_wrapper(torch, ep, options):
    """The C++ wrapper AOTInductor generates for `ep` with `options` (package_cpp_only: generated, not built), or
    None when the package does not hold exactly one."""
    with tempfile.TemporaryDirectory() as tmp:
        package = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.join(tmp, "program.pt2"),
                                                           inductor_configs=options)
        with zipfile.ZipFile(package) as z:
            z.extractall(tmp)
        wrappers = glob.glob(os.path.join(tmp, "**", "*.wrapper.cpp"), recursive=True)
        return open(wrappers[0]).read() if len(wrappers) == 1 else None


def cpu_wrapper(torch, ep, op, shim, declaration):
    """(the shim's CPU name, its CPU declaration, the wrapper generated for `ep` with `op` mapped to it): Inductor
    names a custom op's shim after the device, and the CPU is the only one here."""
    cpu = shim.replace("aoti_torch_cuda_", "aoti_torch_cpu_")
    cpu_declaration = declaration.replace(shim, cpu)
    options = {"aot_inductor.custom_ops_to_c_shims": {op: [cpu_declaration]}, "aot_inductor.package_cpp_only": True}
    return cpu, cpu_declaration, generated_wrapper(torch, ep, options)


def check_fused_linear_int4(torch, check, flo) -> None:
    """The int4 form as the model calls it (model.fused_projection) on Linears whose weights are torchao's
    Int4TilePackedTo4dTensor: torch.export reads the weight's parts from the parameter, AOTInductor makes them the
    program's constants and passes them to the shim."""
    try:
        from test_model import int4_weight
        int4_weight(torch, 8, 8)
    except ImportError:
        print("  (int4 fused linear codegen skipped: torchao is not installed)")
        return
    from model import fused_projection

    class Int4Step(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = torch.nn.Parameter(torch.ones(256, dtype=torch.bfloat16))
            self.w13 = torch.nn.Linear(256, 128, bias=False)
            self.w13.weight = torch.nn.Parameter(int4_weight(torch, 128, 256), requires_grad=False)
            self.w2 = torch.nn.Linear(64, 256, bias=False)
            self.w2.weight = torch.nn.Parameter(int4_weight(torch, 256, 64), requires_grad=False)

        def forward(self, x):
            a = fused_projection(x, self.norm, 1e-5, True, self.w13, None)
            return fused_projection(a, None, 0.0, False, self.w2, x)

    ep = torch.export.export(Int4Step(), (torch.randn(1, 1, 256, dtype=torch.bfloat16),))
    cpu_int4, declaration, code = cpu_wrapper(torch, ep, torch.ops.aoti_cuda.aoti_cuda_fused_linear_int4.default,
                                              flo.INT4_SHIM, flo.INT4_SHIM_DECLARATION)
    code = code or ""
    check("int4 fused linear: the declaration is written as given (group_size and n as int64_t)",
          f"extern {declaration};" in code and "int64_t group_size, int64_t n" in declaration)
    optional = r"(nullptr|&temporary_reference\((\w+)\.get\(\)\))"
    calls = re.findall(rf"{cpu_int4}\((\w+), {optional}, ([0-9.e+-]+), ([01]), (\w+), (\w+), (\d+)L?, (\d+)L?, "
                       rf"{optional}, &(\w+)\)", code)
    check("int4 fused linear: two direct calls (x, &norm or nullptr, eps, swiglu, qdata, scale_and_zero, group_size, "
          "n, &residual or nullptr, &out)",
          len(calls) == 2 and code.count(f"{cpu_int4}(") == 3  # the declaration and the calls
          and calls[0][1] != "nullptr" and calls[0][9] == "nullptr" and calls[1][1] == "nullptr"
          and calls[1][9] != "nullptr")
    check("int4 fused linear: swiglu 1 / 0, group_size 32 and n (128, then 256) as literals",
          len(calls) == 2 and (calls[0][4], calls[0][7], calls[0][8]) == ("1", "32", "128")
          and (calls[1][4], calls[1][7], calls[1][8]) == ("0", "32", "256"))
    constants = set(re.findall(r"auto& (\w+) = constants_->at\(", code))
    check("int4 fused linear: qdata and scale_and_zero are the program's constants (the weights' parts)",
          len(calls) == 2 and all(c[5] in constants and c[6] in constants for c in calls)
          and len({c[5] for c in calls} | {c[6] for c in calls}) == 4)
    check("int4 fused linear: no generated kernel, no other int4 matmul", "cpp_fused" not in code
          and "_weight_int4pack_mm" not in code)


# A decode's shape in small: N fused projections, each taking the previous output as x and as the residual (as the
# model's residual stream does), then the argmax operator. Run in a fresh process, where the lowering meets the
# argmax operator for the first time, as an export does.
DEEP_CHAIN = r"""
import os, sys, time
sys.path.insert(0, sys.argv[1])
import torch
import argmax_op, fused_linear_op, export_llm
if sys.argv[2] == "register":
    print("registered", export_llm.register_operator_fallbacks(export_llm.decode_op_shims()), flush=True)
    print("again", export_llm.register_operator_fallbacks(export_llm.decode_op_shims()), flush=True)
class Chain(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.w = torch.nn.ParameterList([torch.nn.Parameter(torch.randn(64, 64) / 8) for _ in range(n)])
    def forward(self, x):
        for w in self.w:
            x = torch.ops.aoti_cuda.aoti_cuda_fused_linear(x, None, 0.0, False, w, x)
        return torch.ops.aoti_cuda.aoti_cuda_argmax(x)
ep = torch.export.export(Chain(int(sys.argv[3])), (torch.randn(1, 1, 64),))
shims = {op: [d.replace("aoti_torch_cuda_", "aoti_torch_cpu_") for d in decl]
         for op, decl in export_llm.decode_op_shims().items()}
import glob, tempfile, zipfile
t0 = time.time()
with tempfile.TemporaryDirectory() as tmp:
    package = torch._inductor.aoti_compile_and_package(
        ep, package_path=os.path.join(tmp, "chain.pt2"),
        inductor_configs={"aot_inductor.custom_ops_to_c_shims": shims, "aot_inductor.package_cpp_only": True})
    print(f"lowered in {time.time() - t0:.1f} s", flush=True)
    with zipfile.ZipFile(package) as z:
        z.extractall(tmp)
    code = "".join(open(w).read() for w in glob.glob(os.path.join(tmp, "**", "*.wrapper.cpp"), recursive=True))
# Direct calls (the declaration is the one more occurrence), no proxy executor: as the implicit fallback gives.
print("calls", code.count("aoti_torch_cpu_aoti_cuda_fused_linear(") - 1,
      code.count("aoti_torch_cpu_aoti_cuda_argmax(") - 1, "proxy" if "proxy_executor_call_function" in code else "",
      flush=True)
"""


def check_deep_chain(check) -> None:
    """export_llm.register_operator_fallbacks: a 40-call chain ending in the argmax operator lowers in seconds.
    Without the registration, torch 2.11 builds a log text that doubles with every call of the chain (the lowering
    of the 22-layer decode never ended); that run is only reported, as a later torch may not do so."""
    import subprocess

    here = os.path.dirname(os.path.abspath(__file__))

    def run(mode, timeout):
        try:
            p = subprocess.run([sys.executable, "-c", DEEP_CHAIN, here, mode, "40"], capture_output=True, text=True,
                               timeout=timeout)
            return p.returncode, p.stdout + p.stderr
        except subprocess.TimeoutExpired:
            return None, ""

    rc, out = run("register", 240)
    check("register_operator_fallbacks: every operator once, then none", "registered 6" in out and "again 0" in out)
    check("a 40-call chain ending in the argmax operator lowers in a fresh process", rc == 0 and "lowered in" in out)
    check("registered fallbacks: 40 direct fused linear calls and one argmax call, no proxy executor",
          re.search(r"^calls 40 1 $", out, re.M) is not None)
    rc, out = run("implicit", 20)
    print("  (without the registration: " + ("still lowering after 20 s)" if rc is None else
                                               f"exit {rc}, {out.strip().splitlines()[-1:]})"))


def main() -> int:
    try:
        import torch
    except ImportError:
        print("decode op codegen tests SKIPPED: torch is not installed")
        return 0
    import decode_attention_op as dao

    results = []

    def check(name, ok):
        results.append(bool(ok))
        print(f"  {'ok  ' if ok else 'FAIL'} {name}")

    class Step(torch.nn.Module):
        def forward(self, q, k, v, pos):
            return torch.ops.aoti_cuda.aoti_cuda_decode_attention(q * 2, k, v, pos, 0.125) + 1

    args = (torch.randn(1, 8, 1, 64), torch.randn(1, 2, 32, 64), torch.randn(1, 2, 32, 64), torch.tensor([5]))
    ep = torch.export.export(Step(), args)
    cpu_shim, declaration, code = cpu_wrapper(torch, ep, torch.ops.aoti_cuda.aoti_cuda_decode_attention.default,
                                              dao.SHIM, dao.SHIM_DECLARATION)
    check("one generated wrapper", code is not None)
    code = code or ""
    check("the declaration is written as given", f"extern {declaration};" in code)
    call = re.search(rf"{cpu_shim}\((\w+), (\w+), (\w+), (\w+), ([0-9.e+-]+), &(\w+)\)", code)
    check("one direct call (q, k_cache, v_cache, input_pos, scale, &out)", call is not None
          and code.count(f"{cpu_shim}(") == 2)  # the declaration and the call
    check("scale passed as a double literal", call is not None and float(call.group(5)) == 0.125)
    check("no proxy executor", "proxy_executor_call_function" not in code)
    # torch 2.12+ asserts the strides of a custom op's output in the wrapper; 2.11 writes no such check.
    asserted = re.search(r"assert_size_stride\([^;]*\"torch\.ops\.aoti_cuda\.aoti_cuda_decode_attention", code)
    if asserted is None:
        print(f"  (torch {torch.__version__} writes no stride assertion for the operator's output)")
    check("the output, where its strides are asserted, is asserted contiguous [1, 8, 1, 64]",
          asserted is None or
          re.search(r"assert_size_stride\(\w+, \{1L, 8L, 1L, 64L\}, \{512L, 64L, 64L, 1L\}, "
                    r"\"torch\.ops\.aoti_cuda\.aoti_cuda_decode_attention", code) is not None)

    # The update form on a module whose KV caches are buffers, as in the model's decode: AOTInductor must pass the
    # buffers themselves (constants) to the shim, with the projections before it fused, and write no cache elsewhere.
    class CachedStep(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("k_cache", torch.zeros(1, 2, 32, 64))
            self.register_buffer("v_cache", torch.zeros(1, 2, 32, 64))

        def forward(self, q, k, v, pos):
            return torch.ops.aoti_cuda.aoti_cuda_decode_attention_update(q, k * 2, v + 1, self.k_cache, self.v_cache,
                                                                          pos, 0.125) + 1

    args = (torch.randn(1, 8, 1, 64), torch.randn(1, 2, 1, 64), torch.randn(1, 2, 1, 64), torch.tensor([5]))
    ep = torch.export.export(CachedStep(), args)
    cpu_update, _, code = cpu_wrapper(torch, ep, torch.ops.aoti_cuda.aoti_cuda_decode_attention_update.default,
                                      dao.UPDATE_SHIM, dao.UPDATE_SHIM_DECLARATION)
    code = code or ""
    call = re.search(rf"{cpu_update}\((\w+), (\w+), (\w+), (\w+), (\w+), (\w+), ([0-9.e+-]+), &(\w+)\)", code)
    check("update form: one direct call (q, k_new, v_new, k_cache, v_cache, input_pos, scale, &out)",
          call is not None and code.count(f"{cpu_update}(") == 2)
    check("update form: the cache buffers themselves are passed (no copies of them)",
          call is not None and call.group(4) == "k_cache" and call.group(5) == "v_cache"
          and "k_cache = constants_->at(" in code.replace("auto& ", "").replace("[[maybe_unused]] ", ""))
    check("update form: nothing else writes the caches (no copy_ or clone of them)",
          re.search(r"(copy_|clone)\w*\([^;]*\b[kv]_cache\b", code) is None)

    # The qkv form right after the fused q/k/v projection, with the rotary tables as buffers (the model's decode).
    class QkvStep(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.wqkv = torch.nn.Linear(256, (8 + 2 * 2) * 64, bias=False)
            self.register_buffer("k_cache", torch.zeros(1, 2, 32, 64))
            self.register_buffer("v_cache", torch.zeros(1, 2, 32, 64))
            self.register_buffer("rope_cos", torch.ones(32, 32))
            self.register_buffer("rope_sin", torch.zeros(32, 32))

        def forward(self, x, pos):
            return torch.ops.aoti_cuda.aoti_cuda_decode_attention_qkv(self.wqkv(x), self.rope_cos, self.rope_sin,
                                                                       self.k_cache, self.v_cache, pos, 8, 0.125)

    ep = torch.export.export(QkvStep(), (torch.randn(1, 1, 256), torch.tensor([5])))
    cpu_qkv, _, code = cpu_wrapper(torch, ep, torch.ops.aoti_cuda.aoti_cuda_decode_attention_qkv.default,
                                   dao.QKV_SHIM, dao.QKV_SHIM_DECLARATION)
    code = code or ""
    call = re.search(rf"{cpu_qkv}\((.+?), (\w+), (\w+), (\w+), (\w+), (\w+), (\d+)L?, ([0-9.e+-]+), &(\w+)\)", code)
    projection = re.search(r"aoti_torch_cpu_(?:mm|addmm)_out\((\w+),", code)
    check("qkv form: one direct call (qkv, rope_cos, rope_sin, k_cache, v_cache, input_pos, n_heads, scale, &out)",
          call is not None and code.count(f"{cpu_qkv}(") == 2)
    check("qkv form: n_heads and scale as literals", call is not None and call.group(7) == "8"
          and float(call.group(8)) == 0.125)
    check("qkv form: the tables and the caches are the buffers themselves",
          call is not None and (call.group(2), call.group(3), call.group(4), call.group(5)) ==
          ("rope_cos", "rope_sin", "k_cache", "v_cache"))
    check("qkv form: the projection's output buffer is the operator's qkv (a view of it, not a copy)",
          call is not None and projection is not None and re.search(rf"\b{projection.group(1)}\b", call.group(1)))
    check("qkv form: no generated kernel (nothing left between the projection and the operator)",
          "cpp_fused" not in code)

    # The fused linear operator (fused_linear_op.py): what the C call looks like with optional tensors and a bool,
    # and that the norm, SwiGLU and residual leave no kernel.
    import fused_linear_op as flo

    class FusedStep(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = torch.nn.Parameter(torch.ones(256))
            self.w13 = torch.nn.Parameter(torch.randn(128, 256))
            self.w2 = torch.nn.Parameter(torch.randn(256, 64))

        def forward(self, x):
            a = torch.ops.aoti_cuda.aoti_cuda_fused_linear(x, self.norm, 1e-5, True, self.w13, None)
            return torch.ops.aoti_cuda.aoti_cuda_fused_linear(a, None, 0.0, False, self.w2, x)

    ep = torch.export.export(FusedStep(), (torch.randn(1, 1, 256),))
    cpu_fused, declaration, code = cpu_wrapper(torch, ep, torch.ops.aoti_cuda.aoti_cuda_fused_linear.default,
                                               flo.SHIM, flo.SHIM_DECLARATION)
    code = code or ""
    check("fused linear: the declaration is written as given", f"extern {declaration};" in code)
    optional = r"(nullptr|&temporary_reference\((\w+)\.get\(\)\))"
    calls = re.findall(rf"{cpu_fused}\((\w+), {optional}, ([0-9.e+-]+), ([01]), (\w+), {optional}, &(\w+)\)", code)
    check("fused linear: two direct calls; an absent optional tensor is nullptr, a present one &its handle",
          len(calls) == 2 and calls[0][1] != "nullptr" and calls[0][6] == "nullptr"
          and calls[1][1] == "nullptr" and calls[1][6] != "nullptr")
    check("fused linear: eps as a double literal, swiglu as 0 / 1",
          len(calls) == 2 and float(calls[0][3]) == 1e-5 and calls[0][4] == "1" and calls[1][4] == "0")
    check("fused linear: no generated kernel (norm, SwiGLU and residual all inside the calls)", "cpp_fused" not in code)
    check_fused_linear_int4(torch, check, flo)

    # The argmax operator (argmax_op.py) on a head's logits, as the model's decode ends: one direct call that takes
    # the projection's output as it is and returns the int64 index tensor.
    import argmax_op

    class Head(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.output = torch.nn.Linear(64, 512, bias=False)

        def forward(self, x):
            logits = self.output(x)
            return logits, torch.ops.aoti_cuda.aoti_cuda_argmax(logits)

    ep = torch.export.export(Head(), (torch.randn(1, 64),))
    cpu_argmax, declaration, code = cpu_wrapper(torch, ep, torch.ops.aoti_cuda.aoti_cuda_argmax.default,
                                                argmax_op.SHIM, argmax_op.SHIM_DECLARATION)
    code = code or ""
    check("argmax: the declaration is written as given", f"extern {declaration};" in code)
    call = re.search(rf"{cpu_argmax}\((\w+), &(\w+)\)", code)
    projection = re.search(r"aoti_torch_cpu_(?:mm|addmm)_out\((\w+),", code)
    check("argmax: one direct call (logits, &out) on the projection's output buffer",
          call is not None and code.count(f"{cpu_argmax}(") == 2 and projection is not None
          and call.group(1) == projection.group(1))
    check("argmax: no generated kernel and no proxy executor",
          "cpp_fused" not in code and "proxy_executor_call_function" not in code)

    check_deep_chain(check)

    failed = results.count(False)
    print(f"decode op codegen: {len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
