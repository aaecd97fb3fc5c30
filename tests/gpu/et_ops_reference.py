#!/usr/bin/env python3
"""GPU check of the ExecuTorch 1.3/1.4 operator shims of libaoti_cuda against PyTorch.

Calls the C shims of libaoti_cuda.so through ctypes on tensors PyTorch allocated
(aoti_torch_create_tensor_from_blob borrows their memory) and compares:

  * aoti_torch_cuda_int{4,5,6,8}_plain_mm with a dequantize-then-matmul reference
    written here from the formats of ExecuTorch's Python op definitions
    (backends/cuda/quantize_op_dispatch/*.py: unpack bits, scale, zero, F.linear), in float64;
    the 1.3 int4 form is called through its own six-argument prototype;
  * aoti_torch_cuda_sort_stable with torch.sort(stable=True): values and indices exactly;
  * aoti_torch_cuda_rand / randint_low_out: shape, dtype, range and distribution (mean,
    variance, histogram), never values; randint inside a CUDA graph draws anew each replay.

Usage: et_ops_reference.py PATH/libaoti_cuda.so [--bench]   (exit 77 without torch or a GPU)
--bench also prints GPU times of the shims next to PyTorch's (informational, never a failure).
"""
import ctypes
import sys

try:
    import torch
except ImportError:
    print("SKIP: no torch")
    sys.exit(77)
if not torch.cuda.is_available():
    print("SKIP: no CUDA device")
    sys.exit(77)

LIB = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
H = ctypes.c_void_p
LIB.aoti_cuda_shim_last_error.restype = ctypes.c_char_p
LIB.aoti_cuda_shim_live_handles.restype = ctypes.c_int64
LIB.aoti_torch_create_tensor_from_blob.argtypes = [H, ctypes.c_int64, ctypes.POINTER(ctypes.c_int64),
                                                   ctypes.POINTER(ctypes.c_int64), ctypes.c_int64, ctypes.c_int32,
                                                   ctypes.c_int32, ctypes.c_int32, ctypes.POINTER(H)]
LIB.aoti_torch_delete_tensor_object.argtypes = [H]
LIB.aoti_torch_get_data_ptr.argtypes = [H, ctypes.POINTER(H)]
LIB.aoti_torch_get_sizes.argtypes = [H, ctypes.POINTER(ctypes.POINTER(ctypes.c_int64))]
LIB.aoti_torch_get_strides.argtypes = [H, ctypes.POINTER(ctypes.POINTER(ctypes.c_int64))]
LIB.aoti_torch_get_dim.argtypes = [H, ctypes.POINTER(ctypes.c_int64)]
LIB.aoti_torch_get_dtype.argtypes = [H, ctypes.POINTER(ctypes.c_int32)]
LIB.aoti_torch_copy_.argtypes = [H, H, ctypes.c_int32]
LIB.aoti_cuda_shim_set_current_stream.argtypes = [ctypes.c_int32, H, ctypes.POINTER(H)]

CODES = {torch.uint8: 0, torch.int8: 1, torch.int16: 2, torch.int32: 3, torch.int64: 4, torch.float16: 5,
         torch.float32: 6, torch.float64: 7, torch.bool: 11, torch.bfloat16: 15}
DTYPES = {v: k for k, v in CODES.items()}
FAILURES = []
CHECKS = [0]


def check(ok, what):
    CHECKS[0] += 1
    if not ok:
        FAILURES.append(what)
        print("FAIL:", what)


def ok(rc, what):
    if rc != 0:
        raise RuntimeError(f"{what} failed: {LIB.aoti_cuda_shim_last_error().decode()}")


def handle(t):
    """A borrowing shim handle on a CUDA torch tensor (its sizes, strides, offset)."""
    n = t.dim()
    sizes = (ctypes.c_int64 * max(n, 1))(*t.shape)
    strides = (ctypes.c_int64 * max(n, 1))(*t.stride())
    h = H()
    base = t.untyped_storage().data_ptr()
    ok(LIB.aoti_torch_create_tensor_from_blob(H(base), n, sizes, strides, t.storage_offset(), CODES[t.dtype], 1,
                                              t.device.index or 0, ctypes.byref(h)), "create_tensor_from_blob")
    return h


