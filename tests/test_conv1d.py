"""gpukern::conv1d / conv1d.padding against torch.nn.functional.conv1d (float64 references).

CUDA kernel paths (the rules of csrc/conv/dispatch_1d.cu):
  rowwise16       stride 1, C == O == groups, dilation 1, L_out >= 256, fp32, any K below the FFT
                  thresholds (one warp per tile of up to 2048 outputs; taps in steps of 1024;
                  forceable for fp16/bf16)
  rowwise_mma     fp16/bf16, the same rows with K >= 8 below the FFT thresholds (tensor cores:
                  banded filter matrix; tiles holding a non-finite input tap by tap)
  rowwise_reg     fp16/bf16, the same rows with K < 8 (register windows, halo by warp shuffles;
                  forceable for fp32 and K <= 8)
  rowwise8        forced only (the same shapes; any K)
  rowwise8dil     the same with 1 < dilation <= 128
  general OT4     everything else with >= 4 output channels per group
  general OT1     everything else with < 4 output channels per group
  fft             one row per output row, stride 1, dilation 1, K >= 512, N*C*L_out*K >= 2^30
                  (overlap-save; tested forced on its own below, with its own error bound)
"""
import math
import zlib

import pytest
import torch
import torch.nn.functional as F

import torch_ops
from conftest import DEVICE_PARAMS, FLOAT_DTYPES, HAS_CUDA, assert_close_ref, rand, \
    skip_unsupported

ALL_DTYPES = [torch.float64] + FLOAT_DTYPES
ops = torch.ops.gpukern


