"""Typed, documented wrappers over ``torch.ops.gpukern``: the public API. Each mirrors the torch
function of the same name (arguments, defaults, result) and runs gpukern's own kernels, on CPU
and CUDA. Forward only.

The wrappers take every argument form the torch functions take: ``torch_ops.conv1d`` /
``conv2d`` accept stride, padding and dilation as an int, a tuple or a list (one value per
spatial dim, or one for all), and padding ``'same'`` / ``'valid'``, like ``F.conv1d`` /
``F.conv2d``. The raw ops ``torch.ops.gpukern.conv1d`` / ``conv2d`` take aten's schema instead
(the schema of ``torch.ops.aten.conv1d``): stride, padding and dilation are lists, e.g.
``torch.ops.gpukern.conv1d(x, w, None, [1], [15], [1], 64)``; a bare int there is rejected, as
aten rejects it."""
from typing import Optional, Union

import torch

from ._args import IntOrSeq, bool_arg, int_arg, int_list

_ops = torch.ops.gpukern


def _call(op, input, weight, bias, stride, padding, dilation, groups, *epilogue):
    """op (a conv op's packet) with its arguments in aten's form: stride, padding and dilation as
    lists, or padding as a string through op's .padding overload; epilogue: the fused ops'
    activation and residual."""
    stride, dilation = int_list(stride, "stride"), int_list(dilation, "dilation")
    groups = int_arg(groups, "groups")
    if isinstance(padding, str):
        return op.padding(input, weight, bias, stride, padding, dilation, groups, *epilogue)
    return op(input, weight, bias, stride, int_list(padding, "padding"), dilation, groups,
              *epilogue)


def conv1d(input: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None,
           stride: IntOrSeq = 1, padding: Union[IntOrSeq, str] = 0, dilation: IntOrSeq = 1,
           groups: int = 1) -> torch.Tensor:
    """Like torch.nn.functional.conv1d (cross-correlation): input [N, C, L] or [C, L], weight
    [O, C/groups, K]; stride, padding and dilation an int or a 1-element tuple/list, padding also
    'same' or 'valid' (every form F.conv1d takes). The raw op ``torch.ops.gpukern.conv1d`` takes
    aten's schema: lists, ``(x, w, None, [1], [0], [1], 1)``."""
    return _call(_ops.conv1d, input, weight, bias, stride, padding, dilation, groups)


def conv2d(input: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None,
           stride: IntOrSeq = 1, padding: Union[IntOrSeq, str] = 0, dilation: IntOrSeq = 1,
           groups: int = 1) -> torch.Tensor:
    """Like torch.nn.functional.conv2d: input [N, C, H, W] or [C, H, W] (contiguous or
    channels_last), weight [O, C/groups, KH, KW]; stride, padding and dilation an int or a tuple/
    list of 1 or 2 values, padding also 'same' or 'valid' (every form F.conv2d takes). The raw op
    ``torch.ops.gpukern.conv2d`` takes aten's schema: lists, ``(x, w, None, [1, 1], [0, 0],
    [1, 1], 1)``."""
    return _call(_ops.conv2d, input, weight, bias, stride, padding, dilation, groups)


def _activation(activation: Optional[str]) -> str:
    return "none" if activation is None else activation


