"""The depthwise conv2d kernels for the shapes real networks run: depthwise_strided (NCHW, stride
1 or 2, square 3/5/7, whole small planes or tiles staged in shared memory), depthwise_small
(NCHW, stride 1 or 2, square 3/5/7, bands of whole-width output rows, several planes a block,
vector staging), depthwise_nhwc_tile (channels_last, pixel groups x 16-byte channel vectors) and
depthwise_nhwc_reg (channels_last, register-blocked output tiles of 4-channel vectors, a big and a
small tile variant, and for 16-bit 7x7 stride 1 a shared-memory staged one), each forced and
against F.conv2d in float64; the automatic choice on the census layers; the native fused epilogue
(act(conv + bias + residual)) when torch.ops.gpukern.conv2d_fused exists; depthwise_small's own
grid (filters x strides x dtypes x planes x channels x batches x views)."""
import itertools
import os
from contextlib import contextmanager

import pytest
import torch
import torch.nn.functional as F

import torch_ops
from conftest import FLOAT_DTYPES, HAS_CUDA, REF_ACTS, assert_close_ref, rand

NEW_ALGOS = ["depthwise_strided", "depthwise_nhwc_tile", "depthwise_nhwc_reg", "depthwise_small"]

cuda_only = [pytest.mark.cuda,
             pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device and the CUDA build")]


def _ref(x, w, b, stride, padding, c):
    d = lambda t: None if t is None else t.detach().to("cpu", torch.float64)  # noqa: E731
    return F.conv2d(d(x), d(w), d(b), stride, padding, 1, c)


def _make(n, c, h, w_, k, bias, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    x = rand(n, c, h, w_, dtype=dtype, device="cuda", generator=g)
    w = rand(c, 1, k, k, dtype=dtype, device="cuda", generator=g)
    b = rand(c, dtype=dtype, device="cuda", generator=g) if bias else None
    return x, w, b


def _layouts(x):
    """NCHW, channels_last, an NCHW view inside a bigger tensor with a storage offset (rows and
    planes not 16-byte aligned), and a channels_last channel slice (pixel stride C + 1)."""
    n, c, h, w_ = x.shape
    big = torch.zeros(n, c + 1, h + 2, w_ + 5, dtype=x.dtype, device=x.device)
    view = big[:, 1:, 1:h + 1, 3:w_ + 3]
    view.copy_(x)
    big_cl = torch.zeros(n, c + 1, h, w_, dtype=x.dtype, device=x.device).to(
        memory_format=torch.channels_last)
    view_cl = big_cl[:, 1:]
    view_cl.copy_(x)
    return [x, x.to(memory_format=torch.channels_last), view, view_cl]


# Plane sizes (odd, tiny, the census sizes and one that takes several tiles a row: 57 output
# columns at stride 1 and 29 at 2 are one tile, 130 x 257 below several), channels cycling over
# 1, 3, 8, 17, 240, 672 (vector widths, scalar tails, several channel blocks), padding over
# 0 .. K // 2 and one asymmetric (0, K // 2).
SIZES = [(1, 1), (2, 3), (7, 7), (13, 17), (14, 14), (28, 28), (57, 57)]
CHANNELS = [1, 3, 8, 17, 240, 672]


def _cases():
    out = []
    for i, ((h, w_), k, s) in enumerate(itertools.product(SIZES, (3, 5, 7), (1, 2))):
        pads = list(range(k // 2 + 1)) + [(0, k // 2)]
        pad = pads[i % len(pads)]
        ph, pw = pad if isinstance(pad, tuple) else (pad, pad)
        if h + 2 * ph < k or w_ + 2 * pw < k:
            pad, ph, pw = k // 2, k // 2, k // 2  # the only padding that gives an output
        c = CHANNELS[i % len(CHANNELS)]
        # batch 16 where the float64 reference stays cheap
        n = 16 if h * w_ * c <= 14 * 14 * 17 else (2 if h * w_ * c <= 28 * 28 * 17 else 1)
        out.append(((n, c, h, w_), k, s, pad))
    return out


CASES = _cases()
# Tiles: several per row and per plane (130 x 257, 112 x 112), a tall narrow plane whose strips
# the shared budget cuts, a single channel, the 7x7 stride-2 tile at its widest.
BIG = [
    ((2, 3, 130, 257), 3, 2, 1),
    ((1, 2, 113, 112), 7, 2, 3),
    ((1, 1, 300, 40), 5, 1, 2),
    ((1, 4, 1000, 9), 7, 2, 3),
    ((1, 2, 70, 140), 7, 1, (3, 0)),
    ((2, 16, 35, 131), 5, 2, (0, 2)),
]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("algo", NEW_ALGOS)
@pytest.mark.parametrize("case", range(len(CASES) + len(BIG)))
def test_forced_parity(case, algo, dtype):
    if not HAS_CUDA:
        pytest.skip("needs a CUDA device and the CUDA build")
    shape, k, stride, pad = (CASES + BIG)[case]
    n, c, h, w_ = shape
    x, w, b = _make(n, c, h, w_, k, case % 2 == 0, dtype, seed=case)
    ref = _ref(x, w, b, stride, pad, c)
    for xx in _layouts(x):
        with torch_ops.force_algorithm("conv2d", algo):
            assert torch_ops.algorithm("conv2d", xx, w, b, stride, pad, 1, c) == algo
            out = torch_ops.conv2d(xx, w, b, stride, pad, 1, c)
        assert out.dtype == dtype
        assert_close_ref(out, ref, dtype)
        # the output's layout follows torch's for the input's
        expect = F.conv2d(xx, w, None, stride, pad, 1, c)
        assert out.is_contiguous(memory_format=torch.channels_last) == expect.is_contiguous(
            memory_format=torch.channels_last)


@pytest.mark.parametrize("algo", NEW_ALGOS)
def test_forced_weight_and_bias_views(algo):
    """Strided weight (a slice of a bigger filter bank) and bias (every other element)."""
    if not HAS_CUDA:
        pytest.skip("needs a CUDA device and the CUDA build")
    g = torch.Generator().manual_seed(7)
    c = 24
    x = rand(3, c, 15, 15, generator=g).cuda().to(memory_format=torch.channels_last)
    wb = rand(c, 2, 7, 7, generator=g).cuda()
    w = wb[:, 1:, 1:6, 1:6]
    b = rand(2 * c, generator=g).cuda()[::2]
    for stride in (1, 2):
        with torch_ops.force_algorithm("conv2d", algo):
            out = torch_ops.conv2d(x, w, b, stride, 2, 1, c)
        assert_close_ref(out, _ref(x, w, b, stride, 2, c), torch.float32)


@pytest.mark.parametrize("algo", NEW_ALGOS)
def test_forced_refusals(algo):
    """Shapes outside the kernels: not square, dilated, stride 3 or unequal, multiplier 2."""
    if not any(torch_ops.algorithm("conv2d", *_meta((1, 4, 9, 9), 3), None, 1, 1, 1, 4)
               .startswith(p) for p in ("depthwise", "general")):
        pytest.skip("the CPU-only build has no CUDA algorithm choice")
    x, w = _meta((1, 4, 9, 9), 3)
    w35 = torch.empty(4, 1, 3, 5, device="meta")
    w2 = torch.empty(8, 1, 3, 3, device="meta")
    with torch_ops.force_algorithm("conv2d", algo):
        for args in [(x, w35, None, 1, 1, 1, 4), (x, w, None, 1, 1, 2, 4), (x, w, None, 3, 1, 1, 4),
                     (x, w, None, (1, 2), 1, 1, 4), (x, w2, None, 1, 1, 1, 4),
                     (x, torch.empty(4, 4, 3, 3, device="meta"), None, 1, 1, 1, 1)]:
            with pytest.raises(RuntimeError, match="cannot run this shape"):
                torch_ops.algorithm("conv2d", *args)


def _meta(shape, k, channels_last=False, dtype=torch.float32):
    x = torch.empty(shape, device="meta", dtype=dtype)
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
    return x, torch.empty(shape[1], 1, k, k, device="meta", dtype=dtype)


# The census layers (batch 16, bf16) and the algorithm the choice must give them:
# (shape, K, stride, padding, channels_last, algorithm)
CENSUS = [
    ((16, 64, 112, 112), 3, 2, 1, False, "depthwise_small"),
    ((16, 72, 56, 56), 5, 2, 2, False, "depthwise_small"),
    ((16, 240, 28, 28), 3, 2, 1, False, "depthwise_small"),
    ((16, 672, 14, 14), 5, 2, 2, False, "depthwise_small"),
    ((16, 200, 14, 14), 3, 1, 1, False, "depthwise_small"),
    ((16, 184, 14, 14), 3, 1, 1, False, "depthwise_small"),
    ((16, 480, 14, 14), 3, 1, 1, False, "depthwise_small"),
    ((16, 672, 14, 14), 3, 1, 1, False, "depthwise_small"),
    ((16, 960, 7, 7), 5, 1, 2, False, "depthwise_small"),
    ((16, 480, 14, 14), 3, 1, 1, True, "depthwise_nhwc_reg"),
    ((16, 672, 14, 14), 5, 2, 2, True, "depthwise_nhwc_reg"),
    ((16, 672, 14, 14), 3, 1, 1, True, "depthwise_nhwc_reg"),
    ((16, 96, 56, 56), 7, 1, 3, True, "depthwise_nhwc_reg"),
    ((16, 768, 7, 7), 7, 1, 3, True, "depthwise_nhwc_reg"),
    ((16, 64, 112, 112), 3, 2, 1, True, "depthwise_nhwc_reg"),
]
# "a|b": fp32 takes a, 16-bit dtypes b. Channels_last: depthwise_nhwc_reg for every square 3/5/7
# stride-1/2 layer (issue #32; the H100 measurements may move some back to depthwise_nhwc /
# depthwise_nhwc_tile).


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("layer", CENSUS)
def test_census_dispatch(layer, dtype):
    shape, k, stride, pad, cl, algo = layer
    x, w = _meta(shape, k, cl, dtype)
    got = torch_ops.algorithm("conv2d", x, w, None, stride, pad, 1, shape[1])
    if got.startswith("cpu"):
        pytest.skip("the CPU-only build has no CUDA algorithm choice")
    if "|" in algo:
        algo = algo.split("|")[0 if dtype == torch.float32 else 1]
    assert got == algo


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("layer", CENSUS)
def test_census_parity(layer, dtype):
    """The census layers through the automatic choice against float64 (in both dtypes: the
    launch shape, e.g. depthwise_small's units per block, follows the kernel's occupancy)."""
    if not HAS_CUDA:
        pytest.skip("needs a CUDA device and the CUDA build")
    shape, k, stride, pad, cl, algo = layer
    n, c, h, w_ = shape
    x, w, b = _make(n, c, h, w_, k, True, dtype, seed=c + k)
    if cl:
        x = x.to(memory_format=torch.channels_last)
    algo = algo.split("|")[0 if dtype == torch.float32 else -1]
    assert torch_ops.algorithm("conv2d", x, w, b, stride, pad, 1, c) == algo
    out = torch_ops.conv2d(x, w, b, stride, pad, 1, c)
    assert_close_ref(out, _ref(x, w, b, stride, pad, c), dtype)


# ---- the native fused epilogue, through torch.ops.gpukern.conv2d_fused when it exists ----

ACTS = REF_ACTS
ACT_CODES = {name: i for i, name in enumerate(ACTS)}  # device/activation.cuh's ActKind order


def _fused_op():
    op = getattr(torch.ops.gpukern, "conv2d_fused", None)
    if op is None or not HAS_CUDA:
        return None, None
    schema = op.default._schema if hasattr(op, "default") else None
    if schema is None:
        return None, None
    return op.default, schema


def _fused_call(op, schema, x, w, b, stride, pad, groups, act, residual):
    """Calls conv2d_fused by its schema's argument names (its exact signature belongs to
    another change): the conv arguments by position, the activation and residual by name."""
    kwargs = {}
    names = [a.name for a in schema.arguments]
    act_arg = next((a for a in schema.arguments if "act" in a.name), None)
    res_name = next((n for n in names if "resid" in n or n in ("r", "add")), None)
    if act_arg is None or (residual is not None and res_name is None):
        pytest.skip(f"conv2d_fused's schema is not understood here: {schema}")
    is_str = "str" in str(act_arg.type).lower()
    kwargs[act_arg.name] = act if is_str else ACT_CODES[act]
    if res_name is not None:
        kwargs[res_name] = residual
    positional = dict(input=x, weight=w, bias=b, stride=[stride] * 2,
                      padding=list(pad) if isinstance(pad, tuple) else [pad] * 2,
                      dilation=[1, 1], groups=groups)
    for a in schema.arguments:
        if a.name in positional:
            kwargs[a.name] = positional[a.name]
    return op(**kwargs)


FUSED = [
    ((2, 17, 13, 17), 3, 2, 1, "depthwise_small"),
    ((3, 240, 14, 14), 5, 2, 2, "depthwise_small"),
    ((2, 24, 14, 14), 3, 1, 1, "depthwise_small"),
    ((2, 24, 7, 7), 7, 1, 3, "depthwise_small"),
    ((1, 8, 60, 112), 3, 2, 1, "depthwise_small"),
    ((2, 17, 13, 17), 3, 2, 1, "depthwise_strided"),
    ((3, 240, 14, 14), 5, 2, 2, "depthwise_strided"),
    ((2, 24, 14, 14), 3, 1, 1, "depthwise_strided"),
    ((2, 17, 13, 17), 3, 2, 1, "depthwise_nhwc_tile"),
    ((3, 240, 14, 14), 5, 2, 2, "depthwise_nhwc_tile"),
    ((2, 24, 7, 7), 7, 1, 3, "depthwise_nhwc_tile"),
    ((2, 17, 13, 17), 3, 2, 1, "depthwise_nhwc_reg"),
    ((3, 240, 14, 14), 5, 2, 2, "depthwise_nhwc_reg"),
    ((2, 24, 7, 7), 7, 1, 3, "depthwise_nhwc_reg"),
]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("act", list(ACTS))
@pytest.mark.parametrize("case", FUSED)
def test_fused_native(case, act, dtype):
    op, schema = _fused_op()
    if op is None:
        pytest.skip("torch.ops.gpukern.conv2d_fused is not built here (or no GPU)")
    shape, k, stride, pad, algo = case
    n, c, h, w_ = shape
    x, w, b = _make(n, c, h, w_, k, True, dtype, seed=k * 7 + c)
    if algo in ("depthwise_nhwc_tile", "depthwise_nhwc_reg"):
        x = x.to(memory_format=torch.channels_last)
    conv = _ref(x, w, b, stride, pad, c)
    g = torch.Generator().manual_seed(5)
    res = rand(*conv.shape, dtype=dtype, generator=g).cuda()
    # the residual in the other layout than the output, and without one
    res_views = [res, res.to(memory_format=torch.channels_last), None]
    for r in res_views:
        want = conv + (0 if r is None else r.to("cpu", torch.float64))
        want = ACTS[act](want)
        with torch_ops.force_algorithm("conv2d", algo):
            out = _fused_call(op, schema, x, w, b, stride, pad, c, act, r)
        assert_close_ref(out, want, dtype)


# ---- depthwise_nhwc_reg: every filter x stride x dtype x tile variant, odd sizes and views ----

# The tile variant is picked from the problem size and the GPU (csrc/conv/direct/
# depthwise_nhwc_reg_run.cuh); GPUKERN_NHWC_REG_TILE=big / small / stage forces one (read per
# call), so that each runs on every shape. Inputs without 4-element vector access always take the
# small tile. "stage" (the shared-memory staged kernel) exists for 16-bit 7x7 stride 1 only,
# "lean" / "lean2" (the <= 80-register instances) for 16-bit 3x3 stride 2 only (elsewhere the
# knob falls back to the automatic choice, so those cases are skipped for them).
REG_VARIANTS = ["auto", "big", "small", "stage", "lean", "lean2"]


def _stage_applies(k, stride, dtype):
    return k == 7 and stride == 1 and dtype in (torch.float16, torch.bfloat16)


def _variant_applies(variant, k, stride, dtype):
    if variant == "stage":
        return _stage_applies(k, stride, dtype)
    if variant.startswith("lean"):
        return k == 3 and stride == 2 and dtype in (torch.float16, torch.bfloat16)
    return True


@contextmanager
def _knob(name, value):
    """Environment variable `name` set to `value` inside the block ("auto": unset), restored
    after (the kernels' tuning knobs are read per call)."""
    old = os.environ.get(name)
    if value == "auto":
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


def _reg_variant(variant):
    return _knob("GPUKERN_NHWC_REG_TILE", variant)


def _cl_views(x):
    """channels_last layouts of x: dense; channels padded to C + 4 (pixel stride C + 4: 4-element
    vectors stay aligned when C % 4 == 0); a channel slice (pixel stride C + 1, data one element
    past the allocation: the scalar path); dense channels_last strides at a storage offset of one
    element (misaligned: the scalar path); and plain NCHW (any strides run)."""
    n, c, h, w_ = x.shape
    dense = x.contiguous(memory_format=torch.channels_last)
    pad4 = torch.zeros(n, c + 4, h, w_, dtype=x.dtype, device=x.device).to(
        memory_format=torch.channels_last)[:, :c]
    pad4.copy_(x)
    sl = torch.zeros(n, c + 1, h, w_, dtype=x.dtype, device=x.device).to(
        memory_format=torch.channels_last)[:, 1:]
    sl.copy_(x)
    flat = torch.zeros(x.numel() + 1, dtype=x.dtype, device=x.device)
    off = flat[1:].as_strided(dense.shape, dense.stride())
    off.copy_(x)
    return [dense, pad4, sl, off, x.contiguous()]


# (H, W) over 1, 2, 5, 7, 13, 14, 28, 57 (odd, tiny, the network sizes, several tiles a row),
# C over 3, 8, 12, 96, 200, 672 (scalar tail, one vector, 3 vectors, one and several channel
# blocks, uneven blocks), batch 1 and 3; paddings K // 2, 0 (where an output remains), K // 2 + 1
# and (0, K // 2).
REG_SIZES = [(1, 1), (2, 5), (5, 2), (7, 7), (13, 14), (14, 13), (28, 28), (57, 57), (1, 57),
             (57, 2)]
REG_CHANNELS = [3, 8, 12, 96, 200, 672]


def _reg_cases(k, stride):
    out = []
    for i, (h, w_) in enumerate(REG_SIZES):
        c = REG_CHANNELS[(i + k + stride) % len(REG_CHANNELS)]
        if h * w_ * c > 57 * 57 * 12:
            c = 12 if h * w_ > 28 * 28 else min(c, 96)  # keeps the float64 reference cheap
        pads = [k // 2, 0, k // 2 + 1, (0, k // 2)]
        pad = pads[i % len(pads)]
        ph, pw = pad if isinstance(pad, tuple) else (pad, pad)
        if h + 2 * ph < k or w_ + 2 * pw < k:
            pad = k // 2
        n = 3 if i % 2 else 1
        out.append(((n, c, h, w_), pad))
    return out


@pytest.mark.parametrize("variant", REG_VARIANTS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("k", [3, 5, 7])
def test_nhwc_reg_parity(k, stride, dtype, variant):
    """depthwise_nhwc_reg forced, every filter x stride x dtype x tile variant, on odd sizes,
    channel counts and paddings, five layouts of the input, with and without bias."""
    if not HAS_CUDA:
        pytest.skip("needs a CUDA device and the CUDA build")
    if not _variant_applies(variant, k, stride, dtype):
        pytest.skip(f"no {variant} instance for this filter, stride and dtype")
    algo = "depthwise_nhwc_reg"
    for i, ((n, c, h, w_), pad) in enumerate(_reg_cases(k, stride)):
        x, w, b = _make(n, c, h, w_, k, i % 2 == 0, dtype, seed=1000 + 10 * k + i)
        ref = _ref(x, w, b, stride, pad, c)
        for xx in _cl_views(x):
            with torch_ops.force_algorithm("conv2d", algo), _reg_variant(variant):
                assert torch_ops.algorithm("conv2d", xx, w, b, stride, pad, 1, c) == algo
                out = torch_ops.conv2d(xx, w, b, stride, pad, 1, c)
            assert out.dtype == dtype
            assert_close_ref(out, ref, dtype)


# The census layers of issue #32 at batch 16 (ConvNeXt-T and MobileNetV3 channels_last): the
# automatic choice and both tile variants against float64. (shape, K, stride)
REG_LAYERS = [
    ((16, 96, 56, 56), 7, 1), ((16, 192, 28, 28), 7, 1), ((16, 384, 14, 14), 7, 1),
    ((16, 768, 7, 7), 7, 1), ((16, 16, 112, 112), 3, 1), ((16, 64, 112, 112), 3, 2),
    ((16, 72, 56, 56), 3, 1), ((16, 72, 56, 56), 5, 2), ((16, 120, 28, 28), 5, 1),
    ((16, 240, 28, 28), 3, 2), ((16, 200, 14, 14), 3, 1), ((16, 184, 14, 14), 3, 1),
    ((16, 480, 14, 14), 3, 1), ((16, 672, 14, 14), 3, 1), ((16, 672, 14, 14), 5, 2),
    ((16, 960, 7, 7), 5, 1),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("layer", REG_LAYERS, ids=lambda t: "x".join(map(str, t[0])) +
                         f"_k{t[1]}s{t[2]}")
def test_nhwc_reg_layers(layer, dtype):
    if not HAS_CUDA:
        pytest.skip("needs a CUDA device and the CUDA build")
    (n, c, h, w_), k, stride = layer
    x, w, b = _make(n, c, h, w_, k, True, dtype, seed=c + k)
    x = x.to(memory_format=torch.channels_last)
    pad = k // 2
    assert torch_ops.algorithm("conv2d", x, w, b, stride, pad, 1, c) == "depthwise_nhwc_reg"
    ref = _ref(x, w, b, stride, pad, c)
    for variant in REG_VARIANTS:
        if not _variant_applies(variant, k, stride, dtype):
            continue
        with _reg_variant(variant):
            out = torch_ops.conv2d(x, w, b, stride, pad, 1, c)
        assert out.is_contiguous(memory_format=torch.channels_last)
        assert_close_ref(out, ref, dtype)


# Fused epilogue shapes: (N, C, H, W), K, stride, padding; channels_last input.
REG_FUSED = [
    ((2, 17, 13, 17), 3, 2, 1),
    ((3, 240, 14, 14), 5, 2, 2),
    ((2, 24, 7, 7), 7, 1, 3),
    ((1, 96, 28, 28), 7, 1, 3),
    ((3, 12, 9, 11), 5, 1, 2),
    ((1, 200, 14, 14), 3, 1, 1),
]


@pytest.mark.parametrize("variant", ["big", "small", "stage", "lean", "lean2"])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("act", list(ACTS))
def test_nhwc_reg_fused(act, dtype, variant):
    """torch_ops.conv2d_fused forced to depthwise_nhwc_reg: every activation, bias and no bias,
    a residual channels_last (vector path), NCHW (scalar path), a misaligned channels_last view,
    or none; dense and channel-sliced inputs. "stage": the 16-bit 7x7 stride-1 shapes only."""
    if not HAS_CUDA:
        pytest.skip("needs a CUDA device and the CUDA build")
    if variant == "stage" and dtype == torch.float32:
        pytest.skip("the staged variant exists for 16-bit 7x7 stride 1 only")
    algo = "depthwise_nhwc_reg"
    for i, (shape, k, stride, pad) in enumerate(REG_FUSED):
        if not _variant_applies(variant, k, stride, dtype):
            continue
        n, c, h, w_ = shape
        x, w, b = _make(n, c, h, w_, k, True, dtype, seed=2000 + 7 * k + c)
        x = x * 2  # pre-activations past relu6's and hardswish's kinks (exact in every dtype)
        bias = b if i % 2 == 0 else None
        conv = _ref(x, w, bias, stride, pad, c)
        g = torch.Generator().manual_seed(17 + i)
        res = rand(*conv.shape, dtype=dtype, generator=g).cuda()
        res_cl = res.to(memory_format=torch.channels_last)
        flat = torch.zeros(res.numel() + 1, dtype=dtype, device="cuda")
        res_off = flat[1:].as_strided(res_cl.shape, res_cl.stride())
        res_off.copy_(res)
        views = _cl_views(x)
        for j, r in enumerate([res_cl, res, res_off, None]):
            xx = views[(i + j) % 3]  # dense, channels padded to C + 4, channel slice
            want = ACTS[act](conv + (0 if r is None else r.to("cpu", torch.float64)))
            with torch_ops.force_algorithm("conv2d", algo), _reg_variant(variant):
                assert torch_ops.algorithm("conv2d", xx, w, bias, stride, pad, 1, c) == algo
                out = torch_ops.conv2d_fused(xx, w, bias, stride, pad, 1, c, activation=act,
                                             residual=r)
            assert out.dtype == dtype
            # the output's layout follows torch's for the input's
            expect = F.conv2d(xx, w, None, stride, pad, 1, c)
            assert out.is_contiguous(memory_format=torch.channels_last) == expect.is_contiguous(
                memory_format=torch.channels_last)
            assert_close_ref(out, want, dtype)


# ---- depthwise_small: its own grid ----
#
# Every filter (3, 5, 7) x stride (1, 2) x dtype, each over every plane size below, forced and
# against F.conv2d in float64. Channels and batch cycle over the case index (1, 3, 16, 200, 672
# channels; batch 1 or 3; 672 channels only on planes up to 14x14 and 200 up to 29x31, so the
# float64 reference stays cheap). Each case runs on three inputs: the contiguous tensor, a view
# of a batch and channel range of a bigger tensor (plane and image strides of the bigger one),
# and a copy at a storage offset of one element (no 16-byte alignment: the staging falls back to
# narrower vectors or elements). Padding cycles over K // 2, 0, and K // 2 + 1 (wider than the
# 'same' halo), one case in four asymmetric (0 rows, K // 2 columns).
SMALL_PLANES = [(1, 1), (2, 3), (7, 7), (13, 13), (14, 14), (28, 28), (29, 31), (56, 56)]
SMALL_CHANNELS = [1, 3, 16, 200, 672]


def _small_cases():
    out = []
    i = 0
    for k, s in itertools.product((3, 5, 7), (1, 2)):
        for h, w_ in SMALL_PLANES:
            c = SMALL_CHANNELS[i % len(SMALL_CHANNELS)]
            if c == 672 and h * w_ > 14 * 14:
                c = 16
            if c == 200 and h * w_ > 29 * 31:
                c = 3
            n = 1 if i % 2 else 3
            pads = [k // 2, 0, k // 2 + 1, (0, k // 2)]
            pad = pads[i % len(pads)]
            ph, pw = pad if isinstance(pad, tuple) else (pad, pad)
            if h + 2 * ph < k or w_ + 2 * pw < k:
                pad = k // 2  # the padding that gives every plane an output
            out.append(((n, c, h, w_), k, s, pad))
            i += 1
    return out


SMALL_CASES = _small_cases()


def _small_views(x):
    """The contiguous input, a batch and channel range of a bigger tensor, a misaligned copy."""
    n, c, h, w_ = x.shape
    big = torch.zeros(n + 2, c + 3, h, w_, dtype=x.dtype, device=x.device)
    sliced = big[1:n + 1, 2:c + 2]
    sliced.copy_(x)
    flat = torch.zeros(x.numel() + 1, dtype=x.dtype, device=x.device)
    shifted = flat[1:].view(x.shape)
    shifted.copy_(x)
    return {"contiguous": x, "sliced": sliced, "offset": shifted}


def _small_rows(rows):
    """depthwise_small's strip height forced (GPUKERN_SMALL_ROWS; "auto": the rule,
    conv::small_rows)."""
    return _knob("GPUKERN_SMALL_ROWS", rows)


def _small_rows_apply(k, stride):
    """Whether depthwise_small has 7-row strips for the filter and stride (else 4-row strips are
    its only ones and the automatic case runs them)."""
    return stride == 2 and k in (3, 5)


# (case, strip height): every case with the automatic height; the stride-2 3x3 / 5x5 ones also
# with each height forced.
SMALL_GRID = [(i, rows) for i, (_, k, stride, _) in enumerate(SMALL_CASES)
              for rows in (("auto", "4", "7") if _small_rows_apply(k, stride) else ("auto",))]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("case,rows", SMALL_GRID)
def test_small_forced_grid(case, rows, dtype):
    """Every case with the automatic strip height, and where 7-row strips exist (stride 2, 3x3
    and 5x5) with each height forced."""
    if not HAS_CUDA:
        pytest.skip("needs a CUDA device and the CUDA build")
    shape, k, stride, pad = SMALL_CASES[case]
    n, c, h, w_ = shape
    x, w, b = _make(n, c, h, w_, k, case % 3 != 2, dtype, seed=1000 + case)
    ref = _ref(x, w, b, stride, pad, c)
    for name, xx in _small_views(x).items():
        with torch_ops.force_algorithm("conv2d", "depthwise_small"), _small_rows(rows):
            assert torch_ops.algorithm("conv2d", xx, w, b, stride, pad, 1, c) == \
                "depthwise_small", name
            out = torch_ops.conv2d(xx, w, b, stride, pad, 1, c)
        assert out.dtype == dtype
        assert_close_ref(out, ref, dtype)
        expect = F.conv2d(xx, w, None, stride, pad, 1, c)  # the output's layout: torch's
        assert out.is_contiguous(memory_format=torch.channels_last) == expect.is_contiguous(
            memory_format=torch.channels_last), name


# The fused epilogue through depthwise_small: every activation, with and without bias, with a
# residual in NCHW, in channels_last and a misaligned one, and without; each filter and stride.
SMALL_FUSED = [
    ((3, 16, 14, 14), 3, 1, 1),
    ((1, 200, 14, 14), 3, 2, 1),
    ((3, 3, 13, 13), 5, 1, 2),
    ((1, 16, 29, 31), 5, 2, 2),
    ((3, 1, 7, 7), 7, 1, 3),
    ((1, 3, 56, 56), 7, 2, 3),
]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("act", list(ACTS))
@pytest.mark.parametrize("case,rows", [(c, r) for c in SMALL_FUSED for r in (
    ("auto", "7") if _small_rows_apply(c[1], c[2]) else ("auto",))], ids=str)
def test_small_fused(case, rows, act, dtype):
    op, schema = _fused_op()
    if op is None:
        pytest.skip("torch.ops.gpukern.conv2d_fused is not built here (or no GPU)")
    shape, k, stride, pad = case
    n, c, h, w_ = shape
    for with_bias in (True, False):
        x, w, b = _make(n, c, h, w_, k, with_bias, dtype, seed=k * 13 + c + stride)
        conv = _ref(x, w, b, stride, pad, c)
        g = torch.Generator().manual_seed(9)
        res = rand(*conv.shape, dtype=dtype, generator=g).cuda()
        flat = torch.zeros(res.numel() + 1, dtype=dtype, device="cuda")
        res_off = flat[1:].view(res.shape)
        res_off.copy_(res)
        for r in (res, res.to(memory_format=torch.channels_last), res_off, None):
            want = ACTS[act](conv + (0 if r is None else r.to("cpu", torch.float64)))
            with torch_ops.force_algorithm("conv2d", "depthwise_small"), _small_rows(rows):
                out = _fused_call(op, schema, x, w, b, stride, pad, c, act, r)
            assert_close_ref(out, want, dtype)
        # the automatic choice takes these NCHW shapes too (stride 2, or planes up to 16x16)
        assert torch_ops.algorithm("conv2d", x, w, b, stride, pad, 1, c) == "depthwise_small"


# ---- filters wider than the plane lets them be: the problem is cut to the taps that can meet the
# image (conv/args.cpp cut_dead_taps) ----

# (C, H, W, K, stride, padding): 'same' filters over tiny planes (1x1: only the centre tap meets
# the image), non-square planes, a padding wider than K // 2, valid padding (nothing to cut), and
# a strided one whose last output row starts inside the padding.
DEAD_TAP_CASES = [
    (8, 1, 1, 31, 1, 15), (8, 1, 1, 3, 2, 1), (16, 4, 4, 31, 1, 15), (16, 4, 4, 31, 2, 15),
    (3, 7, 7, 15, 2, 7), (5, 2, 9, 7, 1, 3), (8, 1, 56, 5, 1, 2), (8, 3, 3, 5, 1, 4),
    (8, 9, 9, 7, 1, 0), (4, 6, 5, 9, 2, 4),
]


@pytest.mark.parametrize("device", ["cpu"] + (["cuda"] if HAS_CUDA else []))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("case", DEAD_TAP_CASES)
def test_dead_taps_cut(case, dtype, device):
    """Depthwise convolutions whose filters reach past what the padded plane can meet give
    F.conv2d's result (float64), in NCHW and channels_last, with a bias, and through the fused
    op with a residual and an activation where it exists."""
    c, h, w_, k, stride, pad = case
    g = torch.Generator().manual_seed(c * 100 + h * 10 + k)
    x = rand(2, c, h, w_, dtype=dtype, device=device, generator=g)
    w = rand(c, 1, k, k, dtype=dtype, device=device, generator=g)
    b = rand(c, dtype=dtype, device=device, generator=g)
    ref = _ref(x, w, b, stride, pad, c)
    for xin in (x, x.to(memory_format=torch.channels_last)):
        out = torch_ops.conv2d(xin, w, b, stride, pad, 1, c)
        assert_close_ref(out, ref, dtype)
    if hasattr(torch.ops.gpukern, "conv2d_fused"):
        r = rand(*ref.shape, dtype=dtype, device=device, generator=g)
        out = torch_ops.conv2d_fused(x, w, b, stride, pad, 1, c, activation="relu", residual=r)
        assert_close_ref(out, F.relu(ref + r.to("cpu", torch.float64)), dtype)


@pytest.mark.parametrize("device", ["cpu"] + (["cuda"] if HAS_CUDA else []))
def test_dead_taps_cut_conv1d(device):
    """The same for a depthwise conv1d: a 31-tap 'same' filter over rows of 1, 5 and 16."""
    for length in (1, 5, 16):
        g = torch.Generator().manual_seed(length)
        x = rand(2, 8, length, dtype=torch.float32, device=device, generator=g)
        w = rand(8, 1, 31, dtype=torch.float32, device=device, generator=g)
        b = rand(8, dtype=torch.float32, device=device, generator=g)
        d = lambda t: t.to("cpu", torch.float64)  # noqa: E731
        ref = F.conv1d(d(x), d(w), d(b), 1, 15, 1, 8)
        assert_close_ref(torch_ops.conv1d(x, w, b, 1, 15, 1, 8), ref, torch.float32)


def test_dead_taps_cut_query():
    """The cut is what the dispatch sees: a 'same' 31-tap filter over a 4x4 plane is chosen for as
    the 7-tap one it reduces to, over a 1x1 plane as the 1-tap one; a 56x56 plane keeps all 31."""
    x4, x1, x56 = (torch.empty(8, 64, h, h, device="meta") for h in (4, 1, 56))
    w = {k: torch.empty(64, 1, k, k, device="meta") for k in (1, 7, 31)}
    q = lambda x, k, p: torch_ops.algorithm("conv2d", x, w[k], None, 1, p, 1, 64)  # noqa: E731
    if q(x4, 31, 15).startswith("cpu"):
        pytest.skip("the CPU-only build has no CUDA algorithm choice")
    for lay in (torch.contiguous_format, torch.channels_last):
        a4, a1 = x4.to(memory_format=lay), x1.to(memory_format=lay)
        assert q(a4, 31, 15) == q(a4, 7, 3)
        assert q(a1, 31, 15) == q(a1, 1, 0)
    assert q(x56, 31, 15) == "depthwise_large"


def test_dead_taps_not_cut_when_forced():
    """A forced algorithm sees the whole filter (the forced-kernel tests check each kernel's own
    handling of taps that only meet the padding): the refusal names the 31x31 filter, not the
    1x1 it would be cut to."""
    x = torch.empty(8, 64, 1, 1, device="meta")
    w = torch.empty(64, 1, 31, 31, device="meta")
    if torch_ops.algorithm("conv2d", x, w, None, 1, 15, 1, 64).startswith("cpu"):
        pytest.skip("the CPU-only build has no CUDA algorithm choice")
    with torch_ops.force_algorithm("conv2d", "depthwise_small"):
        with pytest.raises(RuntimeError, match=r"cannot run this shape \(.*kernel=31x31"):
            torch_ops.algorithm("conv2d", x, w, None, 1, 15, 1, 64)
