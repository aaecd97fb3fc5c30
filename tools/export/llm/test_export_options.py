#!/usr/bin/env python3
"""Checks of export_llm.py's lowering options that need no torch (stdlib only).

    python3 tools/export/llm/test_export_options.py   # prints "export options: N passed, M failed"

bf16_math_sdpa (what --sdpa decomposed wraps the lowering in): turns PyTorch's
allow_fp16_bf16_reduction_math_sdp on inside the block only, restores the value it found (also after an
exception), changes nothing when disabled, and says so when the torch it runs with has no such switch.
sdpa_decomposed / sdpa_flash: which methods --sdpa decomposes (mixed and flash: decode only) and which keep flash
attention (flash: prefill only); sdpa_decode_op: decode-op sends decode (only) through aoti_cuda's operator and
decomposes nothing (decode-op-fused too, with bf16 or int4 weights); an unknown choice is refused; --max-ctx reaches
the config; --autotune is on unless asked off; --split-lowering needs two methods, and the helper's command line it
makes parses to a one-method export that saves its lowering; the split helper (split_lowering.HelperProcess) starts
this exporter with it (killed with its parent), clears an earlier export's result, and on close() stops the helper and
removes its folder.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from export_llm import (bf16_math_sdpa, exported_methods, parse_args, sdpa_decode_op, sdpa_decomposed,  # noqa: E402
                        sdpa_flash)
import split_lowering  # noqa: E402
from split_lowering import helper_argv  # noqa: E402


class FakeBackends:
    """torch.backends.cuda's two functions, recording every change."""

    def __init__(self, allowed: bool):
        self.allowed = allowed
        self.changes = []

    def allow_fp16_bf16_reduction_math_sdp(self, enabled: bool):
        self.allowed = bool(enabled)
        self.changes.append(bool(enabled))

    def fp16_bf16_reduction_math_sdp_allowed(self) -> bool:
        return self.allowed


