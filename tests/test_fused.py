"""gpukern::conv1d_fused / conv2d_fused (y = act(conv(x, w) + bias [+ residual])) against torch's
unfused sequence in float64 (F.conv, + residual, then the activation), on CPU and CUDA: every
activation with and without bias and residual, every dtype, layouts of the input and of the
residual, strided views, unbatched inputs, groups, depthwise, stride / dilation / padding, empty
outputs, each CUDA algorithm forced (the direct kernels run the elementwise epilogue pass,
csrc/conv/epilogue.cu; igemm its own epilogue), errors, opcheck and torch.compile. Every call
also checks that its inputs are left unchanged."""
from contextlib import nullcontext

import pytest
import torch
import torch.nn.functional as F

import torch_ops
from conftest import (DEVICE_PARAMS, FLOAT_DTYPES, HAS_CUDA, REF_ACTS, assert_close_ref, rand,
                      skip_unsupported)

pytestmark = pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel")

ops = torch.ops.gpukern
ALL_DTYPES = FLOAT_DTYPES + [torch.float64]
ACTS = list(REF_ACTS)


def cuda_test(f):
    """A CUDA-only test: marked cuda, reported as skipped without a GPU."""
    f = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device and the CUDA build of "
                           "gpukern")(f)
    return pytest.mark.cuda(f)


def gen(seed):
    return torch.Generator().manual_seed(seed)


def reference(nsp, x, w, b, stride, padding, dilation, groups, act, r):
    """torch's unfused sequence in float64 on CPU, on the already rounded inputs."""
    d = lambda t: None if t is None else t.detach().to("cpu", torch.float64)  # noqa: E731
    conv = F.conv1d if nsp == 1 else F.conv2d
    y = conv(d(x), d(w), d(b), stride, padding, dilation, groups)
    if r is not None:
        y = y + d(r)
    return REF_ACTS[act](y)


def fused(nsp, x, w, b=None, stride=1, padding=0, dilation=1, groups=1, act="none", r=None):
    fn = torch_ops.conv1d_fused if nsp == 1 else torch_ops.conv2d_fused
    return fn(x, w, b, stride, padding, dilation, groups, activation=act, residual=r)


def check(nsp, x, w, b=None, stride=1, padding=0, dilation=1, groups=1, act="none", r=None,
          tol=None):
    """One call against the reference: value, dtype, device, aten's output layout, and the
    inputs untouched."""
    inputs = [t for t in (x, w, b, r) if t is not None]
    before = [t.clone() for t in inputs]
    out = fused(nsp, x, w, b, stride, padding, dilation, groups, act, r)
    for t, t0 in zip(inputs, before):
        torch.testing.assert_close(t, t0, rtol=0, atol=0, equal_nan=True,
                                   msg="an input was modified")
    ref = reference(nsp, x, w, b, stride, padding, dilation, groups, act, r)
    assert out.device == x.device and out.dtype == x.dtype
    assert_close_ref(out, ref, x.dtype, tol)
    if nsp == 2 and out.numel() > 0:
        conv = F.conv2d(x.detach().cpu().float(), w.detach().cpu().float(), None, stride,
                        padding, dilation, groups)
        cl = torch.channels_last
        assert out.is_contiguous(memory_format=cl) == conv.is_contiguous(memory_format=cl)
        assert out.is_contiguous() == conv.is_contiguous()
    return out