def call(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    if isinstance(padding, str):
        return ops.conv1d.padding(x, w, b, [stride], padding, [dilation], groups)
    return ops.conv1d(x, w, b, [stride], [padding], [dilation], groups)


def reference(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    d = torch.float64
    return F.conv1d(x.detach().cpu().to(d), w.detach().cpu().to(d),
                    None if b is None else b.detach().cpu().to(d), stride, padding, dilation,
                    groups)


def check(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    out = call(x, w, b, stride, padding, dilation, groups)
    assert out.device == x.device and out.dtype == x.dtype
    assert_close_ref(out, reference(x, w, b, stride, padding, dilation, groups))
    return out


def make(N, C, O, L, K, groups, bias, dtype, device, seed):
    g = torch.Generator().manual_seed(seed)
    x = rand(N, C, L, dtype=dtype, device=device, generator=g)
    w = rand(O, C // groups, K, dtype=dtype, device=device, generator=g)
    b = rand(O, dtype=dtype, device=device, generator=g) if bias else None
    return x, w, b


# (N, C, O, L, K, stride, padding, dilation, groups, bias)
GRID = [
    (1, 1, 1, 1, 1, 1, 0, 1, 1, False),          # smallest
    (2, 1, 1, 37, 5, 1, 2, 1, 1, True),          # single channel, prime length
    (3, 1, 1, 61, 61, 1, 0, 1, 1, True),         # filter as long as the input
    (2, 1, 1, 29, 4, 1, "same", 1, 1, True),     # even K: asymmetric 'same'
    (2, 1, 1, 29, 6, 1, "same", 3, 1, False),    # even K, dilated 'same'
    (2, 3, 3, 31, 7, 1, "valid", 2, 3, True),    # depthwise, dilated
    (1, 4, 4, 43, 3, 2, 1, 1, 4, True),          # depthwise, strided
    (2, 4, 8, 23, 3, 1, 1, 1, 4, False),         # depthwise multiplier 2
    (2, 4, 6, 33, 5, 2, 1, 1, 2, True),          # grouped, strided
    (2, 6, 4, 19, 3, 3, 4, 2, 2, True),          # stride 3, padding > K/2
    (1, 5, 7, 41, 2, 1, 0, 4, 1, False),         # dense, dilation 4
    (2, 8, 16, 17, 1, 1, 0, 1, 1, True),         # 1x1 conv
    (1, 3, 5, 13, 9, 5, 4, 1, 1, True),          # stride > K
    (3, 2, 2, 11, 3, 1, "same", 5, 2, True),     # dilated span close to the padded input
    (2, 2, 4, 5, 7, 1, 3, 1, 1, True),           # K > L (padding makes it fit)
]


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("case", GRID, ids=lambda c: "-".join(map(str, c)))
def test_grid(device, dtype, case):
    skip_unsupported(device, dtype)
    N, C, O, L, K, stride, padding, dilation, groups, bias = case
    x, w, b = make(N, C, O, L, K, groups, bias, dtype, device, seed=zlib.crc32(repr(case).encode()))
    check(x, w, b, stride, padding, dilation, groups)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_unbatched_and_functional(device, dtype):
    skip_unsupported(device, dtype)
    g = torch.Generator().manual_seed(3)
    x = rand(4, 29, dtype=dtype, device=device, generator=g)
    w = rand(6, 2, 3, dtype=dtype, device=device, generator=g)
    b = rand(6, dtype=dtype, device=device, generator=g)
    out = check(x, w, b, 2, 1, 1, 2)
    assert out.shape == (6, 15)
    out2 = torch_ops.conv1d(x, w, b, stride=2, padding=1, groups=2)
    assert torch.equal(out, out2)
    out3 = torch_ops.conv1d(x, w, b, padding="same", dilation=2, groups=2)
    assert_close_ref(out3, reference(x, w, b, 1, "same", 2, 2))


@pytest.mark.parametrize("L", [255, 256, 257, 1023, 1024, 1025, 2047, 2049])
def test_tile_edges(device, L):
    """Lengths around the tile sizes (rowwise 1024/2048 outputs, general 512)."""
    g = torch.Generator().manual_seed(L)
    for (C, O, groups, K) in [(1, 1, 1, 5), (1, 1, 1, 40), (3, 3, 3, 3), (2, 4, 1, 3)]:
        x = rand(2, C, L, device=device, generator=g)
        w = rand(O, C // groups, K, device=device, generator=g)
        check(x, w, None, 1, K // 2, 1, groups)
        check(x, w, None, 1, "same", 2, groups)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_strided_views(device, dtype):
    """Sliced, transposed and offset inputs/weights/bias (no hidden contiguity assumptions)."""
    skip_unsupported(device, dtype)
    g = torch.Generator().manual_seed(11)
    big = rand(3, 8, 1300, dtype=dtype, device=device, generator=g)
    wbig = rand(6, 4, 14, dtype=dtype, device=device, generator=g)
    bbig = rand(12, dtype=dtype, device=device, generator=g)
    x = big[:, ::2, 1:1202]                  # channel stride 2*1300, storage offset 1 (unaligned)
    assert x.storage_offset() == 1
    check(x, wbig[:, :2, ::2], bbig[::2], 1, 3, 1, 2)         # general, w_sk = 2
    check(x[:, :1], wbig[:1, :1, 1:8], bbig[1:2], 1, 3)       # rowwise, misaligned rows
    check(x[:, :, ::3], wbig[:4, :1, 2:9], None, 1, "same", 1, 4)   # depthwise, x_sl = 3
    check(x, wbig[:4, :1, :5], bbig[3:7], 1, "same", 3, 4)    # depthwise dilated, offsets
    xt = big.transpose(1, 2).contiguous().transpose(1, 2)[:, :4, 5:]  # x_sl = 8
    check(xt, wbig[:4, :2, :9], None, 2, 4, 1, 2)
    check(xt[:1, 1:2], wbig[:1, :1, :7].transpose(0, 1).contiguous().transpose(0, 1), None)


def test_empty(device):
    g = torch.Generator().manual_seed(5)
    x = rand(0, 4, 33, device=device, generator=g)
    w = rand(6, 2, 5, device=device, generator=g)
    out = call(x, w, None, 2, 1, 1, 2)
    assert out.shape == (0, 6, 16) and out.device == x.device
    # A weight with no output channels is an error, as in aten (issue 30).
    with pytest.raises(RuntimeError, match="expected weight with at least groups=1 output"):
        call(rand(2, 4, 10, device=device, generator=g), rand(0, 4, 3, device=device,
                                                              generator=g))
    # Zero input channels give zero output channels, as in aten.
    out = call(rand(2, 0, 10, device=device, generator=g), rand(6, 0, 3, device=device,
                                                                generator=g))
    assert out.shape == (2, 0, 8)


def test_bigger_cpu_grid():
    """A few more random shapes on the CPU only (cheap there)."""
    g = torch.Generator().manual_seed(7)
    for _ in range(20):
        groups = int(torch.randint(1, 4, (1,), generator=g))
        C = groups * int(torch.randint(1, 4, (1,), generator=g))
        O = groups * int(torch.randint(1, 4, (1,), generator=g))
        K = int(torch.randint(1, 9, (1,), generator=g))
        dil = int(torch.randint(1, 4, (1,), generator=g))
        stride = int(torch.randint(1, 4, (1,), generator=g))
        pad = int(torch.randint(0, 5, (1,), generator=g))
        L = dil * (K - 1) + 1 + int(torch.randint(0, 50, (1,), generator=g))
        x, w, b = make(2, C, O, L, K, groups, True, torch.float32, "cpu",
                       seed=int(torch.randint(0, 1000, (1,), generator=g)))
        check(x, w, b, stride, pad, dil, groups)


# ------------------------------------------------------------------------------------------------
# CUDA paths (larger shapes)
# ------------------------------------------------------------------------------------------------

cuda_only = [pytest.mark.cuda, pytest.mark.skipif(not HAS_CUDA, reason="needs CUDA gpukern")]

# (id, N, C, O, L, K, stride, padding, dilation, groups, bias)
CUDA_PATHS = [
    ("rowwise8_full_k16", 1, 1, 1, 100003, 16, 1, 15, 1, 1, True),
    ("rowwise8_k4_depthwise", 4, 64, 64, 4099, 4, 1, "same", 1, 64, True),
    ("rowwise8_k31_depthwise", 2, 48, 48, 2048, 31, 1, 15, 1, 48, False),
    ("rowwise16_k64_batched", 8, 1, 1, 65537, 64, 1, 0, 1, 1, True),
    # odd L_out: output rows of varying alignment (tiles start at the aligned position)
    ("rowwise16_k64_batched_full", 6, 1, 1, 20000, 64, 1, 63, 1, 1, True),
    ("rowwise8_k4_depthwise_full", 3, 40, 40, 4096, 4, 1, 3, 1, 40, True),
    # L_out = 1020: fp32 rows 16-byte aligned (vector stores), half rows alternately 8/16-byte
    ("rowwise8_rows_alternating_alignment", 3, 2, 2, 1020, 5, 1, 2, 1, 2, True),
    ("rowwise16_k1024", 1, 1, 1, 50001, 1024, 1, 1023, 1, 1, True),
    ("rowwise16_k127_depthwise", 2, 5, 5, 9000, 127, 1, "same", 1, 5, True),
    ("rowwise8dil_d3", 2, 6, 6, 5003, 7, 1, "same", 3, 6, True),
    ("rowwise8dil_d128", 1, 2, 2, 6000, 9, 1, 0, 128, 2, False),
    ("rowwise8dil_long_k", 1, 1, 1, 20000, 700, 1, 5, 7, 1, True),   # chunked by kMaxHalo
    ("general_ot4_dense", 2, 16, 32, 3001, 5, 1, 2, 1, 1, True),
    ("general_ot4_grouped_strided", 2, 12, 24, 4099, 7, 2, 3, 2, 3, True),
    ("general_ot4_long_k", 1, 2, 4, 3000, 1024, 1, 0, 1, 1, True),  # taps chunked by kSmemW
    ("general_ot1_depthwise_s2", 2, 32, 32, 5000, 3, 2, 1, 1, 32, True),
    ("general_ot1_multiplier2", 2, 8, 16, 3000, 5, 1, 2, 1, 8, False),
    ("general_ot1_huge_stride", 1, 2, 2, 100000, 3, 5000, 1, 1, 1, True),
    ("general_ot1_huge_dilation", 1, 2, 2, 20000, 5, 1, 0, 3000, 1, True),
    ("general_ot1_dilation_gt128", 1, 3, 3, 4000, 5, 1, "same", 200, 3, True),
    ("general_short_rows", 4, 64, 64, 40, 3, 1, 1, 1, 64, True),
]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("case", CUDA_PATHS, ids=lambda c: c[0])
@pytest.mark.parametrize("device", [pytest.param("cuda", marks=cuda_only)])
def test_cuda_paths(device, dtype, case):
    _, N, C, O, L, K, stride, padding, dilation, groups, bias = case
    x, w, b = make(N, C, O, L, K, groups, bias, dtype, device, seed=len(case[0]) + L)
    check(x, w, b, stride, padding, dilation, groups)


@pytest.mark.parametrize("device", [pytest.param("cuda", marks=cuda_only)])
def test_cuda_k8191_chunked(device):
    """K = 8191 single channel: the rowwise16 kernel streams the filter in 1024-tap steps."""
    x, w, b = make(1, 1, 1, 12000, 8191, 1, True, torch.float32, device, seed=8191)
    check(x, w, b, 1, 8190, 1, 1)


# FFT path (overlap-save, csrc/conv/fft/overlap_save.cu): one input row per output row, stride 1,
# dilation 1; float32 transforms of B-point blocks (B from fft_block_length below, the C++ rule),
# B - K + 1 valid outputs per block. Tested forced, on its own. The float64 reference is a float64
# FFT correlation on the CPU (F.conv1d in float64 would be slow for K = 8191); its error is
# ~1e-15 of ||x|| ||w||, far below every bound used here.

def _pow2_ceil(n):
    b = 1
    while b < n:
        b *= 2
    return b


def fft_block_length(K, L_out):
    """The transform length the FFT path picks (conv1d_fft_block_length in C++)."""
    B = min(_pow2_ceil(8 * (K - 1)), 32768)
    B = max(B, _pow2_ceil(2 * K))
    B = min(B, _pow2_ceil(L_out + K - 1))
    return max(B, 16)


def _pads(K, padding):
    if padding == "same":
        return (K - 1) // 2, K - 1 - (K - 1) // 2
    return padding, padding


def fft_reference(x, w, b, padding):
    """float64 depthwise correlation through torch.fft on the CPU, F.conv1d's padding rules."""
    x, w = x.detach().to("cpu", torch.float64), w.detach().to("cpu", torch.float64)
    L, K = x.shape[-1], w.shape[-1]
    lo, hi = _pads(K, padding)
    n = L + K - 1
    full = torch.fft.irfft(torch.fft.rfft(x, n) * torch.fft.rfft(w.flip(-1)[:, 0], n), n)
    # full[m] correlates x[m - (K - 1) + k]; output l sits at m = l - lo + K - 1
    L_out = L + lo + hi - K + 1
    out = torch.zeros(x.shape[:-1] + (L_out,), dtype=torch.float64)
    m0 = K - 1 - lo
    l_start, l_end = max(0, -m0), min(L_out, n - m0)
    out[..., l_start:l_end] = full[..., l_start + m0:l_end + m0]
    if b is not None:
        out += b.detach().to("cpu", torch.float64)[:, None]
    return out


def _fft_cases():
    """(id, N, C, L, K, padding, bias, strided): per K, input lengths 1 and K - 1, outputs one
    block's valid length S - 1, S, S + 1 (S of the longest block), and several blocks with a
    partial last one; paddings 0, K - 1 (full) and 'same' (asymmetric for even K)."""
    cases = []
    for K in (1, 2, 17, 1024, 4097, 8191):
        B = fft_block_length(K, 1 << 40)
        S = B - K + 1
        N, C = (2, 3) if K <= 17 else (1, 2) if K <= 1024 else (1, 1)
        for padding in dict.fromkeys((0, K - 1, "same")):
            lo, hi = _pads(K, padding)
            lengths = {1, K - 1}
            for L_out in (S - 1, S, S + 1, 3 * S + 5):
                lengths.add(L_out - lo - hi + K - 1)
            for L in sorted(lengths):
                if L < 1 or L + lo + hi - K + 1 < 1:
                    continue
                i = len(cases)
                cases.append((f"k{K}_p{padding}_l{L}", N, C, L, K, padding, i % 2 == 0,
                              i % 3 == 1))
    return cases


FFT_CASES = _fft_cases()


def _fft_input(N, C, L, K, bias, strided, dtype, device, seed):
    x, w, b = make(N, C, C, 2 * L + 1 if strided else L, K, C, bias, dtype, device, seed=seed)
    if strided:
        x = x[..., 1::2]  # x_sl = 2 and a storage offset
    return x, w, b


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("case", FFT_CASES, ids=lambda c: c[0])
@pytest.mark.parametrize("device", [pytest.param("cuda", marks=cuda_only)])
def test_cuda_fft_path(device, dtype, case):
    """The FFT path forced, against float64, with the dtype's table tolerance. On random normal
    data the float32 FFT error is ~u sqrt(log2 B) rms(y) (u = 2^-24), over 100x below the fp32
    table tolerance; fp16/bf16 outputs are dominated by their final rounding."""
    _, N, C, L, K, padding, bias, strided = case
    x, w, b = _fft_input(N, C, L, K, bias, strided, dtype, device, seed=zlib.crc32(case[0].encode()))
    with torch_ops.force_algorithm("conv1d", "fft"):
        out = call(x, w, b, 1, padding, 1, C)
    assert out.dtype == x.dtype
    assert_close_ref(out, fft_reference(x, w, b, padding))


# The FFT path's own error bound (float32). Per block, with u = 2^-24: a radix-2/4 FFT of length n
# has a normwise error <= log2(n) * eta * ||X|| with eta ~ 7u (twiddles and butterflies; Higham,
# Accuracy and Stability of Numerical Algorithms, thm 24.2). Through the forward transforms of
# the block u_b and the filter h, the product (|H| <= ||h||_1, |X| <= ||u_b||_1 <= sqrt(B) ||u_b||_2,
# Parseval for the rest) and the inverse, the circular-convolution error of a block satisfies
#   max_l |err_l| <= ||err_b||_2 <= (3 * 7 log2(B) + 16) u ||u_b||_2 ||h||_1
# (16 u for the real split/merge steps and the products, which are not log-scaled). This bound
# holds whatever the data, unlike a per-output relative one: an FFT spreads the rounding of
# every input of the block over every output, so small outputs next to large inputs carry errors
# of order u ||u_b|| ||h||, which the per-output fp32 table tolerance does not allow. The test
# uses a superset window of the block (x indices [l - pad_lo - B, l - pad_lo + B)) for ||u_b||_2.
def fft_error_bound(x, w, padding, L_out):
    x, w = x.detach().to("cpu", torch.float64), w.detach().to("cpu", torch.float64)
    L, K = x.shape[-1], w.shape[-1]
    lo, _ = _pads(K, padding)
    B = fft_block_length(K, L_out)
    csum = torch.nn.functional.pad(x.pow(2).cumsum(-1), (1, 0))  # csum[..., m] = sum x[:m]^2
    l = torch.arange(L_out)
    a = (l - lo - B).clamp(0, L)
    e = (l - lo + B).clamp(0, L)
    window = (csum[..., e] - csum[..., a]).clamp_min(0).sqrt()
    h1 = w.abs().sum(-1)  # [C, 1]
    return (21 * math.log2(B) + 16) * 2.0**-24 * window * h1


@pytest.mark.parametrize("K, L, padding", [(1024, 50000, 1023), (8191, 60000, "same"),
                                           (17, 3000, 0)])
@pytest.mark.parametrize("device", [pytest.param("cuda", marks=cuda_only)])
def test_cuda_fft_error_bound(device, K, L, padding):
    """float32 data over 12 decades (spikes next to tiny values): the FFT path's normwise bound
    holds at every output, and random normal data stays within the table tolerance."""
    g = torch.Generator().manual_seed(K + L)
    scale = 10.0 ** (torch.rand(2, 2, L, generator=g) * 12 - 6)
    x = (torch.randn(2, 2, L, generator=g) * scale).to(device)
    w = torch.randn(2, 1, K, generator=g).to(device)
    with torch_ops.force_algorithm("conv1d", "fft"):
        out = call(x, w, None, 1, padding, 1, 2)
    ref = fft_reference(x, w, None, padding)
    err = (out.double().cpu() - ref).abs()
    bound = fft_error_bound(x, w, padding, out.shape[-1])
    worst = float((err / bound).max())
    assert worst <= 1.0, f"error reaches {worst:.3g} x the FFT bound"


@pytest.mark.parametrize("device", [pytest.param("cuda", marks=cuda_only)])
def test_cuda_fft_many_rows(device):
    """More than 65535 rows (x blocks and the grid-stride over buffer rows), batched and
    depthwise, one and two blocks per row."""
    for (N, C, L, K, padding) in [(70000, 1, 40, 17, 16), (3, 23000, 30, 5, "same"),
                                  (40000, 2, 300, 60, 59)]:
        x, w, b = make(N, C, C, L, K, C, True, torch.float32, device, seed=N + C)
        with torch_ops.force_algorithm("conv1d", "fft"):
            out = call(x, w, b, 1, padding, 1, C)
        assert_close_ref(out, reference(x, w, b, 1, padding, 1, C))


@pytest.mark.parametrize("device", [pytest.param("cuda", marks=cuda_only)])
def test_cuda_fft_large_index(device):
    """> 2^31 input elements (bf16, two channels of 2^30 + 7) on the FFT path: int64 offsets in
    the pack and epilogue kernels (buffer offsets reach ~2^33). Checks the first and last outputs
    of the second channel against float64 slices. Needs ~30 GB (x, y and two float32 buffers)."""
    free, _ = torch.cuda.mem_get_info()
    if free < 40 * 2**30:
        pytest.skip("needs ~40 GB of free GPU memory")
    L, K = 2**30 + 7, 1024
    gen = torch.Generator(device=device).manual_seed(37)
    x = torch.randn(1, 2, L, dtype=torch.bfloat16, device=device, generator=gen)
    w = torch.randn(2, 1, K, dtype=torch.bfloat16, device=device, generator=gen)
    b = torch.randn(2, dtype=torch.bfloat16, device=device, generator=gen)
    with torch_ops.force_algorithm("conv1d", "fft"):
        out = call(x, w, b, 1, "same", 1, 2)
    assert out.shape == (1, 2, L)
    lo, hi = _pads(K, "same")
    M = 40000

    def ref_pad(xs, plo, phi):
        return F.conv1d(F.pad(xs.cpu().double(), (plo, phi)), w[1:].cpu().double(),
                        b[1:].cpu().double())

    head = ref_pad(x[:, 1:, :M + K - 1 - lo], lo, 0)
    assert_close_ref(out[:, 1:, :M], head, torch.bfloat16)
    tail = ref_pad(x[:, 1:, L - M - lo:], 0, hi)
    assert_close_ref(out[:, 1:, L - M:], tail, torch.bfloat16)
    del x, out
    torch.cuda.empty_cache()


@pytest.mark.parametrize("device", [pytest.param("cuda", marks=cuda_only)])
def test_cuda_fft_forced_errors(device):
    x, w, b = make(1, 4, 4, 100, 5, 4, True, torch.float32, device, seed=9)
    with torch_ops.force_algorithm("conv1d", "fft"):
        with pytest.raises(RuntimeError, match="cannot run this shape"):
            call(x, w, b, 2, 0, 1, 4)       # stride 2
        with pytest.raises(RuntimeError, match="cannot run this shape"):
            call(x, w, b, 1, 4, 2, 4)       # dilation 2
        with pytest.raises(RuntimeError, match="cannot run this shape"):
            call(x, w[:2].repeat(1, 2, 1), b[:2], 1, 0, 1, 2)   # two input channels per group


@pytest.mark.skipif(not torch_ops.has_cuda_kernels(), reason="needs the CUDA build of gpukern")
@pytest.mark.parametrize("L, K, padding, expected", [
    (2_097_152, 1024, 1023, "fft"),       # c1_k1024_seed
    (16 * 2**20, 1024, 1023, "fft"),      # c1_k1024_16M
    (2**20, 8191, 8190, "fft"),           # c1_k8191_1M
    (64 * 2**20, 127, 126, "rowwise16"),  # c1_k127_64M: FMA-light, direct
    (1_024_000, 16, 15, "rowwise16"),     # c1_k16_seed
    (1_024_000, 3, 1, "rowwise16"),       # fp32 short filters too
    (2**20, 511, 510, "rowwise16"),       # below kFftMinTaps
    (500_000, 1024, 1023, "rowwise16"),   # below kFftMinMacs (fixed costs not amortised)
    (16, 16, 15, "rowwise16"),            # one short fp32 row (the size sweep's N = 1-48)
    (1, 16, 15, "rowwise16"),
])
def test_fft_choice(L, K, padding, expected):
    """The automatic choice between the direct and FFT paths (a pure function of the shape; meta
    tensors, no GPU needed)."""
    x = torch.empty(1, 1, L, device="meta")
    w = torch.empty(1, 1, K, device="meta")
    assert torch_ops.algorithm("conv1d", x, w, None, 1, padding) == expected


@pytest.mark.skipif(not torch_ops.has_cuda_kernels(), reason="needs the CUDA build of gpukern")
def test_short_rows_choice():
    """Short fp32 rows run rowwise16 only when there are at most 4 of them; 16-bit short rows and
    many short rows keep the general kernel."""
    w = torch.empty(1, 1, 16, device="meta")
    assert torch_ops.algorithm("conv1d", torch.empty(4, 1, 16, device="meta"), w, None, 1,
                               15) == "rowwise16"
    assert torch_ops.algorithm("conv1d", torch.empty(5, 1, 16, device="meta"), w, None, 1,
                               15) != "rowwise16"
    wh = torch.empty(1, 1, 16, device="meta", dtype=torch.bfloat16)
    xh = torch.empty(1, 1, 16, device="meta", dtype=torch.bfloat16)
    assert torch_ops.algorithm("conv1d", xh, wh, None, 1, 15) != "rowwise16"


@pytest.mark.parametrize("device", [pytest.param("cuda", marks=cuda_only)])
def test_cuda_views_and_alignment(device):
    """Every storage offset mod 8 (breaks 16-byte alignment of bf16/fp32 rows), strided rows and
    outputs compared with the CPU kernel's float64 reference, on the rowwise paths."""
    g = torch.Generator().manual_seed(21)
    for dtype in FLOAT_DTYPES:
        big = rand(2, 3, 3000, dtype=dtype, device=device, generator=g)
        w = rand(3, 1, 16, dtype=dtype, device=device, generator=g)
        w64 = rand(3, 1, 64, dtype=dtype, device=device, generator=g)
        for off in range(8):
            x = big[:, :, off:off + 2900]
            check(x, w, None, 1, "same", 1, 3)
            check(x, w64, None, 1, 3, 1, 3)
        check(big[:, :, ::2], w, None, 1, 7, 1, 3)


def _row_case(case, dtype, device, seed):
    """Inputs of a row-wise kernel case (N, C, L_out, K, padding, bias, x view: "plain" |
    "offset1" | "strided"): depthwise rows of the length that gives L_out, as a contiguous
    tensor, a view at storage offset 1 or a stride-2 view. Returns x, w, b, the call's (stride,
    padding, dilation, groups), K and L_out."""
    N, C, L_out, K, padding, bias, view = case
    pad_total = K - 1 if padding == "same" else 2 * padding
    L = L_out - pad_total + K - 1
    x, w, b = make(N, C, C, 2 * L + 1, K, C, bias, dtype, device, seed=seed + K + L)
    if view == "plain":
        x = x[..., :L].contiguous()
    elif view == "offset1":
        x = x[..., 1:L + 1]
    else:
        x = x[..., ::2][..., :L]
    return x, w, b, (1, padding, 1, C), K, L_out


def _check_forced_row(algo, case, dtype, device, seed):
    """Runs a row-wise case (_row_case) forced on algo, checked against float64; returns the
    inputs and the call's arguments."""
    x, w, b, args, K, L_out = _row_case(case, dtype, device, seed=seed)
    with torch_ops.force_algorithm("conv1d", algo):
        assert torch_ops.algorithm("conv1d", x, w, b, *args) == algo
        out = check(x, w, b, *args)
    assert out.shape[-1] == L_out
    return x, w, b, args, K, L_out


def _check_offsets(algo, K, dtype, device, seed, big_len, length, pads):
    """Depthwise 2 x 3 rows of `length` at every storage offset 0..7 of a longer tensor, forced on
    algo, with each padding in pads (bias on the odd ones), checked against float64."""
    g = torch.Generator().manual_seed(seed)
    big = rand(2, 3, big_len, dtype=dtype, device=device, generator=g)
    w = rand(3, 1, K, dtype=dtype, device=device, generator=g)
    b = rand(3, dtype=dtype, device=device, generator=g)
    with torch_ops.force_algorithm("conv1d", algo):
        for s0 in range(8):
            x = big[..., s0:s0 + length]
            for pad in sorted(pads):
                check(x, w, b if pad % 2 else None, 1, pad, 1, 3)


# Short filters on rowwise16 (fp32's kernel at every K; forced for fp16/bf16, whose automatic
# choice is rowwise_reg / rowwise_mma): rows around one and two 512-output segments and whole
# 2048-output tiles, K = 1 to 32, every view.
SHORT_MAX_K = 32


def _short_cases():
    t = STREAM_TILE
    s = 512
    # (N, C, L_out, K, padding, bias, x view: "plain" | "offset1" | "strided")
    return [
        (1, 1, t - 1, 16, 15, True, "plain"),
        (1, 1, t, 16, 15, False, "offset1"),
        (2, 1, t + 1, 16, 15, True, "plain"),
        (3, 5, s + 1, 1, 0, True, "offset1"),            # K = 1
        (2, 3, 2 * t + 7, SHORT_MAX_K, 31, True, "plain"),
        (2, 3, 3 * t - 5, SHORT_MAX_K, "same", False, "offset1"),
        (2, 4, s + 3, 31, 15, True, "strided"),
        (4, 6, 4099, 4, 3, True, "offset1"),             # depthwise K4, odd L_out
        (1, 2, 37, 5, 2, True, "plain"),                 # row shorter than a lane's segment
        (1, 1, 5000, 7, 0, True, "strided"),             # 'valid' padding
        (3, 5, s - 7, 4, 3, True, "offset1"),
        (2, 3, 2 * s + 1, 3, 1, False, "plain"),
        (2, 4, 3 * s, 5, 2, True, "plain"),
        (2, 3, t + 9, 17, 16, True, "strided"),          # one full tap block and one tap
    ]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("idx", range(14))
@pytest.mark.parametrize("device", [pytest.param("cuda", marks=cuda_only)])
def test_cuda_rowwise16_short_filters(device, dtype, idx):
    x, w, b, args, K, L_out = _check_forced_row("rowwise16", _short_cases()[idx], dtype, device,
                                                1000 + idx)
    if L_out >= 256:  # shorter rows go to the general kernel unless forced
        auto = "rowwise16"
        if dtype != torch.float32:
            auto = "rowwise_mma" if K >= MMA_MIN_K else "rowwise_reg"
        assert torch_ops.algorithm("conv1d", x, w, b, *args) == auto


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("algo", ["rowwise16", "rowwise_reg"])
@pytest.mark.parametrize("device", [pytest.param("cuda", marks=cuda_only)])
def test_cuda_short_filter_many_rows(device, algo, dtype):
    """N*C > 65535 rows (1-D grids of warp tiles or segments, 32-bit item arithmetic) with an odd
    L_out, on both short-filter kernels."""
    x, w, b = make(3, 22000, 22000, 45, 3, 22000, True, dtype, device, seed=65536)
    with torch_ops.force_algorithm("conv1d", algo):
        check(x, w, b, 1, 1, 1, 22000)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("K", [4, 29, SHORT_MAX_K])
@pytest.mark.parametrize("device", [pytest.param("cuda", marks=cuda_only)])
def test_cuda_rowwise16_short_alignments(device, dtype, K):
    """Every input misalignment (storage offsets 0..7) and several paddings with short filters:
    the staged groups at the rows' ends (zero-filled copies) take every offset."""
    _check_offsets("rowwise16", K, dtype, device, 4242 + K, 760, 701, {0, 1, 2, 3, 5, K - 1})


# rowwise_reg (the register-window kernel): K <= 8, one compiled kernel per K. A warp's item is
# (32 - halo) lanes x 8 (fp32) / 16 (fp16, bf16) outputs, halo = the lanes whose inputs the
# window offset (< 4 / < 8) plus K - 1 taps reach; items start at the row's aligned output.
REG_MAX_K = 8
REG_LANE = {torch.float32: 8, torch.float16: 16, torch.bfloat16: 16}


def _reg_item(dtype, K):
    e = REG_LANE[dtype]
    v = e // 2
    halo = (v - 1 + e + K - 1 + e - 1) // e - 1
    return (32 - halo) * e


@pytest.mark.skipif(not torch_ops.has_cuda_kernels(), reason="needs the CUDA build of gpukern")
@pytest.mark.parametrize("dtype, N, C, L, K, padding, expected", [
    (torch.bfloat16, 8, 4096, 4096, 4, 3, "rowwise_reg"),     # dw1_k4_bf16
    (torch.float32, 8, 4096, 4096, 4, 3, "rowwise16"),        # dw1_k4_f32
    (torch.float16, 1, 255, 4096, 1, 0, "rowwise_reg"),       # few rows, K = 1
    (torch.bfloat16, 1, 1, 64 * 2**20, 4, 3, "rowwise_reg"),  # one long row
    (torch.float32, 1, 1, 64 * 2**20, 4, 3, "rowwise16"),
    (torch.float32, 16, 768, 2048, 31, 15, "rowwise16"),      # dw1_k31
])
def test_rowwise_reg_choice(dtype, N, C, L, K, padding, expected):
    x = torch.empty(N, C, L, device="meta", dtype=dtype)
    w = torch.empty(C, 1, K, device="meta", dtype=dtype)
    assert torch_ops.algorithm("conv1d", x, w, None, 1, padding, 1, C) == expected


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("K", range(1, REG_MAX_K + 1))
@pytest.mark.parametrize("device", [pytest.param("cuda", marks=cuda_only)])
def test_cuda_rowwise_reg_forced(device, dtype, K):
    """Every K of the kernel on rows around whole items (one short, exact, one past), batched and
    depthwise with rows of varying alignments (odd L_out), input views at every storage offset
    mod 8 and strided, with and without bias, paddings from 'valid' to K - 1 and 'same'."""
    q = _reg_item(dtype, K)
    g = torch.Generator().manual_seed(7000 + K)
    with torch_ops.force_algorithm("conv1d", "rowwise_reg"):
        for i, (N, C, L_out) in enumerate([(1, 1, q - 1), (2, 1, q), (2, 3, 2 * q + 1),
                                          (3, 5, 4099), (1, 2, 37)]):
            pad = [0, K - 1, K // 2, "same", 1][i]
            pad_total = K - 1 if pad == "same" else 2 * pad
            L = L_out - pad_total + K - 1
            big = rand(N, C, 2 * L + 9, dtype=dtype, device=device, generator=g)
            w = rand(C, 1, K, dtype=dtype, device=device, generator=g)
            b = rand(C, dtype=dtype, device=device, generator=g) if i % 2 == 0 else None
            views = [big[..., s0:s0 + L] for s0 in range(8)] + [big[..., ::2][..., :L]]
            for x in views:
                assert torch_ops.algorithm("conv1d", x, w, b, 1, pad, 1, C) == "rowwise_reg"
                out = check(x, w, b, 1, pad, 1, C)
                assert out.shape[-1] == L_out


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("K", [1, 4, REG_MAX_K])
@pytest.mark.parametrize("device", [pytest.param("cuda", marks=cuda_only)])
def test_cuda_rowwise_reg_nan_reaches_only_its_window(device, dtype, K):
    """A NaN input makes exactly the outputs whose window holds it NaN (no multiply by a tap
    that is not in the filter reaches a neighbouring input), at every offset from a lane's
    start and at the rows' ends."""
    q = _reg_item(dtype, K)
    g = torch.Generator().manual_seed(7100 + K)
    x = rand(2, 3, 3 * q + 5, dtype=dtype, device=device, generator=g)
    for pos in [0, 1, 7, 8, 15, 16, 17, q - 1, q, q + 3, 3 * q + 4]:
        x[1, 2, pos] = float("nan")
    x[0, 0, -1] = float("nan")
    w = rand(3, 1, K, dtype=dtype, device=device, generator=g)
    b = rand(3, dtype=dtype, device=device, generator=g)
    with torch_ops.force_algorithm("conv1d", "rowwise_reg"):
        for pad in sorted({0, K - 1, K // 2}):
            check(x, w, b, 1, pad, 1, 3)
            check(x[..., 3:], w, None, 1, pad, 1, 3)


# rowwise16 (one warp per tile): tiles of up to four 512-output segments (2048 outputs; fewer
# when the staged tile would pass 12 KB or rows are few), starting up to 3 (fp32) or 7 (fp16,
# bf16) outputs early at the row's 16-byte aligned position; taps in chunks of up to 1024 (one
# segment a tile then); whole segments stored through shared memory, partial ones lane by lane.
STREAM_TILE = 2048


def _stream_cases():
    t = STREAM_TILE
    # (N, C, L_out, K, padding, bias, x view: "plain" | "offset1" | "strided")
    return [
        (1, 1, t - 1, 33, 32, True, "plain"),
        (1, 1, t, 64, 63, False, "offset1"),
        (2, 1, t + 1, 127, 126, True, "plain"),          # rows of alternating alignments
        (3, 2, 2 * t + 5, 64, "same", True, "offset1"),  # depthwise
        (2, 3, 4099, 40, 5, True, "strided"),
        (1, 1, 5000, 1024, 1023, True, "plain"),         # one 1024-tap step (direct staging)
        (2, 1, 3001, 1100, 0, True, "offset1"),          # 2 steps: 1024 + 76 taps
        (1, 1, 3 * t + 1, 2500, 2499, False, "plain"),   # 3 steps: 1024 + 1024 + 452 taps
        (1, 2, 37, 33, 2, True, "plain"),                # row shorter than a warp's outputs
        (3, 1, 700, 16, 15, True, "offset1"),            # short filter forced (one tap block)
        (2, 2, 1500, 1, 0, True, "plain"),               # K = 1
        (1, 1, 4 * t - 3, 97, 0, True, "strided"),       # 'valid'
    ]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("idx", range(12))
@pytest.mark.parametrize("device", [pytest.param("cuda", marks=cuda_only)])
def test_cuda_rowwise16_forced(device, dtype, idx):
    _check_forced_row("rowwise16", _stream_cases()[idx], dtype, device, 2000 + idx)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("device", [pytest.param("cuda", marks=cuda_only)])
def test_cuda_rowwise16_alignments(device, dtype):
    """Every input and output row misalignment (storage offsets 0..7, odd L_out in a batch) with
    K = 33 and 64 and several paddings, on the streaming kernel."""
    g = torch.Generator().manual_seed(1616)
    big = rand(2, 3, 2300, dtype=dtype, device=device, generator=g)
    b = rand(3, dtype=dtype, device=device, generator=g)
    with torch_ops.force_algorithm("conv1d", "rowwise16"):
        for K in (33, 64):
            w = rand(3, 1, K, dtype=dtype, device=device, generator=g)
            for s0 in range(8):
                x = big[..., s0:s0 + 2201]
                for pad in (0, 1, K // 2, K - 1):
                    check(x, w, b if pad % 2 else None, 1, pad, 1, 3)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("device", [pytest.param("cuda", marks=cuda_only)])
def test_cuda_rowwise16_many_rows(device, dtype):
    """N*C > 65535 rows (one tile each, 32-bit item arithmetic, persistent blocks advancing over
    rows) with an odd L_out."""
    x, w, b = make(3, 22000, 22000, 45, 40, 22000, True, dtype, device, seed=65537)
    with torch_ops.force_algorithm("conv1d", "rowwise16"):
        check(x, w, b, 1, 20, 1, 22000)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("K", [5, 31, 33])
@pytest.mark.parametrize("algo", ["rowwise16", "rowwise8", "rowwise8_dilated",
                                  "general_ot1"])
@pytest.mark.parametrize("device", [pytest.param("cuda", marks=cuda_only)])
def test_cuda_direct_nonfinite_reach_only_their_window(device, algo, K, dtype):
    """A NaN or an infinity makes exactly the outputs whose window holds it non-finite, on every
    direct fp32-accumulating kernel: a kernel that rounds K up to whole tap blocks must skip the
    taps past K, not multiply a neighbouring input by a zero tap (0 * inf is NaN)."""
    g = torch.Generator().manual_seed(9300 + K)
    x = rand(2, 3, 5000, dtype=dtype, device=device, generator=g)
    for pos in [0, 1, 7, 8, 15, 16, 17, 511, 512, 2047, 2048, 2049, 4999]:
        x[1, 2, pos] = float("nan")
    x[0, 0, 3000] = float("inf")
    x[0, 1, 1234] = float("-inf")
    w = rand(3, 1, K, dtype=dtype, device=device, generator=g)
    b = rand(3, dtype=dtype, device=device, generator=g)
    with torch_ops.force_algorithm("conv1d", algo):
        for pad in sorted({0, K // 2, K - 1}):
            out = call(x, w, b, 1, pad, 1, 3)
            ref = reference(x, w, b, 1, pad, 1, 3)
            assert torch.equal(torch.isnan(out.cpu()), torch.isnan(ref)), f"NaN pattern, pad {pad}"
            assert torch.equal(torch.isinf(out.cpu()), torch.isinf(ref)), f"inf pattern, pad {pad}"
            finite = torch.isfinite(ref)
            assert_close_ref(out.cpu()[finite], ref[finite])


# rowwise_mma (the tensor-core kernel, fp16/bf16 only): one warp per tile of 128-output mma
# tiles, up to 16 a tile (a row's tiles evened out; down to 4 when rows are few), up to 4 warps a
# block (fewer where a staged tile passes 12 KB); k steps of 16 inputs: 2 (K <= 18), 3 (K <= 34),
# 4 (K <= 50), else 8 (K <= 114 in one pass, longer filters in passes of 112 taps); a tile holding
# a non-finite input is computed tap by tap.
MMA_DTYPES = [torch.float16, torch.bfloat16]
MMA_MIN_K = 8  # kMmaMinK: rowwise_mma's automatic choice for 16-bit rows from this K


def _mma_cases():
    # (N, C, L_out, K, padding, bias, x view: "plain" | "offset1" | "strided")
    return [
        (1, 1, 2047, 9, 4, True, "plain"),
        (1, 1, 2048, 18, 17, False, "offset1"),          # 2 k steps at their limit, full
        (2, 1, 2049, 19, 9, True, "plain"),              # 3 k steps; rows of two alignments
        (3, 2, 4099, 31, 15, True, "offset1"),           # dw1_k31-like; 3 evened tiles a row
        (2, 3, 4099, 34, 33, True, "strided"),           # 3 k steps at their limit; strided
        (2, 2, 3001, 35, 0, True, "plain"),              # 4 k steps, 'valid'
        (1, 2, 5000, 50, "same", False, "offset1"),      # 4 k steps at their limit, 'same'
        (1, 1, 6000, 51, 50, True, "plain"),             # 8 k steps
        (2, 1, 3000, 114, 113, True, "offset1"),         # one pass at its limit
        (1, 2, 2500, 115, 57, True, "plain"),            # two passes
        (1, 1, 3000, 300, 299, False, "strided"),        # three passes
        (2, 2, 100, 12, 11, True, "plain"),              # a row shorter than one mma tile
        (1, 1, 2000, 1, 0, True, "offset1"),             # K = 1
        (1, 1, 4 * 2048 + 3, 64, 0, True, "strided"),    # several tiles, 'valid'
        (1, 1, 2000, 1500, 1499, True, "plain"),         # K > L
        (1, 3, 2500, 6000, 3000, True, "offset1"),       # 54 passes; 3 warps a block (14.7 KB)
        (2, 1, 1000, 16000, 8000, False, "plain"),       # one warp a block (34 KB staged)
    ]


@pytest.mark.parametrize("dtype", MMA_DTYPES, ids=str)
@pytest.mark.parametrize("idx", range(len(_mma_cases())))
@pytest.mark.parametrize("device", [pytest.param("cuda", marks=cuda_only)])
def test_cuda_rowwise_mma_forced(device, dtype, idx):
    _check_forced_row("rowwise_mma", _mma_cases()[idx], dtype, device, 3000 + idx)


@pytest.mark.parametrize("dtype", MMA_DTYPES, ids=str)
@pytest.mark.parametrize("K", [9, 31, 64, 200])
@pytest.mark.parametrize("device", [pytest.param("cuda", marks=cuda_only)])
def test_cuda_rowwise_mma_alignments(device, dtype, K):
    """Every input misalignment (storage offsets 0..7: the 16-byte aligned staging start moves
    by off < 8 and the filter's band with it) and output rows of varying alignment (odd L_out
    in a batch), several paddings, on the tensor-core kernel."""
    _check_offsets("rowwise_mma", K, dtype, device, 5151 + K, 2500, 2201, {0, 1, K // 2, K - 1})


@pytest.mark.parametrize("dtype", MMA_DTYPES, ids=str)
@pytest.mark.parametrize("K", [9, 31, 130])
@pytest.mark.parametrize("device", [pytest.param("cuda", marks=cuda_only)])
def test_cuda_rowwise_mma_nonfinite_reach_only_their_window(device, dtype, K):
    """A NaN or an infinity makes exactly the outputs whose window holds it non-finite: the mma
    path would also reach neighbours through the zeros of the filter's band (0 * inf), so tiles
    holding one run tap by tap; the other tiles of the same rows stay on the tensor cores."""
    g = torch.Generator().manual_seed(9100 + K)
    x = rand(2, 3, 5000, dtype=dtype, device=device, generator=g)
    for pos in [0, 1, 7, 8, 127, 128, 2047, 2048, 2049, 4999]:
        x[1, 2, pos] = float("nan")
    x[0, 0, 3000] = float("nan")
    w = rand(3, 1, K, dtype=dtype, device=device, generator=g)
    b = rand(3, dtype=dtype, device=device, generator=g)
    with torch_ops.force_algorithm("conv1d", "rowwise_mma"):
        for pad in sorted({0, K // 2, K - 1}):
            check(x, w, b, 1, pad, 1, 3)
            check(x[..., 3:], w, None, 1, pad, 1, 3)
        xi = x.nan_to_num(nan=0.0)
        xi[1, 1, 1234] = float("inf")
        out = call(xi, w, b, 1, K // 2, 1, 3)
    ref = reference(xi, w, b, 1, K // 2, 1, 3)
    assert torch.equal(torch.isinf(out.cpu()), torch.isinf(ref)), "infinity pattern differs"
    assert torch.equal(torch.isnan(out.cpu()), torch.isnan(ref)), "NaN pattern differs"
    finite = torch.isfinite(ref)
    assert int(finite.sum()) < ref.numel()
    assert_close_ref(out.cpu().double()[finite], ref[finite], dtype=dtype)


@pytest.mark.parametrize("dtype", MMA_DTYPES, ids=str)
@pytest.mark.parametrize("device", [pytest.param("cuda", marks=cuda_only)])
def test_cuda_rowwise_mma_many_rows(device, dtype):
    """N*C > 65535 rows (one warp per tile, 1-D grid) with an odd L_out, automatic choice."""
    x, w, b = make(3, 22000, 22000, 300, 31, 22000, True, dtype, device, seed=65538)
    assert torch_ops.algorithm("conv1d", x, w, b, 1, 15, 1, 22000) == "rowwise_mma"
    check(x, w, b, 1, 15, 1, 22000)


@pytest.mark.skipif(not torch_ops.has_cuda_kernels(), reason="needs the CUDA build of gpukern")
@pytest.mark.parametrize("dtype, N, C, L, K, padding, expected", [
    (torch.bfloat16, 16, 768, 2048, 31, 15, "rowwise_mma"),   # dw1_k31_bf16
    (torch.float16, 16, 768, 2048, 31, 15, "rowwise_mma"),
    (torch.float32, 16, 768, 2048, 31, 15, "rowwise16"),      # dw1_k31_f32: no fp32 tensor path
    (torch.bfloat16, 1, 1, 2**20, MMA_MIN_K, 4, "rowwise_mma"),
    (torch.bfloat16, 1, 1, 2**20, MMA_MIN_K - 1, 4, "rowwise_reg"),
    (torch.bfloat16, 8, 4096, 4096, 4, 3, "rowwise_reg"),     # dw1_k4_bf16
    (torch.float16, 8, 4096, 4096, MMA_MIN_K - 1, 3, "rowwise_reg"),
    (torch.float16, 8, 4096, 4096, MMA_MIN_K, 3, "rowwise_mma"),  # before rowwise_reg's K <= 8
    (torch.bfloat16, 1, 1, 2**20, 511, 510, "rowwise_mma"),
    (torch.bfloat16, 16, 1, 2**20, 1024, 1023, "fft"),       # long filters, long signals: FFT
])
def test_rowwise_mma_choice(dtype, N, C, L, K, padding, expected):
    x = torch.empty(N, C, L, device="meta", dtype=dtype)
    w = torch.empty(C, 1, K, device="meta", dtype=dtype)
    assert torch_ops.algorithm("conv1d", x, w, None, 1, padding, 1, C) == expected


# Every direct path forced on a shape it can run: (name, N, C, O, L, K, stride, pad, dil, groups)
FORCED = [
    ("rowwise_reg", 2, 3, 3, 3001, 7, 1, 4, 1, 3),
    ("rowwise8", 2, 3, 3, 3001, 9, 1, 4, 1, 3),
    ("rowwise16", 1, 2, 2, 5003, 40, 1, 39, 1, 2),
    ("rowwise_mma", 1, 2, 2, 5003, 40, 1, 39, 1, 2),
    ("rowwise8_dilated", 1, 2, 2, 3001, 5, 1, 4, 2, 2),
    ("general_ot1", 2, 3, 3, 1001, 9, 1, 4, 1, 3),
    ("general_ot4", 2, 4, 8, 1001, 5, 2, 2, 1, 1),
]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("case", FORCED, ids=lambda c: c[0])
@pytest.mark.parametrize("device", [pytest.param("cuda", marks=cuda_only)])
def test_cuda_forced_paths(device, dtype, case):
    name, N, C, O, L, K, stride, pad, dil, groups = case
    x, w, b = make(N, C, O, L, K, groups, True, dtype, device, seed=L + K)
    if name == "rowwise_mma" and dtype == torch.float32:
        with torch_ops.force_algorithm("conv1d", name):  # 16-bit types only
            with pytest.raises(RuntimeError, match="cannot run this shape.*element size 4"):
                call(x, w, b, stride, pad, dil, groups)
        return
    with torch_ops.force_algorithm("conv1d", name):
        assert torch_ops.algorithm("conv1d", x, w, b, stride, pad, dil, groups) == name
        check(x, w, b, stride, pad, dil, groups)


@pytest.mark.parametrize("device", [pytest.param("cuda", marks=cuda_only)])
def test_cuda_forced_errors(device):
    g = torch.Generator().manual_seed(5)
    x = rand(1, 2, 500, device=device, generator=g)
    w9 = rand(2, 1, REG_MAX_K + 1, device=device, generator=g)
    w3 = rand(2, 1, 3, device=device, generator=g)
    with torch_ops.force_algorithm("conv1d", "rowwise_reg"):
        with pytest.raises(RuntimeError, match="cannot run this shape"):
            call(x, w9, None, 1, 0, 1, 2)                  # K past the limit
        with pytest.raises(RuntimeError, match="cannot run this shape"):
            call(x, w3, None, 1, 0, 2, 2)                  # dilation
        with pytest.raises(RuntimeError, match="cannot run this shape"):
            call(x, w3, None, 2, 0, 1, 2)                  # stride
        with pytest.raises(RuntimeError, match="cannot run this shape"):
            call(x, rand(4, 1, 3, device=device, generator=g), None, 1, 0, 1, 2)  # multiplier
    with pytest.raises(RuntimeError, match="rowwise_reg"):
        with torch_ops.force_algorithm("conv1d", "no_such_algorithm"):
            call(x, w3, None, 1, 0, 1, 2)


@pytest.mark.parametrize("device", [pytest.param("cuda", marks=cuda_only)])
def test_cuda_large_index(device):
    """> 2^31 input elements (bf16 depthwise, ~8.6 GB in + out): int64 offsets on the rowwise
    path. Checks the first and last outputs of the second channel against float64 slices."""
    free, _ = torch.cuda.mem_get_info()
    if free < 12 * 2**30:
        pytest.skip("needs ~12 GB of free GPU memory")
    L = 2**30 + 7
    K = 7
    gen = torch.Generator(device=device).manual_seed(31)
    x = torch.randn(1, 2, L, dtype=torch.bfloat16, device=device, generator=gen)
    w = torch.randn(2, 1, K, dtype=torch.bfloat16, device=device, generator=gen)
    b = torch.randn(2, dtype=torch.bfloat16, device=device, generator=gen)
    out = call(x, w, b, 1, K // 2, 1, 2)
    assert out.shape == (1, 2, L)
    M = 4099
    head = reference(x[:, 1:, :M + K], w[1:], b[1:], 1, K // 2)[..., :M]
    assert_close_ref(out[:, 1:, :M], head, torch.bfloat16)
    tail = reference(x[:, 1:, L - M - K // 2:], w[1:], b[1:], 1, K // 2)[..., K // 2:]
    assert_close_ref(out[:, 1:, L - M:], tail, torch.bfloat16)
    del x, out
    torch.cuda.empty_cache()


# ------------------------------------------------------------------------------------------------
# Errors (every check in csrc/conv/args.cpp reachable from conv1d)
# ------------------------------------------------------------------------------------------------

def _xwb(device, dtype=torch.float32):
    g = torch.Generator().manual_seed(0)
    return (rand(2, 4, 10, dtype=dtype, device=device, generator=g),
            rand(6, 2, 3, dtype=dtype, device=device, generator=g),
            rand(6, dtype=dtype, device=device, generator=g))


@pytest.mark.parametrize("device", DEVICE_PARAMS)
def test_errors(device):
    x, w, b = _xwb(device)
    cases = [
        (lambda: call(x.double() if device == "cpu" else x.half(), w, b, groups=2),
         "same dtype"),
        (lambda: call(x, w, b.double() if device == "cpu" else b.half(), groups=2),
         "same dtype"),
        (lambda: call(x.int(), w.int(), None, groups=2), "supported: float32"),
        (lambda: call(x[None], w, b, groups=2), "dimensions"),
        (lambda: call(x[0, 0], w, b, groups=2), "dimensions"),
        (lambda: call(x, w[0], b, groups=2), "weight with 3 dimensions"),
        (lambda: call(x[:, :3], w, b, groups=2), "must divide the input channels"),
        (lambda: call(x, w[:5], b[:5], groups=2), "must divide the output channels"),
        (lambda: call(x, w, b, groups=1), r"weight.size\(1\) \* groups"),
        (lambda: call(x, w, b, groups=0), "groups must be positive"),
        (lambda: call(x, w, b, padding=-1, groups=2), "padding must be non-negative"),
        (lambda: call(x, w, b, stride=0, groups=2), "stride must be positive"),
        (lambda: call(x, w, b, dilation=0, groups=2), "dilation must be positive"),
        (lambda: call(x, w, b, dilation=6, groups=2), "larger than the padded input"),
        (lambda: call(x, rand(6, 2, 11, device=device), b, groups=2),
         "larger than the padded input"),
        (lambda: call(x, w, b, stride=2, padding="same", groups=2), "not supported for strided"),
        (lambda: call(x, w, b, padding="full", groups=2), "padding must be 'same' or 'valid'"),
        (lambda: call(x, w, b[:5], groups=2), "expected bias of shape"),
        (lambda: call(x, w, b[None], groups=2), "expected bias of shape"),
        (lambda: call(x, rand(6, 2, 0, device=device), b, groups=2), "kernel size must be"),
        (lambda: ops.conv1d(x, w, b, [1, 1], [0], [1], 2), "stride must have 1 value, got 2"),
        (lambda: ops.conv1d(x, w, b, [1], [0, 0], [1], 2), "padding must have"),
        (lambda: ops.conv1d.padding(x, w, b, [1], "same", [1, 2], 2), "dilation must have"),
    ]
    for fn, match in cases:
        with pytest.raises(RuntimeError, match=match):
            fn()
    for fn in [lambda: call(x, w, b, groups=2), lambda: call(x, w, b, 1, "valid", 1, 2)]:
        fn()  # the unmodified arguments are valid


@pytest.mark.parametrize("device", [pytest.param("cuda", marks=cuda_only)])
def test_errors_cuda_only(device):
    x, w, b = _xwb(device)
    with pytest.raises(RuntimeError, match="same device"):
        call(x, w.cpu(), b, groups=2)
    with pytest.raises(RuntimeError, match="same device"):
        call(x, w, b.cpu(), groups=2)
    with pytest.raises(RuntimeError, match="float64 runs on CPU only"):
        call(x.double(), w.double(), b.double(), groups=2)
