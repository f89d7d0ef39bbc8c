"""cuDNN as a conv algorithm ("cudnn", csrc/conv/vendor.h) and the first-call race that picks it.

- Forced by name, "cudnn" computes conv1d / conv2d and the fused ops (bias, activation and
  residual in gpukern's elementwise pass) to torch's accuracy: dense, grouped, depthwise, strided,
  dilated, channels_last, strided views, every float dtype, TF32 on and off.
- Its query rules (which problems it can take) hold without a GPU.
- The race (on by default for users; off in this suite's process, conftest.py) runs in a
  subprocess: it picks cuDNN where gpukern's kernel is far slower (a dense layer with channels the
  tensor-core path cannot take), keeps gpukern's kernel where cuDNN is far slower (a
  single-channel image), remembers its verdict (the query reports it, the result is right either
  way), does not race during a CUDA-graph capture, and not in torch's deterministic mode.
"""
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import torch_ops
from algo_cases import ACTIVATIONS, conv_ref, epilogue_rounding_allowance
from conftest import HAS_CUDA, assert_close_ref

CUDA_BUILD = torch_ops.has_cuda_kernels()

# Norm-relative bounds as in tests/test_igemm.py: bf16 / fp16 one rounding of an fp32 sum; TF32
# operands rounded to 10 mantissa bits.
REL_TOL = {torch.bfloat16: 1e-2, torch.float16: 2e-3}
TF32_TOL = 2e-3
FP32_TOL = 1e-5

gpu = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device and the CUDA build of gpukern")


def _rel_err(out, ref):
    return float((out.double() - ref).norm() / ref.norm().clamp_min(1e-30))


# (N, C, H, W, O, K, stride, padding, dilation, groups): dense, grouped, depthwise with a
# multiplier of 1 and 2, strided and dilated, odd sizes, a 1x1 plane.
CASES_2D = [
    (2, 16, 15, 13, 24, 3, 1, 1, 1, 1),
    (3, 30, 17, 17, 10, 3, 2, 1, 1, 1),       # channels no tensor-core path takes
    (2, 32, 9, 11, 64, 1, 1, 0, 1, 1),
    (2, 32, 12, 12, 32, 3, 1, 2, 2, 4),       # grouped, dilated
    (4, 24, 14, 14, 24, 5, 2, 2, 1, 24),      # depthwise stride 2
    (2, 8, 10, 10, 16, 3, 1, 1, 1, 8),        # depthwise multiplier 2
    (2, 12, 1, 1, 12, 7, 1, 3, 1, 12),        # 7x7 over a 1x1 plane (cut to its centre tap)
]