def to_torch(h):
    """Copies a shim-owned CUDA result into a new torch tensor and deletes the handle."""
    dim = ctypes.c_int64()
    ok(LIB.aoti_torch_get_dim(h, ctypes.byref(dim)), "get_dim")
    sizes = ctypes.POINTER(ctypes.c_int64)()
    ok(LIB.aoti_torch_get_sizes(h, ctypes.byref(sizes)), "get_sizes")
    strides = ctypes.POINTER(ctypes.c_int64)()
    ok(LIB.aoti_torch_get_strides(h, ctypes.byref(strides)), "get_strides")
    dtype = ctypes.c_int32()
    ok(LIB.aoti_torch_get_dtype(h, ctypes.byref(dtype)), "get_dtype")
    shape = [sizes[i] for i in range(dim.value)]
    st = [strides[i] for i in range(dim.value)]
    check(st == list(torch.empty(shape).stride()), f"result is contiguous (sizes {shape}, strides {st})")
    out = torch.empty(shape, dtype=DTYPES[dtype.value], device="cuda")
    dst = handle(out)
    ok(LIB.aoti_torch_copy_(dst, h, 0), "copy_")
    LIB.aoti_torch_delete_tensor_object(dst)
    LIB.aoti_torch_delete_tensor_object(h)
    torch.cuda.synchronize()
    return out


def call(fn, tensors_and_args, name=None):
    """Calls fn with handles for the tensors (ints passed as int64), returns the ret0 result."""
    hs, args = [], []
    for a in tensors_and_args:
        if isinstance(a, torch.Tensor):
            hs.append(handle(a))
            args.append(hs[-1])
        else:
            args.append(ctypes.c_int64(a))
    ret = H()
    rc = fn(*args, ctypes.byref(ret))
    for h in hs:
        LIB.aoti_torch_delete_tensor_object(h)
    ok(rc, name or fn.__name__)
    return to_torch(ret)


# ---------------------------------------------------------------- quantized linears (reference)
def nibbles(q, n, k):
    q = q.to(torch.int64) & 0xFF
    return torch.stack([q & 0xF, (q >> 4) & 0xF], dim=-1).reshape(n, k)


def per_group(v, group):  # [N, G] -> [N, K]
    return v.repeat_interleave(group, dim=1)


