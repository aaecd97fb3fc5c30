"""The Python Module on the CPU, through the fake model libraries (no GPU needed)."""

from __future__ import annotations

import sys
import threading
import time

import numpy as np
import pytest

import aoti_cuda
from conftest import AFFINE_W, ticks_while

W = np.array(AFFINE_W, dtype=np.float32)


def affine_inputs(rows: int = 2):
    a = np.arange(rows * 4, dtype=np.float32).reshape(rows, 4)
    b = np.full((rows, 4), 1.0, dtype=np.float32)
    return a, b


def test_forward_numpy_in_and_out(affine):
    a, b = affine_inputs()
    out = affine.forward(a, b)
    assert isinstance(out, list) and len(out) == 2
    assert isinstance(out[0], np.ndarray) and out[0].dtype == np.float32
    np.testing.assert_array_equal(out[0], a * W + b)
    np.testing.assert_array_equal(out[1], out[0])
    np.testing.assert_array_equal(affine.execute("forward", a, b)[0], out[0])


@pytest.mark.parametrize("rows", [0, 1, 3, 8])
def test_dynamic_rows(affine, rows):
    a, b = affine_inputs(rows)
    y = affine.forward(a, b)[0]
    assert y.shape == (rows, 4)
    np.testing.assert_array_equal(y, a * W + b)


def test_non_contiguous_input_is_read_correctly(affine):
    storage = np.arange(8, dtype=np.float32).reshape(4, 2)
    at = storage.T  # a [2, 4] view with strides (1, 2) elements
    assert not at.flags.c_contiguous
    b = np.zeros((2, 4), np.float32)
    np.testing.assert_array_equal(affine.forward(at, b)[0], np.ascontiguousarray(at) * W)


def test_broadcast_input(affine):
    a, _ = affine_inputs()
    row = np.arange(4, dtype=np.float32)
    b = np.broadcast_to(row, (2, 4))  # stride 0 along the rows, read-only
    np.testing.assert_array_equal(affine.forward(a, b)[0], a * W + row)


def test_read_only_input(affine):
    a, b = affine_inputs()
    b.flags.writeable = False  # NumPy exports it only as a versioned (DLPack 1.x) capsule
    np.testing.assert_array_equal(affine.forward(a, b)[0], a * W + b)


def test_dlpack_capsule_input(affine):
    a, b = affine_inputs()
    np.testing.assert_array_equal(affine.forward(a.__dlpack__(), b)[0], a * W + b)


def test_outputs_share_no_memory_with_later_calls(affine):
    a, b = affine_inputs()
    first = affine.forward(a, b)[0]
    keep = first.copy()
    affine.forward(a * 2, b)
    np.testing.assert_array_equal(first, keep)


def test_output_type_dlpack(fake_programs):
    with aoti_cuda.Module(fake_programs["affine"], device="cpu", output_type="dlpack") as m:
        a, b = affine_inputs()
        y = m.forward(a, b)[0]
        assert not isinstance(y, np.ndarray)
        assert y.__dlpack_device__() == (1, 0)
        np.testing.assert_array_equal(np.from_dlpack(y), a * W + b)


def test_output_type_auto_without_torch_is_numpy(fake_programs):
    if "torch" in sys.modules:
        pytest.skip("torch is imported: 'auto' means torch here")
    try:
        import torch  # noqa: F401
        pytest.skip("torch is installed: 'auto' means torch here")
    except ImportError:
        pass
    with aoti_cuda.Module(fake_programs["affine"], device="cpu") as m:
        assert m.output_type == "auto"
        assert isinstance(m.forward(*affine_inputs())[0], np.ndarray)


def test_bound_outputs(affine):
    a, b = affine_inputs()
    out = [np.empty((2, 4), np.float32), np.empty((2, 4), np.float32)]
    assert affine.forward(a, b, out=out) is out
    np.testing.assert_array_equal(out[0], a * W + b)
    np.testing.assert_array_equal(out[1], a * W + b)
    out2 = [np.zeros((2, 4), np.float32), np.zeros((2, 4), np.float32)]
    assert affine.execute_into("forward", [a, b], out2) is None
    np.testing.assert_array_equal(out2[0], a * W + b)


