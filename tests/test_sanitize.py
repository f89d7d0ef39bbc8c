"""A small selection that reaches every CUDA algorithm of every op, sized for compute-sanitizer
(memcheck, racecheck, synccheck, initcheck run it: `STEPS=sanitize benchmarks/gpu_session.sh`,
marker `sanitize`). Each algorithm is forced by name on the first candidate shapes it can run:
odd sizes, strided views, storage offsets, channels_last, empty batches. Results are checked
against torch in float64 (loosely: the point is the sanitizer's verdict, the parity suites check
accuracy), and every algorithm must have run at least one case, so a renamed or new algorithm
without a case here fails the test instead of going unchecked.
"""
import pytest
import torch
import torch.nn.functional as F

import torch_ops
from conftest import HAS_CUDA

pytestmark = [pytest.mark.cuda, pytest.mark.sanitize,
              pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")]

# Every algorithm name of each family's dispatch table (csrc/*/dispatch*.cu).
CONV1D = ["rowwise8", "rowwise16", "rowwise8_dilated", "general_ot1", "general_ot4", "fft",
          "rowwise_reg", "rowwise_mma", "igemm"]
CONV2D = ["depthwise_nhwc", "depthwise_rows", "depthwise_tma", "depthwise_plane",
          "depthwise_large", "depthwise_nchw", "general_staged", "general_direct", "igemm",
          "depthwise_nhwc_tile", "depthwise_strided"]
MV = ["rows_vec", "rows", "cols_vec", "cols", "rows_mma"]
REDUCE = ["small", "seg_contig", "seg", "row", "col_vec", "col", "row_vec", "seg_runs", "flat"]
OPTIONAL = {"igemm"}  # only in builds with the CUTLASS path on sm_90


def _gen():
    return torch.Generator(device="cuda").manual_seed(0)


def _offset(t):
    """t's values at a storage offset of one element (a misaligned base)."""
    flat = torch.empty(t.numel() + 1, dtype=t.dtype, device=t.device)
    return flat[1:].view(t.shape).copy_(t)


def _conv_cases(nsp):
    g = _gen()
    cases = []
    for dtype in (torch.float32, torch.bfloat16):
        def r(*s):
            return torch.randn(*s, device="cuda", generator=g).to(dtype)
        if nsp == 1:
            cases += [
                (r(2, 3, 1500), r(3, 1, 7), dict(padding=3, groups=3)),
                (r(2, 3, 1500), r(3, 1, 16), dict(padding=8, groups=3)),
                (r(1, 2, 1300), r(2, 1, 5), dict(padding=4, dilation=2, groups=2)),
                (r(1, 1, 5000), r(1, 1, 200), dict(padding=100)),
                (r(2, 8, 37), r(16, 8, 3), dict(stride=2, padding=1)),
                (r(2, 6, 37), r(6, 2, 3), dict(padding=1, groups=3)),
                (r(1, 16, 300)[:, :, 1:], r(32, 16, 3), dict(padding=1)),
                (r(0, 8, 40), r(16, 8, 3), dict(padding=1)),
            ]
        else:
            cl = torch.channels_last
            cases += [
                (r(2, 8, 19, 23).contiguous(memory_format=cl), r(8, 1, 3, 3),
                 dict(padding=1, groups=8)),
                (r(2, 4, 70, 66), r(4, 1, 3, 3), dict(padding=1, groups=4)),
                (r(2, 4, 70, 66), r(4, 1, 5, 5), dict(padding=2, groups=4)),
                (r(1, 3, 13, 9), r(3, 1, 3, 3), dict(padding=1, groups=3)),
                (r(1, 2, 40, 40), r(2, 1, 9, 9), dict(padding=4, groups=2)),
                (r(1, 2, 30, 33), r(2, 1, 5, 5), dict(padding=4, dilation=2, groups=2)),
                (r(2, 24, 15, 13).contiguous(memory_format=cl), r(24, 1, 5, 5),
                 dict(stride=2, padding=2, groups=24)),
                (r(2, 5, 29, 31), r(5, 1, 3, 3), dict(stride=2, padding=1, groups=5)),
                (r(1, 16, 20, 20), r(32, 16, 3, 3), dict(padding=1)),
                (r(2, 16, 15, 17), r(32, 16, 3, 3), dict(stride=2, padding=1)),
                (r(1, 4, 30, 30), r(8, 4, 2, 2), dict(stride=13)),
                (_offset(r(2, 8, 11, 10)), r(8, 8, 3, 3), dict(padding=1)),
                (r(0, 8, 9, 9), r(8, 8, 3, 3), dict(padding=1)),
            ]
    return cases


def _run_family(family, names, cases, call, ref):
    ran = {n: 0 for n in names}
    for name in names:
        for args in cases:
            try:
                with torch_ops.force_algorithm(family, name):
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
            ran[name] += 1
    missing = [n for n, k in ran.items() if k == 0 and n not in OPTIONAL]
    if "igemm" in ran and torch.ops.gpukern._has_igemm() and \
            torch.cuda.get_device_capability() == (9, 0) and ran["igemm"] == 0:
        missing.append("igemm")
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
        _run_family(family, CONV1D if nsp == 1 else CONV2D, _conv_cases(nsp),
                    lambda x, w, kw: op(x, w, None, **kw), _conv_ref(nsp))


def test_every_mv_algorithm():
    g = _gen()
    cases = []
    for dtype in (torch.float32, torch.bfloat16):
        def r(*s):
            return torch.randn(*s, device="cuda", generator=g).to(dtype)
        cases += [(r(37, 129), r(129)), (r(129, 37).t(), r(129)), (r(3, 5000), r(5000)),
                  (r(2000, 8), r(8)), (r(64, 256)[:, 1:], r(255)), (r(0, 5), r(5))]
    _run_family("mv", MV, cases, torch_ops.mv,
                lambda a, v: torch.mv(a.double(), v.double()))


def test_every_reduce_algorithm():
    g = _gen()
    cases = []
    for dtype in (torch.float32, torch.bfloat16):
        def r(*s):
            return torch.randn(*s, device="cuda", generator=g).to(dtype)
        cases += [(r(1000), None), (r(300, 257), 1), (r(257, 300), 0), (r(7, 33, 65), 1),
                  (r(6, 40, 3), (0, 2)), (r(65, 130).t(), 1), (r(4, 300, 5)[:, 1:], 1),
                  (r(200000), None), (r(3, 0, 4), 1)]
    _run_family("reduce", REDUCE, cases,
                lambda x, d: torch_ops.sum(x, d),
                lambda x, d: x.double().sum() if d is None else x.double().sum(d))
