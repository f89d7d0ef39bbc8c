"""Every CUDA algorithm name of each op family, and small cases that reach each of them, shared by
tests/test_sanitize.py (compute-sanitizer), tests/test_graphs.py (CUDA-graph capture) and
tests/test_multi_gpu.py (inputs on a device other than the current one).

The cases are drawn from a fixed-seed generator on ``device``: on the same device the lists are
the same values every call, and on two devices of one host the same values too (the CUDA
generator's Philox sequence does not depend on the device). Odd sizes, strided views, a storage
offset of one element, channels_last and empty batches; float32 and bfloat16.
"""
import contextlib

import torch

# Every algorithm name of each family's dispatch table (csrc/*/dispatch*.cu).
CONV1D = ["rowwise8", "rowwise16", "rowwise8_dilated", "general_ot1", "general_ot4", "fft",
          "rowwise_reg", "rowwise_mma", "igemm", "grouped_reg", "cudnn"]
CONV2D = ["depthwise_nhwc", "depthwise_rows", "depthwise_tma", "depthwise_plane",
          "depthwise_large", "depthwise_nchw", "general_staged", "general_direct", "igemm",
          "depthwise_nhwc_tile", "depthwise_strided", "depthwise_nhwc_reg", "depthwise_small",
          "stem_direct", "pointwise_nchw", "cudnn", "aten_depthwise"]
MV = ["rows_vec", "rows", "cols_vec", "cols", "rows_mma", "rows_short", "cols_short",
      "cols_periodic", "cublas"]
REDUCE = ["small", "seg_contig", "seg", "row", "col_vec", "col", "row_vec", "seg_runs", "flat",
          "copy", "periodic", "aten"]
OPTIONAL = {"igemm"}  # only in builds with the CUTLASS path on sm_90
# Algorithms that run fp32 only as TF32, i.e. while torch.backends.cudnn.allow_tf32 is True
# (tests/conftest.py turns it off for every test): forced() turns it on around them, and their
# fp32 results are held to REF_TOL_TF32 (ref_tol).
TF32_ONLY = {"pointwise_nchw"}
# TF32 operands are rounded to 2^-11 relative: an output element's error is about 2^-11 of the
# output's rms, a few times that at the tail of a few thousand elements (REF_TOL's fp32 bound,
# tol * (|ref| + rms), is for true fp32).
REF_TOL_TF32 = 3e-3
FAMILY_ALGORITHMS = {"conv1d": CONV1D, "conv2d": CONV2D, "mv": MV, "reduce": REDUCE}


def generator(device="cuda"):
    return torch.Generator(device=device).manual_seed(0)


def offset(t):
    """t's values at a storage offset of one element (a misaligned base)."""
    flat = torch.empty(t.numel() + 1, dtype=t.dtype, device=t.device)
    return flat[1:].view(t.shape).copy_(t)


def _randn(g, device, dtype):
    def r(*s):
        return torch.randn(*s, device=device, generator=g).to(dtype)
    return r


