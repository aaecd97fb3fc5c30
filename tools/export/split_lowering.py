"""One method of a two-method export lowered in a second process, beside the first (export_llm --split-lowering).

ExecuTorch lowers a program's methods one after another in one Python process: CudaBackend.preprocess runs
AOTInductor once per method, and each run is bound by one core. On the GPU machines of 2026-12-05 an LLM export
spent about 110 s before its first lowering and more than 285 s lowering its two methods, longer than a device call
allows (docs/benchmarks/llm.md). With the split, a helper process exports only the last method and lowers it while
the main process lowers the others; the main process then takes the helper's result instead of lowering that
method itself. The export then takes the front end plus the longer lowering, not the sum of the two.

Both processes build the same model from the same seed with the same flags, so the helper's lowering is the one the
main process would have made. What the main process records about a lowering (the kernels a patch accepted, the
methods that asked for an operator) is carried over with the result. If the helper fails or exits without a result,
the main process lowers the method itself and says so: the split can make an export slower, never wrong.

    helper_argv(argv, method, cache_dir)  the helper's command line, from the main process's own
    helper_lowering(backend_cls, method, cache_dir, records)   in the helper: save `method`'s result, then stop
    main_lowering(backend_cls, method, cache_dir, records, helper_alive)   in the main process: use it
    HelperProcess(script, argv, method, cache_dir)   starts the helper; alive(), split(), log_tail(), close()

Stdlib only (the backend class is passed in), so test_split_lowering.py runs without torch.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import pickle
import time
from typing import Callable, List, Sequence

from gemm_backend import restore_classmethods

SPLIT_FLAG = "--split-lowering"


class LoweredElsewhere(Exception):
    """Raised in the helper once its method's lowering is saved: the helper's export ends there, by design."""


def result_path(cache_dir: str, method: str) -> str:
    return os.path.join(cache_dir, f"{method}.pickle")


def helper_argv(argv: Sequence[str], method: str, cache_dir: str) -> List[str]:
    """The helper's arguments: the main process's own without SPLIT_FLAG, exporting only `method`, saving its lowering
    to `cache_dir`, without the eager reference (the main process records it). Later options win in argparse, so the
    appended ones override any the main process was given."""
    out = [a for a in argv if a != SPLIT_FLAG]
    return out + ["--methods", method, "--lower-only", method, "--lower-cache", cache_dir, "--reference-tokens", "0"]


def _snapshot(records: Sequence[object]) -> list:
    return [dict(r) if isinstance(r, dict) else list(r) for r in records]


def _merge(records: Sequence[object], saved: Sequence[object]) -> None:
    """Adds what the helper recorded to the main process's containers (dicts updated, lists extended in order)."""
    if len(saved) != len(records):
        raise ValueError(f"the helper saved {len(saved)} records, the main process keeps {len(records)}")
    for mine, theirs in zip(records, saved):
        if isinstance(mine, dict):
            mine.update(theirs)
        else:
            mine.extend(x for x in theirs if x not in mine)


@contextlib.contextmanager
def _preprocess_patch(backend_cls, make_preprocess):
    """backend_cls.preprocess replaced by make_preprocess(raw) for the block, where raw(cls, ep, specs) lowers as
    before; restored on exit, also after an exception."""
    saved = {k: backend_cls.__dict__[k] for k in ("preprocess",) if k in backend_cls.__dict__}
    raw = inspect.getattr_static(backend_cls, "preprocess")

    def lower(cls, edge_program, compile_specs):
        return raw.__get__(None, cls)(edge_program, compile_specs)

    backend_cls.preprocess = classmethod(make_preprocess(lower))
    try:
        yield
    finally:
        restore_classmethods(backend_cls, ("preprocess",), saved)


@contextlib.contextmanager
def helper_lowering(backend_cls, method: str, cache_dir: str, records: Sequence[object]):
    """In the helper: `method` is lowered as usual, its result and a copy of `records` are written to
    result_path(cache_dir, method) (atomically: the main process never reads half a file), then LoweredElsewhere is
    raised. Other methods are lowered as usual (the helper is given only `method`)."""

    def make(lower):
        def preprocess(cls, edge_program, compile_specs):
            result = lower(cls, edge_program, compile_specs)
            if cls.method_name_from_compile_specs(compile_specs) != method:
                return result
            os.makedirs(cache_dir, exist_ok=True)
            path = result_path(cache_dir, method)
            with open(path + ".tmp", "wb") as f:
                pickle.dump({"result": result, "records": _snapshot(records)}, f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(path + ".tmp", path)
            raise LoweredElsewhere(f"{method} lowered and saved to {path}")
        return preprocess

    with _preprocess_patch(backend_cls, make):
        yield


@contextlib.contextmanager
def main_lowering(backend_cls, method: str, cache_dir: str, records: Sequence[object],
                  helper_alive: Callable[[], bool], log: Callable[[str], None] = print, poll_s: float = 0.25):
    """In the main process: the lowering of `method` waits for the helper's result and returns it, adding the
    helper's records to `records`; when the helper has ended without one, `method` is lowered here instead (logged).
    Other methods are lowered as usual. Yields a dict that says what happened: "from_helper" (bool) and "wait_s"."""
    outcome = {"from_helper": False, "wait_s": 0.0}

    def make(lower):
        def preprocess(cls, edge_program, compile_specs):
            if cls.method_name_from_compile_specs(compile_specs) != method:
                return lower(cls, edge_program, compile_specs)
            path, t0 = result_path(cache_dir, method), time.time()
            # A result written just before the helper exited is still taken: the file is checked after the exit.
            while not os.path.exists(path) and helper_alive():
                time.sleep(poll_s)
            outcome["wait_s"] = time.time() - t0
            if not os.path.exists(path):
                log(f"split lowering: the helper ended without lowering {method}; lowering it here")
                return lower(cls, edge_program, compile_specs)
            with open(path, "rb") as f:
                saved = pickle.load(f)
            _merge(records, saved["records"])
            outcome["from_helper"] = True
            log(f"split lowering: {method} lowered by the helper (waited {outcome['wait_s']:.1f} s for it)")
            return saved["result"]
        return preprocess

    with _preprocess_patch(backend_cls, make):
        yield outcome


def _die_with_parent():
    """In the helper, before it starts: killed with the main process (Linux's PR_SET_PDEATHSIG), so an export
    stopped by a time limit leaves no lowering running."""
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        pass  # not Linux: close() still stops it on a normal exit


class HelperProcess:
    """The helper process: the exporter `script` again (its command line `argv` changed by helper_argv), exporting
    only `method` and saving its lowering into `cache_dir`, started before the model is built so that both front ends
    run at once. Its output goes to cache_dir/helper.log. Stopped and its files removed on close()."""

    def __init__(self, script: str, argv: Sequence[str], method: str, cache_dir: str):
        import shutil
        import subprocess
        import sys

        self.method = method
        self.cache_dir = cache_dir
        shutil.rmtree(self.cache_dir, ignore_errors=True)  # a result left by an earlier export is not this one's
        os.makedirs(self.cache_dir)
        self.log_path = os.path.join(self.cache_dir, "helper.log")
        cmd = [sys.executable, script] + helper_argv(argv, self.method, self.cache_dir)
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
        print(f"split lowering: {self.method} is lowered by helper process {self.proc.pid} (log {self.log_path})",
              flush=True)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def split(self):
        return ("main", self.method, self.cache_dir, self.alive)

    def log_tail(self, lines=15) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError as e:
            return str(e)

    def close(self):
        import shutil

        if self.alive():
            self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.cache_dir, ignore_errors=True)
