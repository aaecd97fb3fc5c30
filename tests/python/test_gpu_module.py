"""The Python Module on the GPU inside a PyTorch process: streams, output types, bound outputs, bad
input (the Module stays usable), the GIL, outputs that outlive the Module."""

from __future__ import annotations

import numpy as np
import pytest

import aoti_cuda
from conftest import GPU_SKIP_REASON, ticks_while
from gpu_support import fixture_dir, load_bin

if GPU_SKIP_REASON:
    pytest.skip(f"GPU tests SKIPPED: {GPU_SKIP_REASON}", allow_module_level=True)

MLP = fixture_dir("mlp")
SPEC_IN = {"file": "forward.in0.bin", "dtype": "float32", "shape": [8, 64]}
SPEC_OUT = {"file": "forward.out0.bin", "dtype": "float32", "shape": [8, 10]}


@pytest.fixture(scope="module")
def mlp():
    with aoti_cuda.Module(MLP / "mlp.pte") as m:
        yield m


@pytest.fixture(scope="module")
def io():
    return load_bin(MLP, SPEC_IN), load_bin(MLP, SPEC_OUT)


def close(got, want):
    import torch

    torch.testing.assert_close(got.cpu(), want.cpu(), atol=1e-3, rtol=1e-3)


@pytest.fixture()
def usable(mlp, io):
    """After each test: the Module still answers correctly."""
    yield mlp
    close(mlp.forward(io[0].cuda())[0], io[1])


def expect_error(code, *fragments, call):
    with pytest.raises(aoti_cuda.Error) as e:
        call()
    assert e.value.code == code, str(e.value)
    for f in fragments:
        assert f in e.value.message, e.value.message
    return e.value


def test_torch_in_torch_out(mlp, io):
    x, want = io
    y = mlp.forward(x.cuda())[0]
    assert y.is_cuda and y.dtype == want.dtype and tuple(y.shape) == (8, 10)
    close(y, want)
    host = mlp.forward(x.cuda(), outputs="host")[0]
    assert host.device.type == "cpu"
    close(host, want)
    dev = mlp.forward(x, outputs="device")[0]  # host input, device output
    assert dev.is_cuda
    close(dev, want)


def test_side_stream(mlp, io):
    import torch

    x, want = io
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        xs = x.cuda(non_blocking=False) * 1.0  # made on s
        y = mlp.forward(xs)[0]  # runs on s (torch's current stream)
        z = y + 0  # ordered after it on s
    s.synchronize()
    close(z, want)
    xc = x.cuda()
    s.wait_stream(torch.cuda.current_stream())  # xc is made on the default stream
    y2 = mlp.forward(xc, stream=s)[0]  # explicit stream object
    s.synchronize()
    close(y2, want)
    y3 = mlp.forward(xc, stream=torch.cuda.current_stream().cuda_stream)[0]  # explicit int (0: legacy default)
    close(y3, want)


def test_output_types(io):
    import torch

    x, want = io
    with aoti_cuda.Module(MLP / "mlp.pte", output_type="numpy") as m:
        y = m.forward(x.cuda())[0]
        assert isinstance(y, np.ndarray)
        np.testing.assert_allclose(y, want.numpy(), atol=1e-3, rtol=1e-3)
        y = m.forward(x.numpy())[0]
        np.testing.assert_allclose(y, want.numpy(), atol=1e-3, rtol=1e-3)
    with aoti_cuda.Module(MLP / "mlp.pte", output_type="dlpack") as m:
        y = m.forward(x.cuda())[0]
        assert y.__dlpack_device__() == (2, 0)
        close(torch.from_dlpack(y), want)


def test_bound_outputs(mlp, io):
    import torch

    x, want = io
    out = torch.full((8, 10), float("nan"), device="cuda")
    ptr = out.data_ptr()
    assert mlp.forward(x.cuda(), out=out) is out
    assert out.data_ptr() == ptr
    close(out, want)
    host = torch.empty(8, 10).pin_memory()
    mlp.execute_into("forward", [x.cuda()], [host])
    close(host, want)


def test_non_contiguous_cuda_input_is_read_correctly(mlp, io):
    import torch

    x, want = io
    xt = torch.empty(64, 8, device="cuda")
    xt.copy_(x.t())
    view = xt.t()
    assert not view.is_contiguous()
    close(mlp.forward(view)[0], want)


