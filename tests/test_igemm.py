"""The tensor-core implicit-GEMM path ("igemm", csrc/conv/igemm) against F.conv1d / F.conv2d in
float64: ResNet / MobileNet / ConvNeXt-like shapes, odd sizes, bias or none, NCHW and
channels_last, bf16, fp16 and fp32 as TF32; the fall-backs (TF32 off, C = 3, groups); conv1d as
H = 1; views, misaligned and strided tensors; CUDA graph capture; each tile configuration.

Every parity test forces the algorithm by name (torch_ops.force_algorithm(family, "igemm")), so a
pass proves the path ran. Skipped without a CUDA sm_90 device, in a build without the igemm path
(torch.ops.gpukern._has_igemm() false: nvidia-cutlass missing or no 9.0a in
TORCH_CUDA_ARCH_LIST), or where the conv dispatch does not know the name "igemm" yet."""
import pytest
import torch
import torch.nn.functional as F

import torch_ops
from igemm_common import (CONFIGS, DTYPES, FP32_TOL, IGEMM_MARKS, REL_TOL, _captured, _lists,
                          _rand, _ref, _rel_err, _run)
from igemm_common import config  # noqa: F401  (the tile-configuration fixture)

pytestmark = IGEMM_MARKS


# (N, C, H, W, O, (KH, KW), stride, padding, dilation): ResNet / MobileNet / ConvNeXt-like layers
# at small sizes, odd spatial sizes, tile residues in M (N*OH*OW) and N (O), the input trimmed
# where the last window stops short of the padding (1x1 stride 2 over an even size).
SHAPES_2D = [
    (2, 64, 14, 14, 128, (1, 1), 1, 0, 1),      # 1x1 bottleneck expand
    (2, 64, 16, 16, 64, (1, 1), 2, 0, 1),       # 1x1 stride 2 (downsample shortcut), trimmed row
    (2, 32, 17, 13, 64, (3, 3), 1, 1, 1),       # 3x3 'same', odd sizes
    (2, 64, 27, 27, 64, (3, 3), 2, 1, 1),       # 3x3 stride 2, odd size
    (1, 128, 28, 28, 128, (3, 3), 2, 1, 1),     # ResNet 3x3 stride 2
    (2, 8, 33, 33, 64, (7, 7), 2, 3, 1),        # 7x7 stride-2 stem with C padded to 8
    (1, 16, 20, 20, 32, (3, 3), 1, 2, 2),       # dilation 2
    (2, 96, 16, 16, 192, (2, 2), 2, 0, 1),      # ConvNeXt 2x2 stride-2 downsample
    (2, 24, 9, 9, 40, (3, 3), 1, 1, 1),         # O = 40: a partial N tile
    (1, 16, 3, 3, 16, (3, 3), 1, 0, 1),         # one output pixel
    (2, 16, 11, 19, 24, (1, 7), 1, (0, 3), 1),  # asymmetric 1x7
    (3, 16, 64, 64, 16, (1, 1), 1, 0, 1),       # MobileNet-like 1x1, many pixels, few channels
]


def _ids(s):
    n, c, h, wd, o, k, st, p, d = s
    return f"n{n}c{c}_{h}x{wd}_o{o}_k{k[0]}x{k[1]}_s{st}_p{p}_d{d}"


@pytest.mark.parametrize("shape", SHAPES_2D, ids=_ids)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("channels_last", [True, False], ids=["cl", "nchw"])
def test_conv2d_parity(shape, dtype, bias, channels_last, config):
    n, c, h, wd, o, k, stride, padding, dilation = shape
    gen = torch.Generator().manual_seed(SHAPES_2D.index(shape) * 8 + DTYPES.index(dtype) * 2 + bias)
    x = _rand(n, c, h, wd, dtype=dtype, gen=gen)
    w = _rand(o, c, *k, dtype=dtype, gen=gen) / (c * k[0] * k[1]) ** 0.5
    b = _rand(o, dtype=dtype, gen=gen) if bias else None
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
        w = w.contiguous(memory_format=torch.channels_last)
    out = _run("conv2d", x, w, b, stride, padding, dilation)
    ref = _ref(x, w, b, stride, padding, dilation)
    assert out.shape == ref.shape and out.dtype == dtype
    # aten's output layout: channels_last when the input or the weight is.
    assert out.is_contiguous(memory_format=torch.channels_last if channels_last
                             else torch.contiguous_format)
    err = _rel_err(out, ref)
    assert err <= REL_TOL[dtype], f"relative error {err:.3e} > {REL_TOL[dtype]}"


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_conv2d_mixed_layouts_and_views(dtype, config):
    """NCHW input with a channels_last weight (output channels_last), a sliced input (copied), a
    misaligned channels_last view (copied), a strided bias (copied), an unbatched input."""
    gen = torch.Generator().manual_seed(7)
    w = _rand(32, 16, 3, 3, dtype=dtype, gen=gen) / 12.0
    b_big = _rand(64, dtype=dtype, gen=gen)
    b = b_big[::2]
    base = _rand(2, 17, 12, 12, dtype=dtype, gen=gen)
    cases = [
        (base[:, 1:], w.contiguous(memory_format=torch.channels_last)),           # NCHW, CL w
        (base[:, 1:, 1:, 2:], w),                                                 # sliced view
        (base.contiguous(memory_format=torch.channels_last)[:, 1:], w),           # misaligned CL
        (base[0, 1:], w),                                                         # unbatched
    ]
    for x, wi in cases:
        out = _run("conv2d", x, wi, b, 1, 1, 1)
        ref = _ref(x, wi, b, 1, 1, 1)
        assert out.shape == ref.shape
        err = _rel_err(out, ref)
        assert err <= REL_TOL[dtype], f"relative error {err:.3e} > {REL_TOL[dtype]}"


