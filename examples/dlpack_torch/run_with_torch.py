#!/usr/bin/env python3
"""Runs an aoti_cuda program on a PyTorch CUDA tensor and gets a PyTorch tensor
back, both ways through DLPack (no copies), via the C bridge in bridge.cpp.

    python3 run_with_torch.py libaoti_cuda_torch_bridge.so model.pte [input.bin expected.bin]

Without input files the input is torch.randn of the method's shape (mlp: 8x64).
With them (e.g. tests/fixtures/mlp/forward.in0.bin, forward.out0.bin) the result
is checked. Exit status: 0 ok, 1 error or mismatch, 3 cannot run here (no GPU
or no PyTorch)."""
import ctypes
import sys


def main() -> int:
    if len(sys.argv) not in (3, 5):
        print(__doc__, file=sys.stderr)
        return 2
    try:
        import torch
    except ImportError:
        print("cannot run here: PyTorch is not installed", file=sys.stderr)
        return 3
    if not torch.cuda.is_available():
        print("cannot run here: torch.cuda.is_available() is False (no GPU)", file=sys.stderr)
        return 3

    lib = ctypes.CDLL(sys.argv[1])
    lib.bridge_load.restype = ctypes.c_void_p
    lib.bridge_load.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.bridge_run.restype = ctypes.c_void_p
    lib.bridge_run.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.bridge_free.argtypes = [ctypes.c_void_p]
    # PyCapsule C API through ctypes: read the DLManagedTensor* out of torch's
    # capsule, and wrap ours in a capsule for torch.
    capi = ctypes.pythonapi
    capi.PyCapsule_GetPointer.restype = ctypes.c_void_p
    capi.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    capi.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
    capi.PyCapsule_New.restype = ctypes.py_object
    capi.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]

    x = None
    err = ctypes.create_string_buffer(1024)
    module = lib.bridge_load(sys.argv[2].encode(), err, len(err))
    if not module:
        print("error:", err.value.decode(), file=sys.stderr)
        return 3 if err.value.startswith(b"no_device") else 1
    try:
        if len(sys.argv) == 5:
            x = torch.frombuffer(bytearray(open(sys.argv[3], "rb").read()), dtype=torch.float32).reshape(8, 64).cuda()
        else:
            x = torch.randn(8, 64, device="cuda")
        torch.cuda.synchronize()  # aoti_cuda runs on its own stream: make x ready first
        capsule = torch.utils.dlpack.to_dlpack(x)
        managed = capi.PyCapsule_GetPointer(capsule, b"dltensor")
        capi.PyCapsule_SetName(capsule, b"used_dltensor")  # the bridge owns it now (DLPack protocol)
        out = lib.bridge_run(module, b"forward", managed, err, len(err))
        if not out:
            print("error:", err.value.decode(), file=sys.stderr)
            return 1
        y = torch.utils.dlpack.from_dlpack(capi.PyCapsule_New(out, b"dltensor", None))
        print(f"aoti_cuda output as a torch tensor: {tuple(y.shape)} {y.dtype} on {y.device}, first {y[0, :3].tolist()}")
        if len(sys.argv) == 5:
            want = torch.frombuffer(bytearray(open(sys.argv[4], "rb").read()), dtype=torch.float32).reshape(y.shape)
            err_max = (y.cpu() - want).abs().max().item()
            print(f"max |error| vs {sys.argv[4]}: {err_max:g} ({'ok' if err_max <= 1e-3 else 'MISMATCH'})")
            return 0 if err_max <= 1e-3 else 1
        return 0
    finally:
        del x
        lib.bridge_free(ctypes.c_void_p(module))


if __name__ == "__main__":
    sys.exit(main())