def conv_cases(nsp, device="cuda"):
    """(x, weight, kwargs) for conv1d (nsp 1) or conv2d (nsp 2); kwargs are stride/padding/
    dilation/groups as torch_ops.conv1d/conv2d take them (integer padding)."""
    g = generator(device)
    cases = []
    for dtype in (torch.float32, torch.bfloat16):
        r = _randn(g, device, dtype)
        if nsp == 1:
            cases += [
                (r(2, 3, 1500), r(3, 1, 7), dict(padding=3, groups=3)),
                (r(2, 3, 1500), r(3, 1, 16), dict(padding=8, groups=3)),
                (r(1, 2, 1300), r(2, 1, 5), dict(padding=4, dilation=2, groups=2)),
                (r(1, 1, 5000), r(1, 1, 200), dict(padding=100)),
                (r(2, 8, 37), r(16, 8, 3), dict(stride=2, padding=1)),
                (r(2, 6, 37), r(6, 2, 3), dict(padding=1, groups=3)),
                (r(1, 16, 300)[:, :, 1:], r(32, 16, 3), dict(padding=1)),
                # tensor-core forms: a 1x1 GEMM, a C = 1 stem (wav2vec2's: im2col, then a GEMM)
                (r(2, 32, 50), r(48, 32, 1), {}),
                (r(2, 1, 403), r(32, 1, 10), dict(stride=5)),
                # grouped, long filter (grouped_reg: wav2vec2's positional conv in miniature)
                (r(2, 32, 150), r(48, 8, 24), dict(padding=12, groups=4)),
                (r(0, 8, 40), r(16, 8, 3), dict(padding=1)),
            ]
        else:
            cl = torch.channels_last
            cases += [
                (r(2, 8, 19, 23).contiguous(memory_format=cl), r(8, 1, 3, 3),
                 dict(padding=1, groups=8)),
                (r(2, 4, 70, 66), r(4, 1, 3, 3), dict(padding=1, groups=4)),
                (r(2, 4, 70, 66), r(4, 1, 5, 5), dict(padding=2, groups=4)),
                (r(1, 3, 13, 9), r(3, 1, 3, 3), dict(padding=1, groups=3)),
                (r(1, 2, 40, 40), r(2, 1, 9, 9), dict(padding=4, groups=2)),
                (r(1, 2, 30, 33), r(2, 1, 5, 5), dict(padding=4, dilation=2, groups=2)),
                # rows 16 bytes apart, a plane 64x64 tiles do not cover: depthwise_tma and
                # depthwise_plane (the other shapes here reach them only with an empty batch)
                (r(1, 2, 40, 40), r(2, 1, 3, 3), dict(padding=1, groups=2)),
                (r(2, 24, 15, 13).contiguous(memory_format=cl), r(24, 1, 5, 5),
                 dict(stride=2, padding=2, groups=24)),
                (r(2, 5, 29, 31), r(5, 1, 3, 3), dict(stride=2, padding=1, groups=5)),
                (r(1, 16, 20, 20), r(32, 16, 3, 3), dict(padding=1)),
                (r(2, 16, 15, 17), r(32, 16, 3, 3), dict(stride=2, padding=1)),
                (r(1, 4, 30, 30), r(8, 4, 2, 2), dict(stride=13)),
                (offset(r(2, 8, 11, 10)), r(8, 8, 3, 3), dict(padding=1)),
                # the tensor-core path's other forms: 1x1 convolutions as GEMMs over NCHW (one
                # per image) and over NHWC pixels (at most 64 rows; O <= 64; over 3136 rows with
                # O > 64), and a C = 3 stem (explicit im2col, then a GEMM)
                (r(2, 32, 9, 10), r(48, 32, 1, 1), {}),
                (r(1, 32, 7, 9).contiguous(memory_format=cl), r(48, 32, 1, 1), {}),
                (r(2, 32, 9, 10).contiguous(memory_format=cl), r(48, 32, 1, 1), {}),
                (r(2, 32, 40, 45).contiguous(memory_format=cl), r(96, 32, 1, 1), {}),
                (r(2, 3, 33, 35), r(16, 3, 7, 7), dict(stride=2, padding=3)),
                # fp32 1x1 over NCHW planes on mma.sync (pointwise_nchw): odd plane and C,
                # a misaligned base
                (r(2, 20, 7, 7), r(40, 20, 1, 1), {}),
                (offset(r(2, 36, 6, 6)), r(24, 36, 1, 1), {}),
                # an RGB stem over channels_last (stem_direct's channel-major staging)
                (r(2, 3, 30, 41).contiguous(memory_format=cl), r(24, 3, 3, 3),
                 dict(stride=2, padding=1)),
                (r(0, 8, 9, 9), r(8, 8, 3, 3), dict(padding=1)),
            ]
    return cases


