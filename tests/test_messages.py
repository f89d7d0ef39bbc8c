"""Issue 30, defect 5: every message of csrc/conv/args.cpp reads as a sentence that names the op,
the argument, what was expected and what came ("gpukern::conv1d: stride must have 1 value, got
2", never "must have 1 or 1 values")."""
import re

import pytest
import torch

import torch_ops  # noqa: F401
from conftest import DEVICE_PARAMS

ops = torch.ops.gpukern


def _t(*shape, device="cpu", dtype=torch.float32):
    return torch.randn(*shape).to(dtype).to(device)


def _cases(device):
    x1, w1, b1 = _t(2, 4, 16, device=device), _t(6, 2, 3, device=device), _t(6, device=device)
    x2, w2 = _t(2, 4, 9, 10, device=device), _t(6, 2, 3, 3, device=device)
    c1, c2 = ops.conv1d, ops.conv2d
    return [
        (lambda: c1(x1, w1, None, [1, 1], [0], [1], 2),
         "gpukern::conv1d: stride must have 1 value, got 2"),
        (lambda: c1(x1, w1, None, [1], [0, 0], [1], 2),
         "gpukern::conv1d: padding must have 1 value, got 2"),
        (lambda: c1(x1, w1, None, [1], [0], [], 2),
         "gpukern::conv1d: dilation must have 1 value, got 0"),
        (lambda: c2(x2, w2, None, [1, 1, 1], [0], [1], 2),
         "gpukern::conv2d: stride must have 1 or 2 values, got 3"),
        (lambda: ops.conv2d.padding(x2, w2, None, [1], "same", [1, 1, 1], 2),
         "gpukern::conv2d: dilation must have 1 or 2 values, got 3"),
        (lambda: c1(x1, w1[0], None, [1], [0], [1], 2),
         r"gpukern::conv1d: expected weight with 3 dimensions \[out_channels, in_channels / "
         r"groups, kernel size...\], got weight of shape \[2, 3\]"),
        (lambda: c2(x2, w1, None, [1], [0], [1], 2),
         r"gpukern::conv2d: expected weight with 4 dimensions .*, got weight of shape \[6, 2, 3\]"),
        (lambda: c1(x1, w1, None, [1], [0], [1], 0), "gpukern::conv1d: groups must be positive, "
         "got 0"),
        (lambda: c1(x1, _t(6, 2, 0, device=device), None, [1], [0], [1], 2),
         r"gpukern::conv1d: kernel size must be positive, got weight of shape \[6, 2, 0\]"),
        (lambda: c1(x1[:, :3], _t(6, 1, 3, device=device), None, [1], [0], [1], 2),
         "gpukern::conv1d: groups=2 must divide the input channels, got 3 input channels"),
        (lambda: c1(x1, w1[:5], None, [1], [0], [1], 2),
         r"gpukern::conv1d: groups=2 must divide the output channels, got 5 output channels "
         r"\(weight of shape \[5, 2, 3\]\)"),
        (lambda: c1(x1, _t(0, 4, 3, device=device), None, [1], [0], [1], 1),
         r"gpukern::conv1d: expected weight with at least groups=1 output channels "
         r"\(weight.size\(0\)\), got weight of shape \[0, 4, 3\]"),
        (lambda: c1(x1, w1, None, [1], [0], [1], 1),
         r"gpukern::conv1d: expected weight.size\(1\) \* groups == input channels, got weight of "
         r"shape \[6, 2, 3\], groups=1 and 4 input channels"),
        (lambda: c1(x1, w1, b1[:4], [1], [0], [1], 2),
         r"gpukern::conv1d: expected bias of shape \[6\], got bias of shape \[4\]"),
        (lambda: c1(_t(2, 4, 0, device=device), w1, None, [1], [2], [1], 2),
         r"gpukern::conv1d: expected an input with non-zero spatial sizes \(only a zero batch or "
         r"zero channels may make it empty\), got input of shape \[2, 4, 0\]"),
        (lambda: c1(x1, w1, None, [0], [0], [1], 2),
         r"gpukern::conv1d: stride must be positive, got \[0\]"),
        (lambda: c2(x2, w2, None, [1, 1], [0], [1, 0], 2),
         r"gpukern::conv2d: dilation must be positive, got \[1, 0\]"),
        (lambda: c1(x1, w1, None, [1], [-1], [1], 2),
         r"gpukern::conv1d: padding must be non-negative, got \[-1\]"),
        (lambda: ops.conv1d.padding(x1, w1, None, [2], "same", [1], 2),
         r"gpukern::conv1d: padding='same' is not supported for strided convolutions, got "
         r"stride \[2\]"),
        (lambda: ops.conv2d.padding(x2, w2, None, [1], "full", [1], 2),
         "gpukern::conv2d: padding must be 'same' or 'valid', got 'full'"),
        (lambda: c1(x1, w1, None, [1], [0], [8], 2),
         r"gpukern::conv1d: the \(dilated\) kernel size 17 is larger than the padded input size "
         r"16 in spatial dim 0; expected dilation \* \(kernel size - 1\) \+ 1 <= input size \+ "
         r"padding"),
    ]


