"""Shared test fixtures: devices (cpu always, cuda when present), the per-dtype tolerance table
and the float64-reference comparison every parity test uses."""
import collections
import os

# The suite checks gpukern's kernels and its rules: the first-call race against cuDNN
# (csrc/conv/vendor.h), which would swap a shape's algorithm by a timing, is off unless the
# environment says otherwise. tests/test_conv_cudnn.py runs it on, in subprocesses.
os.environ.setdefault("GPUKERN_CONV_RACE", "0")

import pytest
import torch
import torch.nn.functional as F

import torch_ops  # noqa: F401  registers torch.ops.gpukern
from torch.utils._python_dispatch import TorchDispatchMode

HAS_CUDA = torch.cuda.is_available() and torch_ops.has_cuda_kernels()

DEVICES = ["cpu"] + (["cuda"] if HAS_CUDA else [])
# Device parameters for test grids: the cuda entry is reported as skipped, not dropped, when no
# GPU is present, so the same command runs every test on a GPU machine.
DEVICE_PARAMS = [
    "cpu",
    pytest.param("cuda", marks=[pytest.mark.cuda, pytest.mark.skipif(
        not HAS_CUDA, reason="needs a CUDA device and the CUDA build of gpukern")]),
]

FLOAT_DTYPES = [torch.float32, torch.float16, torch.bfloat16]
CPU_ONLY_DTYPES = [torch.float64]

# The fused ops' activations in device/activation.cuh's ActKind order, each as torch computes it
# (the references of the fused-epilogue tests).
REF_ACTS = {
    "none": lambda t: t,
    "relu": F.relu,
    "relu6": F.relu6,
    "silu": F.silu,
    "gelu": F.gelu,
    "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
    "hardswish": F.hardswish,
    "sigmoid": torch.sigmoid,
    "hardsigmoid": F.hardsigmoid,
}

# Relative tolerance per dtype, applied as |out - ref| <= tol * (|ref| + rms(ref)). The reference
# is float64 on the same (already rounded) inputs, so the error is float32 accumulation plus one
# final rounding to the output dtype: float16 2^-11, bfloat16 2^-8 relative.
TOL = {
    torch.float64: 1e-12,
    torch.float32: 2e-5,
    torch.float16: 2e-3,
    torch.bfloat16: 1.6e-2,
}


def kernel_names(call):
    """call()'s result and the names of the CUDA kernels it launched (torch.profiler), joined."""
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        out = call()
        torch.cuda.synchronize()
    return out, " ".join(e.name for e in prof.events() if e.device_type.name == "CUDA")


def dtype_supported(device: str, dtype: torch.dtype) -> bool:
    return dtype != torch.float64 or device == "cpu"


def skip_unsupported(device: str, dtype: torch.dtype) -> None:
    if not dtype_supported(device, dtype):
        pytest.skip(f"{dtype} is CPU-only in gpukern")


def rand(*shape, dtype=torch.float32, device="cpu", generator=None) -> torch.Tensor:
    """Fresh standard-normal data (never zeros), drawn in float32 and rounded to dtype."""
    return torch.randn(*shape, generator=generator, dtype=torch.float32).to(dtype).to(device)


def assert_close_ref(out: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype = None,
                     tol: float = None, extra: torch.Tensor = None) -> None:
    """Compare a gpukern result with a float64 reference (any device). Checks shape, that no
    element is NaN where the reference is finite, and the per-dtype tolerance. extra: a
    per-element allowance (broadcastable to ref) added to the bound, for a documented extra
    rounding (see tests/algo_cases.py epilogue_rounding_allowance)."""
    dtype = dtype or out.dtype
    tol = TOL[dtype] if tol is None else tol
    assert out.shape == ref.shape, f"shape {tuple(out.shape)} != reference {tuple(ref.shape)}"
    o = out.detach().to("cpu", torch.float64)
    r = ref.detach().to("cpu", torch.float64)
    if r.numel() == 0:
        return
    same_nan = torch.isnan(o) == torch.isnan(r)
    assert bool(same_nan.all()), "NaN pattern differs from the reference"
    finite = ~torch.isnan(r)
    o, r = o[finite], r[finite]
    if r.numel() == 0:
        return
    rms = r.pow(2).mean().sqrt()
    err = (o - r).abs()
    bound = tol * (r.abs() + rms)
    if extra is not None:
        bound = bound + extra.detach().to("cpu", torch.float64).expand(finite.shape)[finite]
    worst = int(torch.argmax(err - bound))
    assert bool((err <= bound).all()), (
        f"max error {float(err.max()):.3e} (at flat index {worst}: got {float(o[worst])}, "
        f"expected {float(r[worst])}); tolerance {tol} x (|ref| + rms {float(rms):.3e})"
        + ("" if extra is None else f" + allowance {float(bound[worst] - tol * (r[worst].abs() + rms)):.3e}"))


@pytest.fixture(autouse=True)
def _true_fp32_convolutions():
    """Dense fp32 convolutions follow torch.backends.cudnn.allow_tf32 (the igemm path runs them as
    TF32 when it is True, torch's default, as F.conv does). The parity tests hold fp32 to true-fp32
    tolerances, so every test starts with it off; tests/test_igemm.py turns it on where it tests
    TF32."""
    old = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32 = old


@pytest.fixture
def tf32_allowed():
    """torch's default for convolutions, TF32 allowed, for a test of the TF32 paths (after
    _true_fp32_convolutions turned it off), restored after:
    pytestmark = pytest.mark.usefixtures("tf32_allowed")."""
    old = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = True
    yield
    torch.backends.cudnn.allow_tf32 = old


@pytest.fixture(params=DEVICE_PARAMS)
def device(request):
    return request.param


def pytest_terminal_summary(terminalreporter):
    """One line per skip reason with its count (pyproject's addopts leave out -ra's line per
    skipped test; -rs still lists them one by one)."""
    skipped = terminalreporter.stats.get("skipped", [])
    if not skipped:
        return
    reasons = collections.Counter()
    for report in skipped:
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        reasons[reason.removeprefix("Skipped: ")] += 1
    terminalreporter.write_sep("-", f"{len(skipped)} skipped, by reason")
    for reason, count in reasons.most_common():
        terminalreporter.write_line(f"{count:6d}  {reason}")


class OpLog(TorchDispatchMode):
    """Records the ops that reach the dispatcher (gpukern::* or aten::*)."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(func._schema.name)
        return func(*args, **(kwargs or {}))

    def gpukern(self):
        return [n for n in self.ops if n.startswith("gpukern::")]
