"""Issue 30, defects 3 and 4 and the CPU-routing friction item: under torch_ops.enabled() and
after swap(), results and exceptions are torch's for every input (edge cases gpukern does not
cover go to torch); dtypes gpukern does not compute in go to torch; CPU calls go to torch unless
cpu=True. The raw conv ops return or raise what aten's do for zero channels."""
import pytest
import torch
import torch.nn.functional as F

import torch_ops
from torch_ops import _checks
from conftest import DEVICE_PARAMS, HAS_CUDA, OpLog




def _outcome(fn):
    try:
        return "ok", fn()
    except Exception as e:  # noqa: BLE001  (type and message are compared)
        return type(e), str(e).splitlines()[0]


def _assert_torchs(fn, **enabled):
    """fn() inside enabled(**enabled) gives torch's result or torch's exception (type and
    message)."""
    with torch.no_grad():
        ref = _outcome(fn)
        with torch_ops.enabled(**enabled):
            got = _outcome(fn)
    assert ref[0] == got[0], (ref, got)
    if ref[0] == "ok":
        assert got[1].shape == ref[1].shape and got[1].dtype == ref[1].dtype
        assert got[1].stride() == ref[1].stride() or got[1].numel() == 0
        torch.testing.assert_close(got[1], ref[1], rtol=1e-4, atol=1e-5)
    else:
        assert got[1] == ref[1]


def _edge_cases(device):
    def r(*shape, dtype=torch.float32):
        return torch.randn(*shape).to(dtype).to(device)
    x3 = r(3, 4, 5)
    return {
        "sum dim out of range": lambda: torch.sum(x3, 3),
        "Tensor.sum dims out of range": lambda: x3.sum((0, -4)),
        "amax dim out of range": lambda: torch.amax(x3, 5),
        "amin dim out of range": lambda: x3.amin(-4),
        "mean dim out of range": lambda: x3.mean(3),
        "sum repeated dim": lambda: x3.sum((1, 1)),
        "amax of empty": lambda: r(0, 3).amax(),
        "mean of int": lambda: torch.ones(3, dtype=torch.int32, device=device).mean(),
        "conv1d zero input channels": lambda: F.conv1d(r(2, 0, 8), r(6, 0, 3), r(6), padding=1),
        "conv1d zero input channels groups": lambda: F.conv1d(r(2, 0, 8), r(6, 0, 3), groups=2),
        "conv1d zero output channels": lambda: F.conv1d(r(2, 4, 8), r(0, 4, 3)),
        "conv1d zero output channels bias": lambda: F.conv1d(r(2, 4, 8), r(0, 4, 3), r(0)),
        "conv1d zero batch": lambda: F.conv1d(r(0, 4, 8), r(6, 4, 3), r(6)),
        "conv1d empty length padded": lambda: F.conv1d(r(2, 4, 0), r(6, 4, 3), padding=2),
        "conv1d zero kernel": lambda: F.conv1d(r(2, 4, 8), r(6, 4, 0)),
        "conv1d channels mismatch": lambda: F.conv1d(r(2, 4, 8), r(6, 3, 3)),
        "conv1d bias shape": lambda: F.conv1d(r(2, 4, 8), r(6, 4, 3), r(5)),
        "conv1d kernel too big": lambda: F.conv1d(r(2, 4, 2), r(6, 4, 3)),
        "conv1d same strided": lambda: F.conv1d(r(2, 4, 8), r(6, 4, 3), stride=2,
                                                padding="same"),
        "conv2d zero input channels": lambda: F.conv2d(r(2, 0, 8, 9), r(6, 0, 3, 3), r(6)),
        "conv2d zero input channels cl": lambda: F.conv2d(
            r(2, 0, 8, 9).to(memory_format=torch.channels_last), r(6, 0, 3, 3)),
        "conv2d zero output channels": lambda: F.conv2d(r(2, 4, 8, 8), r(0, 4, 3, 3)),
        "conv2d zero batch channels_last": lambda: F.conv2d(
            r(0, 4, 8, 8).to(memory_format=torch.channels_last), r(6, 4, 3, 3)),
        "conv2d groups": lambda: F.conv2d(r(2, 4, 8, 8), r(6, 4, 3, 3), groups=3),
        "mv mismatch": lambda: torch.mv(r(3, 4), r(5)),
        "mv empty": lambda: torch.mv(r(3, 0), r(0)),
    }


@pytest.mark.parametrize("device", DEVICE_PARAMS)
@pytest.mark.parametrize("case", list(_edge_cases("cpu")))
def test_enabled_gives_torchs_result_or_exception(device, case):
    _assert_torchs(_edge_cases(device)[case], cpu=True)


@pytest.mark.parametrize("device", DEVICE_PARAMS)
def test_dim_out_of_range_is_index_error(device):
    x = torch.randn(3, 4, device=device)
    with torch.no_grad(), torch_ops.enabled(cpu=True):
        for fn in (lambda: x.sum(2), lambda: torch.amax(x, -3), lambda: x.mean((0, 2))):
            with pytest.raises(IndexError, match="Dimension out of range"):
                fn()


