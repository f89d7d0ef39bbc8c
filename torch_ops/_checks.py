"""The argument checks of gpukern's C++ host entries, mirrored in Python with the same order,
exception type and message text, plus the one list of the dtypes gpukern computes in.

Two users: the fake (meta) kernels of :mod:`torch_ops._meta`, so that meta tensors,
``torch.compile`` and FakeTensor tracing fail where an eager call fails, with the same message;
and the override mode (:mod:`torch_ops.override`), which hands every call these checks reject to
torch, so that a user inside ``torch_ops.enabled()`` sees torch's own result or exception.

Mirrored: ``csrc/core/checks.h`` (check_same_device, check_same_dtype, check_floating,
check_dim_in), ``csrc/conv/args.cpp`` (conv_args, conv_output, and the fused ops'
conv_activation and check_conv_residual), the checks of
``csrc/mv/mv.cpp``, ``csrc/conv1d/convolve.cpp`` and ``csrc/reduce/reduce.cpp``. Not mirrored:
checks of the device itself (the fake kernel runs for whatever device the tensors claim),
forced-algorithm errors and launch limits of the CUDA kernels. ``tests/test_meta.py`` checks every
mirrored error path against the CPU op (same type, same message); change both sides together.

On ``meta`` tensors (no real kernel to compare with) float64 counts as supported, as on CPU.
"""
from typing import List, Optional, Sequence, Tuple

import torch

from ._args import expand, int_list

# ------------------------------------------------------------------ supported dtypes (one place)

#: Floating dtypes every op computes in, on CPU and CUDA.
FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
#: Floating dtypes computed on CPU only.
CPU_ONLY_FLOAT_DTYPES = (torch.float64,)
#: Input dtypes ``sum`` reduces in its integer kernels (to int64, as torch.sum), CPU and CUDA.
#: ``mean``/``amax``/``amin`` take floating inputs only; complex inputs are not supported.
SUM_INT_DTYPES = (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
                  torch.uint16, torch.uint32, torch.uint64)


def float_supported(dtype: torch.dtype, device_type: str) -> bool:
    """Whether gpukern computes in floating ``dtype`` on ``device_type`` (cpu, cuda, meta)."""
    return dtype in FLOAT_DTYPES or (dtype in CPU_ONLY_FLOAT_DTYPES and
                                     device_type in ("cpu", "meta"))


def supported_dtypes(op: str, device_type: str) -> Tuple[torch.dtype, ...]:
    """The input dtypes ``op`` (conv1d, conv2d, convolve, mv, sum, mean, amax, amin) computes in
    on ``device_type``: the override mode routes only these to gpukern."""
    floats = FLOAT_DTYPES + (CPU_ONLY_FLOAT_DTYPES if device_type in ("cpu", "meta") else ())
    return floats + SUM_INT_DTYPES if op == "sum" else floats


# ------------------------------------------------------------------ message helpers

_C10_NAMES = {
    torch.uint8: "Byte", torch.int8: "Char", torch.int16: "Short", torch.int32: "Int",
    torch.int64: "Long", torch.float16: "Half", torch.float32: "Float", torch.float64: "Double",
    torch.complex32: "ComplexHalf", torch.complex64: "ComplexFloat",
    torch.complex128: "ComplexDouble", torch.bool: "Bool", torch.bfloat16: "BFloat16",
    torch.qint8: "QInt8", torch.quint8: "QUInt8", torch.qint32: "QInt32",
    torch.uint16: "UInt16", torch.uint32: "UInt32", torch.uint64: "UInt64",
}
for _name in ("float8_e5m2", "float8_e4m3fn", "float8_e5m2fnuz", "float8_e4m3fnuz"):
    if hasattr(torch, _name):
        _C10_NAMES[getattr(torch, _name)] = "F" + _name[1:]


def dtype_name(dtype: torch.dtype) -> str:
    """The dtype as c10 prints it in a message ("Float", "BFloat16", "UInt16")."""
    return _C10_NAMES.get(dtype, str(dtype).replace("torch.", ""))


def _sizes(t: torch.Tensor) -> str:
    return str([int(s) for s in t.shape])