def mv_cases(device="cuda"):
    """(matrix, vector) pairs: tall, transposed, wide, thin, a sliced view, no rows; transposed
    with few rows and a split of N (cols_short: 16-byte vectors, and 17 rows element by
    element)."""
    g = generator(device)
    cases = []
    for dtype in (torch.float32, torch.bfloat16):
        r = _randn(g, device, dtype)
        cases += [(r(37, 129), r(129)), (r(129, 37).t(), r(129)), (r(3, 5000), r(5000)),
                  (r(512, 256).t(), r(512)),
                  (r(2000, 8), r(8)), (r(64, 256)[:, 1:], r(255)), (r(0, 5), r(5)),
                  (r(5000, 24).t(), r(5000)), (r(3001, 17).t(), r(3001))]
    return cases


def reduce_cases(device="cuda"):
    """(x, dim) pairs, dim None for a full reduction; the last one per dtype has no elements."""
    g = generator(device)
    cases = []
    for dtype in (torch.float32, torch.bfloat16):
        r = _randn(g, device, dtype)
        cases += [(r(1000), None), (r(300, 257), 1), (r(300, 256), 1), (r(257, 300), 0),
                  (r(7, 33, 65), 1),
                  (r(6, 40, 3), (0, 2)), (r(65, 130).t(), 1), (r(4, 300, 5)[:, 1:], 1),
                  (r(200000), None), (r(300, 1), 1),
                  # the col kernels' shape-chosen lanes: narrow rows (split R, spread finish),
                  # few reduced rows
                  (r(3001, 8), 0), (r(4, 3000), 0),
                  (r(3, 0, 4), 1)]
    return cases


def convolve_cases(device="cuda"):
    """(x, h) pairs for convolve: one filter for many rows, broadcast leading dims, a strided
    signal, a filter longer than the signal, 1-D operands; K <= 8 and long filters (the
    register and FFT paths), float32 and bfloat16 (the tensor-core row path)."""
    g = generator(device)
    cases = []
    for dtype in (torch.float32, torch.bfloat16):
        r = _randn(g, device, dtype)
        cases += [
            (r(4, 1500), r(7)),
            (r(2, 3, 1301)[..., 1:], r(3, 33)),
            (r(3000), r(300)),
            (r(1, 90), r(2, 120)),
            (r(2, 1, 2000), r(3, 16)),
        ]
    return cases


def missing_algorithms(ran, device=None):
    """The names in ``ran`` (name -> count of cases run) that ran no case and must have: every
    name but OPTIONAL ones, and igemm too where this build has it and the device is sm_90."""
    missing = [n for n, k in ran.items() if k == 0 and n not in OPTIONAL]
    if "igemm" in ran and torch.ops.gpukern._has_igemm() and \
            torch.cuda.get_device_capability(device) == (9, 0) and ran["igemm"] == 0:
        missing.append("igemm")
    return missing


# ------------------------------------------------------------------ shared by the graph and
# multi-GPU tests: the query, float64 references, comparisons


@contextlib.contextmanager
def forced(family, name):
    """torch_ops.force_algorithm(family, name), with TF32 allowed for the TF32_ONLY algorithms
    (restored after)."""
    import torch_ops
    old = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = old or name in TF32_ONLY
    try:
        with torch_ops.force_algorithm(family, name):
            yield
    finally:
        torch.backends.cudnn.allow_tf32 = old


def ref_tol(name, dtype):
    """The reference tolerance (assert_close_ref's tol) of algorithm `name`'s results in dtype."""
    return REF_TOL_TF32 if dtype == torch.float32 and name in TF32_ONLY else REF_TOL[dtype]


def forced_choice(family, name, op, *args, **kwargs):
    """What ``torch_ops.<op>(*args, **kwargs)`` runs with ``name`` forced for ``family``: the name
    itself, "empty" where the output (or, for reductions, the input) is empty and no algorithm
    runs, or None where the forced algorithm cannot run the call. Asks the algorithm query (sizes,
    strides, dtype and alignment only: no kernel, no cache of the real call is filled)."""
    import torch_ops
    with forced(family, name):
        try:
            return torch_ops.algorithm(op, *args, **kwargs)
        except RuntimeError as e:
            if "cannot run" in str(e):
                return None
            raise


