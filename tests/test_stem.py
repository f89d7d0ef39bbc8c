"""stem_direct: dense conv2d over 1-4 input channels (image stems), square 3/5/7 filters, stride 1
or 2, any padding and strides. Forced, against F.conv2d in float64: every filter x stride x
dtype over odd planes, 1-4 input channels, output channels that are not a multiple of the
kernel's 16-channel chunk, NCHW / channels_last / strided-view / misaligned inputs, strided
weights and biases; the fused epilogue (every activation, a residual in either layout); the
automatic choice on the real stems; the shapes it refuses."""
import itertools

import pytest
import torch
import torch.nn.functional as F

import torch_ops
from algo_cases import ACTIVATIONS
from conftest import FLOAT_DTYPES, HAS_CUDA, assert_close_ref, rand

ALGO = "stem_direct"
CL = torch.channels_last


def _needs_cuda():
    if not HAS_CUDA:
        pytest.skip("needs a CUDA device and the CUDA build")


def _ref(x, w, b, stride, padding):
    d = lambda t: None if t is None else t.detach().to("cpu", torch.float64)  # noqa: E731
    return F.conv2d(d(x), d(w), d(b), stride, padding)


def _inputs(x):
    """NCHW, channels_last, a view inside a bigger tensor (channel, row and column offsets), a
    copy at a storage offset of one element, and a channels_last view with a padded pixel
    stride."""
    n, c, h, w_ = x.shape
    big = torch.zeros(n, c + 1, h + 2, w_ + 5, dtype=x.dtype, device=x.device)
    view = big[:, 1:, 1:h + 1, 3:w_ + 3]
    view.copy_(x)
    flat = torch.zeros(x.numel() + 1, dtype=x.dtype, device=x.device)
    off = flat[1:].view(x.shape).copy_(x)
    big_cl = torch.zeros(n, c + 2, h, w_, dtype=x.dtype, device=x.device).to(memory_format=CL)
    view_cl = big_cl[:, 2:]
    view_cl.copy_(x)
    return [x, x.to(memory_format=CL), view, off, view_cl]


