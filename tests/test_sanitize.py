"""A small selection that reaches every CUDA algorithm of every op, sized for compute-sanitizer
(memcheck, racecheck, synccheck, initcheck run it: `STEPS=sanitize benchmarks/gpu_session.sh`,
marker `sanitize`). Each algorithm is forced by name on the first candidate shapes it can run:
odd sizes, strided views, storage offsets, channels_last, empty batches. Results are checked
against torch in float64 (loosely: the point is the sanitizer's verdict, the parity suites check
accuracy), and every algorithm must have run at least one case, so a renamed or new algorithm
without a case here fails the test instead of going unchecked. The algorithm names and the cases
live in tests/algo_cases.py (shared with tests/test_graphs.py and tests/test_multi_gpu.py).
"""
import pytest
import torch
import torch.nn.functional as F

import torch_ops
from algo_cases import CONV1D, CONV2D, MV, REDUCE, conv_cases, conv_output_shape, conv_ref, \
    forced, missing_algorithms, mv_cases, reduce_cases
from conftest import HAS_CUDA

pytestmark = [pytest.mark.cuda, pytest.mark.sanitize,
              pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")]


def _run_family(family, names, cases, call, ref):
    ran = {n: 0 for n in names}
    for name in names:
        for args in cases:
            try:
                with forced(family, name):
                    out = call(*args)
            except RuntimeError as e:
                if "cannot run" in str(e):
                    continue
                raise
            expected = ref(*args)
            assert out.shape == expected.shape
            if out.numel():
                err = float((out.double() - expected).norm() / expected.norm().clamp_min(1e-30))
                assert err < 2e-2, f"{family} {name}: relative error {err:.2e}"
                ran[name] += 1  # an empty output launches nothing: it does not count as a run
    missing = missing_algorithms(ran)
    assert not missing, f"{family}: no case here runs {missing}"


def _conv_ref(nsp):
    conv = F.conv1d if nsp == 1 else F.conv2d

    def ref(x, w, kw):
        return conv(x.double(), w.double(), None, **kw)
    return ref


@pytest.mark.parametrize("nsp", [1, 2])
def test_every_conv_algorithm(nsp):
    family = f"conv{nsp}d"
    op = torch_ops.conv1d if nsp == 1 else torch_ops.conv2d
    with torch.inference_mode():
        _run_family(family, CONV1D if nsp == 1 else CONV2D, conv_cases(nsp),
                    lambda x, w, kw: op(x, w, None, **kw), _conv_ref(nsp))


ACT_CYCLE = ["relu", "silu", "gelu", "hardswish", "sigmoid", "relu6", "gelu_tanh", "none"]


@pytest.mark.parametrize("nsp", [1, 2])
def test_every_fused_conv_algorithm(nsp):
    """The same convolutions through conv{1,2}d_fused with a bias, an activation and a residual:
    the epilogues (the tensor-core kernel's fused one, which reads the residual as its C operand,
    and the generic pass for the other algorithms)."""
    family = f"conv{nsp}d"
    op = torch_ops.conv1d_fused if nsp == 1 else torch_ops.conv2d_fused
    g = torch.Generator(device="cuda").manual_seed(5)
    calls = []
    for i, (x, w, kw) in enumerate(conv_cases(nsp)):
        b = torch.randn(w.shape[0], device="cuda", generator=g).to(x.dtype)
        r = torch.randn(conv_output_shape(nsp, x, w, **kw), device="cuda",
                        generator=g).to(x.dtype)
        calls.append((x, w, b, r, ACT_CYCLE[i % len(ACT_CYCLE)], kw))
    with torch.inference_mode():
        _run_family(family, CONV1D if nsp == 1 else CONV2D, calls,
                    lambda x, w, b, r, act, kw: op(x, w, b, activation=act, residual=r, **kw),
                    lambda x, w, b, r, act, kw: conv_ref(nsp, x, w, b, act, r, **kw))


def test_every_mv_algorithm():
    cases = mv_cases()
    _run_family("mv", MV, cases, torch_ops.mv,
                lambda a, v: torch.mv(a.double(), v.double()))


def test_every_reduce_algorithm():
    cases = reduce_cases()
    _run_family("reduce", REDUCE, cases,
                lambda x, d: torch_ops.sum(x, d),
                lambda x, d: x.double().sum() if d is None else x.double().sum(d))