def per_super(step, groups, group):  # [N, S] -> [N, K]
    return step.to(torch.float64).repeat_interleave(groups // step.shape[1], dim=1).repeat_interleave(group, dim=1)


def linear64(x, w):
    return (x.to(torch.float64) @ w.t()).to(torch.float64)


def ref_int4(x, q, scale, scale_step, zero, zero_step, group):
    n, k = q.shape[0], q.shape[1] * 2
    g = k // group
    s = per_group(scale.to(torch.float64), group) * per_super(scale_step, g, group)
    z = per_group(zero.to(torch.float64), group) * per_super(zero_step, g, group)
    return linear64(x, (nibbles(q, n, k).double() - z) * s)


def ref_int4_legacy(x, q, scale, zero, group):
    n, k = q.shape[0], q.shape[1] * 2
    s = per_group(scale.to(torch.float64).t(), group)
    z = per_group(zero.to(torch.float64).t(), group)
    return linear64(x, (nibbles(q, n, k).double() - z) * s)


def high_bits(qh, n, k, width):
    """Bits above the low nibble: per 32-k chunk, int5 has 4 bytes (one per word of 8 k: even k in
    bits 0-3, odd k in bits 4-7), int6 8 bytes (4 for the even k of each word, 4 for the odd),
    2 bits per k."""
    b = qh.to(torch.int64) & 0xFF
    chunks = k // 32
    out = torch.zeros(n, chunks, 4, 8, dtype=torch.int64, device=qh.device)
    if width == 1:
        b = b.reshape(n, chunks, 4)
        for j in range(8):
            shift = (j // 2) + (4 if j % 2 else 0)
            out[..., j] = (b >> shift) & 1
    else:
        b = b.reshape(n, chunks, 2, 4)  # [.., even/odd, word]
        for j in range(8):
            out[..., j] = (b[:, :, j % 2, :] >> (2 * (j // 2))) & 3
    return out.reshape(n, k)


def ref_int5(x, ql, qh, scale, scale_step, zero, zero_step, group):
    n, k = ql.shape[0], ql.shape[1] * 2
    g = k // group
    u = nibbles(ql, n, k) | (high_bits(qh, n, k, 1) << 4)
    s = per_group(scale.to(torch.float64), group) * per_super(scale_step, g, group)
    z = per_group(zero.to(torch.float64), group) * per_super(zero_step, g, group)
    return linear64(x, s * (u.double() - z))


def ref_int6(x, ql, qh, scale, steps, group):
    n, k = ql.shape[0], ql.shape[1] * 2
    g = k // group
    q = (nibbles(ql, n, k) | (high_bits(qh, n, k, 2) << 4)) - 32
    s = per_group(scale.to(torch.float64), group) * per_super(steps, g, group)
    return linear64(x, q.double() * s)


def ref_int8(x, q, scale, zero, group):
    s = per_group(scale.to(torch.float64), group)
    z = per_group(zero.to(torch.float64), group)
    return linear64(x, (q.double() - z) * s)


def codes(shape, dtype, gen):
    if dtype == torch.uint8:
        return torch.randint(0, 256, shape, generator=gen, device="cuda", dtype=torch.int64).to(torch.uint8)
    return torch.randint(-128, 128, shape, generator=gen, device="cuda", dtype=torch.int64).to(torch.int8)


def compare_mm(name, got, ref, x_dtype):
    check(got.dtype == x_dtype, f"{name}: output dtype {got.dtype}")
    err = (got.double() - ref).abs().max().item()
    scale = ref.abs().max().item() + 1e-30
    rel = err / scale
    tol = 1e-2 if x_dtype != torch.float32 else 1e-5
    print(f"  {name}: max |out - ref| = {err:.3e}, relative to max |ref| {rel:.2e} (tol {tol:.0e})")
    check(rel < tol, f"{name}: relative error {rel:.3e}")


def test_plain_mm():
    gen = torch.Generator(device="cuda").manual_seed(1234)
    print("int{4,5,6,8}_plain_mm vs dequantize-then-matmul (float64)")
    for m, n, k, group, x_dtype, code_dtype in [(1, 96, 512, 128, torch.bfloat16, torch.uint8),
                                                (3, 40, 1024, 32, torch.bfloat16, torch.int8),
                                                (4, 64, 256, 64, torch.float16, torch.uint8),
                                                (17, 24, 768, 128, torch.float32, torch.uint8),
                                                (2, 48, 512, 16, torch.bfloat16, torch.int8),
                                                (5, 33, 2304, 256, torch.bfloat16, torch.uint8)]:
        x = torch.randn(m, k, generator=gen, device="cuda").to(x_dtype)
        sup = k // 256
        tag = f"M={m} N={n} K={k} g={group} {str(x_dtype)[6:]} {str(code_dtype)[6:]} codes"
        q4 = codes((n, k // 2), torch.uint8, gen)
        sc = codes((n, k // group), code_dtype, gen)
        ze = codes((n, k // group), code_dtype, gen)
        s_step = (torch.rand(n, sup, generator=gen, device="cuda") * 0.01 + 1e-3).half()
        z_step = (torch.rand(n, sup, generator=gen, device="cuda") * 0.1).half()
        got = call(LIB.aoti_torch_cuda_int4_plain_mm, [x, q4, sc, s_step, ze, z_step, group])
        compare_mm(f"int4 {tag}", got, ref_int4(x, q4, sc, s_step, ze, z_step, group), x_dtype)

        # The same 4 bytes past a 16-byte boundary (8 k per load) and at an odd address (1 k at a time).
        for shift in (4, 1):
            q4_at = torch.empty(q4.numel() + 16, dtype=torch.uint8, device="cuda")[shift:shift + q4.numel()]
            q4_at = q4_at.view(n, k // 2)
            q4_at.copy_(q4)
            got = call(LIB.aoti_torch_cuda_int4_plain_mm, [x, q4_at, sc, s_step, ze, z_step, group])
            compare_mm(f"int4 qdata at +{shift} {tag}", got, ref_int4(x, q4, sc, s_step, ze, z_step, group), x_dtype)

        qh5 = codes((n, k // 8), torch.uint8, gen)
        got = call(LIB.aoti_torch_cuda_int5_plain_mm, [x, q4, qh5, sc, s_step, ze, z_step, group])
        compare_mm(f"int5 {tag}", got, ref_int5(x, q4, qh5, sc, s_step, ze, z_step, group), x_dtype)

        qh6 = codes((n, k // 4), torch.uint8, gen)
        got = call(LIB.aoti_torch_cuda_int6_plain_mm, [x, q4, qh6, sc, s_step, group])
        compare_mm(f"int6 {tag}", got, ref_int6(x, q4, qh6, sc, s_step, group), x_dtype)

        q8 = codes((n, k), torch.int8, gen)
        s8 = (torch.rand(n, k // group, generator=gen, device="cuda") * 0.02).to(torch.bfloat16)
        z8 = codes((n, k // group), torch.int8, gen)
        got = call(LIB.aoti_torch_cuda_int8_plain_mm, [x, q8, s8, z8, group])
        compare_mm(f"int8 {tag}", got, ref_int8(x, q8, s8, z8, group), x_dtype)
        for shift in (4, 3):
            q8_at = torch.empty(q8.numel() + 16, dtype=torch.int8, device="cuda")[shift:shift + q8.numel()].view(n, k)
            q8_at.copy_(q8)
            got = call(LIB.aoti_torch_cuda_int8_plain_mm, [x, q8_at, s8, z8, group])
            compare_mm(f"int8 qdata at +{shift} {tag}", got, ref_int8(x, q8, s8, z8, group), x_dtype)

        # ExecuTorch 1.3: same symbol, six arguments, bf16 scale/zero [K/group, N].
        s13 = (torch.rand(k // group, n, generator=gen, device="cuda") * 0.02).to(torch.bfloat16)
        z13 = (torch.rand(k // group, n, generator=gen, device="cuda") * 15).to(torch.bfloat16)
        legacy = ctypes.CFUNCTYPE(ctypes.c_int32, H, H, H, H, ctypes.c_int64, ctypes.POINTER(H))(
            ctypes.cast(LIB.aoti_torch_cuda_int4_plain_mm, ctypes.c_void_p).value)
        got = call(legacy, [x, q4, s13, z13, group], "int4_plain_mm (1.3 form)")
        compare_mm(f"int4 (1.3 form) {tag}", got, ref_int4_legacy(x, q4, s13, z13, group), x_dtype)
    # Groups of 4 (not a multiple of 8): the one-k-at-a-time path.
    x = torch.randn(2, 64, device="cuda").to(torch.bfloat16)
    q8 = codes((8, 64), torch.int8, gen)
    s8 = (torch.rand(8, 16, device="cuda") * 0.02).to(torch.bfloat16)
    z8 = codes((8, 16), torch.int8, gen)
    compare_mm("int8 group 4", call(LIB.aoti_torch_cuda_int8_plain_mm, [x, q8, s8, z8, 4]),
               ref_int8(x, q8, s8, z8, 4), torch.bfloat16)
    # A row stride larger than K (a view of a wider activation).
    wide = torch.randn(2, 601, device="cuda").to(torch.bfloat16)
    x = wide[:, :512]
    q8 = codes((8, 512), torch.int8, gen)
    s8 = (torch.rand(8, 4, device="cuda") * 0.02).to(torch.bfloat16)
    z8 = codes((8, 4), torch.int8, gen)
    compare_mm("int8 strided self", call(LIB.aoti_torch_cuda_int8_plain_mm, [x, q8, s8, z8, 128]),
               ref_int8(x, q8, s8, z8, 128), torch.bfloat16)


# ---------------------------------------------------------------- sort
def sort_shim(x, dim, descending):
    hx = handle(x)
    v, i = H(), H()
    stable = ctypes.c_int32(1)
    rc = LIB.aoti_torch_cuda_sort_stable(hx, ctypes.byref(stable), ctypes.c_int64(dim), ctypes.c_int32(descending),
                                         ctypes.byref(v), ctypes.byref(i))
    LIB.aoti_torch_delete_tensor_object(hx)
    ok(rc, "sort_stable")
    return to_torch(v), to_torch(i)


def test_sort():
    print("sort_stable vs torch.sort(stable=True): values (bitwise) and indices exactly")
    gen = torch.Generator(device="cuda").manual_seed(7)
    cases = []
    f = torch.randn(5, 1000, generator=gen, device="cuda")
    f[0, ::7] = float("nan")
    f[1, ::3] = 0.0
    f[1, 1::3] = -0.0
    f[2] = torch.randint(0, 4, (1000,), generator=gen, device="cuda").float()  # many ties
    f[3, ::11] = float("inf")
    f[3, 5::11] = -float("inf")
    cases += [("float32 [5,1000]", f)]
    cases += [("bfloat16 ties", torch.randint(-3, 3, (4, 300), generator=gen, device="cuda").to(torch.bfloat16))]
    h = torch.randn(3, 257, generator=gen, device="cuda").half()
    h[:, ::5] = float("nan")
    cases += [("float16 nan", h)]
    cases += [("float64", torch.randn(2, 3, 50, generator=gen, device="cuda").double())]
    cases += [("int64", torch.randint(-2**62, 2**62, (3, 400), generator=gen, device="cuda"))]
    cases += [("int32 ties", torch.randint(-5, 5, (6, 100), generator=gen, device="cuda", dtype=torch.int32))]
    cases += [("int8", torch.randint(-128, 128, (2, 500), generator=gen, device="cuda").to(torch.int8))]
    cases += [("uint8", torch.randint(0, 256, (700,), generator=gen, device="cuda").to(torch.uint8))]
    cases += [("bool", torch.rand(2, 64, generator=gen, device="cuda") > 0.5)]
    cases += [("vocab logits [1,128256]", torch.randn(1, 128256, generator=gen, device="cuda").to(torch.bfloat16))]
    cases += [("0-d", torch.tensor(3.5, device="cuda"))]
    cases += [("empty", torch.empty(0, 4, device="cuda"))]
    t = torch.randn(40, 30, generator=gen, device="cuda").t()  # non-contiguous
    cases += [("transposed", t)]
    for name, x in cases:
        before = len(FAILURES)
        for d in (range(x.dim()) if x.dim() > 0 else [0, -1]):
            for desc in (0, 1):
                v, i = sort_shim(x, d, desc)
                rv, ri = torch.sort(x, dim=d, descending=bool(desc), stable=True)
                check(same_values(v, rv), f"sort {name} dim={d} desc={desc}: values")
                check(i.dtype == torch.int64 and i.equal(ri), f"sort {name} dim={d} desc={desc}: indices")
        print(f"  {name}: {'ok' if len(FAILURES) == before else 'FAILED'}")


def same_values(a, b):
    """Equal shapes, dtypes and elements, NaN matching NaN, and the sign of zeros kept."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if not a.dtype.is_floating_point:
        return torch.equal(a, b)
    na, nb = torch.isnan(a), torch.isnan(b)
    a0, b0 = torch.where(na, torch.zeros_like(a), a), torch.where(nb, torch.zeros_like(b), b)
    return torch.equal(na, nb) and torch.equal(a0, b0) and torch.equal(torch.signbit(a0), torch.signbit(b0))


# ---------------------------------------------------------------- random
def rand_shim(shape, dtype=None):
    sizes = (ctypes.c_int64 * max(len(shape), 1))(*shape)
    d = ctypes.c_int32(CODES[dtype]) if dtype is not None else None
    dev = ctypes.c_int32(1)
    ret = H()
    ok(LIB.aoti_torch_cuda_rand(sizes, ctypes.c_int64(len(shape)), ctypes.byref(d) if d is not None else None, None,
                                ctypes.byref(dev), ctypes.c_int32(0), None, ctypes.byref(ret)), "rand")
    return to_torch(ret)


def randint_shim(out, low, high):
    h = handle(out)
    sizes = (ctypes.c_int64 * max(out.dim(), 1))(*out.shape)
    rc = LIB.aoti_torch_cuda_randint_low_out(h, ctypes.c_int64(low), ctypes.c_int64(high), sizes,
                                             ctypes.c_int64(out.dim()))
    LIB.aoti_torch_delete_tensor_object(h)
    ok(rc, "randint_low_out")


def test_random():
    print("rand / randint_low_out: shape, dtype, range, distribution")
    for dtype in (None, torch.float32, torch.bfloat16, torch.float16, torch.float64):
        r = rand_shim([1000, 1000], dtype)
        want = dtype or torch.float32
        check(r.dtype == want and list(r.shape) == [1000, 1000], f"rand {want}: shape/dtype {r.dtype} {r.shape}")
        rd = r.double()
        mean, var = rd.mean().item(), rd.var().item()
        check(rd.min().item() >= 0.0 and rd.max().item() < 1.0, f"rand {want}: range [{rd.min()}, {rd.max()}]")
        check(abs(mean - 0.5) < 3e-3 and abs(var - 1 / 12) < 3e-3, f"rand {want}: mean {mean}, var {var}")
        hist = torch.histc(rd.float(), bins=10, min=0, max=1)
        expected = rd.numel() / 10
        chi2 = (((hist - expected) ** 2) / expected).sum().item()
        bins_ok = want not in (torch.float32, torch.float64) or chi2 < 40  # 9 dof: p < 1e-5 above ~35
        check(bins_ok, f"rand {want}: histogram chi2 {chi2:.1f}")
        print(f"  rand {str(want)[6:]}: mean {mean:.5f} var {var:.5f} chi2(10 bins) {chi2:.1f}")
    a, b = rand_shim([4096]), rand_shim([4096])
    check(not a.equal(b), "rand: two calls draw different numbers")
    check(list(rand_shim([0, 3]).shape) == [0, 3], "rand: empty shape")
    for dtype, low, high in [(torch.int64, -5, 7), (torch.int32, 0, 100), (torch.uint8, 10, 250),
                             (torch.int64, -2**40, 2**40), (torch.float32, 0, 16), (torch.int16, -300, 300)]:
        out = torch.full((257, 1031), -99, dtype=dtype, device="cuda") if dtype != torch.uint8 else \
            torch.zeros((257, 1031), dtype=dtype, device="cuda")
        randint_shim(out, low, high)
        torch.cuda.synchronize()
        o = out.double()
        check(o.min().item() >= low and o.max().item() < high, f"randint {dtype} [{low},{high}): range {o.min()}..{o.max()}")
        check(torch.equal(o, o.floor()), f"randint {dtype}: integers")
        mean = o.mean().item()
        want = (low + high - 1) / 2
        spread = (high - low) / (12 ** 0.5) / (o.numel() ** 0.5)
        check(abs(mean - want) < 6 * spread, f"randint {dtype} [{low},{high}): mean {mean} vs {want}")
        if high - low <= 300:
            counts = torch.bincount((out.to(torch.int64) - low).flatten(), minlength=high - low).double()
            e = o.numel() / (high - low)
            chi2 = (((counts - e) ** 2) / e).sum().item()
            dof = high - low - 1
            check(chi2 < dof + 6 * (2 * dof) ** 0.5, f"randint {dtype} [{low},{high}): chi2 {chi2:.1f} dof {dof}")
            print(f"  randint {str(dtype)[6:]} [{low},{high}): mean {mean:.3f} (want {want}), chi2 {chi2:.1f} ({dof} dof)")
        else:
            print(f"  randint {str(dtype)[6:]} [{low},{high}): mean {mean:.4g} (want {want})")
    # Offset view into a bigger buffer: only the view's elements are written.
    buf = torch.full((3, 100), -1, dtype=torch.int64, device="cuda")
    randint_shim(buf[1], 0, 5)
    torch.cuda.synchronize()
    check(bool((buf[0] == -1).all() and (buf[2] == -1).all() and (buf[1] >= 0).all()), "randint: view offset")

    # CUDA graph: the generator's counter lives on the GPU, so replays draw new numbers.
    out = torch.zeros(4096, dtype=torch.int64, device="cuda")
    stream = torch.cuda.Stream()
    graph = torch.cuda.CUDAGraph()
    prev = H()
    ok(LIB.aoti_cuda_shim_set_current_stream(0, H(stream.cuda_stream), ctypes.byref(prev)), "set_current_stream")
    with torch.cuda.stream(stream):
        randint_shim(out, 0, 1 << 30)  # warm-up outside capture
        stream.synchronize()
        with torch.cuda.graph(graph, stream=stream):
            randint_shim(out, 0, 1 << 30)
    ok(LIB.aoti_cuda_shim_set_current_stream(0, prev, None), "restore stream")
    graph.replay()
    torch.cuda.synchronize()
    first = out.clone()
    graph.replay()
    torch.cuda.synchronize()
    check(not first.equal(out), "randint in a CUDA graph: replays draw different numbers")
    check(bool((out >= 0).all() and (out < (1 << 30)).all()), "randint in a CUDA graph: range")
    print(f"  graph replay: {(first != out).float().mean().item() * 100:.1f} % of elements differ between replays")


# ---------------------------------------------------------------- timings (--bench)
def gpu_time_us(enqueue, reps=50):
    """Mean GPU time of enqueue() over reps calls: the stream is held by a sleep kernel while the
    host enqueues them, so host (ctypes) overhead does not count."""
    enqueue()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(200_000_000)
    start.record()
    for _ in range(reps):
        enqueue()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1000 / reps


def raw_call(fn, args_handles):
    def run():
        ret = H()
        ok(fn(*args_handles, ctypes.byref(ret)), "bench call")
        LIB.aoti_torch_delete_tensor_object(ret)
    return run


def bench():
    print("timings (mean GPU time per call, H = this shim; torch = PyTorch on the same GPU)")
    gen = torch.Generator(device="cuda").manual_seed(5)
    n = k = 4096
    g = 128
    x = torch.randn(1, k, device="cuda").to(torch.bfloat16)
    q4 = codes((n, k // 2), torch.uint8, gen)
    sc, ze = codes((n, k // g), torch.uint8, gen), codes((n, k // g), torch.uint8, gen)
    st = torch.rand(n, k // 256, device="cuda").half()
    q8 = codes((n, k), torch.int8, gen)
    s8 = torch.rand(n, k // g, device="cuda").to(torch.bfloat16)
    z8 = codes((n, k // g), torch.int8, gen)
    dense = torch.randn(n, k, device="cuda").to(torch.bfloat16)
    hs = {name: handle(t) for name, t in dict(x=x, q4=q4, sc=sc, ze=ze, st=st, q8=q8, s8=s8, z8=z8).items()}
    i64 = ctypes.c_int64
    for m in (1, 4):
        xm = torch.randn(m, k, device="cuda").to(torch.bfloat16)
        hx = handle(xm)
        t4 = gpu_time_us(raw_call(LIB.aoti_torch_cuda_int4_plain_mm,
                                  [hx, hs["q4"], hs["sc"], hs["st"], hs["ze"], hs["st"], i64(g)]))
        t8 = gpu_time_us(raw_call(LIB.aoti_torch_cuda_int8_plain_mm, [hx, hs["q8"], hs["s8"], hs["z8"], i64(g)]))
        td = gpu_time_us(lambda: torch.nn.functional.linear(xm, dense))
        print(f"  M={m} N=K=4096 g=128: int4_plain_mm {t4:.1f} us ({n * k / 2 / t4 / 1e3:.0f} GB/s of packed weights), "
              f"int8_plain_mm {t8:.1f} us ({n * k / t8 / 1e3:.0f} GB/s), torch bf16 F.linear {td:.1f} us")
        LIB.aoti_torch_delete_tensor_object(hx)
    # Kernel time alone (PyTorch's profiler, CUPTI), against the stream time above.
    try:
        from torch.profiler import profile, ProfilerActivity
        for m in (1, 4):
            xm = torch.randn(m, k, device="cuda").to(torch.bfloat16)
            hx = handle(xm)
            run4 = raw_call(LIB.aoti_torch_cuda_int4_plain_mm, [hx, hs["q4"], hs["sc"], hs["st"], hs["ze"], hs["st"], i64(g)])
            run4()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(20):
                    run4()
                torch.cuda.synchronize()
            kernels = {}
            for e in prof.events():
                if e.device_type == torch.autograd.DeviceType.CUDA:
                    kernels.setdefault(e.name[:60], []).append(e.device_time if hasattr(e, "device_time") else e.cuda_time)
            for name, times in kernels.items():
                print(f"  M={m} profiler: {name}: {len(times)} x {sum(times) / len(times):.2f} us")
            LIB.aoti_torch_delete_tensor_object(hx)
    except Exception as e:  # informational only
        print("  profiler unavailable:", e)
    tiny_x = torch.randn(1, 256, device="cuda").to(torch.bfloat16)
    tiny = [tiny_x, q4[:8, :128].contiguous(), sc[:8, :2].contiguous(), st[:8, :1].contiguous(),
            ze[:8, :2].contiguous(), st[:8, :1].contiguous()]
    th = [handle(t) for t in tiny]
    t_tiny = gpu_time_us(raw_call(LIB.aoti_torch_cuda_int4_plain_mm, th + [i64(g)]))
    print(f"  int4_plain_mm M=1 N=8 K=256 (fixed cost of a call): {t_tiny:.1f} us")
    for h in th:
        LIB.aoti_torch_delete_tensor_object(h)
    for h in hs.values():
        LIB.aoti_torch_delete_tensor_object(h)
    logits = torch.randn(1, 128256, device="cuda").to(torch.bfloat16)
    hl = handle(logits)

    def sort_once():
        v, i = H(), H()
        ok(LIB.aoti_torch_cuda_sort_stable(hl, None, i64(-1), ctypes.c_int32(1), ctypes.byref(v), ctypes.byref(i)),
           "sort")
        LIB.aoti_torch_delete_tensor_object(v)
        LIB.aoti_torch_delete_tensor_object(i)
    ts = gpu_time_us(sort_once)
    tt = gpu_time_us(lambda: torch.sort(logits, dim=-1, descending=True, stable=True))
    print(f"  sort_stable [1, 128256] bf16 descending: {ts:.1f} us; torch.sort {tt:.1f} us")
    rows = torch.randn(64, 4096, device="cuda")
    hr = handle(rows)

    def sort_rows():
        v, i = H(), H()
        ok(LIB.aoti_torch_cuda_sort_stable(hr, None, i64(-1), ctypes.c_int32(0), ctypes.byref(v), ctypes.byref(i)),
           "sort")
        LIB.aoti_torch_delete_tensor_object(v)
        LIB.aoti_torch_delete_tensor_object(i)
    ts = gpu_time_us(sort_rows)
    tt = gpu_time_us(lambda: torch.sort(rows, dim=-1, stable=True))
    print(f"  sort_stable [64, 4096] float32: {ts:.1f} us; torch.sort {tt:.1f} us")
    LIB.aoti_torch_delete_tensor_object(hl)
    LIB.aoti_torch_delete_tensor_object(hr)
    out = torch.empty(1 << 20, dtype=torch.int64, device="cuda")
    ho = handle(out)
    sizes = (ctypes.c_int64 * 1)(1 << 20)
    tr = gpu_time_us(lambda: ok(LIB.aoti_torch_cuda_randint_low_out(ho, i64(0), i64(1000), sizes, i64(1)), "randint"))
    tt = gpu_time_us(lambda: out.random_(0, 1000))
    print(f"  randint_low_out 2^20 int64: {tr:.1f} us; torch random_ {tt:.1f} us")
    LIB.aoti_torch_delete_tensor_object(ho)


live = LIB.aoti_cuda_shim_live_handles()
print("device:", torch.cuda.get_device_name(), "torch", torch.__version__)
for section in (test_plain_mm, test_sort, test_random) + ((bench,) if "--bench" in sys.argv else ()):
    try:
        section()
    except Exception as e:  # one broken section must not hide the others' results
        check(False, f"{section.__name__} raised {type(e).__name__}: {e}")
torch.cuda.synchronize()
check(LIB.aoti_cuda_shim_live_handles() == live, "no handle leaked")
print(f"{CHECKS[0]} checks, {len(FAILURES)} failed")
sys.exit(1 if FAILURES else 0)