def test_tf32_off_does_not_use_igemm():
    """With TF32 off for convolutions there is no true-fp32 tensor-core path: forcing igemm
    raises, the automatic choice runs a direct kernel, and the result is true fp32."""
    gen = torch.Generator().manual_seed(3)
    x = _rand(2, 64, 14, 14, dtype=torch.float32, gen=gen)
    w = _rand(64, 64, 3, 3, dtype=torch.float32, gen=gen) / 24.0
    torch.backends.cudnn.allow_tf32 = False
    assert torch_ops.algorithm("conv2d", x, w, None, 1, 1) != "igemm"
    with pytest.raises(RuntimeError, match="forced algorithm 'igemm' cannot run"):
        _run("conv2d", x, w, None, 1, 1, 1)
    out = _run("conv2d", x, w, None, 1, 1, 1, algo=None)
    assert _rel_err(out, _ref(x, w, None, 1, 1, 1)) <= FP32_TOL
    torch.backends.cudnn.allow_tf32 = True
    with torch_ops.force_algorithm("conv2d", "igemm"):
        assert torch_ops.algorithm("conv2d", x, w, None, 1, 1) == "igemm"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
def test_rejected_shapes_fall_back(dtype):
    """groups = 2 and O not a multiple of the channel alignment (8 for 16-bit, 4 for fp32):
    igemm cannot run them; forcing raises, the automatic choice runs another kernel, correctly."""
    gen = torch.Generator().manual_seed(5)
    cases = [((2, 16, 10, 10), (32, 8, 3, 3), 1, 1, 2)]       # grouped
    cases.append(((2, 16, 10, 10), (6, 16, 3, 3), 1, 1, 1))   # O % 4 != 0 and O % 8 != 0
    for xs, ws, stride, padding, groups in cases:
        x = _rand(*xs, dtype=dtype, gen=gen)
        w = _rand(*ws, dtype=dtype, gen=gen) / 8.0
        assert torch_ops.algorithm("conv2d", x, w, None, stride, padding, 1, groups) != "igemm"
        with pytest.raises(RuntimeError, match="forced algorithm 'igemm' cannot run"):
            _run("conv2d", x, w, None, stride, padding, 1, groups)
        out = _run("conv2d", x, w, None, stride, padding, 1, groups, algo=None)
        err = _rel_err(out, _ref(x, w, None, stride, padding, 1, groups))
        assert err <= (REL_TOL[dtype] if dtype != torch.float32 else FP32_TOL)


# Unaligned input channels (N, C, H, W, O, K, stride, padding): explicit im2col + the NHWC GEMM,
# or the conv kernel over zero-padded channels where the patch rows are too long or the GEMM tiny.
PADDED_C = [
    (2, 3, 33, 33, 64, 7, 2, 3),    # ResNet's RGB stem
    (2, 3, 32, 32, 96, 4, 4, 0),    # ConvNeXt's patchify stem
    (2, 3, 30, 30, 16, 3, 2, 1),    # MobileNet's stem (O = 16: forced only)
    (1, 12, 10, 10, 16, 3, 1, 1),   # C = 12 (bf16 pads to 16, fp32 runs as is)
    (2, 5, 9, 9, 8, 1, 1, 0),       # 1x1 with C = 5: im2col + GEMM (K = 5 padded to 8)
    (1, 3, 40, 40, 16, 15, 1, 7),   # 15x15: patch rows past the im2col tile: padded conv kernel
    (1, 3, 7, 7, 16, 3, 1, 1),      # 49 output pixels (<= 64): padded conv kernel, small tile
]


@pytest.mark.parametrize("shape", PADDED_C, ids=lambda s: f"c{s[1]}_o{s[4]}_k{s[5]}_s{s[6]}")
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("channels_last", [True, False], ids=["cl", "nchw"])
def test_padded_channels(shape, dtype, channels_last):
    n, c, h, wd, o, k, stride, padding = shape
    gen = torch.Generator().manual_seed(11)
    x = _rand(n, c, h, wd, dtype=dtype, gen=gen)
    w = _rand(o, c, k, k, dtype=dtype, gen=gen) / (c * k * k) ** 0.5
    b = _rand(o, dtype=dtype, gen=gen)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
        w = w.contiguous(memory_format=torch.channels_last)
    out = _run("conv2d", x, w, b, stride, padding, 1)
    ref = _ref(x, w, b, stride, padding, 1)
    assert out.shape == ref.shape
    assert _rel_err(out, ref) <= REL_TOL[dtype]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
