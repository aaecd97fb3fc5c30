#!/usr/bin/env python3
"""Checks of split_lowering.py (export_llm --split-lowering) against a fake backend; stdlib only, no torch.

    python3 tools/export/test_split_lowering.py      # prints "split lowering: N passed, M failed"

- helper_argv: the main process's arguments without the split flag, exporting and saving only the given method,
  with no eager reference; appended last, so they override the main process's own;
- in the helper, the method is lowered once, its result and the records saved (and nothing half-written left
  behind), then LoweredElsewhere ends the export; other methods are lowered as usual;
- in the main process, the method's lowering is the helper's result, taken without lowering, waited for when it
  comes later, with the helper's records added (dicts updated, lists extended without repeats); other methods are
  lowered here; when the helper ends without a result the method is lowered here and that is said;
- helper and main process in a row give the main process the result the helper lowered;
- the backend's preprocess is restored afterwards, also after an exception.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from split_lowering import (SPLIT_FLAG, LoweredElsewhere, helper_argv, helper_lowering, main_lowering,  # noqa: E402
                            result_path)


def make_backend():
    """A fake of the two classmethods split_lowering uses, as executorch's CudaBackend has them. One class per
    process of the real thing: the helper run on a thread below patches its own."""

    class FakeBackend:
        lowered = []  # every method this "process" lowered

        @classmethod
        def method_name_from_compile_specs(cls, specs):
            return specs[0].split("=", 1)[1]

        @classmethod
        def preprocess(cls, edge_program, compile_specs):
            if edge_program == "boom":
                raise RuntimeError("lowering failed")
            name = cls.method_name_from_compile_specs(compile_specs)
            cls.lowered.append(name)
            return {"method": name, "bytes": b"\x7fELF" + name.encode()}

    return FakeBackend


FakeBackend = make_backend()


def specs(method):
    return [f"method_name={method}"]


def main() -> int:
    results = []

    def check(name, ok):
        results.append(bool(ok))
        print(f"  {'ok  ' if ok else 'FAIL'} {name}")

    original = FakeBackend.__dict__["preprocess"]
    work = tempfile.mkdtemp(prefix="split_lowering_test_")
    try:
        argv = ["--out", "d", SPLIT_FLAG, "--quant", "int4", "--reference-tokens", "32"]
        got = helper_argv(argv, "decode", "/c")
        check("helper_argv: the split flag removed, the rest kept in order",
              got[:5] == ["--out", "d", "--quant", "int4", "--reference-tokens"] and SPLIT_FLAG not in got)
        check("helper_argv: only the method, saved to the cache, no eager reference, given last",
              got[-8:] == ["--methods", "decode", "--lower-only", "decode", "--lower-cache", "/c",
                           "--reference-tokens", "0"])

        # The helper: lowers decode, saves it with the records, stops; prefill (not expected) lowered as usual.
        cache = os.path.join(work, "cache")
        accepted, emitted = {"aoti_torch_cuda_mm_out": "mm"}, ["decode"]
        FakeBackend.lowered.clear()
        stopped = False
        with helper_lowering(FakeBackend, "decode", cache, [accepted, emitted]):
            check("helper: another method lowered as usual",
                  FakeBackend.preprocess("ep", specs("prefill"))["method"] == "prefill")
            try:
                FakeBackend.preprocess("ep", specs("decode"))
            except LoweredElsewhere:
                stopped = True
        check("helper: LoweredElsewhere after saving", stopped)
        check("helper: decode lowered once", FakeBackend.lowered == ["prefill", "decode"])
        check("helper: the result is in place, nothing half-written left",
              os.path.exists(result_path(cache, "decode")) and os.listdir(cache) == ["decode.pickle"])
        check("helper: preprocess restored", FakeBackend.__dict__["preprocess"] is original)

        # The main process in a row: decode taken from the helper (not lowered), prefill lowered, records merged.
        FakeBackend.lowered.clear()
        mine_accepted, mine_emitted, logged = {"aoti_torch_cuda_bmm_out": "bmm"}, ["prefill"], []
        with main_lowering(FakeBackend, "decode", cache, [mine_accepted, mine_emitted], lambda: False,
                           log=logged.append) as outcome:
            prefill = FakeBackend.preprocess("ep", specs("prefill"))
            decode = FakeBackend.preprocess("ep", specs("decode"))
        check("main: prefill lowered here", prefill["method"] == "prefill" and FakeBackend.lowered == ["prefill"])
        check("main: decode is the helper's result", decode == {"method": "decode", "bytes": b"\x7fELFdecode"})
        check("main: records merged (dict updated, list extended)",
              mine_accepted == {"aoti_torch_cuda_bmm_out": "bmm", "aoti_torch_cuda_mm_out": "mm"} and
              mine_emitted == ["prefill", "decode"])
        check("main: reported as from the helper", outcome["from_helper"] and any("by the helper" in m for m in logged))
        check("main: preprocess restored", FakeBackend.__dict__["preprocess"] is original)

        # The result comes later: the main process waits for it while the helper runs.
        late = os.path.join(work, "late")
        writer = threading.Thread(target=lambda: (time.sleep(0.3), _run_helper(late)))
        writer.start()
        FakeBackend.lowered.clear()
        with main_lowering(FakeBackend, "decode", late, [{}, []], writer.is_alive, log=lambda m: None,
                           poll_s=0.02) as outcome:
            decode = FakeBackend.preprocess("ep", specs("decode"))
        writer.join()
        check("main: waited for a result that came later",
              decode["method"] == "decode" and outcome["from_helper"] and outcome["wait_s"] >= 0.2)
        check("main: the late result was not lowered here", FakeBackend.lowered == [])

        # The helper ended without a result: the method is lowered here, and that is said.
        FakeBackend.lowered.clear()
        logged.clear()
        with main_lowering(FakeBackend, "decode", os.path.join(work, "none"), [{}, []], lambda: False,
                           log=logged.append) as outcome:
            decode = FakeBackend.preprocess("ep", specs("decode"))
        check("main: no result from the helper, lowered here",
              decode["method"] == "decode" and FakeBackend.lowered == ["decode"] and not outcome["from_helper"])
        check("main: the fallback is logged", any("lowering it here" in m for m in logged))

        # Records that do not match are an error, not a silent mix.
        try:
            with main_lowering(FakeBackend, "decode", cache, [{}], lambda: False, log=lambda m: None):
                FakeBackend.preprocess("ep", specs("decode"))
            check("main: mismatched records refused", False)
        except ValueError:
            check("main: mismatched records refused", True)

        # Exceptions in a lowering propagate, and preprocess is restored.
        for name, ctx in (("helper", lambda: helper_lowering(FakeBackend, "decode", cache, [])),
                          ("main", lambda: main_lowering(FakeBackend, "decode", cache, [], lambda: False))):
            try:
                with ctx():
                    FakeBackend.preprocess("boom", specs("prefill"))
                check(f"{name}: an exception propagates", False)
            except RuntimeError:
                check(f"{name}: an exception propagates", True)
            check(f"{name}: restored after an exception", FakeBackend.__dict__["preprocess"] is original)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    passed = sum(results)
    print(f"split lowering: {passed} passed, {len(results) - passed} failed")
    return 0 if passed == len(results) else 1


def _run_helper(cache):
    backend = make_backend()  # the helper's own process, so its own backend class
    try:
        with helper_lowering(backend, "decode", cache, [{}, []]):
            backend.preprocess("ep", specs("decode"))
    except LoweredElsewhere:
        pass


if __name__ == "__main__":
    sys.exit(main())
