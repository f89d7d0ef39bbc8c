"""pointwise_nchw (csrc/conv/direct/pointwise_nchw.cuh, pointwise_nchw16.cuh): dense 1x1
convolutions over NCHW planes on mma.sync, fp32 as TF32 and bfloat16 / float16, with the fused
epilogue act(conv + bias [+ residual]) in registers.

Forced by name against float64 references: tile residues in O (1, 24, 33, 100, 160), C (3, 37,
70, 200, 961: partial and single stages), planes 1x1 to 56x56 and odd ones (the 4-byte copies and
the pixel quads that cross an image), batch and channel slices, a misaligned base, every
activation, residuals, empty batches, conv1d-shaped (H = 1) inputs; every block / warp tile (in
a subprocess with the tile knob), the split tiles. 16-bit: 8- and 4-pixel copies, O across tiles,
partial channel stages, every activation with and without a residual, slices and a base aligned
to 8 bytes only. The automatic rules by query and by the kernels a call launches."""
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import torch_ops
from algo_cases import ACTIVATIONS, conv_ref, offset
from conftest import HAS_CUDA



def gpu(f):
    return pytest.mark.cuda(pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")(f))

ALGO = "pointwise_nchw"
# TF32 operands (10 mantissa bits, rounded to nearest), fp32 accumulation: ~3e-4 measured for
# igemm's TF32 kernels; the bound test_igemm.py uses.
TOL = 2e-3
# 16-bit: fp32 accumulation, the result rounded to the dtype once (norm-relative bounds as in
# tests/test_conv_cudnn.py).
REL_TOL = {torch.bfloat16: 1e-2, torch.float16: 2e-3}


pytestmark = pytest.mark.usefixtures("tf32_allowed")  # tests/conftest.py


def _gen(seed):
    return torch.Generator(device="cuda").manual_seed(seed)


def _rand(g, *shape):
    return torch.randn(*shape, device="cuda", generator=g)


def _rel_err(out, ref):
    o = out.double()
    assert not torch.isnan(o).any(), "NaN in the output"
    return float((o - ref).norm() / ref.norm().clamp_min(1e-30))


def _fused(x, w, b, act="none", r=None):
    with torch_ops.force_algorithm("conv2d", ALGO):
        if x.numel() > 0:  # an empty call reports "empty"
            assert torch_ops.algorithm("conv2d", x, w, b, 1, 0) == ALGO
        return torch_ops.conv2d_fused(x, w, b, 1, 0, 1, 1, activation=act, residual=r)


# (N, C, H, W, O)
SHAPES = [
    (2, 32, 9, 10, 48),     # pixel quads across images (P = 90: 4-byte copies)
    (2, 64, 8, 8, 128),     # 16-byte copies, the 64-row tile
    (3, 37, 7, 7, 24),      # odd C (a partial stage), odd plane, O below one tile
    (1, 3, 5, 9, 33),       # C below one mma step, O = 33 (a 1-row second tile)
    (2, 200, 14, 14, 80),   # MobileNetV3-like, several stages
    (16, 961, 1, 1, 100),   # squeeze-excitation-like: one pixel per image, 31 stages
    (1, 70, 56, 56, 1),     # O = 1
    (4, 160, 7, 7, 160),
]


@gpu
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
def test_parity(shape, bias):
    n, c, h, w_, o = shape
    g = _gen(sum(shape))
    x = _rand(g, n, c, h, w_)
    w = _rand(g, o, c, 1, 1) / c ** 0.5
    b = _rand(g, o) if bias else None
    out = _fused(x, w, b)
    ref = conv_ref(2, x, w, b)
    assert out.shape == ref.shape and out.is_contiguous()
    assert _rel_err(out, ref) <= TOL


@gpu
@pytest.mark.parametrize("act", list(ACTIVATIONS), ids=str)
@pytest.mark.parametrize("residual", [False, True], ids=["plain", "residual"])
def test_fused_epilogue(act, residual):
    g = _gen(7)
    x = _rand(g, 2, 40, 6, 7)
    w = _rand(g, 56, 40, 1, 1) / 40 ** 0.5
    b = _rand(g, 56)
    r = _rand(g, 2, 56, 6, 7) if residual else None
    out = _fused(x, w, b, act, r)
    assert _rel_err(out, conv_ref(2, x, w, b, act, r)) <= TOL


@gpu
def test_views_and_misaligned():
    """Batch and channel slices (plane strides kept, image / channel strides odd), a base one
    element off 16 bytes, residuals sliced, channels_last and transposed: the 4-byte copies and
    the scalar epilogue through the residual's strides."""
    g = _gen(11)
    big = _rand(g, 5, 30, 8, 8)
    w = _rand(g, 24, 29, 1, 1) / 6
    b = _rand(g, 24)
    for x in (big[::2, 1:], big[1:4, :29], offset(big[:, :29].contiguous())):
        rbig = _rand(g, x.shape[0], 25, 8, 8)
        for r in (rbig[:, 1:], rbig[:, 1:].contiguous(memory_format=torch.channels_last),
                  rbig[:, 1:].transpose(2, 3)):  # residual planes sliced, NHWC, transposed
            out = _fused(x, w, b, "relu", r)
            assert _rel_err(out, conv_ref(2, x, w, b, "relu", r)) <= TOL


@gpu
def test_conv1d_shaped_and_empty():
    g = _gen(13)
    x = _rand(g, 2, 48, 1, 37)
    w = _rand(g, 64, 48, 1, 1) / 7
    b = _rand(g, 64)
    assert _rel_err(_fused(x, w, b, "silu"), conv_ref(2, x, w, b, "silu")) <= TOL
    e = _rand(g, 0, 48, 5, 5)
    out = _fused(e, w, b)
    assert out.shape == (0, 64, 5, 5)


# Every block / warp tile (kTiles in pointwise_nchw.cu, forced through the GPUKERN_PW_TILE knob,
# which is read only in a process started with GPUKERN_PW_KNOBS=1), the split tiles (7, 8) with
# 2, 3, 5 and 8 CTAs a cluster (GPUKERN_PW_SPLITS; clamped to the channel stages, so 1 where C
# has one): 16-byte and 4-byte copies, pixel quads and the element epilogue (P = 90, quads
# across images), partial row and column tiles, uneven channel splits (961 channels: 31 stages),
# a residual.
_TILE_SCRIPT = textwrap.dedent("""
    import json, os, torch
    import torch_ops
    from algo_cases import conv_ref
    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cuda.matmul.allow_tf32 = True
    g = torch.Generator(device="cuda").manual_seed(23)
    errs = {}
    configs = [(t, 0) for t in range(1, 7)] + [(7, 2), (7, 3), (7, 8), (8, 2), (8, 5)]
    for tile, splits in configs:
        os.environ["GPUKERN_PW_TILE"] = str(tile)
        os.environ["GPUKERN_PW_SPLITS"] = str(splits)
        for n, c, h, w_, o, res in ((2, 64, 8, 8, 130, True), (2, 37, 9, 10, 70, True),
                                    (3, 160, 7, 7, 33, False), (1, 8, 4, 4, 1, False),
                                    (2, 961, 7, 7, 100, True)):
            x = torch.randn(n, c, h, w_, device="cuda", generator=g)
            w = torch.randn(o, c, 1, 1, device="cuda", generator=g) / c ** 0.5
            b = torch.randn(o, device="cuda", generator=g)
            r = torch.randn(n, o, h, w_, device="cuda", generator=g) if res else None
            with torch_ops.force_algorithm("conv2d", "pointwise_nchw"):
                out = torch_ops.conv2d_fused(x, w, b, activation="relu", residual=r)
            ref = conv_ref(2, x, w, b, "relu", r)
            e = float((out.double() - ref).norm() / ref.norm().clamp_min(1e-30))
            errs[f"{tile}/{splits}:{n}x{c}x{h}x{w_}->{o}"] = e if e == e else 1e30
    print("RESULT " + json.dumps(errs))
""")


@gpu
def test_every_tile():
    env = dict(os.environ, GPUKERN_PW_KNOBS="1")
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.abspath(__file__))] +
                                        sys.path)
    out = subprocess.run([sys.executable, "-c", _TILE_SCRIPT], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    errs = json.loads(line[len("RESULT "):])
    assert len(errs) == 55
    bad = {k: e for k, e in errs.items() if not e <= TOL}
    assert not bad, bad


@gpu
def test_cannot_run_outside_its_shapes():
    """Forcing it on what it does not take raises (3x3, stride 2, channels_last, 16-bit planes of
    49 pixels or 12 channels, TF32 off)."""
    g = _gen(17)
    x = _rand(g, 2, 16, 8, 8)
    w1 = _rand(g, 32, 16, 1, 1)
    x7 = _rand(g, 2, 16, 7, 7)
    cases = [(x, _rand(g, 32, 16, 3, 3), dict(padding=1)),
             (x, w1, dict(stride=2)),
             (x.contiguous(memory_format=torch.channels_last), w1, {}),
             (x.bfloat16().contiguous(memory_format=torch.channels_last), w1.bfloat16(), {}),
             (x7.bfloat16(), w1.bfloat16(), {}),  # 16-bit: planes of a multiple of 4 pixels
             (_rand(g, 2, 12, 8, 8).half(), _rand(g, 32, 12, 1, 1).half(), {})]  # C % 8 != 0
    for xi, wi, kw in cases:
        with torch_ops.force_algorithm("conv2d", ALGO):
            with pytest.raises(RuntimeError, match=f"forced algorithm '{ALGO}' cannot run"):
                torch_ops.conv2d(xi, wi, None, **kw)
    torch.backends.cudnn.allow_tf32 = False
    with torch_ops.force_algorithm("conv2d", ALGO):
        with pytest.raises(RuntimeError, match=f"forced algorithm '{ALGO}' cannot run"):
            torch_ops.conv2d(x, w1, None)


def test_rule():
    """By query (meta tensors, no GPU needed): never the automatic choice by name. igemm's 1x1
    forms run it for calls with a bias or an epilogue (test_igemm_runs_it), and the query, which
    answers for the convolution without them, names igemm."""
    x = torch.empty(16, 64, 56, 56, device="meta")
    w = torch.empty(24, 64, 1, 1, device="meta")
    b = torch.empty(24, device="meta")
    if torch.ops.gpukern._has_igemm():
        assert torch_ops.algorithm("conv2d", x, w, b, 1, 0) == "igemm"
    assert torch_ops.algorithm("conv2d", x, w, b, 1, 0) != ALGO


def _kernels(call):
    from torch.profiler import ProfilerActivity, profile
    call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        out = call()
        torch.cuda.synchronize()
    return out, [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]


@gpu
@pytest.mark.skipif(not HAS_CUDA or not torch.ops.gpukern._has_igemm() or
                    torch.cuda.get_device_capability() != (9, 0),
                    reason="the igemm path (sm_90a)")
def test_igemm_runs_it():
    """igemm's 1x1 forms hand fp32 NCHW blocks with a bias and at most 240 input channels to this
    kernel (one kernel, the epilogue inside), the plain convolution and bf16 to cuBLASLt /
    CUTLASS; 256 input channels only into at most 64 outputs without a residual, not a residual
    into 32 or fewer outputs, not 7x7 planes; 241 to 1024 channels into at most 256 outputs over
    planes under 14x14 where the grid is small enough to split the channels
    (pointwise_nchw_preferred)."""
    g = _gen(19)
    x = _rand(g, 4, 64, 28, 28)
    w = _rand(g, 48, 64, 1, 1) / 8
    b = _rand(g, 48)
    r = _rand(g, 4, 48, 28, 28)

    def taken(call, ref):
        out, names = _kernels(call)
        assert _rel_err(out, ref) <= TOL
        return any("pointwise_nchw" in n for n in names), names

    with torch_ops.force_algorithm("conv2d", "igemm"):
        out, names = _kernels(lambda: torch_ops.conv2d_fused(x, w, b, activation="relu",
                                                              residual=r))
        assert len(names) == 1 and "pointwise_nchw" in names[0], names
        assert _rel_err(out, conv_ref(2, x, w, b, "relu", r)) <= TOL
        for call in (lambda: torch_ops.conv2d(x, w, None),
                     lambda: torch_ops.conv2d(x.bfloat16(), w.bfloat16(), None)):
            _, names = _kernels(call)
            assert not any("pointwise_nchw" in n for n in names), names
        # 16-bit with a bias: the 16-bit kernel, one kernel.
        xb, wb, bb = x.bfloat16(), w.bfloat16(), b.bfloat16()
        out, names = _kernels(lambda: torch_ops.conv2d(xb, wb, bb))
        assert len(names) == 1 and "pointwise_nchw16" in names[0], names
        assert _rel_err(out, conv_ref(2, xb, wb, bb)) <= REL_TOL[torch.bfloat16]
        # The 16-bit rule's edges: 14x14 planes into at most 512 outputs (a residual too); 28x28
        # from at most 64 channels, no residual.
        for c, o, hw, res, want in ((256, 512, 14, True, True), (112, 672, 14, False, False),
                                    (64, 120, 28, False, True), (128, 120, 28, False, False),
                                    (64, 120, 28, True, False)):
            xc = _rand(g, 4, c, hw, hw).bfloat16()
            wc = (_rand(g, o, c, 1, 1) / c ** 0.5).bfloat16()
            bc = _rand(g, o).bfloat16()
            rc = _rand(g, 4, o, hw, hw).bfloat16() if res else None
            out, names = _kernels(lambda: torch_ops.conv2d_fused(xc, wc, bc, residual=rc))
            assert _rel_err(out, conv_ref(2, xc, wc, bc, "none", rc)) <= REL_TOL[torch.bfloat16]
            got = any("pointwise_nchw16" in n for n in names)
            assert got == want, (c, o, hw, res, names)
        for c, o, hw, res, want in ((240, 48, 28, False, True), (256, 48, 28, False, True),
                                    (256, 80, 28, False, False), (256, 48, 28, True, False),
                                    (64, 24, 28, True, False), (64, 48, 7, False, False),
                                    # split tiles: 241-1024 channels over planes under 14x14
                                    (480, 112, 14, False, False), (672, 160, 7, False, True),
                                    (960, 160, 7, True, True), (1280, 112, 7, False, False),
                                    (480, 300, 7, False, False)):
            xc = _rand(g, 4, c, hw, hw)
            wc = _rand(g, o, c, 1, 1) / c ** 0.5
            bc = _rand(g, o)
            rc = _rand(g, 4, o, hw, hw) if res else None
            got, names = taken(lambda: torch_ops.conv2d_fused(xc, wc, bc, residual=rc),
                               conv_ref(2, xc, wc, bc, "none", rc))
            assert got == want, (c, o, hw, res, names)


# ------------------------------------------------------------------------------------------------
# 16-bit (bfloat16, float16): pointwise_nchw16.cuh, mma.m16n8k16 with ldmatrix.trans B fragments.
# ------------------------------------------------------------------------------------------------

# (N, C, H, W, O): 8-pixel copies (P % 8 == 0), 4-pixel copies (14x14: P = 196), O below, across
# and between tiles, many channel stages, a partial last stage (C = 40), P = 4.
SHAPES16 = [
    (2, 32, 8, 8, 48),
    (2, 64, 14, 14, 130),
    (3, 480, 14, 14, 112),
    (2, 40, 28, 28, 33),
    (1, 8, 2, 2, 1),
    (4, 16, 6, 10, 200),
]


@gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("shape", SHAPES16, ids=str)
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
def test_parity16(shape, bias, dtype):
    n, c, h, w_, o = shape
    g = _gen(31 + c + o)
    x = _rand(g, n, c, h, w_).to(dtype)
    w = (_rand(g, o, c, 1, 1) / c ** 0.5).to(dtype)
    b = _rand(g, o).to(dtype) if bias else None
    out = _fused(x, w, b)
    assert out.dtype == dtype and out.is_contiguous()
    assert _rel_err(out, conv_ref(2, x, w, b)) <= REL_TOL[dtype]


@gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("act", list(ACTIVATIONS), ids=str)
@pytest.mark.parametrize("residual", [False, True], ids=["nores", "res"])
def test_fused_epilogue16(act, residual, dtype):
    g = _gen(41)
    x = _rand(g, 2, 48, 14, 14).to(dtype)
    w = (_rand(g, 72, 48, 1, 1) / 7).to(dtype)
    b = _rand(g, 72).to(dtype)
    r = _rand(g, 2, 72, 14, 14).to(dtype) if residual else None
    out = _fused(x, w, b, act, r)
    assert _rel_err(out, conv_ref(2, x, w, b, act, r)) <= REL_TOL[dtype]


@gpu
def test_views16():
    """Batch and channel slices of x (offsets that keep the copies aligned), an empty batch, and
    a view whose offset breaks the 8-pixel alignment (the 4-pixel copies take it)."""
    g = _gen(43)
    base = _rand(g, 3, 48, 8, 8).bfloat16()
    w = (_rand(g, 24, 32, 1, 1) / 6).bfloat16()
    b = _rand(g, 24).bfloat16()
    flat = _rand(g, 3 * 32 * 64 + 4).bfloat16()
    for x in (base[1:, 8:40], base[::2, :32], flat[4:].view(3, 32, 8, 8)):
        assert _rel_err(_fused(x, w, b, "relu"), conv_ref(2, x, w, b, "relu")) <= 1e-2
    out = _fused(base[:0, :32], w, b)
    assert out.shape == (0, 24, 8, 8)
