#!/usr/bin/env python3
"""aoti_torch_cuda_int4_plain_mm called the way an ExecuTorch 1.3 model library calls it: six
arguments, none on the stack. Through libffi (ctypes), whose own frame sits right above the
arguments it passes: had the shim written to the 1.4 form's stack arguments (which a 1.3 caller
does not reserve), libffi would abort here. No GPU needed: CPU operands are refused after
validation, which also shows the call was read in the 1.3 form.

Usage: int4_et13_abi.py PATH/libaoti_cuda.so
"""
import ctypes
import sys

LIB = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
H = ctypes.c_void_p
LIB.aoti_cuda_shim_last_error.restype = ctypes.c_char_p
LIB.aoti_cuda_shim_live_handles.restype = ctypes.c_int64


def empty(shape, dtype):
    sizes = (ctypes.c_int64 * len(shape))(*shape)
    h = H()
    rc = LIB.aoti_torch_empty_strided(ctypes.c_int64(len(shape)), sizes, None, ctypes.c_int32(dtype), ctypes.c_int32(0),
                                      ctypes.c_int32(0), ctypes.byref(h))
    assert rc == 0, LIB.aoti_cuda_shim_last_error()
    return h


BF16, U8 = 15, 0
x, q, scale, zero = empty([1, 256], BF16), empty([16, 128], U8), empty([2, 16], BF16), empty([2, 16], BF16)
et13 = ctypes.CFUNCTYPE(ctypes.c_int32, H, H, H, H, ctypes.c_int64, ctypes.POINTER(H))(
    ctypes.cast(LIB.aoti_torch_cuda_int4_plain_mm, ctypes.c_void_p).value)
failures = 0
for group, want in [(128, b"self must be a CUDA tensor"), (100, b"group_size must be positive and divide K = 256"),
                    (0, b"ExecuTorch 1.3 call with group_size 0")]:
    live = LIB.aoti_cuda_shim_live_handles()
    ret = H(0x1)
    rc = et13(x, q, scale, zero, group, ctypes.byref(ret))
    msg = LIB.aoti_cuda_shim_last_error()
    ok = rc == 1 and want in msg and ret.value is None and LIB.aoti_cuda_shim_live_handles() == live
    print(("ok  " if ok else "FAIL") + f" group {group}: rc {rc}, {msg.decode()}")
    failures += not ok
# A 1.3-form scale ([N, K/group] instead of [K/group, N]) is refused as such.
ret = H()
rc = et13(x, q, empty([16, 2], BF16), zero, 128, ctypes.byref(ret))
msg = LIB.aoti_cuda_shim_last_error()
ok = rc == 1 and b"scale must be [2, 16], got [16, 2]" in msg
print(("ok  " if ok else "FAIL") + f" transposed scale: {msg.decode()}")
failures += not ok
sys.exit(1 if failures else 0)
