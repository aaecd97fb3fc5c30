#!/usr/bin/env python3
"""Test vectors for aoti_torch_cuda__weight_int4pack_mm, from PyTorch on a GPU.

    python3 tools/int4/gen_vectors.py OUT_DIR [--quick]

Writes OUT_DIR/index.txt (one line per case: "case weights M N K group inner_k_tiles") and raw
little-endian files: w_<weights>.bin (int32, packed by torch.ops.aten._convert_weight_to_int4pack),
sz_<weights>.bin (bf16 [K/group, N, 2]), x_<case>.bin (bf16 [M, K]), torch_<case>.bin (bf16 [M, N],
torch.ops.aten._weight_int4pack_mm) and ref_<case>.bin (float32 [M, N]: x times the dequantized
weight bf16((q - 8) * scale + zero), accumulated in float32 without TF32) and ref_exact_<case>.bin (the
same with the weight unrounded, as the streaming kernel's scale-after form multiplies). The GPU test
(tests/gpu/test_int4_mm.cpp) reads them from $AOTI_CUDA_INT4_VECTORS.

It also checks, and prints, the facts the kernels rely on (weight_int4pack_mm.hpp): the packed
layout (every nibble of torch's packing is found where our formula says) and the dequantization
formula (torch's result matches the reference), and exits non-zero if either fails.
"""
import os
import sys

import torch

GROUPS = (32, 64, 128, 256)
IKTS = (2, 4, 8)
SMALL_M = (1, 2, 7, 16, 64, 333)


def cases(quick):
    """(N, K, group, ikt, [M...]) tuples."""
    out = []
    for n, k in ((256, 1024), (520, 1536), (72, 256)):  # square-ish, odd n-tiles, fewer k-tiles than warps
        for g in GROUPS:
            for ikt in IKTS:
                ms = list(SMALL_M) + ([2048] if (n, k) == (520, 1536) else [])
                out.append((n, k, g, ikt, ms if not quick else [1, 7, 333]))
    if not quick:
        for n, k in ((4096, 4096), (11008, 4096), (4096, 11008)):
            out.append((n, k, 128, 8, list(SMALL_M) + [2048]))
            out.append((n, k, 32, 2, [1, 16, 333]))
            out.append((n, k, 256, 4, [2, 64]))
    return out


def unpack_formula(packed, n, k, ikt):
    """q[n][k] read back from torch's packed tensor with OUR layout formula."""
    w = packed.to(torch.int64) & 0xFFFFFFFF  # [N/8, K/(16 ikt), 32, ikt/2]
    nt = torch.arange(n // 8, device=w.device).view(-1, 1, 1, 1, 1)
    s = torch.arange(k // (16 * ikt), device=w.device).view(1, -1, 1, 1, 1)
    lane = torch.arange(32, device=w.device).view(1, 1, -1, 1, 1)
    p = torch.arange(ikt // 2, device=w.device).view(1, 1, 1, -1, 1)
    i = torch.arange(8, device=w.device).view(1, 1, 1, 1, -1)
    nib = (w.unsqueeze(-1) >> (4 * i)) & 0xF
    nn = (8 * nt + lane // 4).expand_as(nib)
    kk = (16 * (ikt * s + 2 * p + (i % 4) // 2) + 8 * (i % 2) + 2 * (lane % 4) + i // 4).expand_as(nib)
    q = torch.full((n, k), -1, dtype=torch.int64, device=w.device)
    q[nn.reshape(-1), kk.reshape(-1)] = nib.reshape(-1)
    return q


def write(path, t):
    t = t.detach().contiguous().cpu()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    with open(path, "wb") as f:
        f.write(t.numpy().tobytes())


def main():
    out_dir = sys.argv[1]
    quick = "--quick" in sys.argv
    os.makedirs(out_dir, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = "cuda"
    gen = torch.Generator(device=dev)
    gen.manual_seed(11)
    lines, worst_torch, layout_ok, formula_ok = [], 0.0, True, True
    case_id = 0
    for wid, (n, k, g, ikt, ms) in enumerate(cases(quick)):
        q = torch.randint(0, 16, (n, k), device=dev, generator=gen)
        as_u8 = ((q[:, 0::2] << 4) | q[:, 1::2]).to(torch.uint8)  # even k in the high nibble
        packed = torch.ops.aten._convert_weight_to_int4pack(as_u8, ikt)
        if not torch.equal(unpack_formula(packed, n, k, ikt), q):
            print(f"LAYOUT MISMATCH n={n} k={k} ikt={ikt}")
            layout_ok = False
        scale = (torch.rand(k // g, n, device=dev, generator=gen) * 0.02 + 0.005).to(torch.bfloat16)
        zero = (torch.randn(k // g, n, device=dev, generator=gen) * 0.02).to(torch.bfloat16)
        sz = torch.stack([scale, zero], dim=2).contiguous()
        s_full = scale.float().repeat_interleave(g, 0).t()  # [n, k]
        z_full = zero.float().repeat_interleave(g, 0).t()
        deq_exact = (q.float() - 8) * s_full + z_full  # the streaming kernel's scale-after form: unrounded
        deq = deq_exact.to(torch.bfloat16).float()
        write(os.path.join(out_dir, f"w_{wid}.bin"), packed)
        write(os.path.join(out_dir, f"sz_{wid}.bin"), sz)
        for m in ms:
            x = torch.randn(m, k, device=dev, generator=gen).to(torch.bfloat16)
            got = torch.ops.aten._weight_int4pack_mm(x, packed, g, sz)
            ref = x.float() @ deq.t()
            err = ((got.float() - ref).abs() / (ref.abs() + 1e-2 * ref.abs().max())).max().item()
            worst_torch = max(worst_torch, err)
            if err > 2 ** -6:
                print(f"FORMULA MISMATCH n={n} k={k} g={g} ikt={ikt} m={m}: rel err {err:.3g}")
                formula_ok = False
            write(os.path.join(out_dir, f"x_{case_id}.bin"), x)
            write(os.path.join(out_dir, f"torch_{case_id}.bin"), got)
            write(os.path.join(out_dir, f"ref_{case_id}.bin"), ref)
            write(os.path.join(out_dir, f"ref_exact_{case_id}.bin"), x.float() @ deq_exact.t())
            lines.append(f"{case_id} {wid} {m} {n} {k} {g} {ikt}")
            case_id += 1
    with open(os.path.join(out_dir, "index.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{case_id} cases, {len(cases(quick))} weights; layout formula {'OK' if layout_ok else 'WRONG'}; "
          f"torch vs bf16-dequant reference: worst relative error {worst_torch:.3g} "
          f"({'OK' if formula_ok else 'WRONG'})")
    return 0 if layout_ok and formula_ok else 1


if __name__ == "__main__":
    sys.exit(main())
