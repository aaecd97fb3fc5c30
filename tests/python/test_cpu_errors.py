"""Bad input gives aoti_cuda.Error with a code and a precise message, and the Module stays usable."""

from __future__ import annotations

import numpy as np
import pytest

import aoti_cuda
from conftest import AFFINE_W, FIXTURES, fixture_manifests

W = np.array(AFFINE_W, dtype=np.float32)
A = np.arange(8, dtype=np.float32).reshape(2, 4)
B = np.ones((2, 4), np.float32)


def expect_error(code, *fragments, call):
    with pytest.raises(aoti_cuda.Error) as e:
        call()
    assert e.value.code == code, str(e.value)
    for f in fragments:
        assert f in e.value.message, e.value.message
    assert str(e.value).startswith(f"[{code.name.lower()}] ")
    return e.value


class FakeCudaArray:
    """Claims to live on a CUDA device; its memory is never touched (checked before __dlpack__)."""

    def __init__(self, index: int):
        self.index = index
        self.exported = False

    def __dlpack_device__(self):
        return (2, self.index)  # kDLCUDA

    def __dlpack__(self, **kwargs):
        self.exported = True
        raise AssertionError("must not be exported")


@pytest.fixture()
def still_usable(affine):
    """After each test: the Module still answers correctly."""
    yield affine
    np.testing.assert_array_equal(affine.forward(A, B)[0], A * W + B)


def test_wrong_count(still_usable):
    expect_error(aoti_cuda.ErrorCode.INVALID_ARGUMENT, "takes 2 input(s), got 1", call=lambda: still_usable.forward(A))


def test_wrong_dtype(still_usable):
    expect_error(aoti_cuda.ErrorCode.INVALID_ARGUMENT, "input 1", "float32", "int64",
                 call=lambda: still_usable.forward(A, B.astype(np.int64)))


def test_wrong_rank_and_shape(still_usable):
    expect_error(aoti_cuda.ErrorCode.INVALID_ARGUMENT, "input 0", "rank", call=lambda: still_usable.forward(A.reshape(8), B))
    expect_error(aoti_cuda.ErrorCode.INVALID_ARGUMENT, "input 0", "dimension 0 is 9, expected at most 8",
                 call=lambda: still_usable.forward(np.zeros((9, 4), np.float32), B))


def test_not_a_tensor(still_usable):
    expect_error(aoti_cuda.ErrorCode.INVALID_ARGUMENT, "input 1 is a list", "__dlpack__",
                 call=lambda: still_usable.forward(A, [[1.0] * 4] * 2))


def test_tensor_on_a_gpu_for_a_cpu_module(still_usable):
    fake = FakeCudaArray(1)
    expect_error(aoti_cuda.ErrorCode.INVALID_ARGUMENT, "input 1 is on cuda:1, but the Module runs on the CPU",
                 call=lambda: still_usable.forward(A, fake))
    assert not fake.exported


def test_negative_strides(still_usable):
    expect_error(aoti_cuda.ErrorCode.UNSUPPORTED, "input 0 cannot be read", "negative",
                 call=lambda: still_usable.forward(A[::-1], B))


def test_unknown_method(still_usable):
    expect_error(aoti_cuda.ErrorCode.NOT_FOUND, "nope", call=lambda: still_usable.execute("nope", A, B))
    expect_error(aoti_cuda.ErrorCode.NOT_FOUND, "nope", call=lambda: still_usable.method_meta("nope"))


def test_model_failure(still_usable):
    bad = B.copy()
    bad[0, 0] = -777  # the fake model fails its run on this value
    expect_error(aoti_cuda.ErrorCode.MODEL, "AOTInductorModelContainerRun failed", call=lambda: still_usable.forward(A, bad))


def test_bad_bound_outputs(still_usable):
    m = still_usable
    good = np.empty((2, 4), np.float32)
    expect_error(aoti_cuda.ErrorCode.INVALID_ARGUMENT, "output", call=lambda: m.forward(A, B, out=[good]))
    strided = np.empty((4, 2), np.float32).T  # right shape, not contiguous
    expect_error(aoti_cuda.ErrorCode.INVALID_ARGUMENT, "output 0", "contiguous",
                 call=lambda: m.forward(A, B, out=[strided, good]))
    expect_error(aoti_cuda.ErrorCode.INVALID_ARGUMENT, "output 1",
                 call=lambda: m.forward(A, B, out=[good, np.empty((2, 4), np.float64)]))
    read_only = np.empty((2, 4), np.float32)
    read_only.flags.writeable = False
    expect_error(aoti_cuda.ErrorCode.INVALID_ARGUMENT, "output 0 is read-only",
                 call=lambda: m.forward(A, B, out=[read_only, good]))


