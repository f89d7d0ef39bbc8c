"""torch_ops.enabled(): torch calls inside the block go to gpukern when it can serve them exactly,
and fall through to torch otherwise; nothing changes outside the block."""
import pytest
import torch
import torch.nn.functional as F

import torch_ops
from conftest import DEVICE_PARAMS, HAS_CUDA, OpLog, assert_close_ref, rand




def _run(fn, ops=None):
    with OpLog() as log, torch_ops.enabled(ops=ops, cpu=True):
        out = fn()
    return out, log


def _routed_cases(device):
    g = torch.Generator().manual_seed(0)
    x1 = rand(2, 6, 31, device=device, generator=g)
    w1 = rand(6, 1, 5, device=device, generator=g)
    wd = rand(4, 3, 3, device=device, generator=g)
    b4 = rand(4, device=device, generator=g)
    x2 = rand(2, 3, 9, 11, device=device, generator=g)
    w2 = rand(5, 3, 3, 2, device=device, generator=g)
    a = rand(13, 7, device=device, generator=g)
    v = rand(7, device=device, generator=g)
    r = rand(3, 5, 6, device=device, generator=g)
    return [
        # (name, call, expected gpukern op)
        ("conv1d dw same", lambda: F.conv1d(x1, w1, None, 1, "same", 1, 6), "conv1d"),
        ("conv1d kwargs", lambda: F.conv1d(x1[:, :3], wd, bias=b4, stride=(2,), padding=1,
                                           dilation=2), "conv1d"),
        ("conv1d unbatched", lambda: F.conv1d(x1[0], w1, groups=6), "conv1d"),
        ("conv2d", lambda: F.conv2d(x2, w2, None, (1, 2), (1, 0)), "conv2d"),
        ("conv2d valid", lambda: F.conv2d(input=x2, weight=w2, padding="valid"), "conv2d"),
        ("conv2d channels_last",
         lambda: F.conv2d(x2.to(memory_format=torch.channels_last), w2[:3, :1], groups=3),
         "conv2d"),
        ("mv", lambda: torch.mv(a, v), "mv"),
        ("Tensor.mv transposed", lambda: a.t().contiguous().t().mv(v), "mv"),
        ("sum all", lambda: torch.sum(r), "sum"),
        ("Tensor.sum dim", lambda: r.sum(1), "sum"),
        ("sum tuple keepdim", lambda: torch.sum(r, (0, 2), keepdim=True), "sum"),
        ("sum dim kw", lambda: r.sum(dim=-1, keepdim=False), "sum"),
        ("sum bool", lambda: (r > 0).sum(), "sum"),
        ("sum int dim", lambda: (r * 10).to(torch.int32).sum(0), "sum"),
        ("sum dtype", lambda: r.sum(dtype=torch.float16 if device == "cuda" else torch.float64),
         "sum"),
        ("mean", lambda: r.mean(), "mean"),
        ("mean dims", lambda: torch.mean(r, [0, 1], True), "mean"),
        ("amax", lambda: torch.amax(r, -1), "amax"),
        ("Tensor.amax all", lambda: r.amax(), "amax"),
        ("amin keepdim", lambda: r.amin((1, 2), keepdim=True), "amin"),
    ]


@pytest.mark.parametrize("device", DEVICE_PARAMS)
def test_routed_calls_match_torch(device):
    for name, call, op in _routed_cases(device):
        expected = call()  # outside the block: torch
        out, log = _run(call)
        assert log.gpukern() == ["gpukern::" + op], (name, log.ops)
        assert out.dtype == expected.dtype and out.shape == expected.shape, name
        if expected.dtype.is_floating_point:
            assert_close_ref(out, expected.double(), tol=1e-4 if
                             expected.dtype == torch.float32 else None)
        else:
            assert torch.equal(out, expected), name


@pytest.mark.parametrize("device", DEVICE_PARAMS)
def test_modules_route_through_functional(device):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv1d(4, 4, 3, padding=1, groups=4),
                              torch.nn.Conv1d(4, 2, 1)).to(device).eval()
    x = torch.randn(2, 4, 16, device=device)
    with torch.no_grad():
        expected = net(x)
        out, log = _run(lambda: net(x))
    assert log.gpukern() == ["gpukern::conv1d", "gpukern::conv1d"]
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5)


def test_fall_through_cases():
    g = torch.Generator().manual_seed(1)
    x = rand(2, 4, 12, generator=g)
    w = rand(4, 1, 3, generator=g)
    r = rand(4, 5, generator=g)
    xg = x.clone().requires_grad_()
    out_buf = torch.empty(4)
    c = torch.randn(3, dtype=torch.complex64, generator=g)
    cases = [
        ("complex", lambda: torch.sum(c)),
        ("out=", lambda: torch.sum(r, 1, out=out_buf)),
        ("int mean with dtype", lambda: torch.arange(6).mean(dtype=torch.float32)),
        ("amax of ints", lambda: torch.arange(6).amax()),
        ("grad needed", lambda: F.conv1d(xg, w, groups=4)),
        ("grad needed sum", lambda: xg.sum()),
        ("unknown kwarg", lambda: torch.sum(r, axis=1)),
        ("mean of uint16", lambda: torch.ones(3, dtype=torch.uint16).mean(dtype=torch.float32)),
    ]
    for name, call in cases:
        expected = call()
        out, log = _run(call)
        assert log.gpukern() == [], (name, log.ops)
        torch.testing.assert_close(out, expected, msg=name)
    # Named tensors (which the dispatch log above cannot see) run torch.
    named = r.refine_names("a", "b")
    with torch_ops.enabled(cpu=True):
        torch.testing.assert_close(named.sum("a").rename(None), r.sum(0))
        torch.testing.assert_close(named.mean(1).rename(None), r.mean(1))
    # The grad-needing call falls through to torch and stays differentiable.
    with torch_ops.enabled():
        y = F.conv1d(xg, w, groups=4).sum()
    y.backward()
    assert xg.grad is not None and xg.grad.shape == xg.shape
    # Under no_grad the same call is served by gpukern.
    with torch.no_grad():
        _, log = _run(lambda: F.conv1d(xg, w, groups=4))
    assert log.gpukern() == ["gpukern::conv1d"]


def test_ops_subset_and_outside_block():
    x = torch.randn(2, 3, 8)
    w = torch.randn(3, 1, 3)
    _, log = _run(lambda: (F.conv1d(x, w, groups=3).sum(), x.amax()), ops=["sum"])
    assert log.gpukern() == ["gpukern::sum"]
    with OpLog() as log:
        with torch_ops.enabled():
            pass
        F.conv1d(x, w, groups=3).sum()
    assert log.gpukern() == []
    with pytest.raises(ValueError, match="unknown op"):
        torch_ops.enabled(ops=["conv3d"]).__enter__()


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device and the CUDA build of gpukern")
def test_float64_cuda_falls_through():
    x = torch.randn(2, 3, 8, device="cuda", dtype=torch.float64)
    w = torch.randn(3, 1, 3, device="cuda", dtype=torch.float64)
    out, log = _run(lambda: (F.conv1d(x, w, groups=3), x.sum(), x.float().sum(dtype=torch.float64)))
    assert log.gpukern() == []
    torch.testing.assert_close(out[0], F.conv1d(x, w, groups=3))