@pytest.mark.parametrize("device", DEVICE_PARAMS)
@pytest.mark.parametrize("nsp", [1, 2])
def test_raw_conv_zero_channels_as_aten(device, nsp):
    sp = (8,) if nsp == 1 else (8, 9)
    ks = (3,) if nsp == 1 else (3, 3)
    aten = torch.ops.aten.conv1d if nsp == 1 else torch.ops.aten.conv2d
    gk = torch.ops.gpukern.conv1d if nsp == 1 else torch.ops.gpukern.conv2d
    ones, zeros = [1] * nsp, [0] * nsp
    x0 = torch.randn(2, 0, *sp, device=device)
    w0 = torch.randn(6, 0, *ks, device=device)
    b = torch.randn(6, device=device)
    ref = aten(x0, w0, b, ones, ones, ones, 1)
    out = gk(x0, w0, b, ones, ones, ones, 1)
    assert out.shape == ref.shape == (2, 0, *sp)
    with pytest.raises(RuntimeError):
        aten(torch.randn(2, 4, *sp, device=device), torch.randn(0, 4, *ks, device=device), None,
             ones, zeros, ones, 1)
    with pytest.raises(RuntimeError, match=f"gpukern::conv{nsp}d: expected weight with at least "
                                           "groups=1 output channels"):
        gk(torch.randn(2, 4, *sp, device=device), torch.randn(0, 4, *ks, device=device), None,
           ones, zeros, ones, 1)
    with pytest.raises(RuntimeError, match="non-zero spatial sizes"):
        gk(torch.randn(2, 4, *([0] * nsp), device=device), torch.randn(6, 4, *ks, device=device),
           None, ones, [2] * nsp, ones, 1)


@pytest.mark.parametrize("device", DEVICE_PARAMS)
def test_swapped_model_zero_channels_as_torch(device):
    net = torch.nn.Sequential(torch.nn.Conv1d(0, 6, 3, padding=1)).to(device).eval()
    x = torch.randn(2, 0, 8, device=device)
    with torch.no_grad():
        ref = net(x)
        torch_ops.swap(net, cpu=True, policy="all")  # gpukern on every call, zero channels too
        with OpLog() as log:
            out = net(x)
    assert out.shape == ref.shape == (2, 0, 8)
    assert log.gpukern() == ["gpukern::conv1d"]


UNSUPPORTED = {
    "mean uint16": lambda d: torch.arange(5, device=d).to(torch.uint16).mean(dtype=torch.float32),
    "sum complex": lambda d: torch.arange(5, device=d).to(torch.complex64).sum(),
    "sum to complex": lambda d: torch.arange(5.0, device=d).sum(dtype=torch.complex64),
    "mean complex": lambda d: (torch.arange(5, device=d) * 1j).mean(),
    "amax uint8": lambda d: torch.arange(5, device=d).to(torch.uint8).amax(),
}


@pytest.mark.parametrize("device", DEVICE_PARAMS)
@pytest.mark.parametrize("case", list(UNSUPPORTED))
def test_unsupported_dtypes_fall_back_to_torch(device, case):
    fn = UNSUPPORTED[case]
    ref = fn(device)
    with torch.no_grad(), OpLog() as log, torch_ops.enabled(cpu=True):
        out = fn(device)
    assert log.gpukern() == [], log.ops
    assert out.dtype == ref.dtype and torch.equal(out.cpu(), ref.cpu())


def test_supported_dtypes_in_one_place():
    assert _checks.supported_dtypes("sum", "cuda") == _checks.FLOAT_DTYPES + \
        _checks.SUM_INT_DTYPES
    assert torch.float64 in _checks.supported_dtypes("amax", "cpu")
    assert torch.float64 not in _checks.supported_dtypes("conv2d", "cuda")
    assert torch.uint16 in _checks.supported_dtypes("sum", "cpu")
    assert torch.uint16 not in _checks.supported_dtypes("amax", "cpu")
    for name in ("bool", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64",
                 "complex"):
        assert name in torch_ops.sum.__doc__


def _tiny_net():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv1d(4, 4, 3, padding=1, groups=4)).eval()


def test_cpu_calls_go_to_torch_by_default():
    net = _tiny_net()
    x = torch.randn(2, 4, 16)
    with torch.no_grad():
        ref = net(x)
        with OpLog() as log, torch_ops.enabled():
            out = net(x)
            torch.sum(x, 1)
        assert log.gpukern() == []
        with OpLog() as log, torch_ops.enabled(cpu=True):
            torch.testing.assert_close(net(x), ref, rtol=1e-4, atol=1e-5)
            torch.sum(x, 1)
        assert log.gpukern() == ["gpukern::conv1d", "gpukern::sum"]
        torch.testing.assert_close(out, ref)

        result = torch_ops.swap(net)
        assert len(result) == 1 and net[0].gpukern_cpu is False
        with OpLog() as log:
            torch.testing.assert_close(net(x), ref)
        assert log.gpukern() == []
        result.restore()
        assert "gpukern_cpu" not in net[0].__dict__
        torch_ops.swap(net, cpu=True)
        with OpLog() as log:
            torch.testing.assert_close(net(x), ref, rtol=1e-4, atol=1e-5)
        assert log.gpukern() == ["gpukern::conv1d"]
    assert "cpu=True" in torch_ops.enabled.__doc__ and "cpu=True" in torch_ops.swap.__doc__


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device and the CUDA build of gpukern")
def test_cuda_calls_go_to_gpukern_by_default():
    net = _tiny_net().cuda()
    x = torch.randn(2, 4, 16, device="cuda")
    with torch.no_grad():
        with OpLog() as log, torch_ops.enabled():
            net(x)
        assert log.gpukern() == ["gpukern::conv1d"]
        torch_ops.swap(net, policy="all")  # the default policy ("rules") may pick torch
        with OpLog() as log:
            net(x)
        assert log.gpukern() == ["gpukern::conv1d"]