def make(nsp, n, c, size, o, k, groups=1, bias=True, dtype=torch.float32, device="cpu", seed=0,
         scale=2.0):
    """x [n, c, *size] (n None: unbatched), w [o, c / groups, *k], bias [o]. x is scaled (exactly,
    by a power of two) so that pre-activations reach past relu6's and hardswish's kinks."""
    g = gen(seed)
    x = rand(*([n] if n is not None else []), c, *size, dtype=dtype, device=device, generator=g)
    x = x * scale
    w = rand(o, c // groups, *k, dtype=dtype, device=device, generator=g)
    b = rand(o, dtype=dtype, device=device, generator=g) if bias else None
    return x, w, b


def residual_like(out_shape, dtype, device, seed, layout="contiguous"):
    """A residual of the output's shape: contiguous, channels_last, a strided view with a storage
    offset, or an expanded (stride 0) view."""
    g = gen(seed)
    if layout == "expanded":
        r = rand(*out_shape[:-1], 1, dtype=dtype, device=device, generator=g)
        return r.expand(out_shape)
    r = rand(*out_shape, dtype=dtype, device=device, generator=g)
    if layout == "channels_last":
        return r.to(memory_format=torch.channels_last) if r.dim() == 4 else \
            r.transpose(-1, -2).contiguous().transpose(-1, -2)
    if layout == "view":
        big = torch.zeros(*out_shape[:-1], out_shape[-1] * 2 + 1, dtype=dtype, device=device)
        view = big[..., 1::2]
        view.copy_(r)
        return view
    return r


def out_shape(nsp, x, w, stride=1, padding=0, dilation=1, groups=1):
    conv = F.conv1d if nsp == 1 else F.conv2d
    return list(conv(torch.empty(x.shape, device="meta"), torch.empty(w.shape, device="meta"),
                     None, stride, padding, dilation, groups).shape)


# ------------------------------------------------------------------------------------------------
# Every activation x bias x residual, conv1d and conv2d, every dtype
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("nsp", [1, 2])
@pytest.mark.parametrize("device", DEVICE_PARAMS)
def test_activation_bias_residual(device, nsp, dtype, act):
    skip_unsupported(device, dtype)
    size, k = ((37,), (3,)) if nsp == 1 else ((9, 10), (3, 3))
    x, w, b = make(nsp, 2, 4, size, 6, k, 2, True, dtype, device, seed=ACTS.index(act))
    shape = out_shape(nsp, x, w, 1, 1, 1, 2)
    r = residual_like(shape, dtype, device, seed=50 + ACTS.index(act))
    for bias in (b, None):
        for res in (r, None):
            check(nsp, x, w, bias, 1, 1, 1, 2, act, res)


@pytest.mark.parametrize("device", DEVICE_PARAMS)
def test_nan_propagates(device):
    """A NaN in the residual gives NaN in its output element under every activation (as torch's:
    relu, relu6 and hardswish keep NaN), the rest of the output finite and correct."""
    x, w, b = make(2, 1, 3, (8, 8), 4, (3, 3), 1, True, device=device, seed=7)
    r = residual_like([1, 4, 8, 8], torch.float32, device, seed=8)
    r[0, 1, 2, 3] = float("nan")
    for act in ACTS:
        out = check(2, x, w, b, 1, 1, 1, 1, act, r)
        assert torch.isnan(out[0, 1, 2, 3]) and int(torch.isnan(out).sum()) == 1


# ------------------------------------------------------------------------------------------------
# Layouts, views, shapes
# ------------------------------------------------------------------------------------------------

def _x_layouts(x):
    n, c, h, w_ = x.shape
    big = torch.zeros(n, c + 1, h + 2, w_ + 5, dtype=x.dtype, device=x.device)
    view = big[:, 1:, 1:h + 1, 3:w_ + 3]
    view.copy_(x)
    return {"nchw": x, "channels_last": x.to(memory_format=torch.channels_last), "view": view}


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("device", DEVICE_PARAMS)
def test_layouts(device, dtype):
    """Input NCHW, channels_last or a strided view (the output follows aten's rule), with a
    residual of every layout: the output's, the other one, a view with an offset, an expanded
    (stride 0) view; and a channels_last weight."""
    skip_unsupported(device, dtype)
    x, w, b = make(2, 2, 6, (11, 13), 8, (3, 3), 2, True, dtype, device, seed=11)
    for xi, (xname, xx) in enumerate(_x_layouts(x).items()):
        for ri, rlayout in enumerate(("contiguous", "channels_last", "view", "expanded")):
            for stride, padding in ((1, 1), (2, 0)):
                shape = out_shape(2, xx, w, stride, padding, 1, 2)
                r = residual_like(shape, dtype, device, seed=100 + 10 * xi + ri, layout=rlayout)
                act = ACTS[(xi * 4 + ri) % len(ACTS)]
                check(2, xx, w, b, stride, padding, 1, 2, act, r)
    wcl = w.to(memory_format=torch.channels_last)
    r = residual_like(out_shape(2, x, w, 1, 1, 1, 2), dtype, device, seed=120)
    check(2, x, wcl, b, 1, 1, 1, 2, "silu", r)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("device", DEVICE_PARAMS)
def test_conv1d_views(device, dtype):
    """conv1d: a strided input view, a transposed (channels-innermost) input and residual."""
    skip_unsupported(device, dtype)
    x, w, b = make(1, 3, 6, (40,), 6, (5,), 3, True, dtype, device, seed=12)
    big = torch.zeros(3, 7, 90, dtype=dtype, device=device)
    xv = big[:, 1:, 3:83:2]
    xv.copy_(x)
    xt = x.transpose(1, 2).contiguous().transpose(1, 2)
    for i, xx in enumerate((x, xv, xt)):
        shape = out_shape(1, xx, w, 1, 2, 1, 3)
        for j, layout in enumerate(("contiguous", "channels_last", "view", "expanded")):
            r = residual_like(shape, dtype, device, seed=130 + 4 * i + j, layout=layout)
            check(1, xx, w, b, 1, 2, 1, 3, ACTS[(i + 3 * j) % len(ACTS)], r)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("device", DEVICE_PARAMS)
def test_unbatched(device, dtype):
    """An unbatched input gives an unbatched output; the residual has the unbatched shape."""
    skip_unsupported(device, dtype)
    x, w, b = make(2, None, 4, (10, 9), 6, (3, 2), 2, True, dtype, device, seed=13)
    for i, (xx, layout) in enumerate(((x, "contiguous"), (x, "channels_last"),
                                      (x.unsqueeze(0).to(memory_format=torch.channels_last)[0],
                                       "view"))):
        shape = out_shape(2, xx, w, (1, 2), 1, 1, 2)
        assert len(shape) == 3
        r = residual_like(shape, dtype, device, seed=140 + i, layout=layout)
        out = check(2, xx, w, b, (1, 2), 1, 1, 2, ACTS[i + 2], r)
        assert out.dim() == 3
    x1, w1, b1 = make(1, None, 4, (30,), 4, (7,), 4, True, dtype, device, seed=14)
    r1 = residual_like(out_shape(1, x1, w1, 1, "same", 2, 4), dtype, device, seed=150)
    out = check(1, x1, w1, b1, 1, "same", 2, 4, "gelu", r1)
    assert out.dim() == 2


# (nsp, N, C, size, O, k, stride, padding, dilation, groups)
SHAPES = [
    (2, 2, 3, (11, 13), 5, (3, 3), 1, 1, 1, 1),              # dense
    (2, 1, 6, (16, 15), 12, (5, 3), 3, (2, 0), (1, 2), 3),   # grouped, strided, dilated
    (2, 2, 8, (12, 10), 8, (3, 3), 1, "same", 1, 8),          # depthwise
    (2, 2, 4, (9, 14), 8, (2, 3), (1, 3), 1, (3, 1), 4),      # depthwise, multiplier 2
    (2, 2, 8, (12, 10), 16, (1, 1), 2, 0, 1, 4),              # 1x1 strided
    (2, 1, 1, (29, 31), 1, (4, 2), 1, "same", 1, 1),          # single channel, even kernel
    (2, 2, 6, (8, 9), 3, (3, 2), (2, 3), "valid", 1, 3),
    (1, 2, 4, (50,), 6, (3,), 2, 1, 1, 2),                    # conv1d grouped strided
    (1, 3, 6, (64,), 6, (9,), 1, "same", 3, 6),               # conv1d depthwise dilated
    (1, 2, 1, (100,), 1, (16,), 1, 0, 1, 1),                  # conv1d single channel
    (1, 2, 4, (33,), 8, (1,), 1, 0, 1, 1),                    # conv1d pointwise
]


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("device", DEVICE_PARAMS)
def test_shapes(device, dtype):
    skip_unsupported(device, dtype)
    for i, (nsp, n, c, size, o, k, stride, padding, dilation, groups) in enumerate(SHAPES):
        x, w, b = make(nsp, n, c, size, o, k, groups, i % 2 == 0, dtype, device, seed=200 + i)
        shape = out_shape(nsp, x, w, stride, padding, dilation, groups)
        r = residual_like(shape, dtype, device, seed=300 + i)
        check(nsp, x, w, b, stride, padding, dilation, groups, ACTS[i % len(ACTS)], r)
        check(nsp, x, w, b, stride, padding, dilation, groups, ACTS[(i + 5) % len(ACTS)], None)


@pytest.mark.parametrize("device", DEVICE_PARAMS)
def test_empty(device):
    """Empty batch or zero channels: an empty output of the conv's shape; the residual must
    still have exactly that shape."""
    for nsp, size, k in ((1, (10,), (3,)), (2, (5, 6), (3, 3))):
        x, w, b = make(nsp, 0, 4, size, 6, k, 2, True, device=device, seed=15)
        shape = out_shape(nsp, x, w, 1, 1, 1, 2)
        r = torch.empty(shape, device=device)
        for res in (r, None):
            out = check(nsp, x, w, b, 1, 1, 1, 2, "relu", res)
            assert list(out.shape) == shape
        with pytest.raises(RuntimeError, match="not broadcast"):
            fused(nsp, x, w, b, 1, 1, 1, 2, "relu", torch.empty(shape[1:], device=device))
        # Zero input channels: [N, 0, ...] as aten.
        xz = rand(2, 0, *size, device=device)
        wz = rand(6, 0, *k, device=device)
        shape = out_shape(nsp, xz, wz, 1, 1)
        out = check(nsp, xz, wz, None, 1, 1, 1, 1, "silu", torch.empty(shape, device=device))
        assert list(out.shape) == shape and shape[1] == 0


# ------------------------------------------------------------------------------------------------
# The raw ops: defaults, both padding overloads, keyword arguments, wrapper forms
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("device", DEVICE_PARAMS)
def test_raw_ops_and_forms(device):
    x, w, b = make(2, 2, 4, (9, 10), 6, (3, 3), 2, True, device=device, seed=16)
    x1, w1, b1 = make(1, 2, 4, (20,), 6, (3,), 2, True, device=device, seed=17)
    # Defaults (activation "none", no residual) are the plain conv ops.
    torch.testing.assert_close(ops.conv2d_fused(x, w, b, [1], [1], [1], 2),
                               ops.conv2d(x, w, b, [1], [1], [1], 2), rtol=0, atol=0)
    torch.testing.assert_close(ops.conv1d_fused.padding(x1, w1, b1, [1], "same", [1], 2),
                               ops.conv1d.padding(x1, w1, b1, [1], "same", [1], 2),
                               rtol=0, atol=0)
    r = residual_like(out_shape(2, x, w, 1, "same", 2, 2), torch.float32, device, seed=18)
    out = ops.conv2d_fused.padding(x, w, b, [1, 1], "same", [2, 1], 2, activation="hardswish",
                                   residual=r)
    assert_close_ref(out, reference(2, x, w, b, 1, "same", (2, 1), 2, "hardswish", r))
    out = ops.conv2d_fused(x, w, None, [2, 1], [0, 1], [1], 2, "sigmoid")
    assert_close_ref(out, reference(2, x, w, None, (2, 1), (0, 1), 1, 2, "sigmoid", None))
    r1 = residual_like(out_shape(1, x1, w1, 2, 1, 1, 2), torch.float32, device, seed=19)
    out = ops.conv1d_fused(x1, w1, b1, [2], [1], [1], 2, "relu6", r1)
    assert_close_ref(out, reference(1, x1, w1, b1, 2, 1, 1, 2, "relu6", r1))
    # The wrappers: ints, tuples, 'valid', positional activation, activation=None.
    for stride, padding in ((1, 1), ((1, 2), (1, 0)), ([2], "valid")):
        r = residual_like(out_shape(2, x, w, stride, padding, 1, 2), torch.float32, device, 20)
        out = torch_ops.conv2d_fused(x, w, b, stride, padding, 1, 2, "gelu", r)
        assert_close_ref(out, reference(2, x, w, b, stride, padding, 1, 2, "gelu", r))
    out = torch_ops.conv1d_fused(x1, w1, b1, padding="same", groups=2, activation=None)
    assert_close_ref(out, reference(1, x1, w1, b1, 1, "same", 1, 2, "none", None))


def test_benchmark_call_form():
    """benchmarks/layers.py calls the fused op as f(x, w, bias, stride, padding, dilation, groups,
    activation=..., residual=...), with the layer's own argument forms."""
    x, w, b = make(2, 2, 4, (9, 10), 4, (3, 3), 1, True, seed=21)
    r = residual_like(out_shape(2, x, w, (1, 1), (1, 1), (1, 1), 1), torch.float32, "cpu", 22)
    out = torch_ops.conv2d_fused(x, w, b, (1, 1), (1, 1), (1, 1), 1, activation="relu",
                                 residual=r)
    assert_close_ref(out, reference(2, x, w, b, 1, 1, 1, 1, "relu", r))


# ------------------------------------------------------------------------------------------------
# Errors
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("device", DEVICE_PARAMS)
def test_errors(device):
    x, w, b = make(2, 2, 4, (9, 10), 6, (3, 3), 2, True, device=device, seed=23)
    x1, w1, b1 = make(1, 2, 4, (20,), 6, (3,), 2, True, device=device, seed=24)
    r = rand(2, 6, 9, 10, device=device)
    r1 = rand(2, 6, 20, device=device)
    calls = [
        ("conv2d_fused", lambda **kw: ops.conv2d_fused(x, w, b, [1], [1], [1], 2, **kw), r),
        ("conv2d_fused.padding",
         lambda **kw: ops.conv2d_fused.padding(x, w, b, [1], "same", [1], 2, **kw), r),
        ("conv1d_fused", lambda **kw: ops.conv1d_fused(x1, w1, b1, [1], [1], [1], 2, **kw), r1),
        ("conv1d_fused.padding",
         lambda **kw: ops.conv1d_fused.padding(x1, w1, b1, [1], "same", [1], 2, **kw), r1),
        ("conv2d_fused", lambda **kw: torch_ops.conv2d_fused(x, w, b, 1, 1, 1, 2, **kw), r),
    ]
    for name, call, res in calls:
        op = name.split(".")[0]
        for bad in ("tanh", "ReLU", "", "gelu_erf"):
            with pytest.raises(ValueError, match=rf"^gpukern::{op}: activation must be one of "
                               r"'none', 'relu', 'relu6', 'silu', 'gelu', 'gelu_tanh', "
                               rf"'hardswish', 'sigmoid', 'hardsigmoid', got '{bad}'"):
                call(activation=bad)
        # Shapes torch's `y + r` would broadcast are rejected: the exact shape is required.
        for bad_r in (res[:1], res[0], res[..., :1], res.unsqueeze(0), res[:, :3]):
            with pytest.raises(RuntimeError, match=rf"^gpukern::{op}: expected residual of "
                               r"exactly the output's shape \[.*\] \(it is not broadcast\), "
                               r"got residual of shape"):
                call(activation="relu", residual=bad_r)
        bad_dtype = torch.float16 if device == "cuda" else torch.float64
        with pytest.raises(RuntimeError, match=rf"^gpukern::{op}: expected input and residual of "
                           r"the same dtype, got Float and (Half|Double)"):
            call(residual=res.to(bad_dtype))
        if device == "cuda":
            with pytest.raises(RuntimeError, match=rf"^gpukern::{op}: expected input and "
                               r"residual on the same device, got cuda:\d+ and cpu"):
                call(residual=res.cpu())
        # The checks of the conv ops come first and name the fused op.
        with pytest.raises(RuntimeError, match=rf"^gpukern::{op}: expected bias of shape"):
            if op == "conv2d_fused":
                ops.conv2d_fused(x, w, b[:4], [1], [1], [1], 2, "relu", res)
            else:
                ops.conv1d_fused(x1, w1, b1[:4], [1], [1], [1], 2, "relu", res)


def test_errors_match_torch_types():
    """The residual's dtype and device errors have the type torch's own errors have for the same
    mistakes in F.conv2d (a bias of another dtype) and in `y + r` (another device)."""
    x, w, b = make(2, 2, 4, (9, 10), 6, (3, 3), 2, True, seed=25)
    with pytest.raises(Exception) as torch_err:
        F.conv2d(x, w, b.double(), 1, 1, 1, 2)
    with pytest.raises(Exception) as ours:
        torch_ops.conv2d_fused(x, w, b, 1, 1, 1, 2, residual=rand(2, 6, 9, 10).double())
    assert type(ours.value) is type(torch_err.value)


@pytest.mark.parametrize("device", DEVICE_PARAMS)
def test_requires_grad_raises(device):
    """Forward only: a residual that requires grad under grad mode raises, as for every op."""
    x, w, b = make(2, 2, 4, (9, 10), 6, (3, 3), 2, True, device=device, seed=26)
    r = rand(2, 6, 9, 10, device=device).requires_grad_()
    with pytest.raises(RuntimeError, match="^gpukern::conv2d_fused: gpukern is inference-only"):
        torch_ops.conv2d_fused(x, w, b, 1, 1, 1, 2, "relu", r)
    with torch.no_grad():
        out = torch_ops.conv2d_fused(x, w, b, 1, 1, 1, 2, "relu", r)
    assert not out.requires_grad
    assert_close_ref(out, reference(2, x, w, b, 1, 1, 1, 2, "relu", r))


# ------------------------------------------------------------------------------------------------
# opcheck, torch.compile
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("device", DEVICE_PARAMS)
def test_opcheck(device):
    x, w, b = make(2, 2, 4, (9, 10), 6, (3, 3), 2, True, device=device, seed=27)
    x1, w1, b1 = make(1, 2, 4, (20,), 6, (3,), 2, True, device=device, seed=28)
    cl = torch.channels_last
    r = rand(2, 6, 9, 10, device=device)
    r1 = rand(2, 6, 20, device=device)
    cases = [
        (ops.conv2d_fused.default, (x, w, b, [1], [1], [1], 2), {}),
        (ops.conv2d_fused.default, (x, w, b, [1], [1], [1], 2, "silu", r), {}),
        (ops.conv2d_fused.default, (x.to(memory_format=cl), w, None, [1, 1], [1, 1], [1], 2),
         {"activation": "gelu_tanh", "residual": r}),
        (ops.conv2d_fused.padding, (x, w, b, [1], "same", [2, 1], 2, "hardswish",
                                    r.to(memory_format=cl)), {}),
        (ops.conv2d_fused.padding, (x[0], w, b, [1], "same", [1], 2, "relu", r[0]), {}),
        (ops.conv2d_fused.default, (x[:0], w, b, [1], [1], [1], 2, "relu", r[:0]), {}),
        (ops.conv1d_fused.default, (x1, w1, b1, [1], [1], [1], 2, "sigmoid", r1), {}),
        (ops.conv1d_fused.padding, (x1, w1, None, [1], "same", [1], 2),
         {"activation": "relu6", "residual": r1[:, :, :]}),
    ]
    for op, args, kwargs in cases:
        torch.library.opcheck(op, args, kwargs)


@pytest.mark.parametrize("device", DEVICE_PARAMS)
def test_compile_fullgraph(device):
    x, w, b = make(2, 2, 4, (12, 12), 4, (3, 3), 1, True, device=device, seed=29)
    w2 = rand(4, 1, 3, 3, device=device, generator=gen(30))
    x1, w1, _ = make(1, 2, 4, (32,), 4, (5,), 4, False, device=device, seed=31)

    def block(x, w, b, w2, x1, w1):
        h = torch_ops.conv2d_fused(x, w, b, padding=1, activation="relu")
        y = torch_ops.conv2d_fused(h, w2, None, 1, "same", 1, 4, "silu", residual=h)
        z = torch_ops.conv1d_fused(x1, w1, None, 1, "same", 1, 4, activation="gelu",
                                   residual=x1)
        return y.sum(dim=(2, 3)) + z.mean(-1)

    torch._dynamo.reset()
    eager = block(x, w, b, w2, x1, w1)
    compiled = torch.compile(block, fullgraph=True, backend="aot_eager")(x, w, b, w2, x1, w1)
    torch.testing.assert_close(compiled, eager)
    torch._dynamo.reset()
    dynamic = torch.compile(block, fullgraph=True, backend="aot_eager", dynamic=True)
    torch.testing.assert_close(dynamic(x, w, b, w2, x1, w1), eager)


# ------------------------------------------------------------------------------------------------
# CUDA: each algorithm forced, the tensor-core path, the epilogue pass's own paths
# ------------------------------------------------------------------------------------------------

ALGOS_2D = ["depthwise_nhwc", "depthwise_rows", "depthwise_tma", "depthwise_plane",
            "depthwise_large", "depthwise_nchw", "general_staged", "general_direct", "igemm",
            "depthwise_nhwc_reg", "depthwise_small", "stem_direct"]
# (N, C, H, W), O, (KH, KW), groups, stride, padding, dilation: depthwise shapes the depthwise
# kernels take (3x3 'same' planes, 16-byte rows, 7x7, large filters), then grouped and dense
# ones (igemm: C, O multiples of 8, 16-bit; stem_direct: an RGB stem).
SHAPES_2D = [
    ((2, 3, 37, 64), 3, (3, 3), 3, 1, "same", 1),
    ((2, 4, 28, 28), 4, (3, 3), 4, 1, "same", 1),
    ((1, 2, 17, 63), 2, (7, 7), 2, 1, "same", 1),
    ((2, 5, 13, 9), 5, (3, 3), 5, 1, (0, 1), 1),
    ((1, 2, 40, 33), 2, (13, 9), 2, 1, (6, 4), 1),
    ((2, 5, 9, 11), 5, (3, 2), 5, (2, 1), 1, (1, 2)),
    ((2, 4, 33, 31), 6, (3, 3), 2, (1, 2), 1, 1),
    ((1, 2, 20, 25), 4, (3, 2), 1, 3, 2, (1, 2)),
    ((2, 16, 12, 12), 32, (3, 3), 1, 1, 1, 1),
    ((2, 16, 9, 9), 24, (1, 1), 1, 2, 0, 1),
    ((2, 3, 30, 31), 24, (3, 3), 1, 2, 1, 1),
]
ALGOS_1D = ["rowwise8", "rowwise16", "rowwise8_dilated", "general_ot1", "general_ot4", "fft",
            "rowwise_reg", "rowwise_mma", "igemm", "grouped_reg"]
# (N, C, L), O, K, groups, stride, padding, dilation
SHAPES_1D = [
    ((2, 3, 2048), 3, 7, 3, 1, "same", 1),
    ((2, 2, 1500), 2, 31, 2, 1, "same", 1),
    ((1, 2, 3000), 2, 5, 2, 1, "same", 3),
    ((2, 4, 300), 8, 3, 2, 2, 1, 1),
    ((1, 1, 5000), 1, 600, 1, 1, 0, 1),
    ((2, 16, 200), 32, 3, 1, 1, 1, 1),
    ((2, 32, 150), 48, 24, 4, 1, 12, 1),
]


def _cannot_run(e):
    return "cannot run this shape" in str(e)


def _forced_sweep(nsp, algo, dtype, shapes):
    """Every shape the forced algorithm can run, with a residual of another layout than the
    output and an activation that varies, then without residual; returns how many ran."""
    ran = 0
    for i, (shape, o, k, groups, stride, padding, dil) in enumerate(shapes):
        n, c = shape[:2]
        x, w, b = make(nsp, n, c, shape[2:], o, k if nsp == 2 else (k,), groups, i % 2 == 0,
                       dtype, "cuda", seed=400 + i)
        xs = [x, x.to(memory_format=torch.channels_last)] if nsp == 2 else [x]
        for j, xx in enumerate(xs):
            oshape = out_shape(nsp, xx, w, stride, padding, dil, groups)
            y_cl = nsp == 2 and (j == 1)
            layout = "contiguous" if y_cl else "channels_last"
            r = residual_like(oshape, dtype, "cuda", seed=500 + i, layout=layout)
            with torch_ops.force_algorithm(f"conv{nsp}d", algo):
                try:
                    check(nsp, xx, w, b, stride, padding, dil, groups,
                          ACTS[(i + j) % len(ACTS)], r)
                except RuntimeError as e:
                    if not _cannot_run(e):
                        raise
                    continue
                check(nsp, xx, w, b, stride, padding, dil, groups,
                      ACTS[(i + j + 4) % len(ACTS)], None)
                ran += 1
    return ran


def _expect_runs(algo, dtype):
    """Whether the forced algorithm must run at least one of the sweep's shapes on this GPU."""
    cap = torch.cuda.get_device_capability()
    if algo == "igemm":
        return (torch.ops.gpukern._has_igemm() and cap == (9, 0) and dtype != torch.float32)
    if algo in ("depthwise_tma", "depthwise_plane"):
        return cap[0] >= 9
    if algo in ("rowwise_reg", "rowwise_mma"):  # the 16-bit row kernels
        return dtype != torch.float32
    return True


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("algo", ALGOS_2D)
@cuda_test
def test_cuda_conv2d_forced(algo, dtype):
    ran = _forced_sweep(2, algo, dtype, SHAPES_2D)
    if ran == 0:
        assert not _expect_runs(algo, dtype), f"{algo} ran none of the shapes"
        pytest.skip(f"{algo} cannot run any of these shapes here")


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("algo", ALGOS_1D)
@cuda_test
def test_cuda_conv1d_forced(algo, dtype):
    ran = _forced_sweep(1, algo, dtype, SHAPES_1D)
    if ran == 0:
        assert not _expect_runs(algo, dtype), f"{algo} ran none of the shapes"
        pytest.skip(f"{algo} cannot run any of these shapes here")


def _igemm_available():
    return (HAS_CUDA and torch.ops.gpukern._has_igemm()
            and torch.cuda.get_device_capability() == (9, 0))


@pytest.mark.parametrize("act", ACTS)
@pytest.mark.skipif(not _igemm_available(),
                    reason="needs an sm_90 GPU and a build with the igemm path")
@cuda_test
def test_cuda_igemm_bf16_channels_last(act):
    """A dense bf16 channels_last layer (C = O = 64, 3x3) runs the tensor-core path, which
    applies the activation and the residual in its own epilogue (one rounding)."""
    x, w, b = make(2, 2, 64, (14, 14), 64, (3, 3), 1, True, torch.bfloat16, "cuda", seed=600,
                   scale=1.0)
    x = x.to(memory_format=torch.channels_last)
    w = w.to(memory_format=torch.channels_last)
    assert torch_ops.algorithm("conv2d", x, w, b, 1, 1) == "igemm"
    assert torch_ops.algorithm("conv2d_fused", x, w, b, 1, 1, 1, 1, act) == "igemm"
    shape = out_shape(2, x, w, 1, 1)
    for i, layout in enumerate(("channels_last", "contiguous", "view")):
        r = residual_like(shape, torch.bfloat16, "cuda", seed=610 + i, layout=layout)
        out = check(2, x, w, b, 1, 1, 1, 1, act, r)
        assert out.is_contiguous(memory_format=torch.channels_last)
    check(2, x, w, None, 1, 1, 1, 1, act, None)
    # NCHW input, same layer (igemm converts it; the output follows aten's rule).
    check(2, x.contiguous(), w.contiguous(), b, 1, 1, 1, 1, act,
          residual_like(shape, torch.bfloat16, "cuda", seed=620))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@cuda_test
def test_cuda_epilogue_pass_paths(dtype):
    """The elementwise pass (csrc/conv/epilogue.cu) on its own paths, through a depthwise layer
    (a direct kernel): the flat vectorised path (dense y and r of one layout, 16-byte aligned),
    its scalar fallback (a residual one element past a 16-byte boundary), a tail (numel not a
    multiple of the vector), a grid-stride loop (an output of millions of elements), and the
    strided path (residual of the other layout, expanded)."""
    # Odd numel: 3 * 5 * 7 * 9 elements.
    x, w, b = make(2, 3, 5, (7, 9), 5, (3, 3), 5, True, dtype, "cuda", seed=700)
    shape = out_shape(2, x, w, 1, 1, 1, 5)
    flat = torch.empty(int(torch.tensor(shape).prod()) + 1, dtype=dtype, device="cuda")
    misaligned = flat[1:].view(shape)
    misaligned.copy_(residual_like(shape, dtype, "cuda", seed=701))
    for i, r in enumerate((residual_like(shape, dtype, "cuda", seed=702), misaligned,
                           residual_like(shape, dtype, "cuda", seed=703, layout="channels_last"),
                           residual_like(shape, dtype, "cuda", seed=704, layout="expanded"),
                           None)):
        check(2, x, w, b, 1, 1, 1, 5, ACTS[1 + i], r)
    # Millions of elements: more vectors than the capped grid's threads.
    x, w, b = make(2, 4, 16, (256, 256), 16, (3, 3), 16, True, dtype, "cuda", seed=705,
                   scale=1.0)
    shape = out_shape(2, x, w, 1, 1, 1, 16)
    for layout, act in (("contiguous", "silu"), ("channels_last", "gelu_tanh")):
        r = residual_like(shape, dtype, "cuda", seed=706, layout=layout)
        check(2, x, w, b, 1, 1, 1, 16, act, r)
    check(2, x.to(memory_format=torch.channels_last), w, b, 1, 1, 1, 16, "hardswish",
          residual_like(shape, dtype, "cuda", seed=707, layout="channels_last"))


@cuda_test
def test_cuda_stream_and_device():
    """The pass runs on the current stream: a call on a side stream, synchronised with that
    stream only, is complete and correct."""
    x, w, b = make(2, 2, 8, (64, 64), 8, (3, 3), 8, True, torch.float32, "cuda", seed=800)
    r = residual_like(out_shape(2, x, w, 1, 1, 1, 8), torch.float32, "cuda", seed=801)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        out = torch_ops.conv2d_fused(x, w, b, 1, 1, 1, 8, "relu", r)
    s.synchronize()
    assert_close_ref(out, reference(2, x, w, b, 1, 1, 1, 8, "relu", r))


def test_algorithm_query_names_the_convolution():
    """torch_ops.algorithm("conv2d_fused" / "conv1d_fused", ...) answers what the convolution
    alone would run (meta tensors, no GPU): activation and residual do not change the choice."""
    x = torch.empty(2, 16, 32, 32, device="meta").to(memory_format=torch.channels_last)
    w = torch.empty(16, 1, 3, 3, device="meta")
    r = torch.empty(2, 16, 32, 32, device="meta")
    assert torch_ops.algorithm("conv2d_fused", x, w, None, 1, 1, 1, 16, "relu", r) == \
        torch_ops.algorithm("conv2d", x, w, None, 1, 1, 1, 16)
    x1, w1 = torch.empty(2, 8, 4096, device="meta"), torch.empty(8, 1, 31, device="meta")
    assert torch_ops.algorithm("conv1d_fused", x1, w1, padding="same", groups=8,
                               activation="silu") == \
        torch_ops.algorithm("conv1d", x1, w1, padding="same", groups=8)
