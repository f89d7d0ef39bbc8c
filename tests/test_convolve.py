"""gpukern::convolve against numpy.convolve in float64, row by row over the broadcast shape.

convolve runs conv1d's kernels as a correlation with the reversed filter (csrc/conv1d/convolve.cpp):
a shared filter maps to a batch of single-channel rows, anything else to depthwise rows (stride 0
where an operand is broadcast). The CUDA cases force each conv1d path in turn
(torch_ops.force_algorithm("conv1d", name)) so that convolve is tested through every shared kernel.
"""
import numpy as np
import pytest
import torch

import torch_ops
from conftest import DEVICE_PARAMS, FLOAT_DTYPES, HAS_CUDA, assert_close_ref, rand, \
    skip_unsupported

ALL_DTYPES = [torch.float64] + FLOAT_DTYPES
MODES = ["full", "same", "valid"]
ops = torch.ops.gpukern
cuda_only = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device and the CUDA build")


def reference(x, h, mode):
    """numpy.convolve in float64 over every broadcast row (the inputs as rounded to their dtype)."""
    xn = x.detach().to("cpu", torch.float64).numpy()
    hn = h.detach().to("cpu", torch.float64).numpy()
    lead = np.broadcast_shapes(xn.shape[:-1], hn.shape[:-1])
    xb = np.broadcast_to(xn, lead + xn.shape[-1:]).reshape(-1, xn.shape[-1])
    hb = np.broadcast_to(hn, lead + hn.shape[-1:]).reshape(-1, hn.shape[-1])
    rows = [np.convolve(a, v, mode) for a, v in zip(xb, hb)]
    length = rows[0].shape[0] if rows else {
        "full": xn.shape[-1] + hn.shape[-1] - 1, "same": max(xn.shape[-1], hn.shape[-1]),
        "valid": abs(xn.shape[-1] - hn.shape[-1]) + 1}[mode]
    out = np.stack(rows) if rows else np.zeros((0, length))
    return torch.from_numpy(out.reshape(lead + (length,)))


def check(x, h, mode="full"):
    out = ops.convolve(x, h, mode)
    assert out.device == x.device and out.dtype == x.dtype and out.is_contiguous()
    assert_close_ref(out, reference(x, h, mode))
    return out


def gen(seed):
    return torch.Generator().manual_seed(seed)


# ------------------------------------------------------------------------------------------------
# Lengths and modes
# ------------------------------------------------------------------------------------------------

LENGTHS = [1, 2, 3, 4, 5, 7, 8, 13, 16, 31, 32, 33]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("device", DEVICE_PARAMS)
def test_lengths_grid(device, mode):
    """Every (N, K) pair of the grid: K > N, K == N, even and odd, primes, 1. float64 on CPU
    (exact windows: an off-by-one shows as a large error), float32 on CUDA."""
    dtype = torch.float64 if device == "cpu" else torch.float32
    g = gen(7)
    for N in LENGTHS:
        for K in LENGTHS:
            x = rand(N, dtype=dtype, device=device, generator=g)
            h = rand(K, dtype=dtype, device=device, generator=g)
            out = check(x, h, mode)
            assert out.dim() == 1


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("device", DEVICE_PARAMS)
def test_dtypes(device, dtype):
    skip_unsupported(device, dtype)
    g = gen(11)
    for N, K in [(97, 5), (64, 64), (10, 37), (300, 31)]:
        x = rand(3, N, dtype=dtype, device=device, generator=g)
        h = rand(3, K, dtype=dtype, device=device, generator=g)
        for mode in MODES:
            check(x, h, mode)
            check(x, h[1], mode)


def test_default_mode_and_wrapper():
    g = gen(3)
    x, h = rand(2, 40, generator=g), rand(9, generator=g)
    full = ops.convolve(x, h)
    assert full.shape == (2, 48)
    assert torch.equal(full, torch_ops.convolve(x, h))
    assert torch.equal(ops.convolve(x, h, "valid"), torch_ops.convolve(x, h, mode="valid"))
    assert_close_ref(full, reference(x, h, "full"))


# ------------------------------------------------------------------------------------------------
# Broadcasting
# ------------------------------------------------------------------------------------------------

