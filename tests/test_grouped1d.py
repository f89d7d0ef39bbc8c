"""grouped_reg: conv1d with several channels per group (grouped or dense), stride 1, dilation 1.
Forced, against F.conv1d in float64: every dtype over group counts 1-16, channels per group that
are not a multiple of the kernel's 8-channel warp slices or of its 64-channel blocks, filters
of 1 to 130 taps, paddings from 0 to past K / 2, lengths shorter than a tile and several tiles;
strided views and a misaligned copy of the input; strided weights and biases; the fused
epilogue; wav2vec2's positional convolution at its real size; the automatic choice; the shapes it
refuses."""
import pytest
import torch
import torch.nn.functional as F

import torch_ops
from algo_cases import ACTIVATIONS
from conftest import FLOAT_DTYPES, HAS_CUDA, assert_close_ref, rand

ALGO = "grouped_reg"


def _needs_cuda():
    if not HAS_CUDA:
        pytest.skip("needs a CUDA device and the CUDA build")


def _ref(x, w, b, padding, groups):
    d = lambda t: None if t is None else t.detach().to("cpu", torch.float64)  # noqa: E731
    return F.conv1d(d(x), d(w), d(b), 1, padding, 1, groups)


def _inputs(x):
    """Contiguous, a view inside a bigger tensor (channel and position offsets), a copy at a
    storage offset of one element, and a (N, L, C)-strided view (channels contiguous)."""
    n, c, length = x.shape
    big = torch.zeros(n, c + 2, length + 7, dtype=x.dtype, device=x.device)
    view = big[:, 2:, 3:length + 3]
    view.copy_(x)
    flat = torch.zeros(x.numel() + 1, dtype=x.dtype, device=x.device)
    off = flat[1:].view(x.shape).copy_(x)
    nlc = x.transpose(1, 2).contiguous().transpose(1, 2)
    return [x, view, off, nlc]


# (N, C, L), O, K, groups, padding
CASES = [
    ((2, 32, 150), 48, 24, 4, 12),
    ((1, 16, 40), 16, 1, 1, 0),
    ((3, 12, 300), 20, 17, 2, 8),
    ((2, 96, 70), 96, 33, 3, (0, 16)),
    ((1, 10, 129), 130, 5, 1, 4),
    ((2, 18, 5), 18, 9, 9, 4),
    ((1, 64, 257), 64, 130, 16, 65),
    ((2, 24, 1000), 24, 7, 1, 0),
]


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("case", range(len(CASES)))
def test_forced_parity(case, dtype):
    _needs_cuda()
    (n, c, length), o, k, groups, pad = CASES[case]
    g = torch.Generator().manual_seed(case)
    x = rand(n, c, length, dtype=dtype, generator=g).cuda()
    w = rand(o, c // groups, k, dtype=dtype, generator=g).cuda()
    b = rand(o, dtype=dtype, generator=g).cuda() if case % 2 == 0 else None
    if isinstance(pad, tuple):  # asymmetric: pad the input, then no padding
        x = F.pad(x, pad)
        pad = 0
    ref = _ref(x, w, b, pad, groups)
    for xx in _inputs(x):
        with torch_ops.force_algorithm("conv1d", ALGO):
            assert torch_ops.algorithm("conv1d", xx, w, b, 1, pad, 1, groups) == ALGO
            out = torch_ops.conv1d(xx, w, b, 1, pad, 1, groups)
        assert out.dtype == dtype
        assert_close_ref(out, ref, dtype)


@pytest.mark.cuda
def test_weight_and_bias_views():
    _needs_cuda()
    g = torch.Generator().manual_seed(5)
    x = rand(2, 16, 90, generator=g).cuda()
    wb = rand(64, 6, 40, generator=g).cuda()
    w = wb[::2, 1:5, 3:35]  # [32, 4, 32], every stride non-unit but the taps'
    b = rand(64, generator=g).cuda()[1::2]
    with torch_ops.force_algorithm("conv1d", ALGO):
        out = torch_ops.conv1d(x, w, b, 1, 16, 1, 4)
    assert_close_ref(out, _ref(x, w, b, 16, 4), torch.float32)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("act", list(ACTIVATIONS))
def test_fused(act, dtype):
    """conv1d_fused forced to grouped_reg: every activation, bias or none, a residual (contiguous,
    misaligned) or none."""
    _needs_cuda()
    if not hasattr(torch.ops.gpukern, "conv1d_fused"):
        pytest.skip("torch.ops.gpukern.conv1d_fused is not built here")
    g = torch.Generator().manual_seed(11)
    x = (rand(2, 32, 150, dtype=dtype, generator=g) * 2).cuda()
    w = rand(48, 8, 24, dtype=dtype, generator=g).cuda()
    b = rand(48, dtype=dtype, generator=g).cuda()
    for i, bias in enumerate([b, None]):
        conv = _ref(x, w, bias, 12, 4)
        res = rand(*conv.shape, dtype=dtype, generator=g).cuda()
        flat = torch.zeros(res.numel() + 1, dtype=dtype, device="cuda")
        res_off = flat[1:].view(res.shape).copy_(res)
        for r in [res, res_off, None]:
            want = ACTIVATIONS[act](conv + (0 if r is None else r.to("cpu", torch.float64)))
            with torch_ops.force_algorithm("conv1d", ALGO):
                out = torch_ops.conv1d_fused(x, w, bias, 1, 12, 1, 4, activation=act,
                                             residual=r)
            assert_close_ref(out, want, dtype)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_wav2vec2_positional_conv(dtype):
    """The real layer: 4 x 768 x 199, 768 outputs, K = 128, padding 64, 16 groups, a bias; the
    automatic choice takes grouped_reg."""
    _needs_cuda()
    g = torch.Generator().manual_seed(12)
    x = rand(4, 768, 199, dtype=dtype, generator=g).cuda()
    w = (rand(768, 48, 128, generator=g) / 80).to(dtype).cuda()
    b = rand(768, dtype=dtype, generator=g).cuda()
    assert torch_ops.algorithm("conv1d", x, w, b, 1, 64, 1, 16) == ALGO
    out = torch_ops.conv1d(x, w, b, 1, 64, 1, 16)
    assert_close_ref(out, _ref(x, w, b, 64, 16), dtype)


@pytest.mark.cuda
def test_empty_batch():
    _needs_cuda()
    x = torch.randn(0, 16, 50, device="cuda")
    w = torch.randn(16, 4, 20, device="cuda")
    with torch_ops.force_algorithm("conv1d", ALGO):
        out = torch_ops.conv1d(x, w, None, 1, 10, 1, 4)
    assert out.shape == (0, 16, 51)


def test_refusals():
    """Stride 2, dilation 2, one channel a group (the row-wise kernels' shapes)."""
    x = torch.empty(1, 16, 100, device="meta")
    w = torch.empty(16, 4, 20, device="meta")
    if not torch_ops.algorithm("conv1d", x, w, None, 1, 10, 1, 4) in (ALGO, "general_ot4"):
        pytest.skip("the CPU-only build has no CUDA algorithm choice")
    with torch_ops.force_algorithm("conv1d", ALGO):
        assert torch_ops.algorithm("conv1d", x, w, None, 1, 10, 1, 4) == ALGO
        for args in [(x, w, None, 2, 10, 1, 4), (x, w, None, 1, 10, 2, 4),
                     (x, torch.empty(16, 1, 20, device="meta"), None, 1, 10, 1, 16)]:
            with pytest.raises(RuntimeError, match="cannot run this shape"):
                torch_ops.algorithm("conv1d", *args)
