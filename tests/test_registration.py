"""Schema-level checks over every op: each is registered, has CPU (and, in a CUDA build, CUDA)
kernels, passes torch.library.opcheck, and traces under torch.compile(fullgraph=True)."""
import pytest
import torch

import torch_ops
from conftest import DEVICE_PARAMS, HAS_CUDA, rand

OPS = ["conv1d", "conv1d.padding", "conv2d", "conv2d.padding", "conv1d_fused",
       "conv1d_fused.padding", "conv2d_fused", "conv2d_fused.padding", "convolve", "mv", "sum",
       "sum.dim_IntList", "mean", "mean.dim", "amax", "amin"]


@pytest.mark.parametrize("name", OPS)
def test_registered_with_cpu_kernel(name):
    qualname = "gpukern::" + name
    assert torch._C._dispatch_has_kernel_for_dispatch_key(qualname, "CPU")
    if HAS_CUDA:
        assert torch._C._dispatch_has_kernel_for_dispatch_key(qualname, "CUDA")


def _cases(device):
    """(op overload, args, kwargs) covering every op with a few argument forms."""
    g = torch.Generator().manual_seed(0)
    x1 = rand(2, 4, 33, device=device, generator=g)
    w1 = rand(6, 2, 5, device=device, generator=g)
    b1 = rand(6, device=device, generator=g)
    x2 = rand(2, 4, 13, 11, device=device, generator=g)
    w2 = rand(4, 1, 3, 3, device=device, generator=g)
    a = rand(37, 19, device=device, generator=g)
    v = rand(19, device=device, generator=g)
    r = rand(3, 5, 7, device=device, generator=g)
    sig = rand(2, 3, 29, device=device, generator=g)
    taps = rand(3, 6, device=device, generator=g)
    ops = torch.ops.gpukern
    return [
        (ops.conv1d.default, (x1, w1, b1, [2], [1], [1], 2), {}),
        (ops.conv1d.padding, (x1, w1, None, [1], "same", [2], 2), {}),
        (ops.conv2d.default, (x2, w2, None, [1, 2], [1, 0], [1, 1], 4), {}),
        (ops.conv2d.padding, (x2.to(memory_format=torch.channels_last), w2, None, [1, 1],
                              "same", [1, 1], 4), {}),
        (ops.conv1d_fused.default, (x1, w1, b1, [2], [1], [1], 2, "silu",
                                    rand(2, 6, 16, device=device, generator=g)), {}),
        (ops.conv1d_fused.padding, (x1, w1, None, [1], "same", [2], 2),
         {"activation": "gelu"}),
        (ops.conv2d_fused.default, (x2, w2, None, [1, 2], [1, 0], [1, 1], 4, "relu",
                                    rand(2, 4, 13, 5, device=device, generator=g)), {}),
        (ops.conv2d_fused.padding, (x2.to(memory_format=torch.channels_last), w2, None,
                                    [1, 1], "same", [1, 1], 4),
         {"activation": "hardswish", "residual": rand(2, 4, 13, 11, device=device, generator=g)}),
        (ops.convolve.default, (sig, taps), {}),
        (ops.convolve.default, (sig[:, :1, ::2], taps, "same"), {}),
        (ops.convolve.default, (sig[0, 0], taps[:, :4]), {"mode": "valid"}),
        (ops.mv.default, (a, v), {}),
        (ops.mv.default, (a.t().contiguous().t(), v), {}),
        (ops.sum.default, (r,), {}),
        (ops.sum.default, ((r > 0),), {}),
        (ops.sum.dim_IntList, (r, [0, 2], True), {}),
        (ops.sum.dim_IntList, (r, [1]), {"dtype": torch.float64} if device == "cpu" else {}),
        (ops.mean.default, (r,), {}),
        (ops.mean.dim, (r, [-1]), {}),
        (ops.amax.default, (r, [1], False), {}),
        (ops.amin.default, (r, [0, 1], True), {}),
    ]


@pytest.mark.parametrize("device", DEVICE_PARAMS)
def test_opcheck(device):
    for op, args, kwargs in _cases(device):
        torch.library.opcheck(op, args, kwargs)


@pytest.mark.parametrize("device", DEVICE_PARAMS)
def test_compile_fullgraph(device):
    g = torch.Generator().manual_seed(1)
    x = rand(2, 3, 64, device=device, generator=g)
    w = rand(3, 1, 7, device=device, generator=g)
    img = rand(1, 1, 20, 24, device=device, generator=g)
    k = rand(1, 1, 3, 3, device=device, generator=g)
    a = rand(16, 8, device=device, generator=g)
    h = rand(3, 5, device=device, generator=g)

    def f(x, w, img, k, a, h):
        y = torch_ops.conv1d(x, w, None, 1, "same", 1, 3)
        y = y + torch_ops.convolve(x, h, "same")[..., :64] - torch_ops.convolve(x, h[0])[..., 4:]
        z = torch_ops.conv2d(img, k, padding=1)
        m = torch_ops.mv(a, torch_ops.sum(img[0, 0, :8, :], dim=1))
        return (torch_ops.amax(y, -1) + torch_ops.mean(z) - torch_ops.amin(m)).sum()

    torch._dynamo.reset()
    eager = f(x, w, img, k, a, h)
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")(x, w, img, k, a, h)
    torch.testing.assert_close(compiled, eager)