def conv1d_fused(input: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None,
                 stride: IntOrSeq = 1, padding: Union[IntOrSeq, str] = 0, dilation: IntOrSeq = 1,
                 groups: int = 1, activation: Optional[str] = "none",
                 residual: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``act(F.conv1d(input, weight, bias, ...) + residual)`` in one op: the convolution's
    arguments in every form :func:`conv1d` takes, then ``activation``, one of "none" (or None),
    "relu", "relu6", "silu", "gelu", "gelu_tanh" (``F.gelu(approximate="tanh")``), "hardswish",
    "sigmoid", "hardsigmoid", and an optional ``residual`` of exactly the output's shape (not broadcast), the
    input's dtype and device, any strides. The epilogue is computed in the accumulation type
    (float32; float64 for float64) and rounded once on CPU and in the tensor-core path; the other
    CUDA paths round conv + bias to the dtype first. The result's layout is the convolution's."""
    return _call(_ops.conv1d_fused, input, weight, bias, stride, padding, dilation, groups,
                 _activation(activation), residual)


def conv2d_fused(input: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None,
                 stride: IntOrSeq = 1, padding: Union[IntOrSeq, str] = 0, dilation: IntOrSeq = 1,
                 groups: int = 1, activation: Optional[str] = "none",
                 residual: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``act(F.conv2d(input, weight, bias, ...) + residual)`` in one op, as :func:`conv1d_fused`
    with the arguments of :func:`conv2d` (NCHW or channels_last; the residual may have another
    layout than the output, which follows the convolution's rule)."""
    return _call(_ops.conv2d_fused, input, weight, bias, stride, padding, dilation, groups,
                 _activation(activation), residual)


def convolve(x: torch.Tensor, h: torch.Tensor, mode: str = "full") -> torch.Tensor:
    """True convolution (flipped filter) of x [..., N] and h [..., K] along the last dimension,
    like torchaudio.functional.convolve, with numpy.convolve's modes:

    - ``"full"``: length N + K - 1, ``y[j] = sum_k x[j - k] * h[k]``;
    - ``"same"``: length max(N, K), the centre of "full" starting at (min(N, K) - 1) // 2
      (numpy's definition; torchaudio's "same" keeps length N instead);
    - ``"valid"``: length max(N, K) - min(N, K) + 1, starting at min(N, K) - 1.

    The leading dimensions broadcast as in aten (right-aligned, size-1 dims stretch, either
    operand may have fewer), so one filter can apply to every row, one signal to many filters, or
    rows to filters pairwise. The result is contiguous with the broadcast leading shape and x's
    dtype; 1-D x and h give a 1-D result. Runs conv1d's kernels (CUDA path chosen as for the
    equivalent single-channel/depthwise conv1d; ``force_algorithm("conv1d", ...)`` applies)."""
    return _ops.convolve(x, h, mode)


def mv(input: torch.Tensor, vec: torch.Tensor) -> torch.Tensor:
    """Like torch.mv: [M, N] @ [N] -> [M]; any strides (a transposed matrix is read in place)."""
    return _ops.mv(input, vec)


def sum(input: torch.Tensor, dim: Optional[IntOrSeq] = None, keepdim: bool = False, *,  # noqa: A001
        dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    """Like torch.sum: bool/integer inputs sum to int64, float16/bfloat16 accumulate in float32.

    Input dtypes: float32, float16, bfloat16 (CPU and CUDA), float64 (CPU only), and bool, uint8,
    uint16, uint32, uint64, int8, int16, int32, int64 (``torch_ops._checks.SUM_INT_DTYPES``).
    complex inputs are rejected (``torch_ops.enabled()`` hands them to torch)."""
    keepdim = bool_arg(keepdim, "sum(): argument 'keepdim'")
    if dim is None:
        return _ops.sum(input, dtype=dtype) if not keepdim else \
            _ops.sum.dim_IntList(input, None, True, dtype=dtype)
    return _ops.sum.dim_IntList(input, int_list(dim, "dim"), keepdim, dtype=dtype)


def mean(input: torch.Tensor, dim: Optional[IntOrSeq] = None, keepdim: bool = False, *,
         dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    """Like torch.mean, for floating inputs: float32, float16, bfloat16, float64 on CPU only
    (an integer input needs a floating ``dtype=``)."""
    keepdim = bool_arg(keepdim, "mean(): argument 'keepdim'")
    if dim is None:
        return _ops.mean(input, dtype=dtype) if not keepdim else \
            _ops.mean.dim(input, None, True, dtype=dtype)
    return _ops.mean.dim(input, int_list(dim, "dim"), keepdim, dtype=dtype)


def amax(input: torch.Tensor, dim: IntOrSeq = (), keepdim: bool = False) -> torch.Tensor:
    """Like torch.amax (NaN propagates), for floating inputs: float32, float16, bfloat16,
    float64 on CPU only."""
    keepdim = bool_arg(keepdim, "amax(): argument 'keepdim'")
    return _ops.amax(input, int_list(dim, "dim"), keepdim)


def amin(input: torch.Tensor, dim: IntOrSeq = (), keepdim: bool = False) -> torch.Tensor:
    """Like torch.amin (NaN propagates), for floating inputs: float32, float16, bfloat16,
    float64 on CPU only."""
    keepdim = bool_arg(keepdim, "amin(): argument 'keepdim'")
    return _ops.amin(input, int_list(dim, "dim"), keepdim)