def usage_error(argv):
    """What parse_args(argv) printed when it refused argv as a usage error (argparse exits), else None."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            parse_args(argv)
        except SystemExit:
            return err.getvalue()
    return None


class FakePopen:
    """subprocess.Popen as split_lowering.HelperProcess uses it, recording the command; alive until killed."""
    made = []

    def __init__(self, cmd, stdout=None, stderr=None, preexec_fn=None):
        self.cmd, self.preexec_fn, self.pid, self.killed, self.returncode = cmd, preexec_fn, 4242, False, None
        FakePopen.made.append(self)

    def poll(self):
        return self.returncode

    def kill(self):
        self.killed, self.returncode = True, -9

    def wait(self):
        return self.returncode


def check_split_helper(check):
    """The split helper's plumbing (export_llm.start_split_helper) without a second exporter: the command it starts,
    its files, and its clean-up."""
    import shutil
    import subprocess
    import tempfile

    import export_llm

    out = tempfile.mkdtemp(prefix="split_helper_test_")
    saved_popen = subprocess.Popen
    subprocess.Popen = FakePopen
    try:
        stale = os.path.join(out, ".split-lowering")
        os.makedirs(stale)
        open(os.path.join(stale, "decode.pickle"), "w").close()  # an earlier export's result
        argv = ["--out", out, "--split-lowering", "--quant", "int4"]
        with contextlib.redirect_stdout(io.StringIO()):
            helper = export_llm.start_split_helper(argv, parse_args(argv))
        (proc,) = FakePopen.made
        check("split helper: this exporter again, with the helper's arguments, killed with its parent",
              proc.cmd[:2] == [sys.executable, os.path.abspath(export_llm.__file__)]
              and proc.cmd[2:] == helper_argv(argv, "decode", helper.cache_dir)
              and proc.preexec_fn is split_lowering._die_with_parent)
        check("split helper: an earlier result removed, the log in the cache folder",
              os.listdir(helper.cache_dir) == ["helper.log"] and helper.method == "decode")
        check("split helper: the main process's side of the lowering",
              helper.split()[:3] == ("main", "decode", helper.cache_dir) and helper.split()[3]() is True)
        helper.close()
        check("split helper: close() stops a running helper and removes its folder",
              proc.killed and not os.path.exists(helper.cache_dir))
    finally:
        subprocess.Popen = saved_popen
        shutil.rmtree(out, ignore_errors=True)


def main() -> int:
    results = []

    def check(name, ok):
        results.append(ok)
        print(("ok   " if ok else "FAIL ") + name)

    quiet = io.StringIO()
    for start in (False, True):
        b = FakeBackends(start)
        with contextlib.redirect_stdout(quiet):
            with bf16_math_sdpa(True, b):
                inside = b.allowed
        check(f"enabled (found {start}): on inside the block", inside is True)
        check(f"enabled (found {start}): the value found is restored", b.allowed is start and b.changes[-1] is start)

    a = parse_args(["--out", "x", "--max-ctx", "4096"])
    check("--max-ctx parses (the long-context export)", a.max_ctx == 4096)
    check("--max-ctx defaults to the config's", parse_args(["--out", "x"]).max_ctx is None)
    check("sdpa triton: no method decomposed", not sdpa_decomposed("prefill", "triton") and not sdpa_decomposed("decode", "triton"))
    check("sdpa decomposed: both methods", sdpa_decomposed("prefill", "decomposed") and sdpa_decomposed("decode", "decomposed"))
    check("sdpa mixed: decode only", sdpa_decomposed("decode", "mixed") and not sdpa_decomposed("prefill", "mixed"))
    check("sdpa flash: decode decomposed, prefill not",
          sdpa_decomposed("decode", "flash") and not sdpa_decomposed("prefill", "flash"))
    check("sdpa flash: prefill keeps flash attention, decode does not",
          sdpa_flash("prefill", "flash") and not sdpa_flash("decode", "flash"))
    check("sdpa other than flash: no method keeps flash attention",
          not any(sdpa_flash(m, c) for m in ("prefill", "decode") for c in ("triton", "decomposed", "mixed")))
    check("sdpa decode-op: decode through the operator, prefill not, nothing decomposed or flash",
          sdpa_decode_op("decode", "decode-op") and not sdpa_decode_op("prefill", "decode-op")
          and not any(sdpa_decomposed(m, "decode-op") or sdpa_flash(m, "decode-op") for m in ("prefill", "decode")))
    check("sdpa other than decode-op: no method through the operator",
          not any(sdpa_decode_op(m, c) for m in ("prefill", "decode") for c in ("triton", "decomposed", "mixed", "flash")))
    check("--sdpa decode-op and --max-ctx on the command line",
          parse_args(["--out", "x", "--sdpa", "decode-op", "--max-ctx", "4096"]).sdpa == "decode-op"
          and parse_args(["--out", "x", "--max-ctx", "4096"]).max_ctx == 4096
          and parse_args(["--out", "x"]).max_ctx is None)
    for fn in (sdpa_decomposed, sdpa_flash, sdpa_decode_op):
        try:
            fn("decode", "cudnn")
            check(f"{fn.__name__}: an unknown choice is refused", False)
        except ValueError as e:
            check(f"{fn.__name__}: an unknown choice is refused, naming the choices", "mixed" in str(e) and "flash" in str(e))

    b = FakeBackends(False)
    try:
        with contextlib.redirect_stdout(quiet):
            with bf16_math_sdpa(True, b):
                raise RuntimeError("lowering failed")
    except RuntimeError:
        pass
    check("an exception in the block still restores the switch", b.allowed is False)

    b = FakeBackends(False)
    with bf16_math_sdpa(False, b):
        inside = b.allowed
    check("disabled: nothing changes", inside is False and b.changes == [])

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        with bf16_math_sdpa(True, object()):  # a torch without the switch
            pass
    check("a torch without the switch: the block runs and the log says math SDPA upcasts",
          "upcasts to float32" in out.getvalue())
    default = parse_args(["--out", "x"])
    chosen = parse_args(["--out", "x", "--fusion", "inductor", "--sdpa", "mixed", "--gemm", "cublas"])
    check("fusion: executorch by default, inductor when asked", default.fusion == "executorch"
          and chosen.fusion == "inductor" and chosen.sdpa == "mixed")
    check("autotune: on by default (the backend's max_autotune), off when asked",
          default.autotune == "on" and parse_args(["--out", "x", "--autotune", "off"]).autotune == "off")
    refusal = usage_error(["--out", "x", "--autotune", "fast"])
    check("autotune: an unknown value is a usage error", refusal is not None and "--autotune" in refusal)
    check("sdpa flash accepted on the command line", parse_args(["--out", "x", "--sdpa", "flash"]).sdpa == "flash")
    fused = {q: parse_args(["--out", "x", "--quant", q, "--sdpa", "decode-op-fused"]) for q in ("bf16", "int4")}
    check("sdpa decode-op-fused accepted with bf16 and int4 weights (the operator's int4 form)",
          all(fused[q].sdpa == "decode-op-fused" and fused[q].quant == q for q in fused)
          and sdpa_decode_op("decode", "decode-op-fused") and not sdpa_decode_op("prefill", "decode-op-fused"))
    check("argmax: the op by default with decode-op-fused, aten otherwise, and either when asked with a decode-op",
          fused["bf16"].argmax == "op" and default.argmax == "aten" and chosen.argmax == "aten"
          and parse_args(["--out", "x", "--sdpa", "decode-op-fused", "--argmax", "aten"]).argmax == "aten"
          and parse_args(["--out", "x", "--sdpa", "decode-op-qkv", "--argmax", "op"]).argmax == "op")
    refusal = usage_error(["--out", "x", "--sdpa", "mixed", "--argmax", "op"])
    check("argmax op without a decode-op --sdpa is refused, saying why",
          refusal is not None and "--argmax op needs a decode-op --sdpa" in refusal)
    split = parse_args(["--out", "x", "--split-lowering"])
    check("split lowering: off by default, on when asked, both methods lowered in their order",
          not default.split_lowering and split.split_lowering and exported_methods(split) == ["prefill", "decode"]
          and exported_methods(parse_args(["--out", "x", "--methods", "decode,prefill"])) == ["prefill", "decode"])
    refusal = usage_error(["--out", "x", "--split-lowering", "--methods", "decode"])
    check("split lowering with one method is refused, saying why",
          refusal is not None and "--split-lowering needs two methods" in refusal)
    refusal = usage_error(["--out", "x", "--lower-only", "decode"])
    check("the helper's --lower-only without --lower-cache is refused",
          refusal is not None and "--lower-only and --lower-cache go together" in refusal)
    helper = parse_args(helper_argv(["--out", "x", "--split-lowering", "--quant", "int4"], "decode", "/c"))
    check("the helper's command line parses: decode only, saved to the cache, no reference, no further split",
          helper.methods == "decode" and helper.lower_only == "decode" and helper.lower_cache == "/c"
          and helper.reference_tokens == 0 and not helper.split_lowering and helper.quant == "int4")
    check_split_helper(check)

    passed = sum(results)
    print(f"export options: {passed} passed, {len(results) - passed} failed")
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