ACTIVATIONS = {
    "none": lambda y: y,
    "relu": torch.nn.functional.relu,
    "relu6": torch.nn.functional.relu6,
    "silu": torch.nn.functional.silu,
    "gelu": torch.nn.functional.gelu,
    "gelu_tanh": lambda y: torch.nn.functional.gelu(y, approximate="tanh"),
    "hardswish": torch.nn.functional.hardswish,
    "sigmoid": torch.sigmoid,
    "hardsigmoid": torch.nn.functional.hardsigmoid,
}


def conv_ref(nsp, x, w, b=None, activation="none", residual=None, **kw):
    """act(conv(x, w) + b + residual) in float64 (torch's convolution)."""
    conv = torch.nn.functional.conv1d if nsp == 1 else torch.nn.functional.conv2d
    y = conv(x.double(), w.double(), None if b is None else b.double(), **kw)
    if residual is not None:
        y = y + residual.double()
    return ACTIVATIONS[activation](y)


# The algorithms whose kernels apply the fused ops' epilogue act(acc + bias + residual) to their
# fp32 accumulator (csrc/conv/dispatch_1d.cu / dispatch_2d.cu algorithm_fuses_epilogue). The
# others round conv + bias to the output dtype, then the epilogue pass applies act(y + residual)
# (csrc/conv/epilogue.h: one more rounding in float16 / bfloat16).
NATIVE_EPILOGUE = {
    1: {"igemm", "grouped_reg"},
    2: {"igemm", "depthwise_strided", "depthwise_nhwc_tile", "depthwise_small",
        "depthwise_nhwc_reg", "stem_direct", "pointwise_nchw"},
}

_UNIT_ROUNDOFF = {torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8}


def epilogue_rounding_allowance(nsp, x, w, b, activation="none", residual=None, **kw):
    """The error one rounding of conv + bias to x's dtype can cause in act(conv + bias +
    residual), per element, in float64: |act(t +- d) - act(t)| at t = conv + bias + residual,
    d = |conv + bias| * the dtype's unit roundoff. The extra rounding of the algorithms without a
    native epilogue (NATIVE_EPILOGUE), which epilogue.h documents: where the activation is
    steep relative to its output (hardswish near -3: a pre-activation of 3 with an output of
    0.02), it exceeds the output-relative tolerance while the result is as accurate as the
    documented two-rounding computation (and torch's unfused sequence) allows. Zero for
    float32."""
    u = _UNIT_ROUNDOFF.get(x.dtype)
    if u is None:
        return None
    conv = torch.nn.functional.conv1d if nsp == 1 else torch.nn.functional.conv2d
    pre = conv(x.double(), w.double(), None if b is None else b.double(), **kw)
    t = pre if residual is None else pre + residual.double()
    d = pre.abs() * u
    act = ACTIVATIONS[activation]
    a0 = act(t)
    return torch.maximum((act(t + d) - a0).abs(), (act(t - d) - a0).abs())


def conv_output_shape(nsp, x, w, **kw):
    conv = torch.nn.functional.conv1d if nsp == 1 else torch.nn.functional.conv2d
    return conv(x.to("meta"), w.to("meta"), None, **kw).shape


def convolve_ref(x, h, mode):
    """numpy.convolve's full / same / valid along the last dim, leading dims broadcast, in
    float64 (a grouped F.conv1d with the flipped filters and K - 1 zeros each side)."""
    x, h = x.double(), h.double()
    n, k = x.shape[-1], h.shape[-1]
    lead = torch.broadcast_shapes(x.shape[:-1], h.shape[:-1])
    xb = x.expand(*lead, n).reshape(-1, n)
    hb = h.expand(*lead, k).reshape(-1, k)
    full = torch.nn.functional.conv1d(xb.unsqueeze(0), hb.flip(-1).unsqueeze(1),
                                      padding=k - 1, groups=xb.shape[0])[0]
    lo, hi = min(n, k), max(n, k)
    if mode == "full":
        y = full
    elif mode == "same":
        start = (lo - 1) // 2
        y = full[:, start:start + hi]
    else:
        y = full[:, lo - 1:lo - 1 + hi - lo + 1]
    return y.reshape(*lead, y.shape[-1])


