"""Issue 30, defect 2: the fake (meta) kernels reject what the real kernels reject, with the same
exception type and message, so meta tensors, FakeTensor tracing and torch.compile fail where eager
fails. Every error path of the C++ host entries that torch_ops/_checks.py mirrors is called on CPU
tensors, on FakeTensors of the same CPU tensors, and on meta tensors."""
import subprocess
import sys

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import torch_ops  # noqa: F401
from torch_ops import _checks

ops = torch.ops.gpukern


def _r(*shape, dtype=torch.float32):
    if dtype.is_floating_point or dtype.is_complex:
        return torch.randn(*shape).to(dtype)
    return torch.ones(*shape, dtype=dtype)


X1, W1, B1 = _r(2, 4, 16), _r(6, 2, 3), _r(6)
X2, W2 = _r(2, 4, 9, 10), _r(6, 2, 3, 3)
A, V = _r(5, 7), _r(7)
R = _r(3, 4, 5)

# (name, op, args, kwargs): calls the CPU kernel rejects.
ERRORS = [
    ("conv1d input dims", ops.conv1d, (X2, W1, None, [1], [0], [1], 2), {}),
    ("conv1d weight dims", ops.conv1d, (X1, W2, None, [1], [0], [1], 2), {}),
    ("conv1d dtypes differ", ops.conv1d, (X1, W1.double(), None, [1], [0], [1], 2), {}),
    ("conv1d integer", ops.conv1d, (X1.int(), W1.int(), None, [1], [0], [1], 2), {}),
    ("conv1d complex", ops.conv1d, (X1.cfloat(), W1.cfloat(), None, [1], [0], [1], 2), {}),
    ("conv1d groups 0", ops.conv1d, (X1, W1, None, [1], [0], [1], 0), {}),
    ("conv1d kernel 0", ops.conv1d, (X1, _r(6, 2, 0), None, [1], [0], [1], 2), {}),
    ("conv1d groups vs C", ops.conv1d, (X1[:, :3], _r(6, 1, 3), None, [1], [0], [1], 2), {}),
    ("conv1d groups vs O", ops.conv1d, (X1, W1[:5], None, [1], [0], [1], 2), {}),
    ("conv1d no output channels", ops.conv1d, (X1, _r(0, 4, 3), None, [1], [0], [1], 1), {}),
    ("conv1d channels mismatch", ops.conv1d, (X1, W1, None, [1], [0], [1], 1), {}),
    ("conv1d bias dtype", ops.conv1d, (X1, W1, B1.double(), [1], [0], [1], 2), {}),
    ("conv1d bias shape", ops.conv1d, (X1, W1, B1[:5], [1], [0], [1], 2), {}),
    ("conv1d empty length", ops.conv1d, (_r(2, 4, 0), W1, None, [1], [2], [1], 2), {}),
    ("conv1d stride length", ops.conv1d, (X1, W1, None, [1, 1], [0], [1], 2), {}),
    ("conv1d padding length", ops.conv1d, (X1, W1, None, [1], [0, 0], [1], 2), {}),
    ("conv1d dilation length", ops.conv1d.padding, (X1, W1, None, [1], "same", [1, 2], 2), {}),
    ("conv1d stride 0", ops.conv1d, (X1, W1, None, [0], [0], [1], 2), {}),
    ("conv1d dilation 0", ops.conv1d, (X1, W1, None, [1], [0], [0], 2), {}),
    ("conv1d padding -1", ops.conv1d, (X1, W1, None, [1], [-1], [1], 2), {}),
    ("conv1d same strided", ops.conv1d.padding, (X1, W1, None, [2], "same", [1], 2), {}),
    ("conv1d bad padding", ops.conv1d.padding, (X1, W1, None, [1], "full", [1], 2), {}),
    ("conv1d kernel too big", ops.conv1d, (X1, W1, None, [1], [0], [9], 2), {}),
    ("conv2d stride 3 values", ops.conv2d, (X2, W2, None, [1, 1, 1], [0], [1], 2), {}),
    ("conv2d channels mismatch", ops.conv2d, (X2, W2, None, [1], [0], [1], 1), {}),
    ("conv2d integer", ops.conv2d, (X2.long(), W2.long(), None, [1], [0], [1], 2), {}),
    ("conv2d no output channels", ops.conv2d, (X2, _r(0, 2, 3, 3), None, [1], [0], [1], 2), {}),
    ("conv2d kernel too big", ops.conv2d, (X2, _r(6, 2, 3, 11), None, [1], [0], [1], 2), {}),
    ("conv2d empty height", ops.conv2d, (_r(2, 4, 0, 5), W2, None, [1], [3], [1], 2), {}),
    ("conv2d_fused activation", ops.conv2d_fused, (X2, W2, None, [1], [1], [1], 2, "tanh"),
     {}),
    ("conv2d_fused.padding activation", ops.conv2d_fused.padding,
     (X2, W2, None, [1], "same", [1], 2), {"activation": "ReLU"}),
    ("conv1d_fused activation", ops.conv1d_fused, (X1, W1, B1, [1], [1], [1], 2, ""), {}),
    ("conv2d_fused residual shape", ops.conv2d_fused,
     (X2, W2, None, [1], [1], [1], 2, "relu", _r(1, 6, 9, 10)), {}),
    ("conv2d_fused residual unbatched", ops.conv2d_fused.padding,
     (X2, W2, None, [1], "same", [1], 2, "none", _r(6, 9, 10)), {}),
    ("conv1d_fused residual shape", ops.conv1d_fused,
     (X1, W1, B1, [1], [1], [1], 2, "none", _r(2, 6, 1)), {}),
    ("conv1d_fused residual dtype", ops.conv1d_fused,
     (X1, W1, B1, [1], [1], [1], 2, "silu", _r(2, 6, 16, dtype=torch.float64)), {}),
    ("conv2d_fused conv check first", ops.conv2d_fused,
     (X2, W2, B1[:5], [1], [1], [1], 2, "tanh", _r(3)), {}),
    ("conv2d_fused activation before residual", ops.conv2d_fused,
     (X2, W2, None, [1], [1], [1], 2, "tanh", _r(3)), {}),
    ("convolve 0-d", ops.convolve, (torch.tensor(1.0), _r(3)), {}),
    ("convolve dtypes", ops.convolve, (_r(8), _r(3).double()), {}),
    ("convolve integer", ops.convolve, (_r(8, dtype=torch.int32), _r(3, dtype=torch.int32)), {}),
    ("convolve empty", ops.convolve, (_r(0), _r(3)), {}),
    ("convolve mode", ops.convolve, (_r(8), _r(3), "circular"), {}),
    ("convolve broadcast", ops.convolve, (_r(2, 8), _r(3, 3)), {}),
    ("mv 1-D self", ops.mv, (V, V), {}),
    ("mv 2-D vec", ops.mv, (A, A), {}),
    ("mv shape mismatch", ops.mv, (A, _r(6)), {}),
    ("mv dtypes", ops.mv, (A, V.double()), {}),
    ("mv integer", ops.mv, (A.int(), V.int()), {}),
    ("sum complex", ops.sum.default, (R.cfloat(),), {}),
    ("sum complex dtype", ops.sum.default, (R,), {"dtype": torch.complex64}),
    ("sum dim out of range", ops.sum.dim_IntList, (R, [3]), {}),
    ("sum dim out of range negative", ops.sum.dim_IntList, (R, [-4]), {}),
    ("sum dim of a 0-d tensor", ops.sum.dim_IntList, (R.sum(), [1]), {}),
    ("sum repeated dim", ops.sum.dim_IntList, (R, [1, -2]), {}),
    ("sum to uint32", ops.sum.dim_IntList, (R, [0]), {"dtype": torch.uint32}),
    ("sum float8 result", ops.sum.default, (R,), {"dtype": torch.float8_e4m3fn}),
    ("mean integer", ops.mean.default, (R.int(),), {}),
    ("mean integer dtype", ops.mean.dim, (R, [0]), {"dtype": torch.int32}),
    ("mean dim out of range", ops.mean.dim, (R, [5]), {}),
    ("amax integer", ops.amax, (R.int(), [0]), {}),
    ("amax empty", ops.amax, (_r(0, 3), []), {}),
    ("amin empty dim", ops.amin, (_r(0, 3), [0]), {}),
    ("amin dim out of range", ops.amin, (R, [3]), {}),
    ("amax bool", ops.amax, (R > 0, [0]), {}),
]


