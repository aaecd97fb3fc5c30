"""Shared set-up of the Python package's tests.

CPU tests load fake programs (tests/python/fake_programs.cpp) on the fake model libraries of a CMake
build with tests: point AOTI_CUDA_TEST_BUILD at that build folder (scripts/test.sh does). GPU tests
need a CUDA device, torch with CUDA and the unpacked fixtures (tests/fixtures); without them they are
skipped, and the header of the run says why.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import aoti_cuda

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(os.environ.get("AOTI_CUDA_FIXTURES", ROOT / "tests" / "fixtures"))


def _gpu_skip_reason() -> str:
    reason = aoti_cuda.gpu_unavailable_reason()
    if reason:
        return reason
    try:
        import torch
    except ImportError:
        return "torch is not installed (the GPU tests compare against it and pass torch tensors)"
    if not torch.cuda.is_available():
        return "torch.cuda.is_available() is False"
    if not (FIXTURES / "mlp" / "mlp.pte").exists():
        return f"the fixture binaries are not unpacked in {FIXTURES} (cmake -P cmake/unpack_fixtures.cmake)"
    return ""


GPU_SKIP_REASON = _gpu_skip_reason()


def pytest_report_header(config):
    build = os.environ.get("AOTI_CUDA_TEST_BUILD", "")
    lines = [f"aoti_cuda {aoti_cuda.__version__} from {Path(aoti_cuda.__file__).parent}"]
    lines.append(f"aoti_cuda CPU tests: fake programs from {build}" if build else
                 "aoti_cuda CPU tests SKIPPED: AOTI_CUDA_TEST_BUILD is not set (a CMake build with tests)")
    lines.append("aoti_cuda GPU tests: running" if not GPU_SKIP_REASON else f"aoti_cuda GPU tests SKIPPED: {GPU_SKIP_REASON}")
    return lines


@pytest.fixture(scope="session")
def fake_programs(tmp_path_factory) -> dict[str, Path]:
    """{"affine": .pte, "state": .pte} written once per run (see tests/python/fake_programs.cpp)."""
    build = os.environ.get("AOTI_CUDA_TEST_BUILD")
    if not build:
        pytest.skip("CPU tests SKIPPED: set AOTI_CUDA_TEST_BUILD to a CMake build folder configured with tests")
    tool = Path(build) / "tests" / "aoti_cuda_fake_programs"
    if not tool.exists():
        pytest.skip(f"CPU tests SKIPPED: {tool} is missing (build the target aoti_cuda_fake_programs)")
    out = tmp_path_factory.mktemp("fake_programs")
    subprocess.run([str(tool), str(out)], check=True, capture_output=True)
    return {"affine": out / "affine" / "affine.pte", "state": out / "state" / "state.pte"}


@pytest.fixture()
def affine(fake_programs):
    """forward(a f32[<=8,4], b f32[<=8,4]) -> (y, y), y = a * W + b, on the CPU."""
    with aoti_cuda.Module(fake_programs["affine"], device="cpu", output_type="numpy") as m:
        yield m


AFFINE_W = (0.5, 1.0, 2.0, -1.0)


def fixture_manifests() -> list[tuple[str, dict]]:
    """(name, manifest) of every bundled fixture, in name order."""
    found = []
    for path in sorted(FIXTURES.glob("*/manifest.json")):
        found.append((path.parent.name, json.loads(path.read_text())))
    return found


def ticks_while(work) -> int:
    """How often another thread got the GIL while `work()` ran on this one.

    Forced switches are put off (switch interval 5 s), so the other thread runs only when this
    one gives the GIL up, e.g. while a call is inside the SDK with the GIL released.
    """
    count = [0]
    done = threading.Event()

    def ticker():
        while not done.is_set():
            count[0] += 1
            time.sleep(0)  # hand the GIL back at once

    old = sys.getswitchinterval()
    sys.setswitchinterval(5.0)
    t = threading.Thread(target=ticker)
    try:
        t.start()
        time.sleep(0.05)
        start = count[0]
        work()
        return count[0] - start
    finally:
        done.set()
        t.join()
        sys.setswitchinterval(old)
