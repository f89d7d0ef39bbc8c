"""gpukern::conv2d / conv2d.padding against torch.nn.functional.conv2d (float64 reference on CPU):
argument grids, tile-edge sizes, layouts and strided views, every dtype, each CUDA kernel path,
one large-index case, and every error path."""
from contextlib import nullcontext

import pytest
import torch
import torch.nn.functional as F

import torch_ops
from conftest import DEVICE_PARAMS, FLOAT_DTYPES, HAS_CUDA, assert_close_ref, rand, skip_unsupported

# torch warns that its own reference pads a copy for even kernels with 'same'; not ours to fix.
pytestmark = pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel")

ALL_DTYPES = FLOAT_DTYPES + [torch.float64]

# Tile sizes of the CUDA kernels (csrc/conv/direct/*.cuh): general 32x32, depthwise NCHW 64x64
# (the rows kernel's strips are 128 columns, segments 4 * 2^k columns: see FORCED_DW below).
GENERAL_TILE = 32
DEPTHWISE_TILE = 64


def gen(seed):
    return torch.Generator().manual_seed(seed)


def reference(x, w, b, stride, padding, dilation, groups):
    """F.conv2d in float64 on CPU, on the already rounded inputs."""
    d = lambda t: None if t is None else t.detach().to("cpu", torch.float64)  # noqa: E731
    return F.conv2d(d(x), d(w), d(b), stride, padding, dilation, groups)