def test_igemm_is_the_automatic_choice(dtype):
    """Dense layers with aligned channels, and stems with a few input channels feeding 32+ output
    channels through 8+ taps, choose igemm; grouped and other unaligned layers do not."""
    cl = torch.channels_last
    x = torch.empty(8, 256, 56, 56, device="meta", dtype=dtype).contiguous(memory_format=cl)
    w = torch.empty(256, 256, 3, 3, device="meta", dtype=dtype)
    x1 = torch.empty(4, 512, 1000, device="meta", dtype=dtype)
    w1 = torch.empty(512, 512, 3, device="meta", dtype=dtype)
    assert torch_ops.algorithm("conv2d", x, w, None, 1, 1) == "igemm"
    assert torch_ops.algorithm("conv2d", x.contiguous(), w, None, 1, 1) == "igemm"
    assert torch_ops.algorithm("conv1d", x1, w1, None, 2, 1) == "igemm"
    stem_x = torch.empty(16, 3, 224, 224, device="meta", dtype=dtype)
    stem_w = torch.empty(64, 3, 7, 7, device="meta", dtype=dtype)
    assert torch_ops.algorithm("conv2d", stem_x, stem_w, None, 2, 3) == "igemm"
    audio_x = torch.empty(4, 1, 64000, device="meta", dtype=dtype)
    audio_w = torch.empty(512, 1, 10, device="meta", dtype=dtype)
    assert torch_ops.algorithm("conv1d", audio_x, audio_w, None, 5, 0) == "igemm"
    gx = torch.empty(4, 64, 28, 28, device="meta", dtype=dtype)
    gw = torch.empty(64, 8, 3, 3, device="meta", dtype=dtype)
    assert torch_ops.algorithm("conv2d", gx, gw, None, 1, 1, 1, 8) != "igemm"
    if dtype == torch.bfloat16:  # C = 12: above the alignment, not a multiple of it
        ux = torch.empty(4, 12, 28, 28, device="meta", dtype=dtype)
        uw = torch.empty(64, 12, 3, 3, device="meta", dtype=dtype)
        assert torch_ops.algorithm("conv2d", ux, uw, None, 1, 1) != "igemm"


# 1x1 stride-1 layers run as plain GEMMs: cuBLASLt (conv/igemm/blas.h: NHWC pixel rows, or one
# GEMM per NCHW image from 14x14 planes up, or per single-pixel image) or, where that does not
# take them (GPUKERN_IGEMM_BLAS=0, NCHW with a bias or small planes, a strided channel slice), the
# CUTLASS GEMMs: over NCHW (16-bit, pixels per channel a multiple of 8) one GEMM per image;
# otherwise one GEMM over the NHWC pixels (NCHW converted first).
POINTWISE = [
    (2, 64, 16, 16, 256),   # NCHW-flat (HW = 256)
    (3, 32, 7, 7, 64),      # HW = 49: NCHW converted
    (1, 256, 28, 28, 64),   # a projection
    (16, 120, 1, 1, 32),    # squeeze-excitation: one pixel per image
    (2, 8, 40, 40, 8),      # the smallest aligned channel counts
    (3, 24, 15, 15, 40),    # odd plane (225 pixels: the batched cuBLAS form), odd M
]


@pytest.fixture(params=["blas", "cutlass"])
def gemm_lib(request, monkeypatch):
    """The 1x1 GEMM's library: cuBLASLt where it takes the layer (default), or the CUTLASS GEMMs
    (GPUKERN_IGEMM_BLAS=0)."""
    if request.param == "cutlass":
        monkeypatch.setenv("GPUKERN_IGEMM_BLAS", "0")
    else:
        monkeypatch.delenv("GPUKERN_IGEMM_BLAS", raising=False)
    return request.param


@pytest.mark.parametrize("shape", POINTWISE, ids=lambda s: f"n{s[0]}c{s[1]}_{s[2]}x{s[3]}_o{s[4]}")
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", ["nchw", "cl", "strided"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
def test_pointwise_gemm(shape, dtype, layout, bias, gemm_lib):
    n, c, h, wd, o = shape
    gen = torch.Generator().manual_seed(13)
    x = _rand(n, c, h, wd, dtype=dtype, gen=gen)
    if layout == "cl":
        x = x.contiguous(memory_format=torch.channels_last)
    elif layout == "strided":  # a channel slice of a wider tensor: channel stride kept
        x = _rand(n, c + 8, h, wd, dtype=dtype, gen=gen)[:, 4:4 + c]
    w = _rand(o, c, 1, 1, dtype=dtype, gen=gen) / c ** 0.5
    b = _rand(o, dtype=dtype, gen=gen) if bias else None
    out = _run("conv2d", x, w, b, 1, 0, 1)
    ref = _ref(x, w, b, 1, 0, 1)
    assert out.shape == ref.shape
    assert _rel_err(out, ref) <= REL_TOL[dtype]
    # The output's memory format is aten's.
    aten = F.conv2d(x, w, b)
    for fmt in (torch.contiguous_format, torch.channels_last):
        assert out.is_contiguous(memory_format=fmt) == aten.is_contiguous(memory_format=fmt)


def _blas_expected(shape, dtype, layout, bias):
    """Whether igemm.cpp's rule sends the 1x1 layer to cuBLASLt (blas_gemm_of), for the name."""
    n, c, h, wd, o = shape
    hw = h * wd
    if layout == "cl" or hw == 1:
        return True  # NHWC pixel rows (a single-pixel plane reads as either layout)
    if layout == "strided":
        return False  # a channel slice: neither uniform pixel rows nor an NCHW plane stride
    # NCHW planes from 14x14 up, or from 7x7 up with a small weight (forms.h blas_images_plane):
    # no bias, or fp32, or 16-bit with O <= 64 or planes under 28x28 (the bias as a pass after
    # the GEMM; forms.cpp pass16_rule)
    plane_ok = hw >= 196 or (hw >= 49 and c * o <= 1 << 18
                             and (dtype == torch.float32 or c <= 256))
    return (not bias or dtype == torch.float32 or o <= 64 or hw < 784) and plane_ok