def test_method_meta_and_stats(affine):
    assert affine.method_names() == ["forward"]
    assert affine.default_method == "forward"
    assert affine.device == "cpu"
    meta = affine.method_meta("forward")
    assert meta.name == "forward" and meta.num_delegates == 1
    assert [s.dtype for s in meta.inputs] == ["float32", "float32"]
    assert meta.inputs[0].shape == (8, 4) and meta.inputs[0].dynamic
    assert len(meta.outputs) == 2 and len(meta.dynamic_dims) == 2
    stats = affine.load_stats()
    assert stats.weight_bytes == 16 and len(stats.libraries) == 1
    timings = affine.load_timings()
    assert timings.total_ms >= timings.parse_ms >= 0
    status = affine.graph_status("forward")
    assert not status.requested and status.replays == 0
    assert affine.state_bytes == 0
    assert "TensorSpec(dtype='float32'" in repr(meta)


def test_progress_callback(fake_programs):
    seen = []
    with aoti_cuda.Module(fake_programs["state"], device="cpu", on_progress=seen.append) as m:
        assert m.method_names() == ["forward", "write", "write_too"]
    phases = [(p.phase, p.method) for p in seen]
    assert phases[0] == ("parse", "")
    assert ("weights", "write_too") in phases
    assert seen[-1].done == seen[-1].total == 3


def test_progress_callback_exception_aborts_the_load(fake_programs):
    class Stop(Exception):
        pass

    def stop_at_library(p):
        if p.phase == "library":
            raise Stop(p.method)

    with pytest.raises(Stop, match="forward"):
        aoti_cuda.Module(fake_programs["affine"], device="cpu", on_progress=stop_at_library)
    # Nothing was left behind: the program loads again.
    with aoti_cuda.Module(fake_programs["affine"], device="cpu") as m:
        assert m.method_names() == ["forward"]
        assert m.load_stats().read_only_constants == 1  # its weight: memory no kernel writes


def test_state_shared_across_methods_and_sessions(fake_programs):
    m = aoti_cuda.Module(fake_programs["state"], device="cpu", share_state="all", output_type="numpy")
    init = np.arange(1, 17, dtype=np.float32).reshape(4, 4)
    x = np.full((1, 4), 100.0, np.float32)
    zeros = np.zeros((1, 4), np.float32)
    assert m.load_stats().shared_state_constants == 1
    assert m.load_stats().read_only_constants == 1  # forward's weight; the shared cache is written: never marked
    assert m.state_bytes == 64
    cache = init.copy()
    cache[0] = 100
    np.testing.assert_array_equal(m.execute("write", x, np.array([0]))[0], cache.sum(0))
    cache[3] = 0  # the other method writes the same (shared) cache
    np.testing.assert_array_equal(m.execute("write_too", zeros, np.array([3]))[0], cache.sum(0))

    s = m.create_session()
    fresh = init.copy()
    fresh[1] = 0
    np.testing.assert_array_equal(m.execute("write", zeros, np.array([1]), session=s)[0], fresh.sum(0))
    assert s.state_bytes == 64 and not s.closed
    # The Module's own state was not touched by the session.
    np.testing.assert_array_equal(m.execute("write_too", zeros, np.array([3]))[0], cache.sum(0))
    s.reset()
    np.testing.assert_array_equal(m.execute("write", zeros, np.array([2]), session=s)[0],
                                  np.where(np.arange(4)[:, None] == 2, 0, init).sum(0))
    m.reset_state()
    np.testing.assert_array_equal(m.execute("write", x, np.array([0]))[0], np.vstack([x, init[1:]]).sum(0))
    m.close()
    assert s.closed and m.closed