# (N, C, H, W), O, K, stride, padding: every filter x stride, 1-4 input channels, planes from
# 1x1 to two tiles a row and several a column, O from 1 to 40 (chunk tails), paddings 0 to past
# K // 2 and asymmetric.
def _cases():
    out = []
    planes = [(1, 1), (5, 7), (17, 33), (40, 70), (65, 31)]
    for i, (k, s) in enumerate(itertools.product((3, 5, 7), (1, 2))):
        for j, (h, w_) in enumerate(planes):
            c = 1 + (i + j) % 4
            o = (1, 8, 16, 24, 40)[(i + 2 * j) % 5]
            pad = (k // 2, 0, k // 2 + 1, (0, k // 2), (k // 2, 1))[(i + j) % 5]
            ph, pw = pad if isinstance(pad, tuple) else (pad, pad)
            if h + 2 * ph < k or w_ + 2 * pw < k:
                pad = k // 2
            out.append(((1 + j % 2, c, h, w_), o, k, s, pad))
    return out


CASES = _cases()


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("case", range(len(CASES)))
def test_forced_parity(case, dtype):
    _needs_cuda()
    (n, c, h, w_), o, k, s, pad = CASES[case]
    g = torch.Generator().manual_seed(case)
    x = rand(n, c, h, w_, dtype=dtype, generator=g).cuda()
    w = rand(o, c, k, k, dtype=dtype, generator=g).cuda()
    b = rand(o, dtype=dtype, generator=g).cuda() if case % 2 == 0 else None
    ref = _ref(x, w, b, s, pad)
    for xx in _inputs(x):
        with torch_ops.force_algorithm("conv2d", ALGO):
            assert torch_ops.algorithm("conv2d", xx, w, b, s, pad) == ALGO
            out = torch_ops.conv2d(xx, w, b, s, pad)
        assert out.dtype == dtype
        assert_close_ref(out, ref, dtype)
        expect = F.conv2d(xx, w, None, s, pad)
        assert out.is_contiguous(memory_format=CL) == expect.is_contiguous(memory_format=CL)


@pytest.mark.cuda
def test_weight_and_bias_views():
    """A strided weight (a slice of a bigger filter bank, channels_last) and bias (every other
    element)."""
    _needs_cuda()
    g = torch.Generator().manual_seed(3)
    x = rand(2, 3, 37, 41, generator=g).cuda()
    wb = rand(40, 4, 9, 9, generator=g).cuda().to(memory_format=CL)
    w = wb[::2, 1:, 1:8, 2:9]
    b = rand(40, generator=g).cuda()[::2]
    for s in (1, 2):
        with torch_ops.force_algorithm("conv2d", ALGO):
            out = torch_ops.conv2d(x, w, b, s, 3)
        assert_close_ref(out, _ref(x, w, b, s, 3), torch.float32)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("act", list(ACTIVATIONS))
def test_fused(act, dtype):
    """conv2d_fused forced to stem_direct: every activation, with and without a bias, a residual
    in channels_last, NCHW, at a misaligned offset, or none; O = 16 (the chunk exactly, channel
    vectors) and 24 (a partial chunk)."""
    _needs_cuda()
    if not hasattr(torch.ops.gpukern, "conv2d_fused"):
        pytest.skip("torch.ops.gpukern.conv2d_fused is not built here")
    for i, (o, k, s) in enumerate([(16, 3, 2), (24, 7, 2), (16, 5, 1)]):
        g = torch.Generator().manual_seed(100 + i)
        x = (rand(2, 3, 33, 47, dtype=dtype, generator=g) * 2).cuda()
        w = rand(o, 3, k, k, dtype=dtype, generator=g).cuda()
        b = rand(o, dtype=dtype, generator=g).cuda()
        conv = _ref(x, w, b if i != 1 else None, s, k // 2)
        res = rand(*conv.shape, dtype=dtype, generator=g).cuda()
        flat = torch.zeros(res.numel() + 1, dtype=dtype, device="cuda")
        res_off = flat[1:].view(res.shape).copy_(res)
        for j, r in enumerate([res.to(memory_format=CL), res, res_off, None]):
            xx = x if j % 2 == 0 else x.to(memory_format=CL)
            want = ACTIVATIONS[act](conv + (0 if r is None else r.to("cpu", torch.float64)))
            with torch_ops.force_algorithm("conv2d", ALGO):
                out = torch_ops.conv2d_fused(xx, w, b if i != 1 else None, s, k // 2,
                                             activation=act, residual=r)
            assert out.dtype == dtype
            assert_close_ref(out, want, dtype)


@pytest.mark.cuda
def test_empty_batch():
    _needs_cuda()
    x = torch.randn(0, 3, 20, 20, device="cuda")
    w = torch.randn(16, 3, 3, 3, device="cuda")
    with torch_ops.force_algorithm("conv2d", ALGO):
        out = torch_ops.conv2d(x, w, None, 2, 1)
    assert out.shape == (0, 16, 10, 10)


def _meta(shape, o, k, dtype=torch.float32, channels_last=False):
    x = torch.empty(shape, device="meta", dtype=dtype)
    if channels_last:
        x = x.to(memory_format=CL)
    return x, torch.empty(o, shape[1], k, k, device="meta", dtype=dtype)


def _has_cuda_choice():
    """Whether this build answers the CUDA algorithm query (the CPU-only build does not)."""
    x, w = _meta((1, 4, 9, 9), 4, 3)
    return torch_ops.algorithm("conv2d", x, w[:, :1], None, 1, 1, 1, 4).startswith("depthwise")


def test_refusals():
    """Outside the kernel: 5+ input channels, grouped, not square, dilated, stride 3 or
    unequal, a 9x9 filter, more than 64 output channels."""
    if not _has_cuda_choice():
        pytest.skip("the CPU-only build has no CUDA algorithm choice")
    x, w = _meta((1, 3, 20, 20), 16, 3)
    with torch_ops.force_algorithm("conv2d", ALGO):
        assert torch_ops.algorithm("conv2d", x, w, None, 2, 1) == ALGO
        for args in [(*_meta((1, 5, 20, 20), 16, 3), None, 1, 1),
                     (torch.empty(1, 4, 20, 20, device="meta"),
                      torch.empty(16, 2, 3, 3, device="meta"), None, 1, 1, 1, 2),
                     (x, torch.empty(16, 3, 3, 5, device="meta"), None, 1, 1),
                     (x, w, None, 1, 1, 2), (x, w, None, 3, 1), (x, w, None, (1, 2), 1),
                     (*_meta((1, 3, 20, 20), 16, 9), None, 1, 4),
                     (*_meta((1, 3, 20, 20), 65, 3), None, 1, 1)]:
            with pytest.raises(RuntimeError, match="cannot run this shape"):
                torch_ops.algorithm("conv2d", *args)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("channels_last", [False, True])
def test_auto_choice(dtype, channels_last):
    """The real stems the rule gives stem_direct (MobileNetV3's 3 -> 16 3x3 stride 2); a
    single-channel image with one filter stays on the depthwise kernels."""
    if not _has_cuda_choice():
        pytest.skip("the CPU-only build has no CUDA algorithm choice")
    x, w = _meta((16, 3, 224, 224), 16, 3, dtype, channels_last)
    assert torch_ops.algorithm("conv2d", x, w, None, 2, 1) == ALGO
    x32, w32 = _meta((16, 3, 224, 224), 32, 3, dtype, channels_last)  # EfficientNet's stem
    assert torch_ops.algorithm("conv2d", x32, w32, None, 2, 1) == ALGO
    x1, w1 = _meta((1, 1, 64, 64), 1, 3, dtype)
    assert torch_ops.algorithm("conv2d", x1, w1, None, 1, 1) != ALGO
    # 3 -> 64 3x3 stride 1 (VGG's first layer): stem_direct over NCHW, igemm over channels_last
    x3, w3 = _meta((16, 3, 224, 224), 64, 3, dtype, channels_last)
    want = "igemm" if channels_last and torch.ops.gpukern._has_igemm() else ALGO
    if channels_last and torch_ops.algorithm("conv2d", x3, w3, None, 1, 1) != "igemm":
        want = ALGO  # a device without the tensor-core path
    assert torch_ops.algorithm("conv2d", x3, w3, None, 1, 1) == want