# (id, x shape, h shape): the last entries are the lengths N and K.
BROADCAST = [
    ("shared_filter_1d", (4, 3, 50), (7,)),
    ("shared_filter_ones", (4, 3, 50), (1, 1, 7)),
    ("shared_signal", (50,), (5, 7)),
    ("shared_signal_ones", (1, 1, 50), (2, 3, 7)),
    ("both_varying", (2, 3, 50), (2, 3, 7)),
    ("fewer_h_dims", (2, 3, 50), (3, 7)),
    ("fewer_x_dims", (3, 50), (2, 3, 7)),
    ("outer_product", (3, 1, 50), (1, 4, 7)),     # x varies outer, h inner: no copy needed
    ("needs_expansion", (1, 4, 50), (3, 1, 7)),   # h varies outer, x inner: materialised
    ("partial_h", (2, 1, 50), (2, 3, 7)),
    ("partial_x", (2, 3, 50), (2, 1, 7)),
    ("long_filter", (2, 3, 9), (3, 40)),
    ("four_dims", (2, 1, 3, 1, 23), (1, 2, 1, 4, 6)),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", BROADCAST, ids=lambda c: c[0])
@pytest.mark.parametrize("device", DEVICE_PARAMS)
def test_broadcast(device, case, mode):
    _, xs, hs = case
    g = gen(len(xs) * 100 + xs[-1] + hs[-1])
    dtype = torch.float64 if device == "cpu" else torch.float32
    x = rand(*xs, dtype=dtype, device=device, generator=g)
    h = rand(*hs, dtype=dtype, device=device, generator=g)
    out = check(x, h, mode)
    assert out.shape[:-1] == torch.broadcast_shapes(xs[:-1], hs[:-1])


@pytest.mark.parametrize("device", DEVICE_PARAMS)
def test_empty_leading(device):
    g = gen(5)
    for xs, hs in [((0, 10), (4,)), ((2, 0, 10), (1, 3)), ((3, 10), (0, 1, 4)), ((0, 10), (1, 4))]:
        x = rand(*xs, device=device, generator=g)
        h = rand(*hs, device=device, generator=g)
        for mode in MODES:
            out = check(x, h, mode)
            assert out.numel() == 0


# ------------------------------------------------------------------------------------------------
# Strided inputs
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("device", DEVICE_PARAMS)
def test_strided_views(device, dtype):
    skip_unsupported(device, dtype)
    g = gen(13)
    big = rand(5, 6, 90, dtype=dtype, device=device, generator=g)
    hbig = rand(6, 40, dtype=dtype, device=device, generator=g)
    xs = [
        big[:, :, ::2],             # stepped last dim
        big[:, 1:4, 3:60],          # leading dims that collapse to no single stride
        big[1:4, 1:, 1:80],         # storage offset breaking 16-byte alignment
        big.transpose(0, 1)[:, :, 5:45],  # leading dims in reversed memory order
        big[0, 0, 3:50].expand(4, 6, 47),  # broadcast input (stride-0 leading dims)
    ]
    hs = [
        hbig[0, 1:10],              # offset filter
        hbig[:, ::3],               # stepped filter taps
        hbig.t()[:5, :6].t(),       # transposed: taps 40 elements apart
        hbig[2:3, 7:8].expand(1, 6),  # stride-0 taps
        hbig[:, 2:9],               # six filters, one per x channel
    ]
    for x in xs:
        for h in hs:
            if h.dim() == 2 and h.shape[0] != x.shape[-2]:
                h = h[:1]
            for mode in MODES:
                check(x, h, mode)


# ------------------------------------------------------------------------------------------------
# Errors
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("device", DEVICE_PARAMS)
def test_errors(device):
    g = gen(0)
    x = rand(2, 3, 10, device=device, generator=g)
    h = rand(3, 4, device=device, generator=g)
    cases = [
        (lambda: ops.convolve(x[0, 0, 0], h), "at least 1 dimension"),
        (lambda: ops.convolve(x, h[0, 0]), "at least 1 dimension"),
        (lambda: ops.convolve(x, h.half()), "same dtype"),
        (lambda: ops.convolve(x.int(), h.int()), "supported: float32"),
        (lambda: ops.convolve(x, h, "circular"), "mode must be 'full', 'same' or 'valid'"),
        (lambda: ops.convolve(x, h, "Full"), "mode must be"),
        (lambda: ops.convolve(x[..., :0], h), "must not be empty"),
        (lambda: ops.convolve(x, h[..., :0]), "must not be empty"),
        (lambda: ops.convolve(x, h[:2]), "not broadcastable"),
        (lambda: ops.convolve(x[:, :2], rand(3, 2, 4, device=device)), "not broadcastable"),
    ]
    for fn, match in cases:
        with pytest.raises(RuntimeError, match=match):
            fn()
    for mode in MODES:
        ops.convolve(x, h, mode)  # the unmodified arguments are valid


@pytest.mark.parametrize("device", [pytest.param("cuda", marks=cuda_only)])
def test_errors_cuda_only(device):
    g = gen(0)
    x = rand(2, 10, device=device, generator=g)
    h = rand(2, 4, device=device, generator=g)
    with pytest.raises(RuntimeError, match="same device"):
        ops.convolve(x, h.cpu())
    with pytest.raises(RuntimeError, match="float64 runs on CPU only"):
        ops.convolve(x.double(), h.double())


# ------------------------------------------------------------------------------------------------
# CUDA: every conv1d path, forced
# ------------------------------------------------------------------------------------------------

# (id, x shape, h shape): shared filter (single-channel batch), both varying (depthwise), shared
# signal (depthwise with a stride-0 input), a long filter (K > N), and a row too short for a tile.
PATH_SHAPES = [
    ("shared_filter", (3, 5003), (17,)),
    ("depthwise", (2, 3, 4099), (2, 3, 31)),
    ("shared_signal", (6000,), (4, 9)),
    ("k_gt_n", (2, 301), (2, 1000)),
    ("short_rows", (5, 40), (5, 3)),
    ("long_k", (2, 3000), (2, 700)),
]
PATHS = ["rowwise8", "rowwise16", "rowwise8_dilated", "general_ot1", "general_ot4", "fft"]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("algo", PATHS)
@pytest.mark.parametrize("device", [pytest.param("cuda", marks=cuda_only)])
def test_cuda_forced_paths(device, algo, dtype):
    g = gen(len(algo))
    for _, xs, hs in PATH_SHAPES:
        x = rand(*xs, dtype=dtype, device=device, generator=g)
        h = rand(*hs, dtype=dtype, device=device, generator=g)
        with torch_ops.force_algorithm("conv1d", algo):
            for mode in MODES:
                check(x, h, mode)


@pytest.mark.parametrize("device", [pytest.param("cuda", marks=cuda_only)])
def test_cuda_views_and_alignment(device):
    """Storage offsets mod 8, stepped and reversed-order views on the rowwise paths."""
    g = gen(21)
    for dtype in FLOAT_DTYPES:
        big = rand(2, 3, 3000, dtype=dtype, device=device, generator=g)
        h16 = rand(3, 16, dtype=dtype, device=device, generator=g)
        h64 = rand(64, dtype=dtype, device=device, generator=g)
        for off in range(8):
            x = big[:, :, off:off + 2900]
            for mode in MODES:
                check(x, h16, mode)
                check(x, h64, mode)
        check(big[:, :, ::2], h16[:, ::2], "same")
        check(big.transpose(0, 1), h64, "full")


def fft_reference(x, h, mode):
    """float64 FFT convolution on the CPU, for shapes where numpy.convolve would take minutes."""
    xd = x.detach().to("cpu", torch.float64)
    hd = h.detach().to("cpu", torch.float64)
    N, K = xd.shape[-1], hd.shape[-1]
    n = N + K - 1
    full = torch.fft.irfft(torch.fft.rfft(xd, n) * torch.fft.rfft(hd, n), n)
    lo, hi = min(N, K), max(N, K)
    off, length = {"full": (0, n), "same": ((lo - 1) // 2, hi), "valid": (lo - 1, hi - lo + 1)}[mode]
    return full[..., off:off + length]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("device", [pytest.param("cuda", marks=cuda_only)])
def test_cuda_auto_fft(device, mode, dtype):
    """Long filter on a long signal: the automatic choice takes the FFT path (K >= 2048 and
    N*L_out*K >= 2^30)."""
    g = gen(8191)
    x = rand(1, 150000, dtype=dtype, device=device, generator=g)
    h = rand(8191, dtype=dtype, device=device, generator=g)
    out = ops.convolve(x, h, mode)
    assert_close_ref(out, fft_reference(x, h, mode))


@pytest.mark.parametrize("device", [pytest.param("cuda", marks=cuda_only)])
def test_cuda_large_index(device):
    """> 2^31 elements in x and in y (bf16, depthwise rows, ~8.6 GB): int64 row offsets."""
    free, _ = torch.cuda.mem_get_info()
    if free < 12 * 2**30:
        pytest.skip("needs ~12 GB of free GPU memory")
    N, K = 2**30 + 7, 5
    gcuda = torch.Generator(device=device).manual_seed(31)
    x = torch.randn(2, N, dtype=torch.bfloat16, device=device, generator=gcuda)
    h = torch.randn(2, K, dtype=torch.bfloat16, device=device, generator=gcuda)
    out = ops.convolve(x, h, "same")
    assert out.shape == (2, N)
    M = 4099
    head = reference(x[1:, :M + K], h[1:], "full")[..., K // 2:K // 2 + M]
    assert_close_ref(out[1:, :M], head, torch.bfloat16)
    # out[N - M + i] = full[N - M + i + (K - 1) // 2]; the slice starts at N - M - K
    tail = reference(x[1:, N - M - K:], h[1:], "full")[..., K + K // 2:K + K // 2 + M]
    assert_close_ref(out[1:, N - M:], tail, torch.bfloat16)
    del x, out
    torch.cuda.empty_cache()