@pytest.mark.parametrize("shape", POINTWISE, ids=lambda s: f"n{s[0]}c{s[1]}_{s[2]}x{s[3]}_o{s[4]}")
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", ["nchw", "cl"])
def test_pointwise_fused_epilogues(shape, dtype, layout, gemm_lib):
    """The fused op on 1x1 layers: bias, residual and each activation cuBLASLt's epilogue has
    (none, relu) or not (silu, hardswish: the CUTLASS GEMM, or cuBLASLt and an activation pass
    over NHWC on small planes, forms.cpp rows_act_pass), against the unfused float64
    sequence; the configuration the query names is the one the rule picks."""
    n, c, h, wd, o = shape
    gen = torch.Generator().manual_seed(17)
    x = _rand(n, c, h, wd, dtype=dtype, gen=gen)
    if layout == "cl":
        x = x.contiguous(memory_format=torch.channels_last)
    w = _rand(o, c, 1, 1, dtype=dtype, gen=gen) / c ** 0.5
    for bias in (False, True):
        b = _rand(o, dtype=dtype, gen=gen) if bias else None
        ref = _ref(x, w, b, 1, 0, 1)
        r = _rand(*ref.shape, dtype=dtype, gen=gen)
        if layout == "cl":
            r = r.contiguous(memory_format=torch.channels_last)
        for res in (None, r):
            for act, fn in (("none", lambda t: t), ("relu", F.relu), ("silu", F.silu),
                            ("hardswish", F.hardswish)):
                with torch_ops.force_algorithm("conv2d", "igemm"):
                    out = torch_ops.conv2d_fused(x, w, b, 1, 0, 1, 1, act, res)
                want = fn(ref + (0 if res is None else res.double()))
                err = _rel_err(out, want)
                assert err <= REL_TOL[dtype], (bias, res is None, act, err)
    xm = x.to("meta")
    wm = w.to("meta")
    name = torch.ops.gpukern._igemm_config_conv2d(xm, wm, [1, 1], [0, 0], [1, 1])
    if gemm_lib == "blas" and _blas_expected(shape, dtype, layout, False):
        assert name == "cublas_1x1", name
    else:
        assert name != "cublas_1x1", name


# cuBLASLt's algorithm per problem (csrc/conv/igemm/blas.h): by default the heuristic's candidates
# are timed on the problem's first call outside a CUDA-graph capture and the fastest kept; with
# GPUKERN_BLAS_TUNE=0, or under torch's deterministic mode, the heuristic's first choice.
# (N, C, H, W, O, layout): pixel rows (kRows) and NCHW planes (kImages).
TUNED_1X1 = [(8, 256, 14, 14, 512, "cl"), (8, 1024, 14, 14, 256, "nchw"),
             (4, 64, 28, 28, 64, "cl"), (2, 160, 16, 16, 96, "nchw")]


def _tuned_layer(shape, dtype, gen):
    n, c, h, wd, o, layout = shape
    x = _rand(n, c, h, wd, dtype=dtype, gen=gen)
    if layout == "cl":
        x = x.contiguous(memory_format=torch.channels_last)
    w = _rand(o, c, 1, 1, dtype=dtype, gen=gen) / c ** 0.5
    return x, w


@pytest.mark.parametrize("shape", TUNED_1X1, ids=lambda s: f"n{s[0]}c{s[1]}_{s[2]}_o{s[4]}_{s[5]}")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
def test_blas_tuning_each_way(shape, dtype, monkeypatch):
    """The timed choice and the heuristic's first choice both compute the layer (bias, relu and a
    residual in cuBLASLt's epilogue over pixel rows; the plain GEMM over NCHW planes), and torch's
    deterministic mode runs the very kernel GPUKERN_BLAS_TUNE=0 runs (bit for bit the same)."""
    gen = torch.Generator().manual_seed(29)
    x, w = _tuned_layer(shape, dtype, gen)
    cl = shape[5] == "cl"
    b = _rand(shape[4], dtype=dtype, gen=gen) if cl else None
    ref = _ref(x, w, b, 1, 0, 1)
    r = None
    if cl:
        r = _rand(*ref.shape, dtype=dtype, gen=gen).contiguous(memory_format=torch.channels_last)
    act = "relu" if cl else "none"
    want = F.relu(ref + r.double()) if cl else ref
    assert torch.ops.gpukern._igemm_config_conv2d(
        x.to("meta"), w.to("meta"), [1, 1], [0, 0], [1, 1]) == "cublas_1x1"

    def run():
        with torch_ops.force_algorithm("conv2d", "igemm"):
            return torch_ops.conv2d_fused(x, w, b, 1, 0, 1, 1, act, r)
    outs = {}
    for setting in ("1", "0"):
        monkeypatch.setenv("GPUKERN_BLAS_TUNE", setting)
        for call in range(2):  # the first call (timing the candidates, or not) and a later one
            out = run()
            assert _rel_err(out, want) <= REL_TOL[dtype], (setting, call)
        outs[setting] = out
    monkeypatch.delenv("GPUKERN_BLAS_TUNE")
    old = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        det = run()
    finally:
        torch.use_deterministic_algorithms(old)
    assert torch.equal(det, outs["0"])