def _fused_cases(device):
    x1, w1 = _t(2, 4, 16, device=device), _t(6, 2, 3, device=device)
    x2, w2 = _t(2, 4, 9, 10, device=device), _t(6, 2, 3, 3, device=device)
    f1, f2 = ops.conv1d_fused, ops.conv2d_fused
    return [
        (lambda: f2(x2, w2, None, [1], [1], [1], 2, "tanh"), ValueError,
         "gpukern::conv2d_fused: activation must be one of 'none', 'relu', 'relu6', 'silu', "
         "'gelu', 'gelu_tanh', 'hardswish', 'sigmoid', 'hardsigmoid', got 'tanh'"),
        (lambda: f1(x1, w1, None, [1], [1], [1], 2, "relu", _t(6, 16, device=device)),
         RuntimeError,
         r"gpukern::conv1d_fused: expected residual of exactly the output's shape \[2, 6, 16\] "
         r"\(it is not broadcast\), got residual of shape \[6, 16\]"),
        (lambda: ops.conv2d_fused.padding(x2, w2, None, [1], "same", [1], 2, "none",
                                          _t(2, 6, 9, 10, device=device).double()),
         RuntimeError,
         "gpukern::conv2d_fused: expected input and residual of the same dtype, got Float and "
         "Double"),
        (lambda: f1(x1, w1, None, [1, 1], [0], [1], 2),
         RuntimeError, "gpukern::conv1d_fused: stride must have 1 value, got 2"),
    ]


@pytest.mark.parametrize("device", DEVICE_PARAMS)
def test_fused_messages(device):
    for fn, error, match in _fused_cases(device):
        with pytest.raises(error, match=match):
            fn()


@pytest.mark.parametrize("device", DEVICE_PARAMS)
def test_conv_argument_messages(device):
    for fn, match in _cases(device):
        with pytest.raises(RuntimeError, match=match):
            fn()


def test_no_garbled_message_left():
    """No "1 or 1" in args.cpp's messages: the expected count is worded per dimensionality."""
    for nsp, op in ((1, ops.conv1d), (2, ops.conv2d)):
        x = torch.randn(1, 1, *([5] * nsp))
        w = torch.randn(1, 1, *([1] * nsp))
        for args in (([1] * 3, [0], [1]), ([1], [0] * 3, [1]), ([1], [0], [1] * 3)):
            with pytest.raises(RuntimeError) as info:
                op(x, w, None, *args, 1)
            msg = str(info.value).splitlines()[0]
            assert not re.search(r"1 or 1\b", msg) and msg.startswith(f"gpukern::conv{nsp}d: ")