def test_sessions_are_private_without_share_state(fake_programs):
    with aoti_cuda.Module(fake_programs["state"], device="cpu", output_type="numpy") as m:
        init = np.arange(1, 17, dtype=np.float32).reshape(4, 4)
        m.execute("write", np.full((1, 4), 50.0, np.float32), np.array([0]))
        np.testing.assert_array_equal(m.execute("write_too", init[1:2], np.array([1]))[0], init.sum(0))


def test_gil_is_released_while_calls_run(fake_programs):
    """A C++ loop of calls (Module._bench, the GIL released as by forward) lets another thread run;
    pure Python for as long does not (the control). tests/python/test_gpu_fixtures.py checks
    forward itself on calls long enough to observe."""
    m = aoti_cuda.Module(fake_programs["affine"], device="cpu", output_type="numpy")
    a, b = affine_inputs(8)
    elapsed = []

    def calls():
        t0 = time.perf_counter()
        m._bench("forward", [a, b], runs=20000, warmup=0)
        elapsed.append(time.perf_counter() - t0)

    released = ticks_while(calls)

    def busy():
        end = time.perf_counter() + elapsed[0]
        while time.perf_counter() < end:
            pass

    held = ticks_while(busy)
    print(f"ticks in {elapsed[0] * 1e3:.1f} ms: {released} during calls, {held} during pure Python")
    assert held <= 2
    assert released >= 10
    m.close()


def test_context_manager_and_close(fake_programs):
    with aoti_cuda.Module(fake_programs["affine"], device="cpu") as m:
        pass
    assert m.closed
    m.close()  # idempotent
    with pytest.raises(aoti_cuda.Error) as e:
        m.forward(*affine_inputs())
    assert e.value.code == aoti_cuda.ErrorCode.INVALID_ARGUMENT
    assert "closed" in e.value.message
    for call in (m.method_names, m.load_stats, m.create_session, lambda: m.method_meta("forward")):
        with pytest.raises(aoti_cuda.Error, match="closed"):
            call()


def test_outputs_outlive_the_module(fake_programs):
    m = aoti_cuda.Module(fake_programs["affine"], device="cpu", output_type="numpy")
    a, b = affine_inputs()
    y = m.forward(a, b)[0]
    m.close()
    del m
    np.testing.assert_array_equal(y, a * W + b)


def test_tuning(fake_programs):
    with aoti_cuda.Module(fake_programs["affine"], device="cpu", tuning={"block_cache_mib": 0, "staging": "wc"}) as m:
        t = m.tuning()
        assert t["block_cache_mib"] == 0 and t["staging"] == "wc"
        assert set(t) == {"upload_threads", "staging", "page_lock_weights", "block_cache_mib", "small_copy_kernels",
                          "gemv_max_rows", "int4_dequant_min_m", "cublas_workspace_mib",
                          "dependent_launch", "attention_cluster"}
        assert t["attention_cluster"] == -1  # auto: the decode attention's form chosen from the cache length
        np.testing.assert_array_equal(m.forward(*affine_inputs())[0], affine_inputs()[0] * W + 1)


def test_calls_from_several_threads_and_close_meanwhile(fake_programs):
    m = aoti_cuda.Module(fake_programs["affine"], device="cpu", num_models=2, output_type="numpy")
    errors, counts = [], [0] * 4
    stop = threading.Event()

    def worker(k):
        a = np.full((3, 4), float(k), np.float32)
        b = np.ones((3, 4), np.float32)
        try:
            while not stop.is_set():
                np.testing.assert_array_equal(m.forward(a, b)[0], a * W + b)
                counts[k] += 1
        except aoti_cuda.Error as e:
            if "closed" not in e.message:
                errors.append(e)
        except Exception as e:  # noqa: BLE001  (a wrong result or anything else fails the test)
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.3)
    m.close()  # while calls are in flight: they finish, later ones raise "closed"
    stop.set()
    for t in threads:
        t.join()
    assert not errors, errors
    assert all(c > 10 for c in counts), counts
    assert m.closed