def _ints(v: Sequence[int]) -> str:
    return str([int(x) for x in v])


def _is_int_like(dtype: torch.dtype) -> bool:
    return dtype == torch.bool or not (dtype.is_floating_point or dtype.is_complex)


def fail(op: str, *parts, error: type = RuntimeError):
    """Raise ``error("gpukern::<op>: <parts>")``, the form of GK_CHECK's messages."""
    raise error(f"gpukern::{op}: " + "".join(str(p) for p in parts))


def _probe_dim_error() -> type:
    """The exception type this build's reductions raise for a dim out of range (RuntimeError, or
    IndexError where the C++ raises torch's IndexError), so the fake kernels raise the same."""
    try:
        torch.ops.gpukern.amax(torch.zeros(1), [1])
    except IndexError:
        return IndexError
    except RuntimeError:
        return RuntimeError
    return RuntimeError


DIM_ERROR = _probe_dim_error()


def _probe_index_error(call) -> type:
    """IndexError where this build raises torch's IndexError for `call` (as torch does), else
    RuntimeError (a build from before that check followed torch)."""
    try:
        call()
    except IndexError:
        return IndexError
    except RuntimeError:
        return RuntimeError
    return RuntimeError


#: amax/amin over a given dim of size 0 (torch: IndexError).
EMPTY_DIM_ERROR = _probe_index_error(lambda: torch.ops.gpukern.amax(torch.zeros(0), [0]))
#: mv with a 0-d self (torch: IndexError).
MV_0D_ERROR = _probe_index_error(lambda: torch.ops.gpukern.mv(torch.zeros(()), torch.zeros(1)))

# ------------------------------------------------------------------ core/checks.h


def check_same_device(op, a, name_a, b, name_b):
    if a.device != b.device:
        fail(op, f"expected {name_a} and {name_b} on the same device, got {a.device} and "
                 f"{b.device}")


def check_same_dtype(op, a, name_a, b, name_b):
    if a.dtype != b.dtype:
        fail(op, f"expected {name_a} and {name_b} of the same dtype, got {dtype_name(a.dtype)} "
                 f"and {dtype_name(b.dtype)}")


def check_floating(op, t, name):
    dev = t.device.type
    if not float_supported(t.dtype, dev):
        cpu = dev in ("cpu", "meta")
        fail(op, f"{name} has dtype {dtype_name(t.dtype)} on {dev}; supported: float32, float16, "
                 f"bfloat16", ", float64" if cpu else "",
             "" if cpu else " (float64 runs on CPU only)")


def check_dim_in(op, t, name, lo, hi):
    if not lo <= t.dim() <= hi:
        want = str(lo) if lo == hi else f"{lo} or {hi}"
        fail(op, f"expected {name} with {want} dimensions, got {t.dim()} (shape {_sizes(t)})")


# ------------------------------------------------------------------ conv/args.cpp


def _expand_list(op, name, values, nsp) -> list:
    values = int_list(values)
    if len(values) not in (1, nsp):
        fail(op, name, " must have 1 value, got " if nsp == 1 else
             " must have 1 or 2 values, got ", len(values))
    return expand(values, nsp)