def test_wrong_dtype_shape_device(usable, io):
    import torch

    x, _ = io
    m = usable
    expect_error(aoti_cuda.ErrorCode.INVALID_ARGUMENT, "input 0", "float32", "float16", call=lambda: m.forward(x.cuda().half()))
    expect_error(aoti_cuda.ErrorCode.INVALID_ARGUMENT, "input 0", call=lambda: m.forward(x.cuda()[:4, :32]))
    expect_error(aoti_cuda.ErrorCode.UNSUPPORTED, "input 0 is on device 'meta'", call=lambda: m.forward(torch.empty(8, 64, device="meta")))
    if torch.cuda.device_count() > 1:
        expect_error(aoti_cuda.ErrorCode.INVALID_ARGUMENT, "input 0 is on cuda:1, but the Module runs on cuda:0",
                     call=lambda: m.forward(x.to("cuda:1")))

    class Elsewhere:  # claims another GPU; never exported
        def __dlpack_device__(self):
            return (2, 7)

        def __dlpack__(self, **kw):
            raise AssertionError("must not be exported")

    expect_error(aoti_cuda.ErrorCode.INVALID_ARGUMENT, "input 0 is on cuda:7, but the Module runs on cuda:0",
                 call=lambda: m.forward(Elsewhere()))


def test_bad_bound_outputs(usable, io):
    import torch

    x, _ = io
    m = usable
    expect_error(aoti_cuda.ErrorCode.INVALID_ARGUMENT, "output 0", "contiguous",
                 call=lambda: m.forward(x.cuda(), out=torch.empty(10, 8, device="cuda").t()))
    expect_error(aoti_cuda.ErrorCode.INVALID_ARGUMENT, "output 0",
                 call=lambda: m.forward(x.cuda(), out=torch.empty(8, 10, device="cuda", dtype=torch.float16)))


def test_unknown_device():
    import torch

    n = torch.cuda.device_count()
    expect_error(aoti_cuda.ErrorCode.NO_DEVICE, call=lambda: aoti_cuda.Module(MLP / "mlp.pte", device=f"cuda:{n + 3}"))


def test_gil_is_released_by_forward(io):
    """Calls on the Module's own stream wait for the GPU with the GIL released: another thread runs."""
    x, _ = io
    with aoti_cuda.Module(fixture_dir("cnn") / "cnn.pte") as m:
        img = load_bin(fixture_dir("cnn"), {"file": "forward.in0.bin", "dtype": "float32", "shape": [1, 3, 64, 64]})
        m.forward(img)  # load the kernels

        def calls():
            for _ in range(50):
                m.forward(img)  # host input: own stream, the call waits for the result

        ticks = ticks_while(calls)
        print(f"ticks of another thread during 50 forward calls: {ticks}")
        assert ticks >= 10


def test_outputs_outlive_the_module(io):
    import torch

    x, want = io
    m = aoti_cuda.Module(MLP / "mlp.pte")
    y = m.forward(x.cuda())[0]
    m.close()
    del m
    torch.cuda.synchronize()
    close(y, want)


def test_graphs_with_torch_tensors(io):
    import torch

    x, want = io
    with aoti_cuda.Module(MLP / "mlp.pte", cuda_graphs=True) as m:
        out = torch.empty(8, 10, device="cuda")
        for _ in range(4):
            close(m.forward(x.cuda())[0], want)
            m.forward(x.cuda(), out=out)
            close(out, want)
        status = m.graph_status("forward")
        assert status.available, status.reason
        assert status.replays >= 4 and status.captures >= 1
        close(m.forward(x.cuda(), use_graph=False)[0], want)


def test_torch_routes_agree(mlp, io):
    """torch tensors cross through DLPack's C exchange table when torch has one, else through torch's
    Python DLPack calls: the route follows what torch offers, and both give the same outputs."""
    import subprocess
    import sys

    import torch

    has_table = any(hasattr(torch.Tensor, n) for n in ("__dlpack_c_exchange_api__", "__c_dlpack_exchange_api__"))
    route = aoti_cuda._ext._torch_route()
    assert route == ("exchange" if has_table else "python"), route
    x, want = io
    y = torch.empty(8, 10, device="cuda")
    mlp.forward(x.cuda(), out=y)
    close(y, want)
    script = (
        "import sys, torch, aoti_cuda\n"
        "m = aoti_cuda.Module(sys.argv[1])\n"
        "x = torch.frombuffer(bytearray(open(sys.argv[2], 'rb').read()), dtype=torch.float32).reshape(8, 64).cuda()\n"
        "y = torch.empty(8, 10, device='cuda'); m.forward(x, out=y)\n"
        "z = m.forward(x)[0]\n"
        "assert torch.equal(y, z), 'bound and returned outputs differ'\n"
        "print(aoti_cuda._ext._torch_route()); sys.stdout.flush()\n"
        "open(sys.argv[3], 'wb').write(z.cpu().numpy().tobytes())\n"
    )
    import os
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "y.bin")
        env = dict(os.environ, AOTI_CUDA_PYTHON_NO_EXCHANGE_API="1")
        r = subprocess.run([sys.executable, "-c", script, str(MLP / "mlp.pte"), str(MLP / SPEC_IN["file"]), out],
                           env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == "python"
        other = torch.frombuffer(bytearray(open(out, "rb").read()), dtype=torch.float32).reshape(8, 10)
    assert torch.equal(other, y.cpu()), "the two routes gave different outputs"