def test_bad_keyword_values(still_usable):
    m = still_usable
    expect_error(aoti_cuda.ErrorCode.INVALID_ARGUMENT, "outputs must be", call=lambda: m.forward(A, B, outputs="gpu"))
    expect_error(aoti_cuda.ErrorCode.INVALID_ARGUMENT, "use_graph must be", call=lambda: m.forward(A, B, use_graph=1))
    expect_error(aoti_cuda.ErrorCode.INVALID_ARGUMENT, "session must be", call=lambda: m.forward(A, B, session=3))
    expect_error(aoti_cuda.ErrorCode.INVALID_ARGUMENT, "stream must be", call=lambda: m.forward(A, B, stream="x"))


def test_closed_session_and_foreign_session(fake_programs):
    m = aoti_cuda.Module(fake_programs["state"], device="cpu", output_type="numpy")
    other = aoti_cuda.Module(fake_programs["state"], device="cpu", output_type="numpy")
    x = np.zeros((1, 4), np.float32)
    pos = np.array([0])
    s = m.create_session()
    s.close()
    assert s.closed
    expect_error(aoti_cuda.ErrorCode.INVALID_ARGUMENT, "the Session is closed",
                 call=lambda: m.execute("write", x, pos, session=s))
    expect_error(aoti_cuda.ErrorCode.INVALID_ARGUMENT, "the Session is closed", call=s.reset)
    s2 = other.create_session()
    expect_error(aoti_cuda.ErrorCode.INVALID_ARGUMENT, "another Module", call=lambda: m.execute("write", x, pos, session=s2))
    # Both Modules still run, with and without a session.
    assert m.execute("write", x, pos)[0].shape == (4,)
    assert other.execute("write", x, pos, session=s2)[0].shape == (4,)
    m.close()
    other.close()
    assert s2.closed


def test_bad_load_arguments(fake_programs):
    path = fake_programs["affine"]
    expect_error(aoti_cuda.ErrorCode.NOT_FOUND, "no_such.pte", call=lambda: aoti_cuda.Module(path.parent / "no_such.pte", device="cpu"))
    expect_error(aoti_cuda.ErrorCode.INVALID_ARGUMENT, "device must be", call=lambda: aoti_cuda.Module(path, device="tpu"))
    expect_error(aoti_cuda.ErrorCode.INVALID_ARGUMENT, "output_type must be",
                 call=lambda: aoti_cuda.Module(path, device="cpu", output_type="jax"))
    expect_error(aoti_cuda.ErrorCode.NOT_FOUND, "decode", call=lambda: aoti_cuda.Module(path, device="cpu", methods=["decode"]))
    expect_error(aoti_cuda.ErrorCode.INVALID_ARGUMENT, "unknown tuning key 'threads'",
                 call=lambda: aoti_cuda.Module(path, device="cpu", tuning={"threads": 2}))
    expect_error(aoti_cuda.ErrorCode.INVALID_ARGUMENT, "tuning['upload_threads'] must be an int",
                 call=lambda: aoti_cuda.Module(path, device="cpu", tuning={"upload_threads": "4"}))
    expect_error(aoti_cuda.ErrorCode.INVALID_ARGUMENT, "upload_threads",
                 call=lambda: aoti_cuda.Module(path, device="cpu", tuning={"upload_threads": 0}))
    expect_error(aoti_cuda.ErrorCode.INVALID_ARGUMENT, "tuning['staging']",
                 call=lambda: aoti_cuda.Module(path, device="cpu", tuning={"staging": "fast"}))
    expect_error(aoti_cuda.ErrorCode.NOT_FOUND, "kv.nope",
                 call=lambda: aoti_cuda.Module(fake_programs["state"], device="cpu", share_state=["kv.nope"]))


def test_error_class():
    e = aoti_cuda.Error(aoti_cuda.ErrorCode.IO, "disk gone")
    assert isinstance(e, RuntimeError)
    assert e.code is aoti_cuda.ErrorCode.IO and e.message == "disk gone" and str(e) == "[io] disk gone"
    assert [c.value for c in aoti_cuda.ErrorCode] == list(range(1, 12))


NOT_RUNNABLE = [(n, m) for n, m in fixture_manifests() if m.get("expect_not_runnable")]


@pytest.mark.parametrize("name,manifest", NOT_RUNNABLE, ids=[n for n, _ in NOT_RUNNABLE])
def test_not_runnable_fixture_is_refused_before_device_work(name, manifest):
    """Refused while reading the program, so this holds on a machine without a GPU too."""
    pte = FIXTURES / name / manifest["pte"]
    if not pte.exists():
        pytest.skip(f"{pte} is not unpacked (cmake -P cmake/unpack_fixtures.cmake)")
    e = expect_error(aoti_cuda.ErrorCode.UNSUPPORTED, "'forward'", call=lambda: aoti_cuda.Module(pte))
    for op in manifest.get("kernel_calls", []):
        assert op in e.message
