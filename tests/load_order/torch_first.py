"""The load-order cases inside a PyTorch process: torch is imported and makes
its CUDA context first (it loads its CUDA libraries RTLD_GLOBAL), then the
cases library (which links libaoti_cuda.so) is loaded RTLD_LOCAL with ctypes,
as a Python extension would be, and runs every case of tests/load_order.

    python3 tests/load_order/torch_first.py BUILD_DIR [doctest args...]
"""
import ctypes
import os
import sys

import torch

torch.zeros(1, device="cuda")  # PyTorch's CUDA context and libraries first
build = sys.argv[1]
cases = ctypes.CDLL(os.path.join(build, "tests", "libaoti_cuda_load_order_cases.so"), mode=os.RTLD_LOCAL)
argv = [b"torch_first"] + [a.encode() for a in sys.argv[2:]]
c_argv = (ctypes.c_char_p * len(argv))(*argv)
print(f"torch {torch.__version__} initialized CUDA first; running the load-order cases", flush=True)
rc = cases.aoti_cuda_load_order_cases(len(argv), c_argv)
sys.exit(rc)