def conv_check(op: str, nsp: int, input: torch.Tensor, weight: torch.Tensor,
               bias: Optional[torch.Tensor], stride, padding, dilation, groups: int
               ) -> Tuple[List[int], bool]:
    """conv_args + conv_output: raises what ``gpukern::conv{nsp}d`` raises for these arguments,
    else returns (output shape, whether the output is channels_last)."""
    check_dim_in(op, input, "input", nsp + 1, nsp + 2)
    if weight.dim() != nsp + 2:
        fail(op, f"expected weight with {nsp + 2} dimensions [out_channels, in_channels / groups, "
                 f"kernel size...], got weight of shape {_sizes(weight)}")
    check_same_device(op, input, "input", weight, "weight")
    check_same_dtype(op, input, "input", weight, "weight")
    check_floating(op, input, "input")
    if groups <= 0:
        fail(op, f"groups must be positive, got {groups}")
    batched = input.dim() == nsp + 2
    off = 1 if batched else 0
    n = input.shape[0] if batched else 1
    c, o = input.shape[off], weight.shape[0]
    sizes = list(input.shape[off + 1:])
    ks = list(weight.shape[2:])
    if any(k <= 0 for k in ks):
        fail(op, f"kernel size must be positive, got weight of shape {_sizes(weight)}")
    if c % groups != 0:
        fail(op, f"groups={groups} must divide the input channels, got {c} input channels")
    if o % groups != 0:
        fail(op, f"groups={groups} must divide the output channels, got {o} output channels "
                 f"(weight of shape {_sizes(weight)})")
    if o < groups:
        fail(op, f"expected weight with at least groups={groups} output channels "
                 f"(weight.size(0)), got weight of shape {_sizes(weight)}")
    if weight.shape[1] * groups != c:
        fail(op, f"expected weight.size(1) * groups == input channels, got weight of shape "
                 f"{_sizes(weight)}, groups={groups} and {c} input channels")
    if bias is not None:
        check_same_device(op, input, "input", bias, "bias")
        check_same_dtype(op, input, "input", bias, "bias")
        if bias.dim() != 1 or bias.shape[0] != o:
            fail(op, f"expected bias of shape [{o}], got bias of shape {_sizes(bias)}")
    if any(s == 0 for s in sizes) and n != 0 and c != 0:
        fail(op, "expected an input with non-zero spatial sizes (only a zero batch or zero "
                 f"channels may make it empty), got input of shape {_sizes(input)}")
    strides = _expand_list(op, "stride", stride, nsp)
    dilations = _expand_list(op, "dilation", dilation, nsp)
    for s, d in zip(strides, dilations):
        if s <= 0:
            fail(op, f"stride must be positive, got {_ints(int_list(stride))}")
        if d <= 0:
            fail(op, f"dilation must be positive, got {_ints(int_list(dilation))}")
    if isinstance(padding, str):
        if padding == "valid":
            pads = [(0, 0)] * nsp
        elif padding == "same":
            pads = []
            for s, d, k in zip(strides, dilations, ks):
                if s != 1:
                    fail(op, "padding='same' is not supported for strided convolutions, got "
                             f"stride {_ints(int_list(stride))}")
                total = d * (k - 1)
                pads.append((total // 2, total - total // 2))
        else:
            fail(op, f"padding must be 'same' or 'valid', got '{padding}'")
    else:
        pad = _expand_list(op, "padding", padding, nsp)
        for p in pad:
            if p < 0:
                fail(op, f"padding must be non-negative, got {_ints(int_list(padding))}")
        pads = [(p, p) for p in pad]
    out = []
    for i, (size, (lo, hi), d, k, s) in enumerate(zip(sizes, pads, dilations, ks, strides)):
        padded, span = size + lo + hi, d * (k - 1) + 1
        if span > padded:
            fail(op, f"the (dilated) kernel size {span} is larger than the padded input size "
                     f"{padded} in spatial dim {i}; expected dilation * (kernel size - 1) + 1 <= "
                     "input size + padding")
        out.append((padded - span) // s + 1)
    shape = ([n] if batched else []) + [0 if c == 0 else o] + out
    # As aten: an unbatched call reads input.unsqueeze(0) (its output is then the batched
    # channels_last tensor without the batch dim).
    channels_last = (nsp == 2 and n > 0 and c > 0
                     and (_is_channels_last(input if batched else input.unsqueeze(0))
                          or _is_channels_last(weight)))
    return shape, channels_last


#: The activations of conv1d_fused / conv2d_fused, in the order of their ActKind codes
#: (csrc/device/activation.cuh).
ACTIVATIONS = ("none", "relu", "relu6", "silu", "gelu", "gelu_tanh", "hardswish", "sigmoid",
               "hardsigmoid")


def conv_fused_check(op: str, nsp: int, input: torch.Tensor, weight: torch.Tensor,
                     bias: Optional[torch.Tensor], stride, padding, dilation, groups: int,
                     activation: str, residual: Optional[torch.Tensor]
                     ) -> Tuple[List[int], bool]:
    """conv_check, then the fused ops' own checks (conv_activation, check_conv_residual): raises
    what ``gpukern::conv{nsp}d_fused`` raises, else returns (output shape, channels_last)."""
    shape, channels_last = conv_check(op, nsp, input, weight, bias, stride, padding, dilation,
                                      groups)
    if activation not in ACTIVATIONS:
        valid = ", ".join(f"'{a}'" for a in ACTIVATIONS)
        fail(op, f"activation must be one of {valid}, got '{activation}'", error=ValueError)
    if residual is not None:
        check_same_device(op, input, "input", residual, "residual")
        check_same_dtype(op, input, "input", residual, "residual")
        if list(residual.shape) != shape:
            fail(op, f"expected residual of exactly the output's shape {_ints(shape)} (it is not "
                     f"broadcast), got residual of shape {_sizes(residual)}")
    return shape, channels_last


def _is_channels_last(t: torch.Tensor) -> bool:
    return t.dim() == 4 and torch._prims_common.suggest_memory_format(t) == torch.channels_last


# ------------------------------------------------------------------ conv1d/convolve.cpp


def convolve_length(n: int, k: int, mode: str) -> int:
    """Output length of gpukern::convolve (numpy.convolve's modes)."""
    if mode == "full":
        return n + k - 1
    if mode == "same":
        return max(n, k)
    if mode == "valid":
        return max(n, k) - min(n, k) + 1
    fail("convolve", f"mode must be 'full', 'same' or 'valid', got '{mode}'")


def convolve_check(x: torch.Tensor, h: torch.Tensor, mode: str) -> List[int]:
    """The checks of gpukern::convolve; returns the output shape."""
    op = "convolve"
    if x.dim() < 1 or h.dim() < 1:
        fail(op, f"expected x and h with at least 1 dimension, got {x.dim()}-D and {h.dim()}-D")
    check_same_device(op, x, "x", h, "h")
    check_same_dtype(op, x, "x", h, "h")
    check_floating(op, x, "x")
    n, k = x.shape[-1], h.shape[-1]
    if n < 1 or k < 1:
        fail(op, f"x and h must not be empty along the last dimension, got lengths {n} and {k}")
    length = convolve_length(n, k, mode)
    xl, hl = list(x.shape[:-1]), list(h.shape[:-1])
    m = max(len(xl), len(hl))
    xl2, hl2 = [1] * (m - len(xl)) + xl, [1] * (m - len(hl)) + hl
    lead = []
    for a, b in zip(xl2, hl2):
        if not (a == b or a == 1 or b == 1):
            fail(op, f"leading dimensions of x {_ints(xl)} and h {_ints(hl)} are not "
                     "broadcastable")
        lead.append(b if a == 1 else a)
    return lead + [length]


# ------------------------------------------------------------------ mv/mv.cpp


def mv_check(self: torch.Tensor, vec: torch.Tensor) -> List[int]:
    """check_mv_args of gpukern::mv; returns the output shape."""
    op = "mv"
    if self.dim() == 0:
        fail(op, "expected self to be a 2-D matrix, got 0-D (shape [])", error=MV_0D_ERROR)
    if self.dim() != 2:
        fail(op, f"expected self to be a 2-D matrix, got {self.dim()}-D (shape {_sizes(self)})")
    if vec.dim() != 1:
        fail(op, f"expected vec to be 1-D, got {vec.dim()}-D (shape {_sizes(vec)})")
    if self.shape[1] != vec.shape[0]:
        fail(op, f"size mismatch: self is {_sizes(self)} and vec is {_sizes(vec)} "
                 "(self.size(1) must equal vec.size(0))")
    check_same_device(op, self, "self", vec, "vec")
    check_same_dtype(op, self, "self", vec, "vec")
    check_floating(op, self, "self")
    return [self.shape[0]]


# ------------------------------------------------------------------ reduce/reduce.cpp


def _check_float_dtype_on(op, dtype, device_type, what):
    if not float_supported(dtype, device_type):
        cpu = device_type in ("cpu", "meta")
        fail(op, f"{what} dtype {dtype_name(dtype)} is not supported on {device_type}; "
                 "supported: float32, float16, bfloat16", ", float64" if cpu else "",
             "" if cpu else " (float64 runs on CPU only)")


def reduce_check(op: str, x: torch.Tensor, dim, keepdim: bool,
                 dtype: Optional[torch.dtype]) -> Tuple[List[int], torch.dtype]:
    """The checks of gpukern's sum/mean/amax/amin (``dim`` None or [] = every dim); returns
    (output shape, output dtype)."""
    dev = x.device.type
    in_t = x.dtype
    if in_t.is_complex:
        fail(op, "complex inputs are not supported")
    if op == "sum":
        out_t = dtype if dtype is not None else (torch.int64 if _is_int_like(in_t) else in_t)
        if out_t.is_complex:
            fail(op, "complex dtype is not supported")
        if out_t in (torch.uint16, torch.uint32, torch.uint64):
            raise NotImplementedError(
                f"gpukern::{op}: dtype={dtype_name(out_t)} is not supported as the result dtype; "
                "unsigned inputs sum to int64")
    elif op == "mean":
        if dtype is not None:
            if not dtype.is_floating_point:
                fail(op, f"dtype must be a floating point dtype, got {dtype_name(dtype)}")
        elif not in_t.is_floating_point:
            fail(op, "expected a floating point input (or pass a floating dtype=), got "
                     f"{dtype_name(in_t)}")
        out_t = dtype if dtype is not None else in_t
    else:
        if not in_t.is_floating_point:
            fail(op, f"expected a floating point input, got {dtype_name(in_t)}")
        out_t = in_t
    if _is_int_like(out_t):
        kernel_t = in_t if (out_t == torch.int64 and _is_int_like(in_t)) else out_t
    else:
        _check_float_dtype_on(op, out_t, dev, "result")
        widen = out_t == torch.float32 and in_t in (torch.float16, torch.bfloat16)
        kernel_t = in_t if widen else out_t
        _check_float_dtype_on(op, kernel_t, dev, "input")

    ndim = x.dim()
    dims = None if dim is None else int_list(dim)
    if op in ("amax", "amin") and x.numel() == 0:
        # As torch (zero_numel_check_dims, before the repeated-dims check).
        if not dims:
            fail(op, "expected reduction dim to have non-zero size: the input has numel() == "
                     "0; specify the reduction dim with the 'dim' argument")
        for d in dims:
            w = _wrap_dim(op, ndim, d)
            if x.shape[w] == 0:
                fail(op, f"expected reduction dim {w} to have non-zero size",
                     error=EMPTY_DIM_ERROR)
    if not dims:
        mask = [True] * max(ndim, 1)
    else:
        mask = [False] * max(ndim, 1)
        for d in dims:
            w = _wrap_dim(op, ndim, d)
            if mask[w]:
                fail(op, f"dim {w} appears multiple times in the list of dims")
            mask[w] = True
    shape = [1 if mask[d] else s for d, s in enumerate(x.shape)] if keepdim else \
        [s for d, s in enumerate(x.shape) if not mask[d]]
    if (_is_int_like(kernel_t) and kernel_t not in SUM_INT_DTYPES and x.numel() > 0
            and _numel(shape) > 0):
        # The kernels' integer dispatch (csrc/reduce/cpu.cpp and csrc/reduce/dispatch.cu).
        if dev == "cuda":
            raise RuntimeError(f"gpukern::reduce: unsupported dtype {dtype_name(kernel_t)} on "
                               "CUDA")
        raise RuntimeError(f"gpukern::sum: unsupported integer dtype {dtype_name(kernel_t)}")
    return shape, out_t


def _wrap_dim(op, ndim, d) -> int:
    lo, hi = (-1, 0) if ndim == 0 else (-ndim, ndim - 1)
    if not lo <= d <= hi:
        fail(op, f"dimension {d} out of range (expected to be in range of [{lo}, {hi}])",
             error=DIM_ERROR)
    return d + max(ndim, 1) if d < 0 else d


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n
