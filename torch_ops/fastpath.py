"""Which convolutions gpukern has a specialised CUDA kernel for: the "fast path" policy.

gpukern's own (non-tensor-core) convolution kernels are specialised for convolutions where every
output channel reads exactly one input channel with its own filter: depthwise convolutions with
multiplier 1 and single-channel signals or images (``groups == in_channels == out_channels``), at
stride 1. Dense layers run CUTLASS's tensor-core kernels on sm_90 GPUs (the "igemm" algorithm,
not counted as a fast path here: it is measured per layer by the census and chosen by
:mod:`torch_ops.policy`); grouped channel mixing and depthwise multipliers > 1 run a general direct
kernel that is much slower than cuDNN. :func:`swap` converts all of them
by default; ``torch_ops.swap(model, filter=torch_ops.has_fast_path)`` converts only the layers
this module accepts, and ``torch_ops.enabled(convs="fast")`` routes only such calls.

The rule has two parts. The structural part is this module's policy, from the layer's settings:

* ``groups == in_channels == out_channels`` (1 == 1 == 1 included: single-channel signals);
* every stride 1.

The limits of the specialised kernels (conv1d's row-wise kernels keep one dilation phase per
thread, up to dilation 128; conv2d's depthwise tile must hold the dilated filter footprint) are
not copied here: the rule asks the extension's own CUDA algorithm choice
(``torch_ops.algorithm`` on meta tensors, no GPU needed) for a representative input of the layer
(batch 2, length 8192 / 256x256 or the dilated filter's footprint where that is larger, padding
0, float32 and bfloat16: the inputs tests/test_fastpath.py checks the rule on) and calls the
layer fast when every answer is a specialised kernel (a name not starting with ``general``).
Answers are cached per layer setting. A CPU-only build has no CUDA algorithm choice; there the
structural part alone decides.

What the rule cannot see, because it depends on the input: a Conv1d whose output rows are
shorter than 256 samples still runs the general kernel (its row-wise tiles would mostly compute
padding), and a strided depthwise Conv2d fed a ``channels_last`` input does have a specialised
kernel (``depthwise_nhwc_reg``) though the rule leaves it out. ``torch_ops.algorithm(...)`` (or
``python -m torch_ops.info``) gives the exact choice for a given input shape.
"""
import functools
from typing import Optional, Sequence

import torch

from ._args import expand_tuple

__all__ = ["has_fast_path", "fast_path_reason", "conv_fast_path_reason"]

# The representative input of a layer for the CUDA choice: long enough for the row-wise tiles.
_QUERY_LENGTH_1D = 8192
_QUERY_SIZE_2D = 256
_QUERY_DTYPES = (torch.float32, torch.bfloat16)


def _is_general(name: str) -> bool:
    """gpukern names its general (non-specialised) convolution kernels general_*."""
    return name.startswith("general")


@functools.lru_cache(maxsize=1024)
def _cuda_choice_reason(nsp: int, in_channels: int, out_channels: int, groups: int,
                        kernel_size: tuple, dilation: tuple, forced: str) -> Optional[str]:
    """None when the CUDA choice for a stride-1 layer is a specialised kernel for every dtype of
    _QUERY_DTYPES, else the reason. ``forced`` (the family's forced algorithm) keys the cache."""
    from .algorithms import algorithm
    del forced
    spans = [d * (k - 1) + 1 for k, d in zip(kernel_size, dilation)]
    base = [_QUERY_LENGTH_1D] if nsp == 1 else [_QUERY_SIZE_2D] * 2
    sizes = [max(b, span) for b, span in zip(base, spans)]  # padding 0
    for dtype in _QUERY_DTYPES:
        x = torch.empty(2, in_channels, *sizes, dtype=dtype, device="meta")
        w = torch.empty(out_channels, in_channels // groups, *kernel_size, dtype=dtype,
                        device="meta")
        try:
            name = algorithm(f"conv{nsp}d", x, w, None, 1, 0, list(dilation), groups)
        except RuntimeError as e:  # e.g. a forced algorithm that cannot run the layer
            return f"the CUDA algorithm query failed ({str(e).splitlines()[0]})"
        if _is_general(name):
            footprint = "x".join(str(s) for s in spans)
            return (f"the CUDA choice is '{name}' ({str(dtype).replace('torch.', '')}): the "
                    f"dilated filter footprint {footprint} is past the specialised kernels' "
                    "limits; runs gpukern's general kernel")
    return None


# Under torch.compile the answer is computed eagerly while tracing and kept as a constant: it is a
# pure function of the layer's settings and the forced algorithm, and the extension queries it
# makes (meta tensors, the forced-algorithm op) return strings, which dynamo cannot trace.
@torch._dynamo.assume_constant_result
def conv_fast_path_reason(nsp: int, in_channels: int, out_channels: int, groups: int,
                          kernel_size: Sequence[int], stride, dilation) -> Optional[str]:
    """None when a ``nsp``-d convolution with these settings has a specialised gpukern kernel,
    else a one-line reason why it runs the general kernel."""
    stride, dilation = expand_tuple(stride, nsp), expand_tuple(dilation, nsp)
    kernel_size = expand_tuple(kernel_size, nsp)
    if not groups == in_channels == out_channels:
        if groups == 1:
            kind = f"dense channel mixing ({in_channels} -> {out_channels} channels, groups=1)"
        elif groups == in_channels:
            kind = f"depthwise multiplier {out_channels // max(groups, 1)}"
        else:
            kind = f"grouped channel mixing ({groups} groups of {in_channels // max(groups, 1)})"
        return f"{kind} runs gpukern's general kernel"
    if any(s != 1 for s in stride):
        return f"stride {stride} runs gpukern's general kernel"
    from . import has_cuda_kernels
    if not has_cuda_kernels():
        return None  # no CUDA choice to ask: the structural rule decides
    forced = torch.ops.gpukern._forced_algorithm(f"conv{nsp}d")
    return _cuda_choice_reason(nsp, in_channels, out_channels, groups,
                               tuple(int(k) for k in kernel_size),
                               tuple(int(d) for d in dilation), forced)


def fast_path_reason(layer: torch.nn.Module) -> Optional[str]:
    """None when ``layer`` (a ``torch.nn.Conv1d`` / ``Conv2d`` or subclass) has a specialised
    gpukern kernel, else a one-line reason."""
    if isinstance(layer, torch.nn.Conv1d):
        nsp = 1
    elif isinstance(layer, torch.nn.Conv2d):
        nsp = 2
    else:
        return f"{type(layer).__qualname__} is not a Conv1d or Conv2d"
    return conv_fast_path_reason(nsp, layer.in_channels, layer.out_channels, layer.groups,
                                 layer.kernel_size, layer.stride, layer.dilation)


def has_fast_path(name: str, layer: torch.nn.Module) -> bool:
    """A :func:`torch_ops.swap` filter: True for the layers gpukern has a specialised kernel for
    (depthwise with multiplier 1 / single-channel, stride 1, within the specialised kernels'
    limits; see the module docstring).

    ``torch_ops.swap(model, filter=torch_ops.has_fast_path)``; layers it rejects are listed in
    ``SwapResult.skipped`` with the reason (e.g. "dense channel mixing ... runs gpukern's general
    kernel"). ``name`` is unused (the filter signature of :func:`swap`)."""
    del name
    return fast_path_reason(layer) is None
