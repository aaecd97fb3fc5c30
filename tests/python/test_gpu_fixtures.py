"""Every bundled fixture on the GPU, through the Python package, against eager PyTorch: the outputs
eager PyTorch gave at export time (tests/fixtures/*/*.out*.bin, tolerances from each manifest.json) and,
where the exporter can rebuild the model here, eager PyTorch run now on the same inputs."""

from __future__ import annotations

import pytest

import aoti_cuda
from conftest import GPU_SKIP_REASON, fixture_manifests
from gpu_support import assert_close, eager_model, eager_outputs, fixture_dir, load_bin

MANIFESTS = dict(fixture_manifests())
RUNNABLE = sorted(n for n, m in MANIFESTS.items() if not m.get("expect_not_runnable"))

if GPU_SKIP_REASON:
    pytest.skip(f"GPU tests SKIPPED: {GPU_SKIP_REASON}", allow_module_level=True)


def cases(spec: dict) -> list[dict]:
    return [spec] + ([spec["alt_case"]] if "alt_case" in spec else [])


def run(m, method: str, inputs: list, out_specs: list, variant: str) -> list:
    import torch

    if variant == "host":  # CPU torch tensors in, CPU torch tensors out
        return m.execute(method, *inputs)
    xs = [x.cuda() for x in inputs]
    if variant == "bound":
        out = [torch.empty(s["shape"], dtype=getattr(torch, s["dtype"]), device="cuda") for s in out_specs]
        assert m.execute(method, *xs, out=out) is out
        return out
    got = m.execute(method, *xs)
    assert all(g.is_cuda for g in got)
    return got


@pytest.mark.parametrize("variant", ["device", "host", "bound", "graphs"])
@pytest.mark.parametrize("name", RUNNABLE)
def test_fixture_matches_recorded_eager(name, variant):
    manifest = MANIFESTS[name]
    folder = fixture_dir(name)
    options = {"cuda_graphs": True} if variant == "graphs" else {}
    with aoti_cuda.Module(folder / manifest["pte"], **options) as m:
        assert m.output_type == "torch"
        for method, spec in manifest["methods"].items():
            for case in cases(spec):
                inputs = [load_bin(folder, s) for s in case["inputs"]]
                want = [load_bin(folder, s) for s in case["outputs"]]
                for call in range(3 if variant == "graphs" else 1):  # graphs: plain, capture, replay
                    got = run(m, method, inputs, case["outputs"], variant)
                    assert len(got) == len(want)
                    for i, (g, w, s) in enumerate(zip(got, want, case["outputs"])):
                        assert_close(g, w, s, f"{name}.{method} output {i} ({variant}, call {call + 1})")
        if variant == "graphs":
            for method in manifest["methods"]:
                status = m.graph_status(method)
                assert status.requested
                assert status.replays > 0 or (not status.available and status.reason), repr(status)
                if not status.available:
                    print(f"{name}.{method}: CUDA graphs not available: {status.reason}")


@pytest.mark.parametrize("name", RUNNABLE)
def test_fixture_matches_live_eager(name):
    manifest = MANIFESTS[name]
    model, why = eager_model(name, manifest)
    if model is None:
        pytest.skip(f"live eager comparison SKIPPED for {name}: {why}")
    folder = fixture_dir(name)
    methods = {meth.name: meth for meth in model.methods}
    with aoti_cuda.Module(folder / manifest["pte"]) as m:
        for method, spec in manifest["methods"].items():
            for case in cases(spec):
                inputs = [load_bin(folder, s) for s in case["inputs"]]
                want = eager_outputs(methods[method], inputs)
                try:  # the rebuilt model must be the exported one (same library versions, same seeds)
                    for i, (w, s) in enumerate(zip(want, case["outputs"])):
                        assert_close(w, load_bin(folder, s), s, f"{name}.{method} output {i}")
                except AssertionError as e:
                    pytest.skip(f"live eager comparison SKIPPED for {name}: the model rebuilt here is not the "
                                f"exported one ({str(e).splitlines()[0]})")
                got = m.execute(method, *[x.cuda() for x in inputs])
                for i, (g, w, s) in enumerate(zip(got, want, case["outputs"])):
                    assert_close(g, w, s, f"{name}.{method} output {i} vs eager PyTorch now")
