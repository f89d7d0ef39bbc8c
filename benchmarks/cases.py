"""The benchmark cases of docs/performance.md: shapes, the bytes that must cross device memory, the
flops, our call, the baselines a PyTorch user would otherwise call, and the target.

Each case is built by `case.make(device, scale)`: scale 1 is the documented shape; the CPU run
uses a small scale so it finishes on a laptop-class machine. Bytes count each input read once and
each output written once; flops count 2 per multiply-add.
"""
import math
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

import torch
import torch.nn.functional as F

import torch_ops


@dataclass
class Built:
    ours: Callable[[], torch.Tensor]
    baselines: Dict[str, Tuple[Callable[[], torch.Tensor], dict]]  # name -> (fn, backend flags)
    reference: Callable[[], torch.Tensor]  # float64 (or exact) reference of the same function
    bytes: int
    flops: int


@dataclass
class Case:
    id: str
    desc: str
    family: str
    make: Callable[[str, float], Built]
    target: Tuple[str, float]  # ("roof", frac) | ("speedup", x) | ("us", max_us)
    graph: bool = False  # launch-bound: time inside a captured CUDA graph
    tol: float = 1e-5  # norm-relative error allowed against the reference
    tags: List[str] = field(default_factory=list)


CUDNN_OFF = {"cudnn_benchmark": False}
CUDNN_ON = {"cudnn_benchmark": True}
NONE = {}

_TOL = {torch.float32: 1e-5, torch.float16: 1e-3, torch.bfloat16: 8e-3}


def _esize(dtype):
    return torch.empty((), dtype=dtype).element_size()


def _randn(shape, dtype, device, seed):
    g = torch.Generator(device="cpu").manual_seed(seed)
    return torch.randn(shape, generator=g, dtype=torch.float32).to(device=device, dtype=dtype)


def _fft_len(n):
    """Smallest 2^a * 3^b * 5^c >= n (a size cuFFT handles fast)."""
    best = 1 << (n - 1).bit_length()
    p5 = 1
    while p5 < best:
        p35 = p5
        while p35 < best:
            m = p35
            while m < n:
                m *= 2
            best = min(best, m)
            p35 *= 3
        p5 *= 5
    return best


def fft_correlate_full(x, w):
    """Full cross-correlation (F.conv1d with padding K-1) through torch.fft, single channel."""
    n, k = x.shape[-1], w.shape[-1]
    size = _fft_len(n + k - 1)
    y = torch.fft.irfft(torch.fft.rfft(x, size) * torch.fft.rfft(w.flip(-1), size), size)
    return y[..., : n + k - 1]