def test_blas_first_call_in_graph_capture():
    """A 1x1 problem whose first call is captured into a CUDA graph runs the heuristic's choice
    there (no timing inside a capture) and replays correctly; the next call outside the capture
    times the candidates and is correct too."""
    gen = torch.Generator().manual_seed(31)
    warm, ww = _tuned_layer((2, 32, 8, 8, 32, "cl"), torch.bfloat16, gen)
    x, w = _tuned_layer((3, 72, 13, 11, 56, "cl"), torch.bfloat16, gen)  # a shape no test uses
    b = _rand(56, dtype=torch.bfloat16, gen=gen)
    with torch_ops.force_algorithm("conv2d", "igemm"):
        torch.ops.gpukern.conv2d(warm, ww, None, [1, 1], [0, 0], [1, 1], 1)  # the handle exists
        g, out = _captured(lambda: torch.ops.gpukern.conv2d(x, w, b, [1, 1], [0, 0], [1, 1], 1))
        x.copy_(_rand(3, 72, 13, 11, dtype=torch.bfloat16, gen=gen))
        g.replay()
        torch.cuda.synchronize()
        assert _rel_err(out, _ref(x, w, b, 1, 0, 1)) <= REL_TOL[torch.bfloat16]
        again = torch.ops.gpukern.conv2d(x, w, b, [1, 1], [0, 0], [1, 1], 1)
    assert _rel_err(again, _ref(x, w, b, 1, 0, 1)) <= REL_TOL[torch.bfloat16]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_nhwc_blas_small_planes(dtype, monkeypatch):
    """NCHW 1x1 layers that run4 converts to NHWC run cuBLASLt's pixel-row form on planes of up to
    7x7 (forms.h nhwc_blas_plane), the CUTLASS GEMM above, and GPUKERN_IGEMM_NHWC_BLAS=1 / 0
    forces either: each way the fused op computes act(conv + bias + residual) with the output in
    aten's memory format, and the configuration's name says which ran."""
    gen = torch.Generator().manual_seed(37)
    for env, (n, c, h, wd, o), want in (
            # (a small weight on these planes takes the batched NCHW form, cublas_1x1, instead)
            (None, (2, 512, 7, 7, 1024), "nhwc+cublas_1x1"),
            (None, (3, 64, 5, 9, 32), "nhwc+cublas_1x1"),
            ("0", (2, 512, 7, 7, 1024), "gemm_1x1"),
            ("1", (2, 512, 13, 9, 1024), "nhwc+cublas_1x1"),
            (None, (2, 512, 13, 9, 1024), "gemm_1x1")):
        if env is None:
            monkeypatch.delenv("GPUKERN_IGEMM_NHWC_BLAS", raising=False)
        else:
            monkeypatch.setenv("GPUKERN_IGEMM_NHWC_BLAS", env)
        x = _rand(n, c, h, wd, dtype=dtype, gen=gen)
        w = _rand(o, c, 1, 1, dtype=dtype, gen=gen) / c ** 0.5
        b = _rand(o, dtype=dtype, gen=gen)
        name = torch.ops.gpukern._igemm_config_conv2d(x, w, [1, 1], [0, 0], [1, 1])
        assert name == want, (env, (n, c, h, wd, o), name)
        ref = _ref(x, w, b, 1, 0, 1)
        r = _rand(*ref.shape, dtype=dtype, gen=gen)
        for res, act, fn in ((None, "none", lambda t: t), (r, "relu", F.relu),
                             (None, "silu", F.silu)):
            with torch_ops.force_algorithm("conv2d", "igemm"):
                out = torch_ops.conv2d_fused(x, w, b, 1, 0, 1, 1, act, res)
            want_out = fn(ref + (0 if res is None else res.double()))
            assert _rel_err(out, want_out) <= REL_TOL[dtype], (env, n, c, act)
            assert out.is_contiguous()


# 1x1 with a stride (ResNet's downsampling shortcuts): the sampled pixels copied in x's memory
# format (to NHWC for output planes of at most 64 pixels), then the stride-1 GEMM forms
# ("subsample+<the 1x1 form>"). (N, C, H, W, O, stride).
STRIDED_POINTWISE = [
    (2, 64, 16, 16, 128, 2),       # even size: 8x8 out, gathered to NHWC
    (2, 64, 14, 14, 96, 2),        # ResNet-50's shortcut into 7x7, gathered to NHWC
    (3, 32, 13, 13, 48, 2),        # odd size: the last row / column sampled, 7x7 out
    (2, 32, 20, 20, 64, 3),        # stride 3: 7x7 out
    (3, 32, 29, 31, 64, 2),        # odd sizes: the last row / column sampled, 15x16 out
    (2, 16, 40, 40, 32, (2, 3)),   # different strides per dim
    (2, 64, 56, 56, 32, 2),        # 28x28 planes: the batched NCHW cuBLASLt form
]


