"""What the igemm tests share (tests/test_igemm.py, tests/test_igemm_epilogues.py): tolerances,
the skip reason, the tile-configuration fixture, inputs, the float64 reference and the raw-op
calls."""
import pytest
import torch
import torch.nn.functional as F

import torch_ops
from conftest import HAS_CUDA

# Norm-relative error bounds, ||out - ref|| / ||ref||, against float64 on the same rounded inputs.
# bf16 / fp16: fp32 accumulation and one rounding of the output (2^-9 / 2^-12 rms); TF32: the
# operands rounded to 10 mantissa bits (about 3e-4 measured, bounded at 2e-3).
REL_TOL = {torch.bfloat16: 1e-2, torch.float16: 2e-3, torch.float32: 2e-3}
# True fp32 (the fall-back when TF32 is off): direct kernels, fp32 accumulation.
FP32_TOL = 1e-5


def _igemm_state():
    """None when the igemm tests can run, else the reason they cannot."""
    if not HAS_CUDA:
        return "needs a CUDA device and the CUDA build of gpukern"
    if not torch.ops.gpukern._has_igemm():
        return "this build has no igemm path (nvidia-cutlass, TORCH_CUDA_ARCH_LIST with 9.0a)"
    if torch.cuda.get_device_capability() != (9, 0):
        return "the igemm kernels are sm_90a code (H100/H200)"
    x = torch.empty(1, 8, 4, 4, device="meta", dtype=torch.bfloat16)
    w = torch.empty(8, 8, 1, 1, device="meta", dtype=torch.bfloat16)
    try:
        with torch_ops.force_algorithm("conv2d", "igemm"):
            torch_ops.algorithm("conv2d", x, w, None, 1, 0)
    except RuntimeError as e:
        return f"the conv2d dispatch has no algorithm 'igemm' yet ({e})"
    return None


_STATE = _igemm_state()
# Each test starts with torch's default for convolutions (TF32 allowed; tests/conftest.py).
IGEMM_MARKS = [pytest.mark.cuda, pytest.mark.skipif(_STATE is not None, reason=str(_STATE)),
              pytest.mark.usefixtures("tf32_allowed")]

DTYPES = [torch.bfloat16, torch.float16, torch.float32]
# The conv kernel's tile configurations (csrc/conv/igemm/config.h), forced through
# GPUKERN_IGEMM_CONFIG; test_bucket_rule checks the automatic choice.
CONFIGS = ["large", "small", "medium", "narrow"]


@pytest.fixture(params=CONFIGS)
def config(request, monkeypatch):
    monkeypatch.setenv("GPUKERN_IGEMM_CONFIG", request.param)
    return request.param


def _rand(*shape, dtype, gen):
    return torch.randn(*shape, generator=gen, dtype=torch.float32).to(dtype).cuda()


def _ref(x, w, b, stride, padding, dilation, groups=1):
    d = lambda t: None if t is None else t.double()  # noqa: E731
    conv = F.conv1d if w.dim() == 3 else F.conv2d  # by the weight: an unbatched 2-D x is 3-D
    return conv(d(x), d(w), d(b), stride, padding, dilation, groups)


def _rel_err(out, ref):
    o, r = out.double(), ref.double()
    assert not torch.isnan(o).any(), "NaN in the output"
    return float((o - r).norm() / r.norm().clamp_min(1e-30))


def _captured(call):
    """call() captured into a CUDA graph after the queued work is done: (the graph, its output)."""
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = call()
    return g, out


def _lists(n, *values):
    """The raw ops take aten's schema: stride, padding and dilation as lists of n values."""
    return [list(v) if isinstance(v, (tuple, list)) else [v] * n for v in values]


def _run(family, x, w, b, stride, padding, dilation, groups=1, algo="igemm"):
    op = torch.ops.gpukern.conv2d if family == "conv2d" else torch.ops.gpukern.conv1d
    args = _lists(2 if family == "conv2d" else 1, stride, padding, dilation)
    if algo is None:
        return op(x, w, b, *args, groups)
    with torch_ops.force_algorithm(family, algo):
        out = op(x, w, b, *args, groups)
    return out
