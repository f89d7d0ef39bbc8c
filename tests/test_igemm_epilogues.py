"""The igemm path's fused-epilogue forms against the unfused float64 sequence: 16-bit NCHW 1x1
blocks on the CUTLASS NCHW GEMM or cuBLASLt and a pass, channels_last blocks with an activation
cuBLASLt lacks, the conv kernel's NCHW-output epilogue, 1x1 layers over 7x7 planes through the
channels_last temporary and the epilogue on the way back, CUTLASS 2.x's SM80 NCHW GEMM (gemm80).
Skipped as tests/test_igemm.py is (igemm_common.py)."""
import pytest
import torch
import torch.nn.functional as F

import torch_ops
from conftest import kernel_names as _kernel_names
from igemm_common import (DTYPES, IGEMM_MARKS, REL_TOL, _captured, _rand, _ref, _rel_err, _run)
from igemm_common import config  # noqa: F401  (the tile-configuration fixture)

pytestmark = IGEMM_MARKS


@pytest.mark.parametrize("pass16", ["0", "1"], ids=["cutlass", "pass"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_nchw_fused_16bit_both_forms(pass16, dtype, monkeypatch):
    """16-bit NCHW 1x1 fused blocks run either the CUTLASS NCHW GEMM with the epilogue inside or
    cuBLASLt's batched GEMM and the epilogue pass (GPUKERN_IGEMM_PASS16 forces each): both match
    the float64 sequence, with bias, residual and an activation cuBLASLt lacks."""
    monkeypatch.setenv("GPUKERN_IGEMM_PASS16", pass16)
    gen = torch.Generator().manual_seed(23)
    for n, c, h, wd, o in ((2, 64, 14, 14, 128), (3, 16, 28, 29, 48), (1, 32, 20, 20, 72)):
        x = _rand(n, c, h, wd, dtype=dtype, gen=gen)
        w = _rand(o, c, 1, 1, dtype=dtype, gen=gen) / c ** 0.5
        b = _rand(o, dtype=dtype, gen=gen)
        ref = _ref(x, w, b, 1, 0, 1)
        r = _rand(*ref.shape, dtype=dtype, gen=gen)
        for res in (None, r):
            for act, fn in (("none", lambda t: t), ("relu", F.relu), ("hardswish", F.hardswish)):
                with torch_ops.force_algorithm("conv2d", "igemm"):
                    out = torch_ops.conv2d_fused(x, w, b, 1, 0, 1, 1, act, res)
                want = fn(ref + (0 if res is None else res.double()))
                assert out.is_contiguous()
                assert _rel_err(out, want) <= REL_TOL[dtype], (n, c, h, wd, o, act, res is None)


@pytest.mark.parametrize("rowpass", ["0", "1"], ids=["cutlass", "pass"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_cl_fused_activation_both_forms(rowpass, dtype, monkeypatch):
    """channels_last 1x1 fused blocks with an activation cuBLASLt's epilogue lacks run either the
    CUTLASS NHWC GEMM with it inside or cuBLASLt (bias, residual) and an activation pass
    (GPUKERN_IGEMM_ROWPASS forces each): both match the float64 sequence."""
    monkeypatch.setenv("GPUKERN_IGEMM_ROWPASS", rowpass)
    gen = torch.Generator().manual_seed(29)
    for n, c, h, wd, o in ((2, 80, 14, 14, 200), (3, 16, 9, 11, 16), (4, 24, 1, 1, 72)):
        x = _rand(n, c, h, wd, dtype=dtype, gen=gen).contiguous(memory_format=torch.channels_last)
        w = _rand(o, c, 1, 1, dtype=dtype, gen=gen) / c ** 0.5
        b = _rand(o, dtype=dtype, gen=gen)
        ref = _ref(x, w, b, 1, 0, 1)
        r = _rand(*ref.shape, dtype=dtype, gen=gen).contiguous(memory_format=torch.channels_last)
        for res in (None, r):
            for act, fn in (("hardswish", F.hardswish), ("silu", F.silu),
                            ("hardsigmoid", F.hardsigmoid), ("gelu", F.gelu)):
                with torch_ops.force_algorithm("conv2d", "igemm"):
                    out = torch_ops.conv2d_fused(x, w, b, 1, 0, 1, 1, act, res)
                want = fn(ref + (0 if res is None else res.double()))
                assert out.is_contiguous(memory_format=torch.channels_last)
                assert _rel_err(out, want) <= REL_TOL[dtype], (n, c, h, wd, o, act, res is None)


# The NCHW-output epilogue (csrc/conv/igemm/epilogue_nchw.cuh): the conv kernel writes an output
# that is not NHWC in its own strides. Shapes with M and N tile residues, images that end inside
# an M tile (P * Q not a multiple of the tile), odd planes and a 1-D case.
NCHW_OUT_SHAPES = [
    (2, 32, 17, 13, 40, 3, 1, 1),    # odd plane, O = 40: partial N tile
    (3, 64, 15, 15, 72, 3, 2, 1),    # stride 2, 8x8 output planes of 64 pixels
    (2, 16, 7, 7, 24, 3, 1, 1),      # 49-pixel images: every M tile spans images
    (1, 48, 30, 30, 136, 1, 2, 0),   # 1x1 stride 2 (a trimmed input row)
]


@pytest.mark.parametrize("shape", NCHW_OUT_SHAPES, ids=lambda s: f"n{s[0]}c{s[1]}_{s[2]}x{s[3]}"
                         f"_o{s[4]}_k{s[5]}_s{s[6]}")
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nchw_out", ["1", "0"], ids=["epilogue", "transpose"])
def test_nchw_output_fused(shape, dtype, nchw_out, config, monkeypatch):
    """Every activation, with and without a bias and a residual, NCHW in and out, on each tile
    configuration: the NCHW-output epilogue (GPUKERN_IGEMM_NCHW_OUT=1, the default) and the
    channels_last temporary it replaced (=0), against the unfused float64 sequence."""
    from conftest import REF_ACTS
    monkeypatch.setenv("GPUKERN_IGEMM_NCHW_OUT", nchw_out)
    n, c, h, wd, o, k, stride, pad = shape
    gen = torch.Generator().manual_seed(NCHW_OUT_SHAPES.index(shape) * 4 + DTYPES.index(dtype))
    x = _rand(n, c, h, wd, dtype=dtype, gen=gen)
    w = _rand(o, c, k, k, dtype=dtype, gen=gen) / (c * k * k) ** 0.5
    b = _rand(o, dtype=dtype, gen=gen)
    for i, (act, fn) in enumerate(REF_ACTS.items()):
        bias = b if i % 2 == 0 else None
        ref = _ref(x, w, bias, stride, pad, 1)
        r = _rand(*ref.shape, dtype=dtype, gen=gen) if i % 3 != 2 else None
        with torch_ops.force_algorithm("conv2d", "igemm"):
            out = torch_ops.conv2d_fused(x, w, bias, stride, pad, 1, 1, act, r)
        assert out.is_contiguous() and out.shape == ref.shape
        want = fn(ref + (r.double() if r is not None else 0))
        err = _rel_err(out, want)
        assert err <= REL_TOL[dtype], (act, bias is not None, r is not None, err)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
def test_nchw_output_views(dtype):
    """The epilogue with a residual whose strides differ from y's (a channels_last residual, a
    sliced one: copied into y's layout) and a sliced NCHW input; a conv1d over NCL (whichever
    igemm form takes it) with a contiguous NCL output."""
    gen = torch.Generator().manual_seed(41)
    x = _rand(2, 24, 12, 12, dtype=dtype, gen=gen)
    w = _rand(32, 24, 3, 3, dtype=dtype, gen=gen) / 15.0
    b = _rand(32, dtype=dtype, gen=gen)
    ref = _ref(x, w, b, 1, 1, 1)
    r_big = _rand(2, 40, 12, 12, dtype=dtype, gen=gen)
    for r in (r_big[:, 3:35], r_big[:, :32].contiguous(memory_format=torch.channels_last)):
        with torch_ops.force_algorithm("conv2d", "igemm"):
            out = torch_ops.conv2d_fused(x, w, b, 1, 1, 1, 1, "relu", r)
        assert _rel_err(out, F.relu(ref + r.double())) <= REL_TOL[dtype]
    xs = _rand(2, 40, 12, 14, dtype=dtype, gen=gen)[:, 8:32, :, 1:13]
    out = _run("conv2d", xs, w, b, 1, 1, 1)
    assert _rel_err(out, _ref(xs, w, b, 1, 1, 1)) <= REL_TOL[dtype]
    x1 = _rand(3, 16, 301, dtype=dtype, gen=gen)
    w1 = _rand(40, 16, 5, dtype=dtype, gen=gen) / 9.0
    out = _run("conv1d", x1, w1, None, 2, 2, 1)
    assert out.is_contiguous()
    assert _rel_err(out, _ref(x1, w1, None, 2, 2, 1)) <= REL_TOL[dtype]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
@pytest.mark.parametrize("back", ["1", "0"], ids=["epilogue_back", "transposes"])
def test_small_plane_residual_to_nhwc(dtype, back, monkeypatch):
    """A 1x1 layer over NCHW 7x7 planes with a residual, on the forms that convert to NHWC. By
    default the GEMM writes conv + bias to the channels_last temporary and one way back adds the
    residual and applies the activation (the profiler sees epilogue_from_nhwc, x's transpose
    only); with GPUKERN_IGEMM_EPILOGUE_BACK=0, x and a contiguous NCHW residual go to channels_last
    through gpukern's small-plane transpose (twice), a channel-sliced residual through a copy.
    Every activation, both residual layouts, against float64."""
    monkeypatch.setenv("GPUKERN_IGEMM_EPILOGUE_BACK", back)
    gen = torch.Generator().manual_seed(47)
    x = _rand(2, 960, 7, 7, dtype=dtype, gen=gen)  # MobileNetV3's 960 -> 160 + residual
    w = _rand(160, 960, 1, 1, dtype=dtype, gen=gen) / 31.0
    b = _rand(160, dtype=dtype, gen=gen)
    ref = _ref(x, w, b, 1, 0, 1)
    r_big = _rand(2, 164, 7, 7, dtype=dtype, gen=gen)
    for r, transposes in ((r_big[:, :160].contiguous(), 2), (r_big[:, 2:162], 1)):
        for act, fn in (("none", lambda t: t), ("relu", F.relu), ("hardswish", F.hardswish),
                        ("gelu", F.gelu)):
            with torch_ops.force_algorithm("conv2d", "igemm"):
                out, names = _kernel_names(
                    lambda: torch_ops.conv2d_fused(x, w, b, 1, 0, 1, 1, act, r))
            if dtype != torch.float32:  # fp32: pointwise_nchw may read the planes in place
                if back == "1":
                    assert names.count("small_planes_to_nhwc") == 1, names
                    assert "epilogue_from_nhwc" in names and "nhwc_to_nchw" not in names, names
                else:
                    assert names.count("small_planes_to_nhwc") == transposes, names
                    assert "epilogue_from_nhwc" not in names, names
            assert out.is_contiguous()
            assert _rel_err(out, fn(ref + r.double())) <= REL_TOL[dtype], act


@pytest.mark.parametrize("back", ["1", "0"], ids=["epilogue_back", "passes"])
def test_small_plane_epilogue_back(back, monkeypatch):
    """1x1 layers over NCHW 7x7 planes without a residual, converted to NHWC (weights too large for
    the batched NCHW GEMM): with an activation cuBLASLt's epilogue lacks (hardswish, gelu), the
    GEMM writes conv + bias to the channels_last temporary and one way back applies the activation
    (epilogue_from_nhwc; O = 40 in bf16: a partial tile of 64 channels); with relu, cuBLASLt's own
    epilogue and the plain way back; GPUKERN_IGEMM_EPILOGUE_BACK=0: an activation pass and the
    plain way back. Against float64."""
    monkeypatch.setenv("GPUKERN_IGEMM_EPILOGUE_BACK", back)
    gen = torch.Generator().manual_seed(53)
    for dtype, c, o in ((torch.bfloat16, 672, 160), (torch.bfloat16, 960, 40),
                        (torch.float16, 960, 160), (torch.float32, 2048, 512)):
        x = _rand(3, c, 7, 7, dtype=dtype, gen=gen)
        w = _rand(o, c, 1, 1, dtype=dtype, gen=gen) / c ** 0.5
        b = _rand(o, dtype=dtype, gen=gen)
        ref = _ref(x, w, b, 1, 0, 1)
        for act, fn in (("hardswish", F.hardswish), ("gelu", F.gelu), ("relu", F.relu)):
            with torch_ops.force_algorithm("conv2d", "igemm"):
                out, names = _kernel_names(
                    lambda: torch_ops.conv2d_fused(x, w, b, 1, 0, 1, 1, act))
            assert out.is_contiguous()
            assert _rel_err(out, fn(ref)) <= REL_TOL[dtype], (dtype, o, act)
            assert "small_planes_to_nhwc" in names, names
            want_back = back == "1" and act != "relu"
            assert ("epilogue_from_nhwc" in names) == want_back, (dtype, o, act, names)
            assert ("nhwc_to_nchw" in names) != want_back, (dtype, o, act, names)


def test_nchw_output_past_2g_bytes():
    """An NCHW bf16 output of 2.2 GB (1.1e9 elements): the epilogue's element offsets reach past
    2^30, its byte offsets past 2^31."""
    free, _ = torch.cuda.mem_get_info()
    if free < 12 * 2**30:
        pytest.skip("needs 12 GiB of free GPU memory")
    gen = torch.Generator().manual_seed(43)
    x = torch.randn(33, 8, 256, 256, dtype=torch.bfloat16, device="cuda")
    w = _rand(512, 8, 3, 3, dtype=torch.bfloat16, gen=gen) / 8.0
    out = _run("conv2d", x, w, None, 1, 1, 1)
    assert out.numel() * out.element_size() > 2**31 and out.is_contiguous()
    for i in (0, 32):  # the first and the last image against the float64 reference
        ref = _ref(x[i:i + 1], w, None, 1, 1, 1)
        assert _rel_err(out[i:i + 1], ref) <= REL_TOL[torch.bfloat16]
    del out


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
def test_nchw_operands_forked_in_graph(dtype):
    """NCHW input and filter, both converted on every replay of a CUDA graph (the filter's
    conversion forked onto a side stream, igemm/nhwc.h nhwc_operands): a replay sees new input
    data and an in-place update of the weight; eager calls before and after agree."""
    gen = torch.Generator().manual_seed(47)
    x = _rand(4, 64, 20, 20, dtype=dtype, gen=gen)
    w = _rand(96, 64, 3, 3, dtype=dtype, gen=gen) / 24.0
    b = _rand(96, dtype=dtype, gen=gen)
    with torch_ops.force_algorithm("conv2d", "igemm"):
        first = torch_ops.conv2d_fused(x, w, b, 1, 1, 1, 1, "relu", None)
        g, out = _captured(lambda: torch_ops.conv2d_fused(x, w, b, 1, 1, 1, 1, "relu", None))
    assert _rel_err(first, F.relu(_ref(x, w, b, 1, 1, 1))) <= REL_TOL[dtype]
    x.copy_(_rand(4, 64, 20, 20, dtype=dtype, gen=gen))
    w.mul_(-0.5)
    g.replay()
    torch.cuda.synchronize()
    assert _rel_err(out, F.relu(_ref(x, w, b, 1, 1, 1))) <= REL_TOL[dtype]
    with torch_ops.force_algorithm("conv2d", "igemm"):
        again = torch_ops.conv2d_fused(x, w, b, 1, 1, 1, 1, "relu", None)
    assert torch.equal(again, out)


# 1x1 over NCHW planes on CUTLASS 2.x's SM80 batched GEMM with the epilogue in its visitor tree
# (igemm.cpp try_gemm80, conv/igemm/gemm80.cuh): (N, C, H, W, O).
GEMM80_SHAPES = [
    (3, 24, 14, 14, 40),  # MobileNetV3-like 14x14 planes, O not a multiple of the 64-row tile
    (2, 72, 4, 9, 24),    # 36-pixel planes: a partial pixel tile
    (1, 160, 8, 8, 104),
]


@pytest.mark.parametrize("shape", GEMM80_SHAPES, ids=lambda s: f"n{s[0]}c{s[1]}_{s[2]}x{s[3]}_o{s[4]}")
@pytest.mark.parametrize("k_step", ["32", "16"])
def test_gemm80_nchw_fused(shape, k_step, monkeypatch):
    """fp32 (TF32), GPUKERN_IGEMM_GEMM80=1, each K step: every activation, with and without a bias
    and a residual, against the unfused float64 sequence; the profiler shows the visitor-tree
    GEMM ran (and, with the switch off, that it did not)."""
    from conftest import REF_ACTS
    dtype = torch.float32
    monkeypatch.setenv("GPUKERN_IGEMM_GEMM80", "1")
    monkeypatch.setenv("GPUKERN_IGEMM_GEMM80_K", k_step)
    n, c, h, wd, o = shape
    gen = torch.Generator().manual_seed(GEMM80_SHAPES.index(shape) * 4 + len(k_step))
    x = _rand(n, c, h, wd, dtype=dtype, gen=gen)
    w = _rand(o, c, 1, 1, dtype=dtype, gen=gen) / c ** 0.5
    b = _rand(o, dtype=dtype, gen=gen)
    for i, (act, fn) in enumerate(REF_ACTS.items()):
        bias = b if i % 2 == 0 else None
        ref = _ref(x, w, bias, 1, 0, 1)
        r = _rand(*ref.shape, dtype=dtype, gen=gen) if i % 3 != 2 else None
        if bias is None and r is None and act == "none":
            continue  # a plain conv: the fused forms are for calls with an epilogue
        with torch_ops.force_algorithm("conv2d", "igemm"):
            out, names = _kernel_names(
                lambda: torch_ops.conv2d_fused(x, w, bias, 1, 0, 1, 1, act, r))
        assert "GemmWithVisitor" in names, names
        assert out.is_contiguous() and out.shape == ref.shape
        want = fn(ref + (r.double() if r is not None else 0))
        err = _rel_err(out, want)
        assert err <= REL_TOL[dtype], (act, bias is not None, r is not None, err)
    monkeypatch.setenv("GPUKERN_IGEMM_GEMM80", "0")
    with torch_ops.force_algorithm("conv2d", "igemm"):
        _, names = _kernel_names(lambda: torch_ops.conv2d_fused(x, w, b, 1, 0, 1, 1, "relu", None))
    assert "GemmWithVisitor" not in names


def test_gemm80_nchw_views_and_fallbacks(monkeypatch):
    """fp32: the visitor-tree GEMM on a channel-sliced input and a channels_last residual (copied
    into y's layout); planes of 7x7 (not a multiple of 4 pixels), a channels_last input and a
    bf16 call go to the other forms, still correct; a CUDA graph replay sees new input data; the
    rule takes MobileNetV3's 14x14 projection."""
    dtype = torch.float32
    monkeypatch.setenv("GPUKERN_IGEMM_GEMM80", "1")
    gen = torch.Generator().manual_seed(59)
    big = _rand(2, 40, 6, 10, dtype=dtype, gen=gen)
    x = big[:, 4:36]  # x_sn = 40 * 60, x_sc = 60
    w = _rand(24, 32, 1, 1, dtype=dtype, gen=gen) / 6.0
    b = _rand(24, dtype=dtype, gen=gen)
    r = _rand(2, 24, 6, 10, dtype=dtype, gen=gen).contiguous(memory_format=torch.channels_last)
    ref = F.relu(_ref(x, w, b, 1, 0, 1) + r.double())
    with torch_ops.force_algorithm("conv2d", "igemm"):
        out, names = _kernel_names(lambda: torch_ops.conv2d_fused(x, w, b, 1, 0, 1, 1, "relu", r))
    assert "GemmWithVisitor" in names
    assert _rel_err(out, ref) <= REL_TOL[dtype]
    for xx in (_rand(2, 32, 7, 7, dtype=dtype, gen=gen),
               _rand(2, 32, 6, 10, dtype=dtype, gen=gen).contiguous(
                   memory_format=torch.channels_last)):
        with torch_ops.force_algorithm("conv2d", "igemm"):
            out, names = _kernel_names(
                lambda: torch_ops.conv2d_fused(xx, w, b, 1, 0, 1, 1, "silu", None))
        assert "GemmWithVisitor" not in names
        assert _rel_err(out, F.silu(_ref(xx, w, b, 1, 0, 1))) <= REL_TOL[dtype]
    xb, wb, bb = (t.to(torch.bfloat16) for t in (x, w, b))
    with torch_ops.force_algorithm("conv2d", "igemm"):
        out, names = _kernel_names(lambda: torch_ops.conv2d_fused(xb, wb, bb, 1, 0, 1, 1, "relu",
                                                                  None))
    assert "GemmWithVisitor" not in names
    assert _rel_err(out, F.relu(_ref(xb, wb, bb, 1, 0, 1))) <= REL_TOL[torch.bfloat16]
    xg = _rand(4, 32, 14, 14, dtype=dtype, gen=gen)
    with torch_ops.force_algorithm("conv2d", "igemm"):
        g, out = _captured(lambda: torch_ops.conv2d_fused(xg, w, b, 1, 0, 1, 1, "hardswish", None))
    xg.copy_(_rand(4, 32, 14, 14, dtype=dtype, gen=gen))
    g.replay()
    torch.cuda.synchronize()
    assert _rel_err(out, F.hardswish(_ref(xg, w, b, 1, 0, 1))) <= REL_TOL[dtype]
    monkeypatch.delenv("GPUKERN_IGEMM_GEMM80")
    xm = _rand(2, 240, 14, 14, dtype=dtype, gen=gen)
    wm = _rand(80, 240, 1, 1, dtype=dtype, gen=gen) / 16.0
    bm = _rand(80, dtype=dtype, gen=gen)
    with torch_ops.force_algorithm("conv2d", "igemm"):
        out, names = _kernel_names(lambda: torch_ops.conv2d_fused(xm, wm, bm, 1, 0, 1, 1, "none",
                                                                  None))
    assert "GemmWithVisitor" in names
    assert _rel_err(out, _ref(xm, wm, bm, 1, 0, 1)) <= REL_TOL[dtype]