def conv1d_case(cid, desc, B, C, L, K, groups, dtype, padding, target, graph=False, fft=False):
    def make(device, scale):
        length = max(int(L * scale), 4 * K) if scale != 1 else L
        x = _randn((B, C, length), dtype, device, 1)
        w = _randn((C if groups > 1 else 1, C // groups, K), dtype, device, 2)
        out_len = length + 2 * padding - K + 1
        base = {
            "cudnn": (lambda: F.conv1d(x, w, None, 1, padding, 1, groups), CUDNN_OFF),
            "cudnn.bm": (lambda: F.conv1d(x, w, None, 1, padding, 1, groups), CUDNN_ON),
        }
        if fft:
            base["torch.fft"] = (lambda: fft_correlate_full(x, w), NONE)
        return Built(
            ours=lambda: torch_ops.conv1d(x, w, None, 1, padding, 1, groups),
            baselines=base,
            reference=lambda: F.conv1d(x.double(), w.double(), None, 1, padding, 1, groups),
            bytes=(x.numel() + w.numel() + B * w.shape[0] * out_len) * _esize(dtype),
            flops=2 * B * w.shape[0] * out_len * (C // groups) * K,
        )
    return Case(cid, desc, "conv1d", make, target, graph, _TOL[dtype])


def convolve_case(cid, desc, B, L, K, dtype, target, graph=False):
    """torch_ops.convolve(x [B, L], h [K]) mode "full" (true convolution, torchaudio's
    convolve) against the FFT convolution and torchaudio's own method, F.conv1d with the flipped
    filter (flipped once outside the timing: the best a user can do)."""
    def make(device, scale):
        length = max(int(L * scale), 4 * K) if scale != 1 else L
        x = _randn((B, length), dtype, device, 8)
        h = _randn((K,), dtype, device, 9)
        hf = h.flip(-1).contiguous()
        out_len = length + K - 1

        def conv1d_flipped():
            return F.conv1d(x.view(B, 1, length), hf.view(1, 1, K), None, 1, K - 1).view(B, -1)
        return Built(
            ours=lambda: torch_ops.convolve(x, h),
            baselines={
                "cudnn": (conv1d_flipped, CUDNN_OFF),
                "cudnn.bm": (conv1d_flipped, CUDNN_ON),
                "torch.fft": (lambda: fft_correlate_full(x, hf), NONE),  # correlate(x, flip(h))
            },
            reference=lambda: F.conv1d(x.double().view(B, 1, length), hf.double().view(1, 1, K),
                                       None, 1, K - 1).view(B, -1),
            bytes=(x.numel() + K + B * out_len) * _esize(dtype),
            flops=2 * B * out_len * K,
        )
    return Case(cid, desc, "conv1d", make, target, graph, _TOL[dtype])


def conv2d_case(cid, desc, N, C, H, W, K, dtype, target, depthwise, channels_last=False,
                groups=None):
    """depthwise: weight [C, 1, K, K]; groups=g: weight [C, C/g, K, K]; else weight [1, C, K, K]."""
    def make(device, scale):
        h = max(int(H * math.sqrt(scale)), 2 * K) if scale != 1 else H
        w_ = max(int(W * math.sqrt(scale)), 2 * K) if scale != 1 else W
        x = _randn((N, C, h, w_), dtype, device, 3)
        if channels_last:  # ours and the baselines read the same channels_last input
            x = x.to(memory_format=torch.channels_last)
        g = C if depthwise else (groups or 1)
        wt = _randn((C, C // g, K, K) if g > 1 else (1, C, K, K), dtype, device, 4)
        o = wt.shape[0]
        return Built(
            ours=lambda: torch_ops.conv2d(x, wt, None, 1, "same", 1, g),
            baselines={
                "cudnn": (lambda: F.conv2d(x, wt, None, 1, "same", 1, g), CUDNN_OFF),
                "cudnn.bm": (lambda: F.conv2d(x, wt, None, 1, "same", 1, g), CUDNN_ON),
            },
            reference=lambda: F.conv2d(x.double(), wt.double(), None, 1, "same", 1, g),
            bytes=(x.numel() + wt.numel() + N * o * h * w_) * _esize(dtype),
            flops=2 * N * o * h * w_ * (C // g) * K * K,
        )
    return Case(cid, desc, "conv2d", make, target, False, _TOL[dtype])


def mv_case(cid, desc, M, N, dtype, target, transposed=False, graph=False, tol=None):
    def make(device, scale):
        m = max(int(M * scale), min(M, 8)) if scale != 1 else M
        a = _randn((N, m) if transposed else (m, N), dtype, device, 5)
        a = a.t() if transposed else a
        v = _randn((N,), dtype, device, 6)
        return Built(
            ours=lambda: torch_ops.mv(a, v),
            baselines={"cuBLAS": (lambda: torch.mv(a, v), NONE)},
            reference=lambda: torch.mv(a.double(), v.double()),
            bytes=(a.numel() + N + m) * _esize(dtype),
            flops=2 * m * N,
        )
    return Case(cid, desc, "mv", make, target, graph, tol or _TOL[dtype])


def reduce_case(cid, desc, shape, dtype, op, dim, target, graph=False):
    ours_fn = getattr(torch_ops, op)
    base_fn = getattr(torch, op)

    def make(device, scale):
        shp = tuple(shape)
        if scale != 1:
            shp = (max(int(shp[0] * scale), 1),) + shp[1:]
        x = _randn(shp, dtype, device, 7)
        kw = {} if dim is None else {"dim": dim}
        out = base_fn(x, **kw)
        return Built(
            ours=lambda: ours_fn(x, **kw),
            baselines={"torch." + op: (lambda: base_fn(x, **kw), NONE)},
            reference=lambda: base_fn(x.double(), **kw),
            bytes=x.numel() * _esize(dtype) + out.numel() * out.element_size(),
            flops=x.numel(),
        )
    # a sum of n terms in fp32 has a norm-relative error far below 1e-5 with pairwise/blocked
    # accumulation; the output rounding dominates for half types
    return Case(cid, desc, "reduce", make, target, graph, _TOL[dtype])


f32, f16, bf16 = torch.float32, torch.float16, torch.bfloat16
M = 1024 * 1024

CASES: List[Case] = [
    conv1d_case("c1_k16_seed", "conv1d 1ch N=1,024,000 K=16 full fp32", 1, 1, 1_024_000, 16, 1,
                f32, 15, ("us", 6.0), graph=True),
    conv1d_case("c1_k16_64M", "conv1d 1ch N=64M K=16 full fp32", 1, 1, 64 * M, 16, 1, f32, 15,
                ("roof", 0.85)),
    conv1d_case("c1_k127_64M", "conv1d 1ch N=64M K=127 full fp32", 1, 1, 64 * M, 127, 1, f32, 126,
                ("roof", 0.75), fft=True),
    conv1d_case("c1_k1024_seed", "conv1d 1ch N=2,097,152 K=1024 full fp32", 1, 1, 2 * M, 1024, 1,
                f32, 1023, ("speedup", 1.5), fft=True),
    conv1d_case("c1_k1024_16M", "conv1d 1ch N=16M K=1024 full fp32", 1, 1, 16 * M, 1024, 1, f32,
                1023, ("speedup", 1.5), fft=True),
    conv1d_case("c1_k8191_1M", "conv1d 1ch N=1M K=8191 full fp32", 1, 1, M, 8191, 1, f32, 8190,
                ("speedup", 1.5), fft=True),
    conv1d_case("c1_b64_k64", "conv1d B=64 1ch L=1M K=64 full fp32", 64, 1, M, 64, 1, f32, 63,
                ("roof", 0.75)),
    conv1d_case("dw1_k4_f32", "conv1d depthwise B8 C4096 L4096 K4 fp32", 8, 4096, 4096, 4, 4096,
                f32, 3, ("roof", 0.85)),
    conv1d_case("dw1_k4_bf16", "same, bf16", 8, 4096, 4096, 4, 4096, bf16, 3, ("roof", 0.85)),
    conv1d_case("dw1_k31_f32", "conv1d depthwise B16 C768 L2048 K31 fp32", 16, 768, 2048, 31, 768,
                f32, 15, ("roof", 0.75)),
    conv1d_case("dw1_k31_bf16", "same, bf16", 16, 768, 2048, 31, 768, bf16, 15, ("roof", 0.75)),
    convolve_case("convolve_k1025", "convolve x [4, 1,000,000] h [1025] full fp32", 4, 1_000_000,
                  1025, f32, ("speedup", 1.5)),
    conv2d_case("c2_3", "conv2d 1ch 8192x8192 3x3 'same' fp32", 1, 1, 8192, 8192, 3, f32,
                ("roof", 0.85), False),
    conv2d_case("c2_5", "same, 5x5", 1, 1, 8192, 8192, 5, f32, ("roof", 0.85), False),
    conv2d_case("c2_7", "same, 7x7", 1, 1, 8192, 8192, 7, f32, ("roof", 0.85), False),
    conv2d_case("c2_15", "same, 15x15", 1, 1, 8192, 8192, 15, f32, ("roof", 0.75), False),
    conv2d_case("c2_b64_3", "conv2d N64 1ch 1024x1024 3x3 'same' fp32", 64, 1, 1024, 1024, 3, f32,
                ("speedup", 1.0), False),
    conv2d_case("c2_g16_3", "conv2d N8 C64 56x56 groups=16 3x3 'same' fp32", 8, 64, 56, 56, 3,
                f32, ("speedup", 1.0), False, groups=16),
    conv2d_case("dw2_3_f32", "conv2d depthwise N32 C256 56x56 3x3 fp32 NCHW", 32, 256, 56, 56, 3,
                f32, ("roof", 0.85), True),
    conv2d_case("dw2_3_bf16", "same, bf16", 32, 256, 56, 56, 3, bf16, ("roof", 0.85), True),
    conv2d_case("dw2_3_f32_nhwc", "dw2_3_f32 in channels_last", 32, 256, 56, 56, 3, f32,
                ("speedup", 1.0), True, channels_last=True),
    conv2d_case("dw2_3_bf16_nhwc", "dw2_3_bf16 in channels_last", 32, 256, 56, 56, 3, bf16,
                ("speedup", 1.0), True, channels_last=True),
    conv2d_case("dw2_7_f32", "conv2d depthwise N8 C384 64x64 7x7 fp32", 8, 384, 64, 64, 7, f32,
                ("roof", 0.75), True),
    conv2d_case("dw2_13_f32", "same, 13x13", 8, 384, 64, 64, 13, f32, ("roof", 0.75), True),
    conv2d_case("dw2_31_f32", "same, 31x31", 8, 384, 64, 64, 31, f32, ("roof", 0.75), True),
    mv_case("mv_8192_f32", "mv 8192x8192 fp32", 8192, 8192, f32, ("roof", 0.90)),
    mv_case("mvT_8192_f32", "mv A.t() (column-major) 8192x8192 fp32", 8192, 8192, f32,
            ("roof", 0.90), transposed=True),
    mv_case("mv_8192_bf16", "mv 8192x8192 bf16", 8192, 8192, bf16, ("roof", 0.90)),
    mv_case("mv_8192_f16", "mv 8192x8192 fp16", 8192, 8192, f16, ("roof", 0.90)),
    mv_case("mv_16384_f32", "mv 16384x16384 fp32", 16384, 16384, f32, ("speedup", 1.0)),
    mv_case("mv_4096x65536_f32", "mv 4096x65536 fp32", 4096, 65536, f32, ("roof", 0.90)),
    mv_case("mv_65536x4096_bf16", "mv 65536x4096 bf16", 65536, 4096, bf16, ("roof", 0.90)),
    # skinny and odd shapes (4 MB and up: HBM-bound after the L2 flush, so not graph-timed)
    mv_case("mv_1x1M_f32", "mv 1x1,000,000 fp32", 1, 1_000_000, f32, ("speedup", 1.0)),
    mv_case("mv_1Mx1_f32", "mv 1,000,000x1 fp32", 1_000_000, 1, f32, ("speedup", 1.0)),
    mv_case("mv_1000x7777_f32", "mv 1000x7777 fp32", 1000, 7777, f32, ("speedup", 1.0)),
    mv_case("mv_3x1M_f32", "mv 3x1,000,000 fp32", 3, 1_000_000, f32, ("speedup", 1.0)),
    reduce_case("sum_100M_f32", "sum of 1e8 fp32", (100_000_000,), f32, "sum", None,
                ("roof", 0.95)),
    reduce_case("sum_100M_bf16", "sum of 1e8 bf16", (100_000_000,), bf16, "sum", None,
                ("roof", 0.90)),
    reduce_case("sum_2e28_f32", "sum of 2^28 fp32", (1 << 28,), f32, "sum", None,
                ("speedup", 1.0)),
    reduce_case("sum_rows_f32", "sum dim=-1 of 65536x256 fp32", (65536, 256), f32, "sum", -1,
                ("roof", 0.85)),
    reduce_case("sum_rows_bf16", "same, bf16", (65536, 256), bf16, "sum", -1, ("roof", 0.85)),
    reduce_case("sum_mid_f32", "sum dim=1 of 64x512x256 fp32", (64, 512, 256), f32, "sum", 1,
                ("speedup", 1.0)),
    reduce_case("sum_nchw_023_f32", "sum dim=(0,2,3) of NCHW 32x256x56x56 fp32",
                (32, 256, 56, 56), f32, "sum", (0, 2, 3), ("speedup", 1.0)),
    reduce_case("mean_100M_f32", "mean of 1e8 fp32", (100_000_000,), f32, "mean", None,
                ("roof", 0.95)),
    reduce_case("amax_100M_f32", "amax of 1e8 fp32", (100_000_000,), f32, "amax", None,
                ("roof", 0.95)),
    reduce_case("amin_100M_f32", "amin of 1e8 fp32", (100_000_000,), f32, "amin", None,
                ("roof", 0.95)),
    reduce_case("mean_rows_f32", "mean dim=-1 of 65536x256 fp32", (65536, 256), f32, "mean", -1,
                ("roof", 0.85)),
    reduce_case("amax_rows_f32", "amax dim=-1 of 65536x256 fp32", (65536, 256), f32, "amax", -1,
                ("roof", 0.85)),
    reduce_case("amin_rows_f32", "amin dim=-1 of 65536x256 fp32", (65536, 256), f32, "amin", -1,
                ("roof", 0.85)),
    reduce_case("sum_cols_f32", "sum dim=0 of 8192x8192 fp32", (8192, 8192), f32, "sum", 0,
                ("roof", 0.90)),
    reduce_case("amax_rows_bf16", "amax dim=-1 of 65536x256 bf16", (65536, 256), bf16, "amax", -1,
                ("roof", 0.85)),
    reduce_case("sum_1K_f32", "sum of 1024 fp32 (graph)", (1024,), f32, "sum", None,
                ("speedup", 2.0), graph=True),
    reduce_case("sum_64K_f32", "sum of 65536 fp32 (graph)", (65536,), f32, "sum", None,
                ("speedup", 2.0), graph=True),
    reduce_case("sum_1M_f32", "sum of 2^20 fp32 (graph)", (M,), f32, "sum", None,
                ("speedup", 2.0), graph=True),
]


def select(patterns: Optional[List[str]]) -> List[Case]:
    if not patterns:
        return CASES
    return [c for c in CASES if any(p in c.id or p == c.family for p in patterns)]