def reduce_ref(op, x, dim=None, keepdim=False, dtype=None):
    """torch's reduction of x in float64 (dim None: all dims)."""
    xd = x.double()
    if op in ("sum", "mean"):
        f = getattr(torch, op)
        return f(xd) if dim is None else f(xd, dim, keepdim)
    f = getattr(torch, op)
    return f(xd, () if dim is None else dim, keepdim)


def reduce_call(op, x, dim=None, keepdim=False, dtype=None):
    """torch_ops.<op>(x, dim, keepdim[, dtype]) (dim None: all dims; amax/amin take ())."""
    import torch_ops
    f = getattr(torch_ops, op)
    if op in ("amax", "amin"):
        return f(x, () if dim is None else dim, keepdim)
    if dtype is not None:
        return f(x, dim, keepdim, dtype=dtype)
    return f(x, dim, keepdim)


#: Tolerance against the float64 reference (conftest.assert_close_ref's form), by output dtype:
#: loose on purpose (the bitwise comparisons are the point of the tests using it; this only
#: proves a result is not garbage).
REF_TOL = {torch.float32: 1e-3, torch.float16: 1e-2, torch.bfloat16: 3e-2, torch.int64: 0}

_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def same_bits(a, b):
    """Whether a and b have the same shape, dtype and bits (NaN payloads and the sign of zero
    included)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.numel() == 0:
        return True
    bits = _BITS[a.element_size()]
    return torch.equal(a.contiguous().view(bits), b.contiguous().view(bits))


def assert_same_bits(got, expected, what):
    """got is expected bit for bit, with the same strides (the same code path wrote both)."""
    assert got.shape == expected.shape, f"{what}: shape {tuple(got.shape)} != " \
                                        f"{tuple(expected.shape)}"
    assert got.dtype == expected.dtype, f"{what}: dtype {got.dtype} != {expected.dtype}"
    assert got.device == expected.device, f"{what}: device {got.device} != {expected.device}"
    if got.numel() == 0:
        return
    assert got.stride() == expected.stride(), \
        f"{what}: strides {got.stride()} != {expected.stride()}"
    if not same_bits(got, expected):
        g, e = got.double(), expected.double()
        differ = (g != e) & ~(g.isnan() & e.isnan())
        diff = (g - e).abs().nan_to_num(float("inf"))
        raise AssertionError(
            f"{what}: {int(differ.sum())} of {got.numel()} elements differ from the eager call "
            f"(max |difference| {float(diff[differ].max()) if differ.any() else 0.0:.3e}; "
            f"NaN where eager has none: {int((g.isnan() & ~e.isnan()).sum())})")


def new_values(t, gen, shift=True):
    """Values for t, in place, unlike its current ones: standard normal * 0.5 from gen, shifted to
    a mean of +0.75 when the current values' mean is below 0.25 and to -0.75 otherwise. The cases
    reuse their inputs from one algorithm to the next, so a fixed shift would make the second
    draw a near copy of the first in every statistic a 16-bit reduction can resolve (the sum of
    200,000 bf16 values near 50,000, whose ulp is 256); alternating signs moves the sum, mean,
    max and min of every case and the result of every convolution.
    Other operands (shift=False: weights, bias, residual) get fresh zero-mean draws, so that a
    convolution's output does not saturate an activation (relu6, sigmoid) in both draws."""
    mean = (0.75 if float(t.float().mean()) < 0.25 else -0.75) if shift else 0.0
    v = torch.randn(t.shape, device=t.device, generator=gen).mul_(0.5).add_(mean)
    t.copy_(v.to(t.dtype))