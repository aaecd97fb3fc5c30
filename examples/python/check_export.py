#!/usr/bin/env python3
"""Check an ExecuTorch CUDA export against the eager model it came from, in five lines:

    import aoti_cuda, torch
    m = aoti_cuda.Module("model.pte")                       # + aoti_cuda_blob.ptd beside it
    x = torch.randn(8, 64, device="cuda")                   # an input the export accepts
    with torch.no_grad(): want = model.cuda().eval()(x)     # your eager nn.Module
    torch.testing.assert_close(m.forward(x)[0], want, atol=1e-3, rtol=1e-3)

`check()` below is those lines for any number of inputs and outputs. Run as a script it checks the bundled
`add` program (tests/fixtures/add, exported from `x + y`) against its eager model:

    python3 examples/python/check_export.py [path/to/add.pte]

Exit status: 0 match, 1 mismatch or error, 3 cannot run here (no GPU, no torch).
"""

import sys
from pathlib import Path


def check(eager, pte_path, *inputs, atol=1e-3, rtol=1e-3):
    """Runs `pte_path`'s forward and the eager module on the same CUDA inputs; raises when they differ."""
    import aoti_cuda
    import torch

    inputs = [x.cuda() for x in inputs]
    if isinstance(eager, torch.nn.Module):
        eager = eager.cuda().eval()
    with aoti_cuda.Module(pte_path) as m, torch.no_grad():
        got, want = m.forward(*inputs), eager(*inputs)
        want = list(want) if isinstance(want, (tuple, list)) else [want]
        assert len(got) == len(want), f"the export has {len(got)} outputs, the eager model {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            torch.testing.assert_close(g, w, atol=atol, rtol=rtol, msg=lambda s: f"output {i}: {s}")
    return len(got)


def main() -> int:
    try:
        import torch
    except ImportError:
        print("cannot run here: torch is not installed", file=sys.stderr)
        return 3
    import aoti_cuda

    reason = aoti_cuda.gpu_unavailable_reason() or ("" if torch.cuda.is_available() else "torch sees no GPU")
    if reason:
        print(f"cannot run here: {reason}", file=sys.stderr)
        return 3
    pte = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2] / "tests/fixtures/add/add.pte"

    class Add(torch.nn.Module):  # the model tests/fixtures/add was exported from
        def forward(self, x, y):
            return x + y

    try:
        n = check(Add(), pte, torch.randn(3, 4), torch.randn(3, 4), atol=1e-5, rtol=1e-5)
    except (AssertionError, aoti_cuda.Error) as e:
        print(f"MISMATCH or error: {e}", file=sys.stderr)
        return 1
    print(f"{pte}: {n} output(s) match eager PyTorch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