@pytest.mark.parametrize("shape", STRIDED_POINTWISE,
                         ids=lambda s: f"n{s[0]}c{s[1]}_{s[2]}x{s[3]}_o{s[4]}_s{s[5]}")
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", ["nchw", "cl", "strided"])
def test_strided_pointwise(shape, dtype, layout, gemm_lib, monkeypatch):
    """1x1 stride > 1 through the subsampled copy: plain and fused (bias, residual, an activation
    cuBLASLt has and one it lacks) against float64; the output's memory format is aten's; the
    query names the form (and GPUKERN_IGEMM_SAMPLED=0 keeps small planes off it)."""
    n, c, h, wd, o, stride = shape
    gen = torch.Generator().manual_seed(19)
    x = _rand(n, c, h, wd, dtype=dtype, gen=gen)
    if layout == "cl":
        x = x.contiguous(memory_format=torch.channels_last)
    elif layout == "strided":  # a channel slice of a wider tensor
        x = _rand(n, c + 8, h, wd, dtype=dtype, gen=gen)[:, 4:4 + c]
    w = _rand(o, c, 1, 1, dtype=dtype, gen=gen) / c ** 0.5
    b = _rand(o, dtype=dtype, gen=gen)
    for bias in (None, b):
        out = _run("conv2d", x, w, bias, stride, 0, 1)
        ref = _ref(x, w, bias, stride, 0, 1)
        assert out.shape == ref.shape
        assert _rel_err(out, ref) <= REL_TOL[dtype]
        aten = F.conv2d(x, w, bias, stride)
        for fmt in (torch.contiguous_format, torch.channels_last):
            assert out.is_contiguous(memory_format=fmt) == aten.is_contiguous(memory_format=fmt)
    ref = _ref(x, w, b, stride, 0, 1)
    r = _rand(*ref.shape, dtype=dtype, gen=gen)
    for act, fn in (("relu", F.relu), ("hardswish", F.hardswish)):
        with torch_ops.force_algorithm("conv2d", "igemm"):
            out = torch_ops.conv2d_fused(x, w, b, stride, 0, 1, 1, act, r)
        assert _rel_err(out, fn(ref + r.double())) <= REL_TOL[dtype], act
    name = torch.ops.gpukern._igemm_config_conv2d(
        x.to("meta"), w.to("meta"), _lists(2, stride)[0], [0, 0], [1, 1])
    # The copy only for NCHW planes (a channel slice included) whose output takes the batched
    # cuBLASLt form (14x14 and larger) or has at most 64 pixels; channels_last reads the samples
    # in place.
    sh, sw = _lists(2, stride)[0]
    planes = ((h - 1) // sh + 1) * ((wd - 1) // sw + 1)
    want = layout != "cl" and (planes >= 196 or planes <= 64) and gemm_lib == "blas"
    assert name.startswith("subsample+") == want, name
    if planes <= 64:
        monkeypatch.setenv("GPUKERN_IGEMM_SAMPLED", "0")
        name = torch.ops.gpukern._igemm_config_conv2d(
            x.to("meta"), w.to("meta"), _lists(2, stride)[0], [0, 0], [1, 1])
        assert not name.startswith("subsample+"), name


# conv1d over NCL with a few taps per stride step: explicit columns and one cuBLASLt GEMM per
# image ("cols_im2col_cublas"; the bias in a pass after the GEMM in fp32, the CUTLASS conv with
# a bias in 16-bit types). (N, C, L, O, K, stride, padding, dilation).
COLS_1D = [
    (2, 64, 101, 64, 3, 2, 0, 1),     # wav2vec2-like K=3 stride 2, odd L
    (3, 1, 1000, 64, 10, 5, 0, 1),    # the single-channel K=10 stride-5 stem (K padded to 16 B)
    (2, 32, 77, 48, 2, 2, 0, 1),      # K=2 stride 2, odd L: the last sample unused
    (2, 16, 50, 32, 3, 1, 2, 2),      # K=3 stride 1 with padding and dilation
    (1, 8, 9, 16, 4, 1, 3, 1),        # padding wider than the first windows
]


@pytest.mark.parametrize("shape", COLS_1D,
                         ids=lambda s: f"n{s[0]}c{s[1]}_l{s[2]}_o{s[3]}_k{s[4]}_s{s[5]}_p{s[6]}")
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", ["ncl", "nlc", "sliced"])
def test_conv1d_cols(shape, dtype, layout, monkeypatch):
    monkeypatch.delenv("GPUKERN_IGEMM_BLAS", raising=False)
    n, c, length, o, k, stride, padding, dilation = shape
    gen = torch.Generator().manual_seed(23)
    x = _rand(n, c, length, dtype=dtype, gen=gen)
    if layout == "nlc":
        x = x.transpose(1, 2).contiguous().transpose(1, 2)
    elif layout == "sliced":  # every other sample of a longer signal: a strided view
        x = _rand(n, c, 2 * length, dtype=dtype, gen=gen)[:, :, ::2]
    w = _rand(o, c, k, dtype=dtype, gen=gen) / (c * k) ** 0.5
    b = _rand(o, dtype=dtype, gen=gen)
    for bias in (None, b):
        out = _run("conv1d", x, w, bias, stride, padding, dilation)
        ref = _ref(x, w, bias, stride, padding, dilation)
        assert out.shape == ref.shape and out.is_contiguous()
        assert _rel_err(out, ref) <= REL_TOL[dtype], bias is None
    ref = _ref(x, w, b, stride, padding, dilation)
    r = _rand(*ref.shape, dtype=dtype, gen=gen)
    for act, fn, res in (("relu", F.relu, None), ("relu", F.relu, r), ("gelu", F.gelu, r)):
        for bias in (None, b):
            want = fn(_ref(x, w, bias, stride, padding, dilation) +
                      (0 if res is None else res.double()))
            with torch_ops.force_algorithm("conv1d", "igemm"):
                out = torch_ops.conv1d_fused(x, w, bias, stride, padding, dilation, 1, act, res)
            assert _rel_err(out, want) <= REL_TOL[dtype], (act, bias is None, res is None)
    if layout == "nlc":
        return  # as a 4-D query the NLC input reads as channels_last (conv1d's output is NCL)
    x4, w4 = x.unsqueeze(2).to("meta"), w.unsqueeze(2).to("meta")
    name = torch.ops.gpukern._igemm_config_conv2d(x4, w4, [1, stride], [0, padding],
                                                  [1, dilation])
    assert name == "cols_im2col_cublas", name
    monkeypatch.setenv("GPUKERN_IGEMM_BLAS", "0")
    assert torch.ops.gpukern._igemm_config_conv2d(x4, w4, [1, stride], [0, padding],
                                                  [1, dilation]) != "cols_im2col_cublas"


# conv1d as H = 1: (N, C, L, O, K, stride, padding, dilation).
SHAPES_1D = [
    (4, 512, 1001, 512, 3, 2, 1, 1),   # wav2vec2-like 512->512 K=3 stride 2 (shorter L)
    (2, 64, 257, 128, 5, 1, 2, 1),     # 'same' K=5
    (2, 32, 100, 64, 3, 1, 2, 2),      # dilated
    (3, 16, 77, 24, 1, 1, 0, 1),       # pointwise
]


@pytest.mark.parametrize("shape", SHAPES_1D,
                         ids=lambda s: f"n{s[0]}c{s[1]}_l{s[2]}_o{s[3]}_k{s[4]}_s{s[5]}")
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nlc", [False, True], ids=["ncl", "nlc"])
def test_conv1d_parity(shape, dtype, nlc, config):
    n, c, length, o, k, stride, padding, dilation = shape
    gen = torch.Generator().manual_seed(11)
    x = _rand(n, c, length, dtype=dtype, gen=gen)
    if nlc:  # channels the contiguous dim: read in place
        x = x.transpose(1, 2).contiguous().transpose(1, 2)
    w = _rand(o, c, k, dtype=dtype, gen=gen) / (c * k) ** 0.5
    b = _rand(o, dtype=dtype, gen=gen)
    out = _run("conv1d", x, w, b, stride, padding, dilation)
    ref = _ref(x, w, b, stride, padding, dilation)
    assert out.shape == ref.shape and out.is_contiguous()
    err = _rel_err(out, ref)
    assert err <= REL_TOL[dtype], f"relative error {err:.3e} > {REL_TOL[dtype]}"


def test_conv1d_wav2vec2_full_size(config):
    """The real wav2vec2 layer: B4, 512->512, K=3, stride 2, L=12,799, bf16."""
    gen = torch.Generator().manual_seed(13)
    x = _rand(4, 512, 12799, dtype=torch.bfloat16, gen=gen)
    w = _rand(512, 512, 3, dtype=torch.bfloat16, gen=gen) / 40.0
    out = _run("conv1d", x, w, None, 2, 0, 1)
    assert _rel_err(out, _ref(x, w, None, 2, 0, 1)) <= REL_TOL[torch.bfloat16]


def test_cuda_graph_capture(config):
    """A forced igemm call captures into a CUDA graph and replays on new data."""
    gen = torch.Generator().manual_seed(17)
    x = _rand(4, 64, 28, 28, dtype=torch.bfloat16, gen=gen).contiguous(
        memory_format=torch.channels_last)
    w = _rand(128, 64, 3, 3, dtype=torch.bfloat16, gen=gen).contiguous(
        memory_format=torch.channels_last) / 24.0
    b = _rand(128, dtype=torch.bfloat16, gen=gen)
    with torch_ops.force_algorithm("conv2d", "igemm"):
        _run("conv2d", x, w, b, 1, 1, 1, algo=None)  # warm-up outside the capture
        g, out = _captured(lambda: torch.ops.gpukern.conv2d(x, w, b, [1, 1], [1, 1], [1, 1], 1))
    x.copy_(_rand(4, 64, 28, 28, dtype=torch.bfloat16, gen=gen))
    g.replay()
    torch.cuda.synchronize()
    assert _rel_err(out, _ref(x, w, b, 1, 1, 1)) <= REL_TOL[torch.bfloat16]


# The automatic configuration (igemm.cpp bucket_of, stems and 1x1 GEMMs), as the query names it:
# (N, C, H, W, O, K, stride, padding) -> the name. A query without a GPU answers for 132 SMs.
CONFIG_RULE = [
    ((16, 512, 7, 7, 512, 3, 1, 1), "medium_64x128"),    # 28 tiles of 128x128, O >= 256
    ((16, 512, 14, 14, 512, 3, 2, 1), "medium_64x128"),  # stride 2 to 7x7: the same grid
    ((16, 128, 7, 7, 128, 3, 1, 1), "small_64x64"),      # 7 tiles, O < 256
    ((16, 64, 56, 56, 64, 3, 1, 1), "narrow_128x64"),    # O = 64
    ((2, 64, 14, 14, 64, 3, 1, 1), "small_64x64"),       # O = 64, 4 tiles
    ((16, 256, 14, 14, 256, 3, 1, 1), "medium_64x128"),  # 50 tiles: under half the SMs
    ((16, 256, 28, 28, 256, 3, 2, 1), "medium_64x128"),  # stride 2 to 14x14
    ((16, 128, 56, 56, 128, 3, 2, 1), "large_128x128"),  # 98 tiles
    ((1, 16, 8, 8, 16, 3, 1, 0), "small_64x64"),         # 36 output pixels
    ((16, 256, 28, 28, 512, 1, 1, 0), "cublas_1x1"),     # NCHW, 28x28 planes: batched cuBLASLt
    ((16, 512, 7, 7, 2048, 1, 1, 0), "nhwc+cublas_1x1"),  # NCHW 7x7: converted, cuBLASLt rows
    ((16, 512, 14, 14, 2048, 1, 1, 0), "cublas_1x1"),    # NCHW 14x14: batched cuBLASLt
    ((16, 160, 7, 7, 960, 1, 1, 0), "cublas_1x1"),       # NCHW 7x7, a small weight: batched
    ((16, 960, 1, 1, 240, 1, 1, 0), "cublas_1x1"),       # squeeze-excitation, one pixel an image
    ((16, 3, 224, 224, 64, 7, 2, 3), "stem_im2col_gemm"),
    ((16, 256, 56, 56, 512, 1, 2, 0), "subsample+cublas_1x1"),  # 1x1 stride 2 to 28x28 planes
]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_bucket_rule(dtype, monkeypatch):
    monkeypatch.delenv("GPUKERN_IGEMM_CONFIG", raising=False)
    for (n, c, h, wd, o, k, stride, padding), want in CONFIG_RULE:
        x = torch.empty(n, c, h, wd, device="meta", dtype=dtype)
        w = torch.empty(o, c, k, k, device="meta", dtype=dtype)
        got = torch.ops.gpukern._igemm_config_conv2d(x, w, [stride] * 2, [padding] * 2, [1, 1])
        if want.startswith(("small", "medium", "large")) and torch.cuda.get_device_properties(
                0).multi_processor_count != 132:
            continue  # the tile rule counts this GPU's SMs
        assert got == want, ((n, c, h, wd, o, k, stride, padding), got)
    x = torch.empty(16, 256, 28, 28, device="meta", dtype=dtype)
    w = torch.empty(512, 256, 1, 1, device="meta", dtype=dtype)
    # GPUKERN_IGEMM_BLAS=0: 1x1 layers on the CUTLASS GEMM
    monkeypatch.setenv("GPUKERN_IGEMM_BLAS", "0")
    assert torch.ops.gpukern._igemm_config_conv2d(x, w, [1, 1], [0, 0], [1, 1]) == "gemm_1x1"
    monkeypatch.delenv("GPUKERN_IGEMM_BLAS")
    # GPUKERN_IGEMM_GEMM=0: 1x1 layers and stems on the conv kernel, and named so
    monkeypatch.setenv("GPUKERN_IGEMM_GEMM", "0")
    assert torch.ops.gpukern._igemm_config_conv2d(x, w, [1, 1], [0, 0], [1, 1]) not in (
        "gemm_1x1", "cublas_1x1")
    monkeypatch.delenv("GPUKERN_IGEMM_GEMM")
    monkeypatch.setenv("GPUKERN_IGEMM_CONFIG", "large")
    x = torch.empty(16, 512, 7, 7, device="meta", dtype=dtype)
    w = torch.empty(512, 512, 3, 3, device="meta", dtype=dtype)
    assert torch.ops.gpukern._igemm_config_conv2d(x, w, [1, 1], [1, 1], [1, 1]) == "large_128x128"


def test_fused_epilogue_each_config(monkeypatch):
    """The fused epilogue (bias, activation, residual) on each tile configuration, NCHW and
    channels_last, against the unfused float64 sequence."""
    gen = torch.Generator().manual_seed(31)
    for dtype in DTYPES:
        x = _rand(2, 64, 9, 11, dtype=dtype, gen=gen)
        w = _rand(72, 64, 3, 3, dtype=dtype, gen=gen) / 24.0
        b = _rand(72, dtype=dtype, gen=gen)
        ref = _ref(x, w, b, 1, 1, 1)
        r = _rand(*ref.shape, dtype=dtype, gen=gen)
        for cfg in CONFIGS:
            monkeypatch.setenv("GPUKERN_IGEMM_CONFIG", cfg)
            for xx in (x, x.contiguous(memory_format=torch.channels_last)):
                for act, fn in (("relu", F.relu), ("silu", F.silu), ("hardswish", F.hardswish)):
                    with torch_ops.force_algorithm("conv2d", "igemm"):
                        out = torch_ops.conv2d_fused(xx, w, b, 1, 1, 1, 1, act, r)
                    err = _rel_err(out, fn(ref + r.double()))
                    assert err <= REL_TOL[dtype], (dtype, cfg, act, err)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
def test_nchw_filter_cache_follows_the_weight(dtype):
    """An NCHW filter's OHWI copy is remembered between calls (igemm.cpp cached_nhwc_filter):
    in-place updates of the weight, a new tensor at the same address, another view of the same
    storage and a call under inference mode must all be seen, never a stale copy."""
    gen = torch.Generator().manual_seed(5)
    x = _rand(2, 64, 12, 12, dtype=dtype, gen=gen)
    w = _rand(64, 64, 3, 3, dtype=dtype, gen=gen) / 24.0
    tol = REL_TOL[dtype]

    def check(weight):
        out = _run("conv2d", x, weight, None, 1, 1, 1)
        assert _rel_err(out, _ref(x, weight, None, 1, 1, 1)) <= tol

    check(w)
    check(w)  # from the cache
    w.mul_(-2.0)  # in place: a new version
    check(w)
    w.data = _rand(64, 64, 3, 3, dtype=dtype, gen=gen) / 24.0  # new storage behind the tensor
    check(w)
    big = _rand(128, 64, 3, 3, dtype=dtype, gen=gen) / 24.0
    check(big[:64])  # two views of one storage
    check(big[64:])
    del w
    w2 = _rand(64, 64, 3, 3, dtype=dtype, gen=gen) / 24.0  # may reuse the freed block
    check(w2)
    with torch.inference_mode():
        wi = _rand(64, 64, 3, 3, dtype=dtype, gen=gen) / 24.0  # no version counter
        check(wi)
        wi.mul_(0.5)
        check(wi)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):  # another stream converts for itself
        check(w2)
    torch.cuda.synchronize()
