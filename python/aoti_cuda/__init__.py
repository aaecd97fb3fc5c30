"""Run ExecuTorch CUDA-delegate programs (``model.pte`` + ``aoti_cuda_blob.ptd``) from Python.

    import aoti_cuda, torch
    m = aoti_cuda.Module("model.pte")                 # finds aoti_cuda_blob.ptd beside it
    y, = m.forward(torch.randn(8, 64, device="cuda"))  # a list of outputs, torch tensors

Inputs are torch tensors, NumPy arrays (host data) or anything with ``__dlpack__``; outputs come back
without a copy, as torch tensors when torch can be imported (otherwise NumPy arrays for host outputs
and DLPack objects for device outputs). Failures raise :class:`Error`, whose ``code`` is an
:class:`ErrorCode`. docs/python.md describes the whole API.

The extension links ``libcudart.so.13`` (the CUDA runtime). It is found when the CUDA toolkit's
library folder is known to the dynamic loader, or when PyTorch (whose NVIDIA wheels carry it) was
imported first; failing both, this module looks for it in those places itself before giving up.
"""

from __future__ import annotations

import enum
import glob
import os
import sys


class ErrorCode(enum.IntEnum):
    """Classes of failure; the values are those of the C++ ``aoti_cuda::ErrorCode``."""

    INVALID_ARGUMENT = 1
    INVALID_PROGRAM = 2
    NOT_FOUND = 3
    UNSUPPORTED = 4
    IO = 5
    LOAD = 6
    MODEL = 7
    CUDA = 8
    OUT_OF_MEMORY = 9
    NO_DEVICE = 10
    INTERNAL = 11


class Error(RuntimeError):
    """The one exception the package raises for the SDK's failures.

    ``code`` (an :class:`ErrorCode`) says which class of failure it is; ``message`` is the SDK's own
    sentence, naming the file, method, input or check involved. ``str(e)`` is ``"[code] message"``.
    """

    def __init__(self, code: int, message: str) -> None:
        super().__init__(code, message)
        try:
            self.code = ErrorCode(code)
        except ValueError:  # a code newer than this file
            self.code = code
        self.message = message

    def __str__(self) -> str:
        name = self.code.name.lower() if isinstance(self.code, ErrorCode) else str(self.code)
        return f"[{name}] {self.message}"


def _cudart_candidates() -> list[str]:
    """Places a CUDA 13 runtime may be: PyTorch's NVIDIA wheels, then the CUDA toolkit."""
    found = []
    for base in sys.path:
        for pattern in ("nvidia/cu13/lib/libcudart.so.13", "nvidia/cuda_runtime/lib/libcudart.so.13"):
            found += glob.glob(os.path.join(base, pattern))
    roots = [os.environ.get("CUDA_HOME", ""), os.environ.get("CUDA_PATH", ""), "/usr/local/cuda"]
    for root in filter(None, roots):
        for sub in ("lib64", "lib", "targets/x86_64-linux/lib"):
            found += glob.glob(os.path.join(root, sub, "libcudart.so.13"))
    return list(dict.fromkeys(os.path.realpath(f) for f in found))


def _import_extension():
    try:
        from . import _ext
        return _ext
    except ImportError as first:
        if "libcudart" not in str(first):
            raise
        import ctypes

        for path in _cudart_candidates():
            try:
                ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)  # later loads match it by its SONAME
            except OSError:
                continue
            from . import _ext
            return _ext
        raise ImportError(
            f"aoti_cuda needs the CUDA 13 runtime (libcudart.so.13): {first}. Install the CUDA toolkit "
            "(and add its lib folder to the loader path), or import torch (CUDA 13 build) before aoti_cuda."
        ) from first


_ext = _import_extension()
_ext._set_error_class(Error)

from ._ext import (  # noqa: E402  (after the runtime library was found)
    DynamicDim,
    GraphStatus,
    LibraryHooks,
    LoadProgress,
    LoadStats,
    LoadTimings,
    MemoryStats,
    MethodMeta,
    Module,
    Session,
    TensorSpec,
    device_count,
    device_memory_stats,
    gpu_unavailable_reason,
    set_log_level,
    trim_device_memory,
    version,
)

__version__ = version()

__all__ = [
    "DynamicDim",
    "Error",
    "ErrorCode",
    "GraphStatus",
    "LibraryHooks",
    "LoadProgress",
    "LoadStats",
    "LoadTimings",
    "MemoryStats",
    "MethodMeta",
    "Module",
    "Session",
    "TensorSpec",
    "device_count",
    "device_memory_stats",
    "gpu_unavailable_reason",
    "set_log_level",
    "trim_device_memory",
    "version",
]
