"""Helpers of the GPU tests: fixture tensors as torch tensors, and eager PyTorch models rebuilt by the
exporter (tools/export/export_models.py, which needs only torch to build them)."""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any, Optional

from conftest import FIXTURES, ROOT

DTYPES = {
    "float32": "float32", "float16": "float16", "bfloat16": "bfloat16", "float64": "float64",
    "int64": "int64", "int32": "int32", "int16": "int16", "int8": "int8", "uint8": "uint8", "bool": "bool",
}


def load_bin(folder: Path, spec: dict):
    """A tensor file of a fixture (raw little-endian, bf16/f16 as 16-bit patterns) as a CPU torch tensor."""
    import torch

    dtype = getattr(torch, DTYPES[spec["dtype"]])
    raw = bytearray((folder / spec["file"]).read_bytes())
    return torch.frombuffer(raw, dtype=dtype).reshape(spec["shape"]).clone()


def assert_close(got, want, spec: dict, what: str) -> None:
    import torch

    assert tuple(got.shape) == tuple(want.shape), f"{what}: shape {tuple(got.shape)} != {tuple(want.shape)}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    torch.testing.assert_close(got.cpu(), want.cpu(), atol=spec.get("atol", 0.0), rtol=spec.get("rtol", 0.0),
                               msg=lambda m: f"{what}: {m}")


_registry: Optional[dict] = None
_registry_error = ""


def eager_model(name: str, manifest: Optional[dict] = None) -> tuple[Any, str]:
    """(the exporter's Model for fixture `name`, "") or (None, why it cannot be rebuilt here).

    A fixture exported with another GEMM backend (manifest "gemm", e.g. mlp_cublas) is its base model."""
    global _registry, _registry_error
    if _registry is None and not _registry_error:
        sys.path.insert(0, str(ROOT / "tools" / "export"))
        try:
            import export_models

            _registry = export_models.REGISTRY
        except Exception as e:  # noqa: BLE001  (any import problem: say it, compare to the stored outputs)
            _registry_error = f"tools/export/export_models.py does not import: {type(e).__name__}: {e}"
    if _registry is None:
        return None, _registry_error
    gemm = (manifest or {}).get("gemm")
    if name not in _registry and gemm and name.endswith("_" + gemm):
        name = name[: -len(gemm) - 1]
    entry = _registry.get(name)
    if entry is None:
        return None, f"the exporter has no model '{name}' (kept from another reference set)"
    try:
        return entry.build(), ""
    except Exception as e:  # noqa: BLE001  (e.g. torchao missing for the int4 models)
        return None, f"cannot build the eager model here: {type(e).__name__}: {e}"


def eager_outputs(method, inputs: list, device: str = "cuda") -> list:
    """The eager method on a fresh copy of its module (its state as exported) on `device`."""
    import torch

    module = copy.deepcopy(method.module).to(device).eval()
    with torch.no_grad():
        out = module(*[x.to(device) for x in inputs])
    return list(out) if isinstance(out, (tuple, list)) else [out]


def fixture_dir(name: str) -> Path:
    return FIXTURES / name
