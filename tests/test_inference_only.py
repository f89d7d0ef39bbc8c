"""gpukern is forward only: every op has an Autograd-key kernel (csrc/bindings.cpp) that
raises when an input requires grad under grad mode, and otherwise runs the op below autograd, so
outputs never require grad."""
import pytest
import torch

import torch_ops
from conftest import DEVICE_PARAMS
from test_registration import _cases

PUBLIC_OPS = ["conv1d", "conv1d.padding", "conv2d", "conv2d.padding", "conv1d_fused",
              "conv1d_fused.padding", "conv2d_fused", "conv2d_fused.padding", "convolve", "mv",
              "sum", "sum.dim_IntList", "mean", "mean.dim", "amax", "amin"]


@pytest.mark.parametrize("name", PUBLIC_OPS)
def test_autograd_kernel_registered(name):
    assert torch._C._dispatch_has_kernel_for_dispatch_key("gpukern::" + name, "Autograd")


def _with_grad(args):
    """The same arguments, floating tensors made leaves that require grad."""
    return tuple(a.detach().clone().requires_grad_() if isinstance(a, torch.Tensor)
                 and a.is_floating_point() else a for a in args)


def _op_name(op):
    name = op._schema.name.split("::")[1]
    return name + ("." + op._overloadname if op._overloadname != "default" else "")


@pytest.mark.parametrize("device", DEVICE_PARAMS)
def test_requires_grad_raises_under_grad_mode(device):
    for op, args, kwargs in _cases(device):
        gargs = _with_grad(args)
        if not any(isinstance(a, torch.Tensor) and a.requires_grad for a in gargs):
            continue  # bool input: nothing can require grad
        expected = op(*args, **kwargs)
        with pytest.raises(RuntimeError, match=rf"^gpukern::{_op_name(op)}: gpukern is "
                           r"inference-only \(forward only\).*torch.inference_mode\(\)"):
            op(*gargs, **kwargs)
        for ctx in (torch.no_grad, torch.inference_mode):
            with ctx():
                out = op(*gargs, **kwargs)
            assert not out.requires_grad, (op, ctx)
            torch.testing.assert_close(out, expected, rtol=0, atol=0)
        # Grad mode on but nothing requires grad: runs, result is a plain tensor.
        out = op(*args, **kwargs)
        assert not out.requires_grad
        # opcheck's autograd-registration test sees the Autograd kernel.
        torch.library.opcheck(op, gargs, kwargs, test_utils="test_autograd_registration")


def test_wrappers_and_modules_raise():
    x = torch.randn(2, 3, 8, requires_grad=True)
    with pytest.raises(RuntimeError, match="gpukern::sum.dim_IntList: gpukern is inference-only"):
        torch_ops.sum(x, 1)
    with pytest.raises(RuntimeError, match="gpukern::amax: gpukern is inference-only"):
        torch_ops.amax(x)
    m = torch_ops.nn.Conv2d(1, 1, 3)  # its weight requires grad
    with pytest.raises(RuntimeError, match="gpukern::conv2d: gpukern is inference-only"):
        m(torch.randn(1, 1, 5, 5))
    m.requires_grad_(False)
    assert not m(torch.randn(1, 1, 5, 5)).requires_grad


def test_compile_under_no_grad_with_grad_parameters():
    torch.manual_seed(0)
    conv = torch_ops.nn.Conv1d(4, 4, 3, padding=1, groups=4)
    x = torch.randn(2, 4, 16)

    def f(x):
        return torch_ops.mean(conv(x), dim=-1)

    torch._dynamo.reset()
    with torch.no_grad():
        eager = f(x)
        out = torch.compile(f, fullgraph=True, backend="aot_eager")(x)
    assert not out.requires_grad
    torch.testing.assert_close(out, eager)
    torch._dynamo.reset()
    with pytest.raises(RuntimeError, match="gpukern is inference-only"):
        torch.compile(f, fullgraph=True, backend="aot_eager")(x)