def _cpu_error(op, args, kwargs):
    with pytest.raises(Exception) as info:
        op(*args, **kwargs)
    return info.value


def _map(args, fn):
    return tuple(fn(a) if isinstance(a, torch.Tensor) else a for a in args)


@pytest.mark.parametrize("name,op,args,kwargs", ERRORS, ids=[e[0] for e in ERRORS])
def test_fake_kernel_raises_what_cpu_kernel_raises(name, op, args, kwargs):
    real = _cpu_error(op, args, kwargs)
    assert str(real).startswith("gpukern::"), real
    # FakeTensors of the CPU tensors: torch.compile's view of the call. Same type, same message.
    with FakeTensorMode() as mode:
        fake_args = _map(args, mode.from_tensor)
        with pytest.raises(type(real)) as fake:
            op(*fake_args, **kwargs)
    assert str(fake.value).splitlines()[0] == str(real).splitlines()[0]
    # Meta tensors (python -m torch_ops.info): same type and message, with the device named meta.
    with pytest.raises(type(real)) as meta:
        op(*_map(args, lambda t: t.to("meta")), **kwargs)
    assert str(meta.value).splitlines()[0] == \
        str(real).splitlines()[0].replace(" on cpu", " on meta")


VALID = [
    (ops.conv1d, (X1, W1, B1, [2], [1], [1], 2)),
    (ops.conv1d, (_r(2, 0, 8), _r(6, 0, 3), None, [1], [1], [1], 1)),  # zero input channels
    (ops.conv1d, (_r(0, 4, 8), W1, B1, [1], [1], [1], 2)),               # zero batch
    (ops.conv2d.padding, (X2.to(memory_format=torch.channels_last), W2, None, [1], "same",
                          [2], 2)),
    (ops.conv2d, (_r(0, 4, 5, 5).to(memory_format=torch.channels_last), W2, None, [1], [1], [1],
                  2)),
    (ops.conv2d_fused, (X2.to(memory_format=torch.channels_last), W2, None, [1], [1], [1], 2,
                        "silu", _r(2, 6, 9, 10))),
    (ops.conv2d_fused.padding, (X2[0], W2, None, [1], "same", [1], 2, "relu", _r(6, 9, 10))),
    (ops.conv1d_fused, (X1, W1, B1, [2], [1], [1], 2, "gelu_tanh", _r(2, 6, 8))),
    (ops.conv1d_fused.padding, (_r(0, 4, 8), W1, B1, [1], "same", [1], 2, "relu6",
                                _r(0, 6, 8))),
    (ops.convolve, (_r(2, 1, 8), _r(3, 4))),
    (ops.mv, (A, V)),
    (ops.sum.dim_IntList, (R.int(), [0, -1], True)),
    (ops.mean.dim, (R, [1])),
    (ops.amax, (R, [-1])),
]


@pytest.mark.parametrize("i", range(len(VALID)))
def test_fake_kernel_matches_valid_calls(i):
    op, args = VALID[i]
    real = op(*args)
    with FakeTensorMode() as mode:
        fake = op(*_map(args, mode.from_tensor))
    assert fake.shape == real.shape and fake.dtype == real.dtype
    if real.numel() > 0:
        assert fake.stride() == real.stride()


def test_dim_error_type_follows_the_build():
    """The fake kernels raise the exception type this build's C++ raises for a dim out of range
    (RuntimeError, or IndexError where the C++ raises torch's IndexError)."""
    assert _checks.DIM_ERROR in (RuntimeError, IndexError)
    with pytest.raises(_checks.DIM_ERROR):
        ops.amax(R, [3])


def test_info_reports_the_error_of_a_mismatched_call():
    out = subprocess.run([sys.executable, "-m", "torch_ops.info", "conv1d", "--input", "8,4,100",
                          "--weight", "4,2,3"], capture_output=True, text=True, check=True).stdout
    assert "output: error: gpukern::conv1d: expected weight.size(1) * groups == input channels" \
        in out