def check(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    out = torch_ops.conv2d(x, w, b, stride, padding, dilation, groups)
    ref = reference(x, w, b, stride, padding, dilation, groups)
    assert out.device == x.device and out.dtype == x.dtype
    assert_close_ref(out, ref, x.dtype)
    return out


def make(n, c, h, w_, o, kh, kw, groups=1, bias=True, dtype=torch.float32, device="cpu", seed=0):
    g = gen(seed)
    x = rand(*([n] if n is not None else []), c, h, w_, dtype=dtype, device=device, generator=g)
    w = rand(o, c // groups, kh, kw, dtype=dtype, device=device, generator=g)
    b = rand(o, dtype=dtype, device=device, generator=g) if bias else None
    return x, w, b


# (N, C, H, W, O, KH, KW, stride, padding, dilation, groups, bias)
GRID = [
    (2, 3, 11, 13, 4, 3, 3, 1, 1, 1, 1, True),
    (1, 4, 17, 9, 6, 3, 5, (2, 1), (1, 2), 1, 2, False),
    (2, 4, 19, 23, 4, 3, 3, 1, 0, 2, 4, True),         # depthwise, dilation
    (1, 6, 16, 15, 12, 5, 3, 3, (2, 0), (1, 2), 3, True),
    (3, 2, 7, 7, 5, 7, 7, 1, 3, 1, 1, False),
    (1, 1, 29, 31, 1, 4, 2, 1, (1, 3), 1, 1, True),    # single channel, even kernel
    (2, 8, 12, 10, 16, 1, 1, 2, 0, 1, 4, True),        # 1x1, strided
    (1, 6, 9, 14, 6, 2, 3, (1, 3), 1, (3, 1), 6, True),  # depthwise strided
    (2, 3, 10, 12, 2, 3, 3, 1, "same", 1, 1, True),
    (1, 4, 13, 11, 4, 4, 2, 1, "same", (2, 3), 4, False),  # even kernels, dilation
    (2, 6, 8, 9, 3, 3, 2, (2, 3), "valid", 1, 3, True),
]


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("case", GRID)
@pytest.mark.parametrize("device", DEVICE_PARAMS)
def test_grid(device, dtype, case):
    skip_unsupported(device, dtype)
    n, c, h, w_, o, kh, kw, stride, padding, dilation, groups, bias = case
    x, w, b = make(n, c, h, w_, o, kh, kw, groups, bias, dtype, device, seed=GRID.index(case))
    check(x, w, b, stride, padding, dilation, groups)


@pytest.mark.parametrize("device", DEVICE_PARAMS)
def test_padding_overloads(device):
    """Single values broadcast, tuples per dim, and 'same'/'valid' through the .padding overload."""
    x, w, b = make(2, 4, 12, 14, 6, 3, 4, 2, True, device=device, seed=1)
    ops = torch.ops.gpukern
    for stride, pad, dil in [([1], [1], [1]), ([2, 1], [0, 2], [1, 2]), ([1], [2, 1], [2])]:
        out = ops.conv2d(x, w, b, stride, pad, dil, 2)
        assert_close_ref(out, reference(x, w, b, stride, pad, dil, 2))
    for pad in ["same", "valid"]:
        out = ops.conv2d.padding(x, w, b, [1], pad, [2, 1], 2)
        assert_close_ref(out, reference(x, w, b, 1, pad, (2, 1), 2))
    # Defaults of the schema: stride 1, padding 0 / 'valid', dilation 1, groups 1.
    x1, w1, _ = make(1, 3, 8, 8, 2, 3, 3, device=device, seed=2)
    assert_close_ref(ops.conv2d(x1, w1), reference(x1, w1, None, 1, 0, 1, 1))
    assert_close_ref(ops.conv2d.padding(x1, w1), reference(x1, w1, None, 1, 0, 1, 1))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("device", DEVICE_PARAMS)
def test_unbatched(device, dtype):
    skip_unsupported(device, dtype)
    x, w, b = make(None, 4, 10, 9, 6, 3, 2, 2, True, dtype, device, seed=3)
    out = check(x, w, b, (1, 2), 1, 1, 2)
    assert out.dim() == 3
    x, w, b = make(None, 3, 7, 7, 3, 3, 3, 3, False, dtype, device, seed=4)
    check(x, w, b, 1, "same", 2, 3)


@pytest.mark.parametrize("layout", ["input", "weight", "both"])
@pytest.mark.parametrize("groups", [1, 2, 6])
@pytest.mark.parametrize("device", DEVICE_PARAMS)
def test_channels_last(device, groups, layout):
    x, w, b = make(2, 6, 11, 13, 6, 3, 3, groups, True, device=device, seed=5)
    cl = torch.channels_last
    if layout in ("input", "both"):
        x = x.to(memory_format=cl)
    if layout in ("weight", "both"):
        w = w.to(memory_format=cl)
    for stride, padding in [(1, 1), (2, 0), (1, "same")]:
        out = check(x, w, b, stride, padding, 1, groups)
        expect = F.conv2d(x.cpu(), w.cpu(), b.cpu(), stride, padding, 1, groups)
        assert out.is_contiguous(memory_format=cl) == expect.is_contiguous(memory_format=cl)
        assert out.is_contiguous() == expect.is_contiguous()


@pytest.mark.parametrize("size", [1, 2, 13, GENERAL_TILE - 1, GENERAL_TILE + 1,
                                  DEPTHWISE_TILE - 1, DEPTHWISE_TILE + 1])
@pytest.mark.parametrize("device", DEVICE_PARAMS)
def test_tile_edges(device, size):
    # General kernel (groups 1) and depthwise kernel (groups == C), rows and columns at tile edges.
    x, w, b = make(1, 2, size, size + 2, 3, 3, 3, 1, True, device=device, seed=size)
    check(x, w, b, 1, 1)
    x, w, b = make(2, 3, size + 1, size, 3, 3, 3, 3, True, device=device, seed=size + 1)
    check(x, w, b, 1, "same", 1, 3)
    x, w, b = make(1, 1, size, size, 1, 2, 5, 1, False, device=device, seed=size + 2)
    check(x, w, b, 1, "same")


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("device", DEVICE_PARAMS)
def test_kernel_as_large_as_padded_input(device, dtype):
    skip_unsupported(device, dtype)
    x, w, b = make(2, 2, 9, 7, 3, 11, 9, 1, True, dtype, device, seed=6)
    out = check(x, w, b, 1, 1)
    assert out.shape[-2:] == (1, 1)
    x, w, b = make(1, 3, 6, 5, 3, 6, 5, 3, True, dtype, device, seed=7)
    check(x, w, b, 1, 0, 1, 3)
    x, w, b = make(1, 1, 4, 4, 1, 3, 3, 1, False, dtype, device, seed=8)
    check(x, w, b, 1, 0, (1, 1))
    check(x, w[..., :2, :2], b, 1, 0, 3)  # dilated span 4 == input size


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("device", DEVICE_PARAMS)
def test_strided_and_offset_views(device, dtype):
    skip_unsupported(device, dtype)
    g = gen(9)
    big = rand(3, 9, 40, 50, dtype=dtype, device=device, generator=g)
    wbig = rand(8, 6, 7, 7, dtype=dtype, device=device, generator=g)
    bbig = rand(16, dtype=dtype, device=device, generator=g)
    x = big[1:, 1:7, 3:30, 5:49:2]          # sliced in every dim, column stride 2
    w = wbig[:6, 1:4, 1:4, 2:5]             # non-contiguous weight
    b = bbig[::2][:6]                       # strided bias
    check(x, w, b, 1, 1, 1, 2)
    check(x, w[:, :1], b, 1, "same", 1, 6)  # depthwise, strided weight view
    # Rows of 40 elements (a whole number of 16-byte vectors for every dtype): offset 0 takes the
    # vectorised loads, storage offsets 1 and 3 break the alignment and must fall back to scalar.
    for off in [0, 1, 3]:
        flat = rand(2 * 4 * 21 * 40 + off, dtype=dtype, device=device, generator=g)
        x = flat[off:].view(2, 4, 21, 40)
        wd = rand(4, 1, 3, 3, dtype=dtype, device=device, generator=g)
        check(x, wd, None, 1, 1, 1, 4)
        check(x, wd, b[:4], 1, "same", 2, 4)
        xt = x.transpose(2, 3)               # rows with element stride != 1
        check(xt, wd, None, 1, 1, 1, 4)
        check(x[..., :37], wd, None, 1, (0, 3), 1, 4)  # row tail inside a vector


@pytest.mark.parametrize("device", DEVICE_PARAMS)
def test_empty(device):
    x, w, b = make(0, 4, 8, 8, 2, 3, 3, 1, True, device=device)
    out = torch_ops.conv2d(x, w, b, padding=1)
    assert out.shape == (0, 2, 8, 8)
    x, w, b = make(0, 4, 8, 8, 4, 3, 3, 4, True, device=device)
    out = torch_ops.conv2d(x.to(memory_format=torch.channels_last), w, b, padding="same",
                           groups=4)
    assert out.shape == (0, 4, 8, 8)


# --------------------------------------------------------------------------------------------
# Each CUDA kernel path (the rules of csrc/conv/dispatch_2d.cu); the shapes also run on CPU, kept small.
# --------------------------------------------------------------------------------------------
PATHS = {
    # square 3/5/7, dilation 1: rows 16 bytes apart take the TMA kernel (dw_nchw_k7 here; sm_90),
    # other widths with column padding <= 4 the rows kernel (depthwise_rows); the 64x64-tile
    # kernel's register-filter instances run these only when forced (test_cuda_forced_paths)
    "dw_nchw_k3": dict(shape=(2, 5, 67, 70), k=(3, 3), groups=5, padding="same"),
    "dw_nchw_k5": dict(shape=(1, 3, 30, 129), k=(5, 5), groups=3, padding=2),
    "dw_nchw_k7": dict(shape=(1, 2, 65, 64), k=(7, 7), groups=2, padding=(3, 1)),
    # single-channel image (groups == C == 1) through the same kernel
    "single_k7": dict(shape=(2, 1, 70, 131), k=(7, 7), groups=1, padding="same"),
    # depthwise NCHW, runtime filter with row dilation: taps from shared memory
    "dw_nchw_rt": dict(shape=(1, 4, 41, 77), k=(4, 6), groups=4, padding=(1, 5),
                       dilation=(2, 1)),
    # depthwise NCHW, runtime filter in register chunks of 8 rows (row dilation 1): one full
    # chunk + remainder, only a remainder, only full chunks, with column dilation
    "single_k15": dict(shape=(1, 1, 80, 90), k=(15, 15), groups=1, padding="same"),
    "dw_nchw_chunk_rem": dict(shape=(2, 3, 37, 66), k=(4, 6), groups=3, padding=(2, 3),
                              dilation=(1, 2)),
    "dw_nchw_chunk_full": dict(shape=(1, 2, 70, 65), k=(16, 3), groups=2, padding=(7, 1)),
    "dw_nchw_k9": dict(shape=(1, 2, 67, 129), k=(9, 9), groups=2, padding="same"),
    # depthwise NHWC (channels_last), strided and dilated
    "dw_nhwc": dict(shape=(2, 40, 19, 23), k=(3, 3), groups=40, padding=1, stride=(2, 1),
                    channels_last=True),
    "dw_nhwc_same": dict(shape=(1, 33, 14, 15), k=(5, 4), groups=33, padding="same",
                         dilation=2, channels_last=True),
    # general staged, and staged in several filter-row chunks (KW * rows > kMaxTaps)
    "general": dict(shape=(2, 6, 35, 33), k=(3, 3), groups=2, padding=1, out=4),
    "general_chunks": dict(shape=(1, 2, 60, 56), k=(50, 45), groups=1, padding=1, out=2),
    # general direct (region of one filter row does not fit: big stride / dilation), and the
    # depthwise tile too big for shared memory
    "general_direct": dict(shape=(1, 2, 50, 61), k=(3, 2), groups=1, padding=2, stride=9,
                           out=3),
    "dw_too_big": dict(shape=(1, 2, 40, 400), k=(3, 31), groups=2, padding=0,
                       dilation=(1, 12)),
}


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("device", DEVICE_PARAMS)
def test_kernel_paths(device, path, dtype):
    spec = PATHS[path]
    n, c, h, w_ = spec["shape"]
    groups = spec["groups"]
    o = spec.get("out", c)
    x, w, b = make(n, c, h, w_, o, *spec["k"], groups, True, dtype, device, seed=len(path))
    if spec.get("channels_last"):
        x = x.to(memory_format=torch.channels_last)
    out = check(x, w, b, spec.get("stride", 1), spec["padding"], spec.get("dilation", 1), groups)
    if spec.get("channels_last"):
        assert out.is_contiguous(memory_format=torch.channels_last)


@pytest.mark.cuda
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device and the CUDA build of gpukern")
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_cuda_perf_shapes(dtype):
    """The PERF.md shapes (smaller batch), against cuDNN/ATen in float64 on the GPU."""
    g = torch.Generator(device="cuda").manual_seed(10)
    cases = [((1, 1, 2048, 2048), 3, 1), ((1, 1, 1024, 1024), 15, 1), ((4, 256, 56, 56), 3, 256),
             ((2, 384, 64, 64), 13, 384), ((1, 384, 64, 64), 31, 384)]
    for shape, k, groups in cases:
        x = torch.randn(shape, device="cuda", generator=g).to(dtype)
        w = torch.randn(shape[1], shape[1] // groups, k, k, device="cuda", generator=g).to(dtype)
        for xx in (x, x.to(memory_format=torch.channels_last)):
            out = torch_ops.conv2d(xx, w, None, 1, "same", 1, groups)
            ref = F.conv2d(xx.double(), w.double(), None, 1, "same", 1, groups)
            assert_close_ref(out, ref, dtype)


@pytest.mark.large_index
@pytest.mark.cuda
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device and the CUDA build of gpukern")
@pytest.mark.parametrize("side", [46341, 46344])
def test_cuda_large_index(side):
    """More than 2^31 elements in one plane (side^2 > 2^31): int64 offsets. Checks the first and
    last rows. 46341: odd rows, the rows kernel; 46344: 16-byte rows, the TMA kernel."""
    g = torch.Generator(device="cuda").manual_seed(11)
    x = torch.randn(1, 1, side, side, device="cuda", dtype=torch.float16, generator=g)
    w = torch.randn(1, 1, 3, 3, device="cuda", dtype=torch.float16, generator=g)
    expect = "depthwise_tma" if side % 8 == 0 and _tma_device() else "depthwise_rows"
    assert torch_ops.algorithm("conv2d", x, w, None, 1, "same") == expect
    out = torch_ops.conv2d(x, w, None, 1, "same")
    assert out.shape == x.shape
    tail = F.pad(x[..., -5:, :].double().cpu(), (0, 0, 0, 1))  # the bottom zero row
    ref = F.conv2d(tail, w.double().cpu(), None, 1, (0, 1))
    assert_close_ref(out[..., -4:, :], ref, torch.float16)
    head = F.pad(x[..., :5, :].double().cpu(), (0, 0, 1, 0))
    assert_close_ref(out[..., :4, :], F.conv2d(head, w.double().cpu(), None, 1, (0, 1)),
                     torch.float16)
    del x, out
    torch.cuda.empty_cache()


@pytest.mark.cuda
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device and the CUDA build of gpukern")
def test_cuda_many_planes():
    """N*O above 65535 (grid-stride over planes) for the general and depthwise kernels."""
    g = torch.Generator(device="cuda").manual_seed(12)
    x = torch.randn(70000, 1, 5, 6, device="cuda", generator=g)
    w = torch.randn(1, 1, 3, 3, device="cuda", generator=g)
    assert_close_ref(torch_ops.conv2d(x, w, None, 1, 1),
                     F.conv2d(x.double(), w.double(), None, 1, 1))
    w2 = torch.randn(2, 1, 2, 2, device="cuda", generator=g)
    assert_close_ref(torch_ops.conv2d(x, w2, None, 2, 1),
                     F.conv2d(x.double(), w2.double(), None, 2, 1))
    xs = torch.randn(35000, 2, 3, 4, device="cuda", generator=g).to(memory_format=torch.channels_last)
    w3 = torch.randn(2, 1, 3, 3, device="cuda", generator=g)
    assert_close_ref(torch_ops.conv2d(xs, w3, None, 1, 1, 1, 2),
                     F.conv2d(xs.double(), w3.double(), None, 1, 1, 1, 2))


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("device", DEVICE_PARAMS)
def test_errors(device):
    x, w, b = make(1, 4, 8, 8, 4, 3, 3, 1, True, device=device)
    conv = torch_ops.conv2d
    with pytest.raises(RuntimeError, match="gpukern::conv2d: expected input and weight of the same dtype"):
        conv(x, w.half())
    with pytest.raises(RuntimeError, match="expected input and bias of the same dtype"):
        conv(x, w, b.half())
    with pytest.raises(RuntimeError, match="expected input with 3 or 4 dimensions"):
        conv(x[0, 0], w)
    with pytest.raises(RuntimeError, match="expected input with 3 or 4 dimensions"):
        conv(x[None], w)
    with pytest.raises(RuntimeError, match="expected weight with 4 dimensions"):
        conv(x, w[0])
    with pytest.raises(RuntimeError, match="groups=3 must divide the input channels"):
        conv(x, w[:3, :1], None, groups=3)
    with pytest.raises(RuntimeError, match="must divide the output channels"):
        conv(x, w[:3, :2], None, groups=2)
    with pytest.raises(RuntimeError, match="expected weight.size\\(1\\) \\* groups"):
        conv(x, w[:, :2], None, groups=1)
    with pytest.raises(RuntimeError, match="groups must be positive"):
        conv(x, w, None, groups=0)
    with pytest.raises(RuntimeError, match="padding must be non-negative"):
        conv(x, w, None, 1, (1, -1))
    with pytest.raises(RuntimeError, match="stride must be positive"):
        conv(x, w, None, (1, 0))
    with pytest.raises(RuntimeError, match="dilation must be positive"):
        conv(x, w, None, 1, 0, 0)
    with pytest.raises(RuntimeError, match="stride must have 1 or 2 values"):
        conv(x, w, None, (1, 1, 1))
    with pytest.raises(RuntimeError, match="is larger than the padded input size"):
        conv(x[..., :2, :], w)
    with pytest.raises(RuntimeError, match="is larger than the padded input size"):
        conv(x, w, None, 1, 0, 4)
    with pytest.raises(RuntimeError, match="padding='same' is not supported for strided"):
        conv(x, w, None, 2, "same")
    with pytest.raises(RuntimeError, match="padding must be 'same' or 'valid', got 'full'"):
        torch.ops.gpukern.conv2d.padding(x, w, None, [1], "full", [1], 1)
    with pytest.raises(RuntimeError, match="expected bias of shape \\[4\\]"):
        conv(x, w, b[:3])
    with pytest.raises(RuntimeError, match="expected bias of shape \\[4\\]"):
        conv(x, w, b[None])
    with pytest.raises(RuntimeError, match="kernel size must be positive"):
        conv(x, w[..., :0])
    with pytest.raises(RuntimeError, match="gpukern::conv2d: input has dtype"):
        conv(x.int(), w.int())


@pytest.mark.cuda
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device and the CUDA build of gpukern")
def test_errors_cuda():
    x, w, b = make(1, 4, 8, 8, 4, 3, 3, 1, True, device="cuda")
    with pytest.raises(RuntimeError, match="expected input and weight on the same device"):
        torch_ops.conv2d(x, w.cpu())
    with pytest.raises(RuntimeError, match="expected input and bias on the same device"):
        torch_ops.conv2d(x, w, b.cpu())
    with pytest.raises(RuntimeError, match="float64 runs on CPU only"):
        torch_ops.conv2d(x.double(), w.double())


@pytest.mark.parametrize("device", DEVICE_PARAMS)
def test_opcheck(device):
    x, w, b = make(2, 4, 13, 11, 4, 3, 3, 4, True, device=device, seed=13)
    ops = torch.ops.gpukern
    cl = torch.channels_last
    cases = [
        (ops.conv2d.default, (x, w, b, [1, 2], [1, 0], [1, 1], 4)),
        (ops.conv2d.default, (x, w.to(memory_format=cl), None, [1], [1], [1], 4)),
        (ops.conv2d.padding, (x.to(memory_format=cl), w, None, [1, 1], "same", [1, 1], 4)),
        (ops.conv2d.padding, (x[0], w, b, [1], "same", [2, 1], 4)),
        (ops.conv2d.default, (x[:0], w, b, [1], [1], [1], 4)),
    ]
    for op, args in cases:
        torch.library.opcheck(op, args)


# --------------------------------------------------------------------------------------------
# Algorithm choice (the rules of csrc/conv/dispatch_2d.cu): the query op, forcing, and each path on its
# own over edge shapes.
# --------------------------------------------------------------------------------------------
ALGOS = ["depthwise_nhwc", "depthwise_rows", "depthwise_tma", "depthwise_plane", "depthwise_large",
         "depthwise_nchw", "depthwise_nhwc_tile", "depthwise_strided", "depthwise_nhwc_reg",
         "depthwise_small",
         "general_staged", "general_direct"]


def _meta(shape, k, groups, o=None, channels_last=False, dtype=torch.float32):
    x = torch.empty(shape, device="meta", dtype=dtype)
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
    w = torch.empty(o or shape[1], shape[1] // groups, *k, device="meta", dtype=dtype)
    return x, w


def _tma_device():
    """Whether the TMA kernel may run: sm_90+, or no GPU visible (the query assumes sm_90)."""
    return not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] >= 9


def _cuda_choice_built():
    x, w = _meta((1, 1, 8, 8), (3, 3), 1)
    return not torch_ops.algorithm("conv2d", x, w, None, 1, 1).startswith("cpu")


def test_algorithm_query_auto():
    x, w = _meta((1, 1, 8, 8), (3, 3), 1)
    if not _cuda_choice_built():
        assert torch_ops.algorithm("conv2d", x, w, None, 1, 1) == "cpu (built without CUDA kernels)"
        return
    q = lambda *a, **k: torch_ops.algorithm("conv2d", *a, **k)  # noqa: E731
    # rows 16-byte aligned (W * element size % 16 == 0), square 3/5/7, stride 1, dilation 1: the
    # TMA kernel (sm_90+; the query without a GPU answers for sm_90)
    tma = "depthwise_tma" if _tma_device() else "depthwise_rows"
    assert q(*_meta((1, 1, 8192, 8192), (3, 3), 1), None, 1, "same") == tma
    # small planes whole in shared memory (W % 4 == 0, W <= 128, <= 16 KB, not a whole number of
    # 64x64 tiles), 3x3 'same', sm_90+: the plane kernel; other padding, 5x5, bigger planes: TMA
    plane = "depthwise_plane" if _tma_device() else "depthwise_rows"
    assert q(*_meta((32, 256, 56, 56), (3, 3), 256), None, 1, "same", 1, 256) == plane
    assert q(*_meta((32, 256, 56, 56), (3, 3), 256, dtype=torch.bfloat16), None, 1, "same", 1,
             256) == plane
    assert q(*_meta((32, 256, 28, 28), (3, 3), 256), None, 1, "same", 1, 256) == plane
    assert q(*_meta((32, 256, 56, 56), (3, 3), 256), None, 1, (1, 2), 1, 256) == tma
    assert q(*_meta((32, 256, 56, 56), (5, 5), 256), None, 1, "same", 1, 256) == tma
    assert q(*_meta((8, 32, 64, 72), (3, 3), 32), None, 1, "same", 1, 32) == tma  # 18 KB
    # planes the TMA kernel's 64x64 tiles cover exactly stay on it (measured faster in 16-bit)
    assert q(*_meta((8, 384, 64, 64), (3, 3), 384, dtype=torch.bfloat16), None, 1, "same", 1,
             384) == tma
    assert q(*_meta((8, 32, 64, 72), (3, 3), 32, dtype=torch.bfloat16), None, 1, "same", 1,
             32) == plane
    assert q(*_meta((8, 384, 64, 64), (7, 7), 384), None, 1, "same", 1, 384) == (
        "depthwise_tma" if _tma_device() else "depthwise_nchw")
    assert q(*_meta((1, 1, 8192, 8192), (5, 5), 1), None, 1, (5, 0)) == tma  # any padding
    # rows not 16-byte aligned: the rows kernel (3x3, 5x5), the tile kernel (7x7: depthwise_nchw
    # measured faster than the rows kernel's 7x7 instance)
    assert q(*_meta((1, 1, 8190, 8190), (3, 3), 1), None, 1, "same") == "depthwise_rows"
    assert q(*_meta((32, 256, 60, 60), (5, 5), 256, dtype=torch.bfloat16), None, 1, "same", 1,
             256) == "depthwise_rows"
    assert q(*_meta((8, 384, 66, 66), (7, 7), 384), None, 1, "same", 1, 384) == "depthwise_nchw"
    assert q(*_meta((1, 1, 8190, 8190), (7, 7), 1), None, 1, "same") == "depthwise_nchw"
    for dt in (torch.float32, torch.bfloat16):
        # channels_last, square 3/5/7, stride 1 or 2: the register-tile kernel
        assert q(*_meta((32, 256, 56, 56), (3, 3), 256, channels_last=True, dtype=dt), None, 1,
                 "same", 1, 256) == "depthwise_nhwc_reg"
        assert q(*_meta((32, 256, 56, 56), (3, 3), 256, channels_last=True, dtype=dt), None, 2,
                 1, 1, 256) == "depthwise_nhwc_reg"
        assert q(*_meta((16, 96, 56, 56), (7, 7), 96, channels_last=True, dtype=dt), None, 1,
                 3, 1, 96) == "depthwise_nhwc_reg"
        # dilated: the runtime-filter nhwc kernel
        assert q(*_meta((32, 256, 56, 56), (3, 3), 256, channels_last=True, dtype=dt), None, 1,
                 2, 2, 256) == "depthwise_nhwc"
    # NCHW stride 2 (square 3/5/7, output rows up to 256 columns), and stride 1 on small planes
    # the plane / TMA kernels do not take: depthwise_small; wider stride-2 outputs: the column
    # tiles of depthwise_strided
    assert q(*_meta((16, 64, 112, 112), (3, 3), 64), None, 2, 1, 1, 64) == "depthwise_small"
    assert q(*_meta((16, 200, 14, 14), (3, 3), 200), None, 1, 1, 1, 200) == "depthwise_small"
    assert q(*_meta((16, 960, 7, 7), (5, 5), 960), None, 1, 2, 1, 960) == "depthwise_small"
    assert q(*_meta((2, 8, 512, 512), (3, 3), 8), None, 2, 1, 1, 8) == "depthwise_small"
    assert q(*_meta((2, 8, 514, 514), (3, 3), 8), None, 2, 1, 1, 8) == "depthwise_strided"
    assert q(*_meta((1, 1, 8190, 8190), (3, 3), 1), None, 2, 1) == "depthwise_strided"
    # channels_last with more taps than the nhwc kernel stages (> 96): the NCHW-order kernels
    assert q(*_meta((2, 16, 40, 40), (13, 13), 16, channels_last=True), None, 1, "same", 1,
             16) == "depthwise_large"
    # filters beyond 7x7 (>= 50 taps), stride 1, dilation 1: the large-filter kernel
    assert q(*_meta((8, 384, 64, 64), (13, 13), 384), None, 1, "same", 1, 384) == "depthwise_large"
    assert q(*_meta((1, 1, 8192, 8192), (15, 15), 1), None, 1, "same") == "depthwise_large"
    assert q(*_meta((8, 384, 64, 64), (31, 31), 384), None, 1, "same", 1, 384) == "depthwise_large"
    assert q(*_meta((2, 8, 64, 64), (5, 10), 8), None, 1, "same", 1, 8) == "depthwise_large"
    assert q(*_meta((2, 8, 64, 64), (5, 9), 8), None, 1, "same", 1, 8) == "depthwise_nchw"
    assert q(*_meta((8, 384, 64, 64), (13, 13), 384, dtype=torch.bfloat16), None, 1, "same", 1,
             384) == "depthwise_nchw"  # 16-bit: the tile kernel measured faster
    assert q(*_meta((8, 384, 64, 64), (13, 13), 384), None, 1, "same", 2, 384) == "depthwise_nchw"
    assert q(*_meta((1, 1, 64, 64), (3, 3), 1), None, 1, 0, 2) == "depthwise_nchw"  # dilated
    assert q(*_meta((1, 1, 64, 64), (3, 3), 1), None, 1, (1, 5)) == (  # pad > 4
        "depthwise_tma" if _tma_device() else "depthwise_nchw")
    assert q(*_meta((1, 1, 64, 62), (3, 3), 1), None, 1, (1, 5)) == "depthwise_nchw"
    assert q(*_meta((2, 8, 9, 9), (3, 3), 8, channels_last=True), None, 1, 1, 1,
             8) == "depthwise_nhwc_reg"  # small plane
    assert q(*_meta((2, 8, 9, 9), (3, 2), 8, channels_last=True), None, 1, 1, 1,
             8) == "depthwise_nhwc"  # not square
    assert q(*_meta((2, 4, 9, 9), (3, 3), 1, o=6), None, 1, 1) == "stem_direct"  # C <= 4
    assert q(*_meta((2, 5, 9, 9), (3, 3), 1, o=6), None, 1, 1) == "general_staged"
    assert q(*_meta((1, 2, 50, 61), (3, 2), 1, o=3), None, 9, 2) == "general_direct"
    x0 = torch.empty(0, 1, 8, 8, device="meta")
    assert q(x0, torch.empty(1, 1, 3, 3, device="meta"), None, 1, 1) == "empty"


def test_algorithm_forcing_errors():
    if not _cuda_choice_built():
        pytest.skip("the CPU-only build has no CUDA algorithm choice")
    x, w = _meta((1, 4, 9, 9), (3, 3), 1, o=4)
    for name in ALGOS:
        with torch_ops.force_algorithm("conv2d", name):
            if name.startswith("depthwise"):
                with pytest.raises(RuntimeError, match=f"forced algorithm '{name}' cannot run"):
                    torch_ops.algorithm("conv2d", x, w, None, 1, 1)
            else:
                assert torch_ops.algorithm("conv2d", x, w, None, 1, 1) == name
    with torch_ops.force_algorithm("conv2d", "nope"):
        with pytest.raises(RuntimeError, match="forced algorithm 'nope' is not one of: "
                                               "depthwise_nhwc, depthwise_rows"):
            torch_ops.algorithm("conv2d", x, w, None, 1, 1)
    xd, wd = _meta((1, 4, 9, 9), (3, 3), 4)
    with torch_ops.force_algorithm("conv2d", "depthwise_rows"):
        for args in [(2, 1, 1), (1, 1, 2), (1, 5, 1)]:  # stride; dilation; padding beyond the halo
            with pytest.raises(RuntimeError, match="cannot run this shape"):
                torch_ops.algorithm("conv2d", xd, wd, None, args[0], args[1], args[2], 4)
        w5 = torch.empty(4, 1, 3, 5, device="meta")
        with pytest.raises(RuntimeError, match="cannot run this shape"):  # not square
            torch_ops.algorithm("conv2d", xd, w5, None, 1, 1, 1, 4)
    # Small NCHW planes (output <= 16x16) the plane / TMA kernels leave take depthwise_small.
    assert torch_ops.algorithm("conv2d", xd, wd, None, 1, 1, 1, 4) == "depthwise_small"
    w11 = torch.empty(4, 1, 11, 9, device="meta")  # 99 taps > NhwcTraits::kMaxTaps
    with torch_ops.force_algorithm("conv2d", "depthwise_nhwc"):
        with pytest.raises(RuntimeError, match="cannot run this shape"):
            torch_ops.algorithm("conv2d", xd, w11, None, 1, "same", 1, 4)


# Depthwise / single-channel shapes every depthwise path can run (stride 1, dilation 1, 'same'
# or padding within the rows kernel's halo): sizes 1, primes, around the rows kernel's segment
# widths (4 * 2^k columns) and strip (128), and the tile kernel's 64.
FORCED_DW = [
    ((1, 1, 1, 1), 3, "same"),
    ((2, 3, 5, 4), 3, "same"),
    ((1, 2, 7, 5), 5, "same"),
    ((3, 5, 13, 9), 3, (0, 1)),
    ((1, 3, 17, 63), 7, "same"),
    ((2, 2, 65, 127), 3, "same"),
    ((1, 1, 31, 129), 5, (2, 0)),
    ((1, 1, 70, 131), 7, (3, 4)),
    ((1, 2, 130, 257), 3, (1, 1)),
    ((33, 3, 6, 7), 3, "same"),    # many narrow planes, several per warp
]
FORCED_OTHER = {  # forced path -> extra shapes (N, C, H, W), O, (KH, KW), groups, stride, pad, dil
    "depthwise_nhwc": [((2, 5, 9, 11), 5, (3, 2), 5, (2, 1), 1, (1, 2))],
    "depthwise_nchw": [((1, 3, 40, 70), 3, (4, 6), 3, 1, (1, 5), (2, 1))],
    # large filters: full and partial 4 x 4 tap chunks (13 = 3 * 4 + 1, 9 = 2 * 4 + 1,
    # 31 = 7 * 4 + 3, 10 = 2 * 4 + 2, 8 and 12 exact), tile edges (65 rows, 130 columns),
    # padding up to the filter and beyond it, several planes
    "depthwise_large": [((1, 2, 70, 75), 2, (13, 9), 2, 1, (6, 4), 1),
                        ((2, 3, 40, 33), 3, (31, 31), 3, 1, 15, 1),
                        ((1, 1, 65, 130), 1, (8, 12), 1, 1, (0, 11), 1),
                        ((3, 2, 20, 17), 2, (10, 6), 2, 1, (12, 7), 1)],
    "general_staged": [((2, 4, 33, 31), 6, (3, 3), 2, (1, 2), 1, 1)],
    "general_direct": [((1, 2, 20, 25), 4, (3, 2), 1, 3, 2, (1, 2))],
}


# The TMA kernel (16-byte aligned rows only) over shapes with W * element size % 16 == 0: narrow
# (one 64-column tile) and wide planes, tile edges (64 rows, 128 columns), any padding (beyond
# the filter too), several tiles per block (ring slots reused).
TMA_DW = [
    ((2, 3, 37, 64), 3, "same"),
    ((1, 2, 70, 136), 5, (1, 3)),
    ((3, 2, 65, 8), 7, "same"),
    ((1, 1, 130, 264), 7, (0, 6)),
    ((2, 2, 64, 128), 3, (9, 2)),
    ((1, 1, 1, 16), 5, "same"),
    ((40, 24, 24, 16), 3, "same"),
]


def _tma_layout(x):
    """Whether the TMA kernel can read x: unit column stride and 16-byte multiples for the
    strides of dims longer than one (the data pointer may be misaligned)."""
    e = x.element_size()
    if x.shape[-1] > 1 and x.stride(-1) != 1:
        return False
    return all(x.shape[d] == 1 or (x.stride(d) * e) % 16 == 0 for d in range(3))


def _pitched_view(x, col0=3):
    """x inside a bigger NaN-filled tensor: rows 8 elements longer (16-byte multiples when W is)
    and a data pointer col0 elements past a 16-byte boundary (3: the TMA kernel's map starts
    before it; 4 in fp32: aligned, read in place). The map's bounds, not the memory's, must zero
    the halo."""
    n, c, h, w_ = x.shape
    big = torch.full((n, c + 1, h + 2, w_ + 8), float("nan"), dtype=x.dtype, device=x.device)
    view = big[:, 1:, 1:h + 1, col0:w_ + col0]
    view.copy_(x)
    return view


# The plane kernel (3x3 'same', W a multiple of 4 up to 128, a plane of at most 16 KB): one band
# of lanes (W = 128) and many (W = 4: 32 bands), bands past the image's last row (37, 9 and 7
# rows), fp32 planes of exactly 16 KB, an odd number of planes; 5x5 is refused. 16-bit
# planes whose rows are an odd number of 16-byte units (W = 8, 24, 56, 120) take its
# tensor-core path: one 8-column block (W = 8), 16-row bands cut by the last row (70, 40, 17).
PLANE_DW = [
    ((2, 3, 37, 64), 3, "same"),
    ((3, 5, 56, 56), 3, "same"),
    ((3, 2, 70, 8), 3, "same"),
    ((2, 3, 40, 24), 3, "same"),
    ((1, 2, 17, 120), 3, "same"),
    ((2, 3, 28, 28), 3, "same"),
    ((1, 3, 64, 64), 3, "same"),
    ((2, 2, 9, 128), 3, "same"),
    ((1, 2, 1, 4), 3, "same"),
    ((5, 3, 7, 12), 3, "same"),
    ((2, 2, 100, 20), 3, "same"),
    ((1, 3, 28, 28), 5, "same"),
]


def _small_ok(x, k, padding):
    """Whether depthwise_small runs this stride-1 input: output rows of at most 256 columns (the
    shared budget holds every FORCED_DW shape)."""
    pw = k // 2 if padding == "same" else (padding[1] if isinstance(padding, tuple) else padding)
    return x.shape[-1] + 2 * pw - k + 1 <= 256


def _plane_ok(x, k, padding):
    """Whether the plane kernel runs this input (sm_90+): see PLANE_DW."""
    h, w_ = x.shape[-2:]
    return (padding == "same" and k == 3 and w_ % 4 == 0 and w_ <= 128 and
            h * w_ * x.element_size() <= 16384 and _tma_device())


def _misaligned(x):
    """x with contiguous rows and planes, every plane starting one element past a 16-byte
    boundary (the plane kernel stages such planes element by element)."""
    flat = torch.empty(x.numel() + 1, dtype=x.dtype, device=x.device)
    view = flat[1:].view(x.shape)
    view.copy_(x)
    return view


def _layouts(x):
    """The input as given, channels_last, and a strided view with a storage offset that breaks
    16-byte alignment (sliced from a bigger tensor)."""
    n, c, h, w_ = x.shape
    big = torch.zeros(n, c + 1, h + 2, w_ + 5, dtype=x.dtype, device=x.device)
    view = big[:, 1:, 1:h + 1, 3:w_ + 3]
    view.copy_(x)
    return [x, x.to(memory_format=torch.channels_last), view]


@pytest.mark.cuda
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device and the CUDA build of gpukern")
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("algo", ALGOS)
def test_cuda_forced_paths(algo, dtype):
    """Each CUDA path on its own (forced), over edge shapes, layouts and strided views."""
    extra = {"depthwise_tma": TMA_DW, "depthwise_plane": PLANE_DW}.get(algo, [])
    for i, (shape, k, padding) in enumerate(FORCED_DW + extra):
        n, c, h, w_ = shape
        x, w, b = make(n, c, h, w_, c, k, k, c, i % 2 == 0, dtype, "cuda", seed=100 + i)
        more = {"depthwise_tma": [_pitched_view(x)],
                "depthwise_plane": [_pitched_view(x), _misaligned(x)]}.get(algo, [])
        for xx in _layouts(x) + more:
            with torch_ops.force_algorithm("conv2d", algo):
                runs = {"depthwise_tma": lambda: _tma_layout(xx),
                        "depthwise_plane": lambda: _plane_ok(xx, k, padding),
                        "depthwise_small": lambda: _small_ok(xx, k, padding)}.get(algo)
                if runs is not None and not runs():
                    with pytest.raises(RuntimeError, match=f"forced algorithm '{algo}' "
                                                           "cannot run this shape"):
                        torch_ops.conv2d(xx, w, b, 1, padding, 1, c)
                    continue
                check(xx, w, b, 1, padding, 1, c)
    for i, (shape, o, k, groups, stride, padding, dil) in enumerate(FORCED_OTHER.get(algo, [])):
        n, c, h, w_ = shape
        x, w, b = make(n, c, h, w_, o, *k, groups, True, dtype, "cuda", seed=200 + i)
        for xx in _layouts(x):
            with torch_ops.force_algorithm("conv2d", algo):
                check(xx, w, b, stride, padding, dil, groups)


@pytest.mark.cuda
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device and the CUDA build of gpukern")
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_cuda_tma_many_tiles(dtype):
    """The TMA kernel's own choice on the benchmark-like shapes: thousands of tiles, so every
    3x3 / 5x5 block cycles its ring slots many times (barrier phases and the slots' arrival
    counters wrap), planes change between a block's tiles (taps fetched a plane ahead), narrow
    and wide instances, 3/5/7 (the 7x7 shapes here run one block a tile; the next test runs
    7x7 persistent blocks too). 2 x 3 x 2100 x 2048: 528 tiles a plane, more than the grid, so
    a block's next tile is now on the same plane, now on the next one; its bottom tiles end 4
    rows into a thread's 8 (the checked stores). 64 x 1 x 1024 x 1024 3x3 and 40 x 1 x 1024 x
    1024 5x5 give a block 16+ tiles: blocks claim them from a counter that the launch's last
    block puts back to zero, so every shape is run twice and the second output must equal the
    first."""
    if not _tma_device():
        pytest.skip("the TMA kernel needs sm_90+")
    g = torch.Generator(device="cuda").manual_seed(22)
    for shape, k in [((64, 1, 1024, 1024), 3), ((16, 1, 1024, 1024), 5), ((8, 1, 1024, 1024), 7),
                     ((8, 64, 136, 64), 3), ((8, 384, 64, 64), 7), ((16, 64, 40, 120), 5),
                     ((2, 3, 2100, 2048), 5), ((40, 1, 1024, 1024), 5)]:
        x = torch.randn(shape, device="cuda", generator=g).to(dtype)
        w = torch.randn(shape[1], 1, k, k, device="cuda", generator=g).to(dtype)
        b = torch.randn(shape[1], device="cuda", generator=g).to(dtype)
        assert torch_ops.algorithm("conv2d", x, w, b, 1, "same", 1, shape[1]) == "depthwise_tma"
        out = torch_ops.conv2d(x, w, b, 1, "same", 1, shape[1])
        assert_close_ref(out, F.conv2d(x.double(), w.double(), b.double(), 1, "same", 1,
                                       shape[1]), dtype)
        assert torch.equal(torch_ops.conv2d(x, w, b, 1, "same", 1, shape[1]), out)


@pytest.mark.cuda
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device and the CUDA build of gpukern")
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_cuda_tma_7x7_persistent_and_tile_a_block(dtype):
    """7x7 on the TMA kernel both ways it launches (TmaTraits::tile_a_block): a few tiles a block
    (8 x 384 x 64 x 64: one block a tile, one ring slot) and 16+ tiles a block (persistent blocks
    cycling two slots, planes changing between a block's tiles). The second shape has 16 x 8
    planes an SM: no block count the launch can choose (at most 8 an SM) brings it under 16 tiles
    a block."""
    if not _tma_device():
        pytest.skip("the TMA kernel needs sm_90+")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    g = torch.Generator(device="cuda").manual_seed(7)
    for shape in [(8, 384, 64, 64), (1, 16 * 8 * sms + 5, 64, 64)]:
        x = torch.randn(shape, device="cuda", generator=g).to(dtype)
        w = torch.randn(shape[1], 1, 7, 7, device="cuda", generator=g).to(dtype)
        b = torch.randn(shape[1], device="cuda", generator=g).to(dtype)
        assert torch_ops.algorithm("conv2d", x, w, b, 1, "same", 1, shape[1]) == "depthwise_tma"
        out = torch_ops.conv2d(x, w, b, 1, "same", 1, shape[1])
        assert_close_ref(out, F.conv2d(x.double(), w.double(), b.double(), 1, "same", 1,
                                       shape[1]), dtype)
        del x, w, b, out


# The large-filter kernel's TMA staging (fp32, W a multiple of 4, 16-byte aligned x): the box
# starts -pad_w mod 4 = 0, 1, 2, 3 columns before the window (compile-time instances), 'same' and
# other paddings (beyond the filter too), KH != KW, full and partial 4 x 4 tap chunks, tile edges
# (65 rows, 132 columns), planes narrower than the 64-column tile, several planes per launch.
LARGE_TMA = [
    ((1, 2, 70, 76), (13, 9), (6, 4)),    # pad_w 4: o = 0
    ((2, 3, 40, 36), (9, 9), "same"),     # pad_w 4: o = 0
    ((1, 1, 65, 132), (8, 12), (0, 5)),   # o = 3
    ((3, 2, 20, 16), (10, 6), (12, 7)),   # o = 1
    ((2, 2, 64, 64), (13, 13), "same"),   # pad_w 6: o = 2
    ((1, 3, 33, 40), (15, 15), "same"),   # pad_w 7: o = 1
    ((2, 1, 31, 68), (31, 31), "same"),   # pad_w 15: o = 1
    ((1, 2, 9, 4), (11, 11), (2, 9)),     # o = 3, the box far wider than the plane
]


@pytest.mark.cuda
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device and the CUDA build of gpukern")
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_cuda_large_tma_staging(dtype):
    """depthwise_large forced over LARGE_TMA: contiguous, an aligned pitched view (TMA staging in
    fp32), a misaligned copy and channels_last (staged element by element), every dtype."""
    for i, (shape, k, padding) in enumerate(LARGE_TMA):
        n, c, h, w_ = shape
        x, w, b = make(n, c, h, w_, c, *k, c, i % 2 == 0, dtype, "cuda", seed=300 + i)
        for xx in [x, _pitched_view(x, col0=4), _misaligned(x),
                   x.to(memory_format=torch.channels_last)]:
            with torch_ops.force_algorithm("conv2d", "depthwise_large"):
                check(xx, w, b, 1, padding, 1, c)


@pytest.mark.cuda
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device and the CUDA build of gpukern")
def test_cuda_large_tma_many_planes():
    """More planes than the grid's 65535 rows: blocks stage several planes in turn through one
    TMA barrier (its phase flips), taps reloaded per plane; and the benchmark-like shapes."""
    g = torch.Generator(device="cuda").manual_seed(24)
    for shape, k in [((2, 33000, 4, 8), 9), ((8, 64, 64, 64), 13), ((1, 1, 300, 260), 15)]:
        c = shape[1]
        x = torch.randn(shape, device="cuda", generator=g)
        w = torch.randn(c, 1, k, k, device="cuda", generator=g)
        b = torch.randn(c, device="cuda", generator=g)
        assert torch_ops.algorithm("conv2d", x, w, b, 1, "same", 1, c) == "depthwise_large"
        out = torch_ops.conv2d(x, w, b, 1, "same", 1, c)
        assert_close_ref(out, F.conv2d(x.double(), w.double(), b.double(), 1, "same", 1, c),
                         torch.float32)


@pytest.mark.cuda
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device and the CUDA build of gpukern")
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_cuda_plane_many_planes(dtype):
    """The plane kernel's own choice on benchmark-like shapes: far more planes than resident
    warps (several waves of blocks), and a channel stride that leaves every fourth fp32 plane
    16-byte aligned (bulk copies and planes staged by hand mixed within a launch)."""
    if not _tma_device():
        pytest.skip("the plane kernel needs sm_90+")
    g = torch.Generator(device="cuda").manual_seed(23)
    for shape, odd in [((32, 256, 56, 56), False), ((64, 128, 28, 28), False),
                       ((16, 96, 32, 128), False), ((8, 200, 20, 24), True)]:
        n, c, h, w_ = shape
        x = torch.randn(shape, device="cuda", generator=g).to(dtype)
        if odd:
            big = torch.zeros(n, c, h * w_ + 1, device="cuda", dtype=dtype)
            big[..., :h * w_] = x.reshape(n, c, h * w_)
            x = big[..., :h * w_].unflatten(-1, (h, w_))
        w = torch.randn(c, 1, 3, 3, device="cuda", generator=g).to(dtype)
        b = torch.randn(c, device="cuda", generator=g).to(dtype)
        assert torch_ops.algorithm("conv2d", x, w, b, 1, "same", 1, c) == "depthwise_plane"
        out = torch_ops.conv2d(x, w, b, 1, "same", 1, c)
        assert_close_ref(out, F.conv2d(x.double(), w.double(), b.double(), 1, "same", 1, c), dtype)


@pytest.mark.cuda
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device and the CUDA build of gpukern")
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("hw", [(37, 24), (56, 56), (20, 28), (9, 64)])
def test_cuda_plane_nonfinite_reach_only_their_window(hw, dtype):
    """A NaN or an infinity makes exactly the outputs whose window holds it non-finite. The plane
    kernel's tensor-core path (16-bit rows of an odd number of 16-byte units: W = 24, 56) multiplies
    whole 8-column blocks by banded taps, zeros included (0 * inf is NaN), so a plane holding one
    must be redone by the exact path after its outputs were written (staged and copied out, or
    stored directly for channels_last); the finite planes beside it (same launch) must stay
    right. W = 28 and 64 run the multiply-add path in every dtype."""
    if not _tma_device():
        pytest.skip("the plane kernel needs sm_90+")
    h, w_ = hw
    g = gen(9400 + h)
    x = rand(3, 4, h, w_, dtype=dtype, generator=g)
    for r, c in [(0, 0), (0, w_ - 1), (h // 2, 7), (h // 2, 8), (h - 1, w_ // 2)]:
        x[0, 1, r, c] = float("nan")
    x[1, 2, h - 1, 0] = float("inf")
    x[2, 0, 3, w_ - 1] = float("-inf")
    w = rand(4, 1, 3, 3, dtype=dtype, generator=g)
    b = rand(4, dtype=dtype, generator=g)
    xc, wc, bc = x.cuda(), w.cuda(), b.cuda()
    ref = reference(x, w, b, 1, "same", 1, 4)
    assert torch_ops.algorithm("conv2d", xc, wc, bc, 1, "same", 1, 4) == "depthwise_plane"
    # forced on channels_last: the mma path's outputs go straight to memory, not staged
    for forced, xx in [(False, xc), (True, xc), (True, xc.to(memory_format=torch.channels_last))]:
        algo = "depthwise_plane" if forced else "auto"
        with torch_ops.force_algorithm("conv2d", "depthwise_plane") if forced else nullcontext():
            out = torch_ops.conv2d(xx, wc, bc, 1, "same", 1, 4).cpu()
        assert torch.equal(torch.isnan(out), torch.isnan(ref)), f"NaN pattern ({algo})"
        assert torch.equal(torch.isinf(out), torch.isinf(ref)), f"inf pattern ({algo})"
        finite = torch.isfinite(ref)
        assert_close_ref(out[finite], ref[finite], dtype)


@pytest.mark.cuda
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device and the CUDA build of gpukern")
def test_cuda_rows_batched_images():
    """Batched single-channel images (the issue's N=64 1x1024x1024) and multi-row chunks."""
    g = torch.Generator(device="cuda").manual_seed(21)
    x = torch.randn(64, 1, 1024, 1024, device="cuda", generator=g)
    for k in (3, 5, 7):
        w = torch.randn(1, 1, k, k, device="cuda", generator=g)
        with torch_ops.force_algorithm("conv2d", "depthwise_rows"):  # 7x7 is not chosen
            assert torch_ops.algorithm("conv2d", x, w, None, 1, "same") == "depthwise_rows"
            out = torch_ops.conv2d(x, w, None, 1, "same")
        assert_close_ref(out, F.conv2d(x.double(), w.double(), None, 1, "same"))


# channels_last depthwise shapes for the nhwc kernel: (N, C, H, W), K, padding. C multiples of
# 8 (16-byte vectors for every dtype), of 4 only (fp32 vectors, 16-bit scalar tail), odd; one
# and several channel blocks (C / V > 32), one and several column blocks, 3/5/7 in registers.
NHWC_SHAPES = [
    ((2, 16, 9, 11), 3, "same"),
    ((1, 64, 13, 17), 5, "same"),
    ((2, 40, 7, 9), 7, "same"),
    ((1, 36, 6, 70), 3, (0, 1)),
    ((3, 520, 5, 6), 3, "same"),
    ((1, 8, 1, 1), 3, "same"),
    ((2, 24, 12, 300), 5, (1, 0)),
    ((1, 7, 11, 13), 3, "same"),
]


# channels_last shapes big enough that the roll kernel walks strips of many rows (the strip height
# follows the device's waves): the benchmark shape, padding beyond the filter (rows of bias only),
# partial last strips, 3/5/7.
NHWC_STRIPS = [
    ((32, 256, 56, 56), 3, "same"),
    ((8, 96, 90, 20), 3, (3, 1)),
    ((16, 64, 70, 33), 5, "same"),
    ((6, 40, 131, 9), 7, (5, 2)),
    ((2, 12, 300, 7), 3, (0, 2)),
]


@pytest.mark.cuda
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device and the CUDA build of gpukern")
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_cuda_nhwc_strips(dtype):
    """The nhwc roll kernel on strips of many output rows: every row's partial sums rotate
    through the register slots and each is stored once, against the float64 reference."""
    for i, (shape, k, padding) in enumerate(NHWC_STRIPS):
        n, c, h, w_ = shape
        x, w, b = make(n, c, h, w_, c, k, k, c, i % 2 == 0, dtype, "cuda", seed=400 + i)
        xc = x.to(memory_format=torch.channels_last)
        assert torch_ops.algorithm("conv2d", xc, w, b, 1, padding, 1, c) == "depthwise_nhwc_reg"
        # the roll kernel forced (the choice takes depthwise_nhwc_reg), then the register-tile
        # kernel on the same large shapes (its big tiles)
        for algo in ("depthwise_nhwc", "depthwise_nhwc_reg"):
            with torch_ops.force_algorithm("conv2d", algo):
                assert torch_ops.algorithm("conv2d", xc, w, b, 1, padding, 1, c) == algo
                out = check(xc, w, b, 1, padding, 1, c)
            assert out.is_contiguous(memory_format=torch.channels_last)


@pytest.mark.cuda
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device and the CUDA build of gpukern")
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_cuda_nhwc_vectors(dtype):
    """depthwise_nhwc chosen for channels_last input, read in place: vector and scalar paths,
    channels_last output; a channel-sliced view (misaligned, channel stride 1, pixel stride
    C + 1) and a stride-2 / dilated (runtime filter) call of the same kernel."""
    for i, (shape, k, padding) in enumerate(NHWC_SHAPES):
        n, c, h, w_ = shape
        x, w, b = make(n, c, h, w_, c, k, k, c, i % 2 == 0, dtype, "cuda", seed=300 + i)
        xc = x.to(memory_format=torch.channels_last)
        big = torch.zeros(n, c + 1, h, w_, dtype=dtype, device="cuda").to(
            memory_format=torch.channels_last)
        view = big[:, 1:]
        view.copy_(x)
        for xx in (xc, view):
            # small planes go to depthwise_nhwc_tile (tests/test_depthwise.py): forced here
            assert torch_ops.algorithm("conv2d", xx, w, b, 1, padding, 1, c) in (
                "depthwise_nhwc", "depthwise_nhwc_tile", "depthwise_nhwc_reg")
            with torch_ops.force_algorithm("conv2d", "depthwise_nhwc"):
                out = check(xx, w, b, 1, padding, 1, c)
            ref_out = F.conv2d(xx, w, b, 1, padding, 1, c)
            assert out.stride() == ref_out.stride()
        with torch_ops.force_algorithm("conv2d", "depthwise_nhwc"):
            check(xc, w, b, 2, k // 2, 1, c)
            check(xc, w, b, 1, k - 1, 2, c)