def _case_tensors(case, dtype, channels_last, gen):
    n, c, h, w, o, k, stride, pad, dil, groups = case
    x = torch.randn(n, c, h, w, device="cuda", generator=gen).to(dtype)
    wt = torch.randn(o, c // groups, k, k, device="cuda", generator=gen).to(dtype)
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
        wt = wt.to(memory_format=torch.channels_last)
    kw = dict(stride=stride, padding=pad, dilation=dil, groups=groups)
    return x, wt, kw


def _tol(dtype):
    if dtype == torch.float32:
        return TF32_TOL if torch.backends.cudnn.allow_tf32 else FP32_TOL
    return REL_TOL[dtype]


def _forced_with_and_without_bias(algo, x, w, b, kw):
    """conv2d with `algo` forced (the query names it first), with bias b and without, and the
    float64 reference with b."""
    with torch_ops.force_algorithm("conv2d", algo):
        assert torch_ops.algorithm("conv2d", x, w, b, **kw) == algo
        out = torch_ops.conv2d(x, w, b, **kw)
        plain = torch_ops.conv2d(x, w, None, **kw)
    return out, plain, conv_ref(2, x, w, b, **kw)


def _check_forced_fused(algo, x, w, b, r, activation, kw):
    """conv2d_fused with `algo` forced against the float64 reference: a library convolution, then
    gpukern's elementwise pass (one more rounding in 16-bit dtypes: epilogue_rounding_allowance)."""
    with torch_ops.force_algorithm("conv2d", algo):
        out = torch_ops.conv2d_fused(x, w, b, activation=activation, residual=r, **kw)
    ref = conv_ref(2, x, w, b, activation, r, **kw)
    if x.dtype == torch.float32:
        assert_close_ref(out, ref, tol=1e-4)
    else:
        assert_close_ref(out, ref, extra=epilogue_rounding_allowance(2, x, w, b, activation, r,
                                                                     **kw))


@gpu
@pytest.mark.parametrize("tf32", [False, True])
@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("case", range(len(CASES_2D)))
def test_forced_cudnn_conv2d(case, dtype, channels_last, tf32):
    if tf32 and dtype != torch.float32:
        pytest.skip("TF32 applies to float32")
    torch.backends.cudnn.allow_tf32 = tf32  # conftest restores it
    gen = torch.Generator(device="cuda").manual_seed(case)
    x, w, kw = _case_tensors(CASES_2D[case], dtype, channels_last, gen)
    b = torch.randn(w.shape[0], device="cuda", generator=gen).to(dtype)
    out, plain, ref = _forced_with_and_without_bias("cudnn", x, w, b, kw)
    assert out.shape == ref.shape
    assert out.is_contiguous(memory_format=torch.channels_last) == \
        torch.nn.functional.conv2d(x, w, b, **kw).is_contiguous(memory_format=torch.channels_last)
    assert _rel_err(out, ref) <= _tol(dtype)
    assert _rel_err(plain, conv_ref(2, x, w, None, **kw)) <= _tol(dtype)


@gpu
@pytest.mark.parametrize("activation", ["relu", "hardswish", "gelu", "none"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("case", [0, 1, 4])
def test_forced_cudnn_fused(case, dtype, activation):
    """conv2d_fused and conv1d_fused with bias, activation and residual: cuDNN's convolution, then
    one elementwise pass y = act(y + bias + r) (one more rounding than a native epilogue)."""
    gen = torch.Generator(device="cuda").manual_seed(10 + case)
    x, w, kw = _case_tensors(CASES_2D[case], dtype, case == 4, gen)
    b = torch.randn(w.shape[0], device="cuda", generator=gen).to(dtype)
    shape = torch.nn.functional.conv2d(x[:1].float(), w.float(), None, **kw).shape
    r = torch.randn((x.shape[0],) + tuple(shape[1:]), device="cuda", generator=gen).to(dtype)
    _check_forced_fused("cudnn", x, w, b, r, activation, kw)
    # conv1d: the same through H = 1, a strided view of the input.
    x1 = torch.randn(3, 16, 301, device="cuda", generator=gen).to(dtype)[:, :, ::2]
    w1 = torch.randn(32, 16, 5, device="cuda", generator=gen).to(dtype)
    b1 = torch.randn(32, device="cuda", generator=gen).to(dtype)
    r1 = torch.randn(3, 32, 147, device="cuda", generator=gen).to(dtype)
    with torch_ops.force_algorithm("conv1d", "cudnn"):
        assert torch_ops.algorithm("conv1d_fused", x1, w1, b1, stride=1, padding=0,
                                   activation=activation, residual=r1) == "cudnn"
        out1 = torch_ops.conv1d_fused(x1, w1, b1, stride=1, padding=0, activation=activation,
                                      residual=r1)
    ref1 = conv_ref(1, x1, w1, b1, activation, r1)
    if dtype == torch.float32:
        assert_close_ref(out1, ref1, tol=1e-4)
    else:
        assert_close_ref(out1, ref1, extra=epilogue_rounding_allowance(1, x1, w1, b1, activation,
                                                                      r1))


@gpu
def test_forced_cudnn_empty_and_offset():
    """An empty batch launches nothing; an input at an odd storage offset (not 16-byte aligned)
    is read where it is."""
    w = torch.randn(8, 4, 3, 3, device="cuda")
    with torch_ops.force_algorithm("conv2d", "cudnn"):
        out = torch_ops.conv2d(torch.randn(0, 4, 9, 9, device="cuda"), w, None, padding=1)
        assert out.shape == (0, 8, 9, 9)
        base = torch.randn(1 + 2 * 4 * 9 * 9, device="cuda")
        x = base[1:].view(2, 4, 9, 9)
        out = torch_ops.conv2d(x, w, None, padding=1)
    assert _rel_err(out, conv_ref(2, x, w, padding=1)) <= FP32_TOL


@pytest.mark.skipif(not CUDA_BUILD, reason="the CPU-only build has no CUDA algorithm choice")
def test_cudnn_query_rules():
    """Which problems "cudnn" takes, by the query (meta tensors, no GPU needed): symmetric padding
    only (an even 'same' filter pads one side more), never convolve (its reversed filter has a
    negative stride)."""
    x = torch.empty(2, 8, 16, 16, device="meta")
    with torch_ops.force_algorithm("conv2d", "cudnn"):
        assert torch_ops.algorithm("conv2d", x, torch.empty(8, 8, 3, 3, device="meta"), None,
                                   1, 1) == "cudnn"
        assert torch_ops.algorithm("conv2d", x, torch.empty(8, 1, 3, 3, device="meta"), None,
                                   2, 1, 1, 8) == "cudnn"
        with pytest.raises(RuntimeError, match="forced algorithm 'cudnn' cannot run"):
            torch_ops.algorithm("conv2d", x, torch.empty(8, 8, 4, 4, device="meta"), None, 1,
                                "same")
    with torch_ops.force_algorithm("conv1d", "cudnn"):
        with pytest.raises(RuntimeError, match="forced algorithm 'cudnn' cannot run"):
            torch_ops.algorithm("convolve", torch.empty(4, 100, device="meta"),
                                torch.empty(7, device="meta"), "full")
    # The automatic choice without a race is never cuDNN.
    assert torch_ops.algorithm("conv2d", x, torch.empty(8, 8, 3, 3, device="meta"), None,
                               1, 1) != "cudnn"


_RACE_SCRIPT = textwrap.dedent("""
    import json, sys
    import torch
    import torch_ops
    import torch.nn.functional as F

    def err(out, ref):
        return float((out.double() - ref).norm() / ref.norm())

    torch.backends.cudnn.allow_tf32 = False
    g = torch.Generator(device="cuda").manual_seed(0)
    res = {}
    # A bf16 dense layer with 36 -> 36 channels (not a multiple of 8: no tensor-core path here):
    # gpukern's direct kernel on CUDA cores is several times slower than cuDNN's tensor cores.
    bf = torch.bfloat16
    x = torch.randn(16, 36, 64, 64, device="cuda", generator=g).to(bf)
    w = torch.randn(36, 36, 3, 3, device="cuda", generator=g).to(bf)
    b = torch.randn(36, device="cuda", generator=g).to(bf)
    res["dense_before"] = torch_ops.algorithm("conv2d", x, w, b, 1, 1)
    out = torch_ops.conv2d(x, w, b, 1, 1)
    res["dense_after"] = torch_ops.algorithm("conv2d", x, w, b, 1, 1)
    res["dense_err"] = err(out, F.conv2d(x.double(), w.double(), b.double(), 1, 1))
    out2 = torch_ops.conv2d(x, w, b, 1, 1)
    res["dense_again_same"] = bool(torch.equal(out, out2))
    # The fused op of the same layer is raced on its own.
    r = torch.randn_like(out)
    fo = torch_ops.conv2d_fused(x, w, b, 1, 1, activation="relu", residual=r)
    res["fused_err"] = err(fo, F.relu(F.conv2d(x.double(), w.double(), b.double(), 1, 1)
                                       + r.double()))
    res["fused_after"] = torch_ops.algorithm("conv2d_fused", x, w, b, 1, 1, activation="relu",
                                             residual=r)
    # A single-channel image and a 7x7 filter: gpukern's kernel is several times faster.
    xs = torch.randn(4, 1, 1024, 1024, device="cuda", generator=g)
    ws = torch.randn(1, 1, 7, 7, device="cuda", generator=g)
    res["single_before"] = torch_ops.algorithm("conv2d", xs, ws, None, 1, 3)
    so = torch_ops.conv2d(xs, ws, None, 1, 3)
    res["single_after"] = torch_ops.algorithm("conv2d", xs, ws, None, 1, 3)
    res["single_err"] = err(so, F.conv2d(xs.double(), ws.double(), None, 1, 3))
    # A first call inside a CUDA-graph capture is not raced; the next eager call is.
    xc = torch.randn(8, 36, 48, 48, device="cuda", generator=g).to(bf)
    wc = torch.randn(36, 36, 3, 3, device="cuda", generator=g).to(bf)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(side):
        with torch.cuda.graph(graph, stream=side):
            yc = torch_ops.conv2d(xc, wc, None, 1, 1)
    torch.cuda.current_stream().wait_stream(side)
    res["capture_after"] = torch_ops.algorithm("conv2d", xc, wc, None, 1, 1)
    graph.replay()
    torch.cuda.synchronize()
    res["capture_err"] = err(yc, F.conv2d(xc.double(), wc.double(), None, 1, 1))
    torch_ops.conv2d(xc, wc, None, 1, 1)
    res["eager_after_capture"] = torch_ops.algorithm("conv2d", xc, wc, None, 1, 1)
    # Deterministic mode: no race, no remembered verdict used.
    xd = torch.randn(8, 36, 40, 40, device="cuda", generator=g).to(bf)
    torch.use_deterministic_algorithms(True)
    torch_ops.conv2d(xd, wc, None, 1, 1)
    res["deterministic"] = torch_ops.algorithm("conv2d", xd, wc, None, 1, 1)
    res["deterministic_known"] = torch_ops.algorithm("conv2d", x, w, b, 1, 1)
    torch.use_deterministic_algorithms(False)
    # conv1d: bf16 36 -> 36 channels, K = 3 over 8192 samples.
    x1 = torch.randn(16, 36, 8192, device="cuda", generator=g).to(bf)
    w1 = torch.randn(36, 36, 3, device="cuda", generator=g).to(bf)
    o1 = torch_ops.conv1d(x1, w1, None, 1, 1)
    res["conv1d_err"] = err(o1, F.conv1d(x1.double(), w1.double(), None, 1, 1))
    res["conv1d_after"] = torch_ops.algorithm("conv1d", x1, w1, None, 1, 1)
    print("RESULT " + json.dumps(res))
""")


def _run_script(script, race="1", **extra_env):
    """Runs `script` in a fresh process with GPUKERN_CONV_RACE=race, the race log on and
    `extra_env`; returns its RESULT line's JSON, the race log lines and the tail of its stderr."""
    env = dict(os.environ, GPUKERN_CONV_RACE=race, GPUKERN_CONV_RACE_LOG="1", **extra_env)
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    races = [ln for ln in out.stderr.splitlines() if ln.startswith("gpukern conv race:")]
    return json.loads(line[len("RESULT "):]), races, out.stderr[-3000:]


def _run_race_script(race):
    return _run_script(_RACE_SCRIPT, race)[0]


@gpu
def test_race_picks_the_faster_and_remembers():
    res = _run_race_script("1")
    assert res["single_err"] < 1e-5, res  # float32, TF32 off
    for k in ("dense_err", "fused_err", "capture_err", "conv1d_err"):  # bfloat16
        assert res[k] < 1e-2, (k, res)
    assert res["dense_before"] != "cudnn"
    assert res["dense_after"] == "cudnn", res
    assert res["dense_again_same"]
    assert res["single_before"] == res["single_after"] != "cudnn", res
    # Captured first: gpukern's choice (no race in a capture); the eager call after races.
    assert res["capture_after"] != "cudnn", res
    assert res["eager_after_capture"] == "cudnn", res
    # Deterministic mode neither races nor uses a verdict.
    assert res["deterministic"] != "cudnn" and res["deterministic_known"] != "cudnn", res
    assert res["conv1d_after"] == "cudnn", res


@gpu
def test_race_off_by_environment():
    res = _run_race_script("0")
    assert res["dense_err"] < 1e-2
    for k in ("dense_after", "fused_after", "single_after", "eager_after_capture",
              "conv1d_after"):
        assert res[k] != "cudnn", (k, res)


_FUSED_RACE_SCRIPT = textwrap.dedent("""
    import json
    import torch
    import torch_ops
    import torch.nn.functional as F

    def err(out, ref):
        return float((out.double() - ref).norm() / ref.norm())

    g = torch.Generator(device="cuda").manual_seed(0)  # torch's default TF32 flags, as models run
    res = []
    # ResNet-50 blocks (BN folded into the bias) where cuDNN's fused call measured 0.75-0.8x of
    # gpukern's fused op on an H100: float32 NCHW 64 -> 64 3x3 + ReLU, 64 -> 256 1x1 + residual +
    # ReLU; bfloat16 channels_last 64 -> 64 3x3 + ReLU.
    for dtype, fmt, cin, cout, k, with_res in (
            (torch.float32, torch.contiguous_format, 64, 64, 3, False),
            (torch.float32, torch.contiguous_format, 64, 256, 1, True),
            (torch.bfloat16, torch.channels_last, 64, 64, 3, False)):
        x = torch.randn(16, cin, 56, 56, device="cuda", generator=g).to(dtype)
        x = x.contiguous(memory_format=fmt)
        w = (torch.randn(cout, cin, k, k, device="cuda", generator=g) / (cin * k * k) ** 0.5)
        w = w.to(dtype).contiguous(memory_format=fmt)
        b = torch.randn(cout, device="cuda", generator=g).to(dtype)
        ref = F.conv2d(x.double(), w.double(), b.double(), 1, k // 2)
        want = F.conv2d(x, w, b, 1, k // 2)
        r = None
        if with_res:
            r = torch.randn(want.shape, device="cuda", generator=g).to(dtype)
            r = r.contiguous(memory_format=fmt)
            ref = ref + r.double()
        ref = ref.relu()
        outs = [torch_ops.conv2d_fused(x, w, b, 1, k // 2, activation="relu", residual=r)
                for _ in range(2)]  # the first races, the second runs the verdict
        res.append(dict(errs=[err(o, ref) for o in outs],
                        strides=[list(o.stride()) for o in outs], want=list(want.stride()),
                        shapes=[list(o.shape) for o in outs], want_shape=list(want.shape),
                        bf16=dtype == torch.bfloat16))
    print("RESULT " + json.dumps(res))
""")


@gpu
def test_race_with_cudnn_fused_side():
    """The fused op's race has cuDNN's fused call (conv + bias + ReLU [+ residual] in one call)
    as a third side on 2-D blocks with a bias and ReLU: each race logs it, the output is right
    and laid out as aten's whichever side wins, and on blocks where it measured well ahead it
    wins at least once."""
    res, races, stderr = _run_script(_FUSED_RACE_SCRIPT)
    assert len(races) == 3, stderr
    assert all("cudnn fused" in ln.split(":", 2)[2].split("->")[0] for ln in races), races
    for r in res:
        for e in r["errs"]:
            assert e < (1e-2 if r["bf16"] else 2e-3), (r, races)  # bf16; fp32 on TF32
        assert all(s == r["want"] for s in r["strides"]), (r, races)
        assert all(s == r["want_shape"] for s in r["shapes"]), (r, races)
    assert any(ln.endswith("-> cudnn fused") for ln in races), races


_CAPTURE_AFTER_RACE_SCRIPT = textwrap.dedent("""
    import json
    import torch
    import torch_ops
    import torch.nn.functional as F

    def err(out, ref):
        return float((out.double() - ref).norm() / ref.norm())

    g = torch.Generator(device="cuda").manual_seed(0)
    bf = torch.bfloat16
    res = {}
    # Raced eagerly first (the bf16 36-channel layer goes to cuDNN's convolution; the bf16
    # channels_last ResNet block may go to cuDNN's fused call), then captured and replayed: the
    # captured call runs the remembered verdict.
    x = torch.randn(16, 36, 64, 64, device="cuda", generator=g).to(bf)
    w = torch.randn(36, 36, 3, 3, device="cuda", generator=g).to(bf)
    cl = torch.channels_last
    xf = torch.randn(16, 64, 56, 56, device="cuda", generator=g).to(bf).contiguous(memory_format=cl)
    wf = (torch.randn(64, 64, 3, 3, device="cuda", generator=g) / 24).to(bf)
    wf = wf.contiguous(memory_format=cl)
    bfb = torch.randn(64, device="cuda", generator=g).to(bf)
    torch_ops.conv2d(x, w, None, 1, 1)
    torch_ops.conv2d_fused(xf, wf, bfb, 1, 1, activation="relu")
    res["plain_verdict"] = torch_ops.algorithm("conv2d", x, w, None, 1, 1)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(side):
        with torch.cuda.graph(graph, stream=side):
            y = torch_ops.conv2d(x, w, None, 1, 1)
            yf = torch_ops.conv2d_fused(xf, wf, bfb, 1, 1, activation="relu")
    torch.cuda.current_stream().wait_stream(side)
    x.copy_(torch.randn(x.shape, device="cuda", generator=g).to(bf))  # new inputs, same buffers
    graph.replay()
    torch.cuda.synchronize()
    res["plain_err"] = err(y, F.conv2d(x.double(), w.double(), None, 1, 1))
    res["fused_err"] = err(yf, F.conv2d(xf.double(), wf.double(), bfb.double(), 1, 1).relu())
    res["fused_strides"] = list(yf.stride())
    res["fused_want"] = list(F.conv2d(xf, wf, bfb, 1, 1).stride())
    print("RESULT " + json.dumps(res))
""")


@gpu
def test_capture_after_race_runs_the_verdict():
    """A call captured into a CUDA graph after its problem was raced eagerly runs the remembered
    verdict (cuDNN's convolution with its search, or cuDNN's fused call) inside the capture, and
    the replay computes the right result on new inputs in the same buffers."""
    res, _, stderr = _run_script(_CAPTURE_AFTER_RACE_SCRIPT)
    assert res["plain_verdict"] == "cudnn", (res, stderr)
    assert res["plain_err"] < 1e-2 and res["fused_err"] < 1e-2, res
    assert res["fused_strides"] == res["fused_want"], res


# ------------------------------------------------------------------------------------------------
# "aten_depthwise": ATen's native depthwise kernel (at::_conv_depthwise2d, what F.conv2d runs for
# the depthwise layers it does not give cuDNN) as a conv2d algorithm and a side of the race.
# ------------------------------------------------------------------------------------------------

# (N, C, H, W, O, K, stride, padding, dilation): multiplier 1 and 2, strided, dilated, odd sizes,
# a filter wider than the plane (cut to its live taps), a 1x1 plane.
DW_CASES = [
    (2, 24, 15, 13, 24, 3, 1, 1, 1),
    (3, 16, 17, 19, 16, 5, 2, 2, 1),
    (2, 8, 10, 10, 16, 3, 1, 1, 1),           # multiplier 2
    (2, 12, 21, 21, 12, 3, 1, 2, 2),          # dilated
    (2, 8, 14, 14, 8, 31, 1, 15, 1),          # 31x31 over 14x14
    (2, 12, 1, 1, 12, 7, 1, 3, 1),
]


def _dw_tensors(case, dtype, gen, view=False):
    n, c, h, w, o, k, stride, pad, dil = case
    x = torch.randn(n, c, h, w + (3 if view else 0), device="cuda", generator=gen).to(dtype)
    if view:
        x = x[:, :, :, 1:w + 1]  # a strided view at an odd offset
    wt = torch.randn(o, 1, k, k, device="cuda", generator=gen).to(dtype)
    return x, wt, dict(stride=stride, padding=pad, dilation=dil, groups=c)


@gpu
@pytest.mark.parametrize("view", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("case", range(len(DW_CASES)))
def test_forced_aten_depthwise(case, dtype, view):
    gen = torch.Generator(device="cuda").manual_seed(100 + case)
    x, w, kw = _dw_tensors(DW_CASES[case], dtype, gen, view)
    b = torch.randn(w.shape[0], device="cuda", generator=gen).to(dtype)
    out, plain, ref = _forced_with_and_without_bias("aten_depthwise", x, w, b, kw)
    assert out.shape == ref.shape and out.is_contiguous()
    tol = FP32_TOL if dtype == torch.float32 else REL_TOL[dtype]
    assert _rel_err(out, ref) <= tol
    assert _rel_err(plain, conv_ref(2, x, w, None, **kw)) <= tol


@gpu
@pytest.mark.parametrize("activation", ["relu", "hardswish", "silu", "none"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_forced_aten_depthwise_fused(dtype, activation):
    """conv2d_fused through ATen's kernel: the convolution, then gpukern's elementwise pass
    y = act(y + bias + r)."""
    gen = torch.Generator(device="cuda").manual_seed(7)
    x, w, kw = _dw_tensors(DW_CASES[1], dtype, gen)
    b = torch.randn(w.shape[0], device="cuda", generator=gen).to(dtype)
    shape = torch.nn.functional.conv2d(x.float(), w.float(), None, **kw).shape
    r = torch.randn(shape, device="cuda", generator=gen).to(dtype)
    _check_forced_fused("aten_depthwise", x, w, b, r, activation, kw)


@gpu
def test_forced_aten_depthwise_empty():
    w = torch.randn(8, 1, 3, 3, device="cuda")
    with torch_ops.force_algorithm("conv2d", "aten_depthwise"):
        out = torch_ops.conv2d(torch.randn(0, 8, 9, 9, device="cuda"), w, None, padding=1,
                               groups=8)
    assert out.shape == (0, 8, 9, 9)


@pytest.mark.skipif(not CUDA_BUILD, reason="the CPU-only build has no CUDA algorithm choice")
def test_aten_depthwise_query_rules():
    """Which problems "aten_depthwise" takes, by the query (meta tensors): depthwise (multiplier
    1 or more) with an NCHW output, symmetric padding; not dense or grouped layers, not
    channels_last (the kernel writes NCHW only). (conv1d's table has no such algorithm.)"""
    x = torch.empty(2, 8, 16, 16, device="meta")
    cl = x.contiguous(memory_format=torch.channels_last)
    dw = torch.empty(8, 1, 3, 3, device="meta")
    with torch_ops.force_algorithm("conv2d", "aten_depthwise"):
        assert torch_ops.algorithm("conv2d", x, dw, None, 1, 1, 1, 8) == "aten_depthwise"
        assert torch_ops.algorithm("conv2d", x, torch.empty(16, 1, 3, 3, device="meta"), None,
                                   2, 1, 1, 8) == "aten_depthwise"
        for args in ((cl, dw, None, 1, 1, 1, 8),
                     (x, torch.empty(8, 8, 3, 3, device="meta"), None, 1, 1),
                     (x, torch.empty(8, 2, 3, 3, device="meta"), None, 1, 1, 1, 4),
                     (x, torch.empty(8, 1, 4, 4, device="meta"), None, 1, "same", 1, 8)):
            with pytest.raises(RuntimeError, match="forced algorithm 'aten_depthwise' cannot run"):
                torch_ops.algorithm("conv2d", *args)
    # Without a race the automatic choice is never a library's.
    assert torch_ops.algorithm("conv2d", x, dw, None, 1, 1, 1, 8) not in ("cudnn",
                                                                         "aten_depthwise")


_ATEN_RACE_SCRIPT = textwrap.dedent("""
    import json
    import torch
    import torch_ops

    def err(out, ref):
        return float((out.double() - ref).norm() / ref.norm())

    g = torch.Generator(device="cuda").manual_seed(0)
    bf = torch.bfloat16
    # A 31x31 depthwise filter over 14x14 bf16 NCHW planes: F.conv2d runs ATen's native depthwise
    # kernel (29 us on an H100); gpukern's kernels and cuDNN took 100-220 us.
    x = torch.randn(8, 128, 14, 14, device="cuda", generator=g).to(bf)
    w = torch.randn(128, 1, 31, 31, device="cuda", generator=g).to(bf)
    res = {}
    res["before"] = torch_ops.algorithm("conv2d", x, w, None, 1, 15, 1, 128)
    out = torch_ops.conv2d(x, w, None, 1, 15, 1, 128)
    res["after"] = torch_ops.algorithm("conv2d", x, w, None, 1, 15, 1, 128)
    ref = torch.nn.functional.conv2d(x.double(), w.double(), None, 1, 15, 1, 128)
    res["err"] = err(out, ref)
    res["again_same"] = bool(torch.equal(out, torch_ops.conv2d(x, w, None, 1, 15, 1, 128)))
    # 13 of the 31 taps per dim can meet a 14x14 plane: gpukern cuts the filter to a 27x27 view
    # of w, but the library side runs the uncut problem, so ATen's kernel gets the contiguous
    # weight and launches no copy of it: one kernel per call.
    from torch.profiler import profile, ProfilerActivity
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        torch_ops.conv2d(x, w, None, 1, 15, 1, 128)
        torch.cuda.synchronize()
    res["kernels"] = [e.name for e in prof.events()
                      if e.device_type == torch.autograd.DeviceType.CUDA]
    print("RESULT " + json.dumps(res))
""")


@gpu
def test_race_with_aten_depthwise_side():
    """A depthwise problem's race has ATen's depthwise kernel as a side (logged), and where that
    kernel is several times faster than gpukern's and cuDNN's, the problem goes to it; the result
    is right, the verdict remembered, and the kernel runs the uncut filter (no copy kernel)."""
    res, races, stderr = _run_script(_ATEN_RACE_SCRIPT)
    assert len(races) == 1 and "aten depthwise" in races[0], stderr
    assert "cudnn heuristic" in races[0], races  # cudnn.benchmark off: both cuDNN sides
    assert res["err"] < 1e-2, (res, races)
    assert res["before"] != "aten_depthwise"
    assert res["after"] == "aten_depthwise", (res, races)
    assert res["again_same"], res
    assert len(res["kernels"]) == 1 and "depthwise" in res["kernels"][0].lower(), res["kernels"]


_BENCHMARK_RACE_SCRIPT = textwrap.dedent("""
    import json
    import torch
    import torch_ops

    torch.backends.cudnn.benchmark = True
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(4, 64, 28, 28, device="cuda", generator=g).to(torch.bfloat16)
    w = torch.randn(64, 64, 3, 3, device="cuda", generator=g).to(torch.bfloat16) / 24
    out = torch_ops.conv2d(x, w, None, 1, 1)
    ref = torch.nn.functional.conv2d(x.double(), w.double(), None, 1, 1)
    print("RESULT " + json.dumps({"err": float((out.double() - ref).norm() / ref.norm())}))
""")


@gpu
def test_race_one_cudnn_side_with_benchmark_on():
    """With torch's cudnn.benchmark on, cuDNN searches whichever way it is called: the race has
    one cuDNN side (no "cudnn heuristic"), and the result is right."""
    res, races, stderr = _run_script(_BENCHMARK_RACE_SCRIPT)
    assert len(races) == 1 and "cudnn" in races[0], stderr
    assert "cudnn heuristic" not in races[0], races
    assert res["err"] < 1e-2, res


# ------------------------------------------------------------------------------------------------
# "cudnn nhwc": cuDNN's channels_last kernels on NHWC copies of an NCHW problem (conv/vendor.h
# cudnn_nhwc_run), a side of the race for 2-D problems that are not depthwise and whose input is
# not channels_last.
# ------------------------------------------------------------------------------------------------

_NHWC_SIDE_SCRIPT = textwrap.dedent("""
    import json
    import torch
    import torch_ops
    import torch.nn.functional as F

    def err(out, ref):
        return float((out.double() - ref).norm() / ref.norm())

    ACT = {"none": lambda t: t, "relu": torch.relu, "hardswish": F.hardswish, "silu": F.silu}
    g = torch.Generator(device="cuda").manual_seed(7)
    res = []
    # (dtype, N, C, H, W, O, K, stride, pad, dil, groups, bias, act, residual, view)
    cases = [
        ("float32", 2, 16, 14, 14, 32, 3, 1, 1, 1, 1, True, "relu", False, False),  # cuDNN fused
        ("bfloat16", 2, 16, 14, 14, 32, 3, 1, 1, 1, 1, True, "relu", True, False),  # + residual
        ("float16", 3, 5, 9, 11, 7, 3, 2, 1, 1, 1, False, "none", False, False),    # odd, strided
        ("bfloat16", 2, 3, 32, 30, 8, 7, 2, 3, 1, 1, True, "hardswish", False, False),  # C = 3
        ("float32", 2, 8, 10, 10, 12, 3, 1, 2, 2, 2, True, "silu", False, False),   # grouped
        ("bfloat16", 2, 24, 13, 13, 40, 1, 1, 0, 1, 1, True, "none", False, True),  # view
        ("float32", 2, 16, 14, 14, 32, 3, 1, 1, 1, 1, False, "relu", True, True),   # no bias
    ]
    for (dt, n, c, h, w_, o, k, s, pad, dil, grp, has_b, act, has_r, view) in cases:
        dtype = getattr(torch, dt)
        x = torch.randn(n, c, h, w_ + (3 if view else 0), device="cuda", generator=g).to(dtype)
        if view:
            x = x[:, :, :, 1:w_ + 1]
        wt = torch.randn(o, c // grp, k, k, device="cuda", generator=g) / (c // grp * k * k) ** 0.5
        wt = wt.to(dtype)
        b = torch.randn(o, device="cuda", generator=g).to(dtype) if has_b else None
        want = F.conv2d(x, wt, b, s, pad, dil, grp)
        ref = F.conv2d(x.double(), wt.double(), None if b is None else b.double(), s, pad, dil, grp)
        r = None
        if has_r:
            r = torch.randn(want.shape, device="cuda", generator=g).to(dtype)
            ref = ref + r.double()
        ref = ACT[act](ref)
        def call():
            if act == "none" and r is None:
                return torch_ops.conv2d(x, wt, b, s, pad, dil, grp)
            return torch_ops.conv2d_fused(x, wt, b, s, pad, dil, grp, activation=act, residual=r)
        outs = [call() for _ in range(2)]  # the first races, the second runs the verdict
        # An in-place update of the weight: the filter's NHWC copy must follow it.
        wt.mul_(-0.5)
        ref2 = F.conv2d(x.double(), wt.double(), None if b is None else b.double(), s, pad, dil,
                        grp)
        ref2 = ACT[act](ref2 + (0 if r is None else r.double()))
        outs.append(call())
        res.append(dict(dtype=dt, errs=[err(outs[0], ref), err(outs[1], ref), err(outs[2], ref2)],
                        strides=[list(t.stride()) for t in outs], want=list(want.stride()),
                        plain=act == "none" and r is None and not view,
                        algo=torch_ops.algorithm("conv2d", x, wt, b, s, pad, dil, grp)))
    print("RESULT " + json.dumps(res))
""")

_NHWC_TOL = {"float32": 2e-3, "bfloat16": 1e-2, "float16": 5e-3}  # TF32; 16-bit rounded twice


@gpu
def test_cudnn_nhwc_side_forced():
    """Forced to the channels_last side (GPUKERN_CONV_RACE_SIDE=cudnn_nhwc) every NCHW problem
    below is raced with that side, runs it, and computes torch's result in aten's layout: fp32
    (TF32) / bf16 / fp16, odd channels and planes, stride, padding, dilation, groups, C = 3, a
    strided input view, bias or none, a residual, ReLU (cuDNN's fused call) and activations of
    the elementwise pass; an in-place update of the weight is seen by the next call."""
    res, races, stderr = _run_script(_NHWC_SIDE_SCRIPT, GPUKERN_CONV_RACE_SIDE="cudnn_nhwc")
    assert len(races) == len(res), stderr
    for ln in races:
        assert "cudnn nhwc" in ln.split(":", 2)[2].split("->")[0], ln
        assert ln.endswith("-> cudnn nhwc"), ln
    for r in res:
        for e in r["errs"]:
            assert e < _NHWC_TOL[r["dtype"]], (r, races)
        assert all(s == r["want"] for s in r["strides"]), r
        # The query sees no epilogue: it reports the plain call's verdict only.
        if r["plain"]:
            assert r["algo"] == "cudnn", r


_NHWC_NOT_SCRIPT = textwrap.dedent("""
    import json
    import torch
    import torch_ops

    g = torch.Generator(device="cuda").manual_seed(3)
    bf = torch.bfloat16
    cl = torch.channels_last
    x = torch.randn(4, 32, 14, 14, device="cuda", generator=g).to(bf)
    w = torch.randn(32, 32, 3, 3, device="cuda", generator=g).to(bf)
    wd = torch.randn(32, 1, 3, 3, device="cuda", generator=g).to(bf)
    torch_ops.conv2d(x.contiguous(memory_format=cl), w.contiguous(memory_format=cl), None, 1, 1)
    torch_ops.conv2d(x, wd, None, 1, 1, 1, 32)  # depthwise
    torch_ops.conv2d(x, w, None, 1, 1)  # NCHW dense: the side races
    print("RESULT " + json.dumps({}))
""")


@gpu
def test_cudnn_nhwc_side_only_for_nchw_dense():
    """The channels_last side races only where it can help: not for an input already in
    channels_last, not for a depthwise problem; it does for an NCHW dense one."""
    _, races, stderr = _run_script(_NHWC_NOT_SCRIPT)
    assert len(races) == 3, stderr
    sides = [ln.split(":", 2)[2].split("->")[0] for ln in races]
    assert "cudnn nhwc" not in sides[0] and "cudnn nhwc" not in sides[1], races
    assert "cudnn nhwc" in sides[2], races


_NHWC_CAPTURE_SCRIPT = textwrap.dedent("""
    import json
    import torch
    import torch_ops
    import torch.nn.functional as F

    def err(out, ref):
        return float((out.double() - ref).norm() / ref.norm())

    g = torch.Generator(device="cuda").manual_seed(11)
    bf = torch.bfloat16
    x = torch.randn(8, 64, 14, 14, device="cuda", generator=g).to(bf)
    w = (torch.randn(64, 64, 3, 3, device="cuda", generator=g) / 24).to(bf)
    b = torch.randn(64, device="cuda", generator=g).to(bf)
    torch_ops.conv2d_fused(x, w, b, 1, 1, activation="relu")  # raced eagerly: the side wins
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(side):
        with torch.cuda.graph(graph, stream=side):
            y = torch_ops.conv2d_fused(x, w, b, 1, 1, activation="relu")
    torch.cuda.current_stream().wait_stream(side)
    # New input and weight values in the same buffers: the replay converts both again.
    x.copy_(torch.randn(x.shape, device="cuda", generator=g).to(bf))
    w.mul_(-1.0)
    graph.replay()
    torch.cuda.synchronize()
    ref = F.conv2d(x.double(), w.double(), b.double(), 1, 1).relu()
    print("RESULT " + json.dumps({"err": err(y, ref), "strides": list(y.stride())}))
""")


@gpu
def test_cudnn_nhwc_side_in_a_graph():
    """A captured call whose problem went to the channels_last side converts input and filter
    inside the graph: a replay after new values are written into the input and the weight (in
    place) computes the new result."""
    res, races, stderr = _run_script(_NHWC_CAPTURE_SCRIPT, GPUKERN_CONV_RACE_SIDE="cudnn_nhwc")
    assert len(races) == 1 and races[0].endswith("-> cudnn nhwc"), stderr
    assert res["err"] < 1e-2, res
    assert res["strides"] == [64 * 14 * 14, 14 * 14, 14, 1], res
