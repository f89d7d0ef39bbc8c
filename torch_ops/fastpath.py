"""Which convolutions gpukern has a specialised CUDA kernel for: the "fast path" policy.

gpukern's convolution kernels are specialised for convolutions where every output channel reads
exactly one input channel with its own filter: depthwise convolutions with multiplier 1 and
single-channel signals or images (``groups == in_channels == out_channels``), at stride 1. Dense
and grouped channel mixing (pointwise 1x1, ResNet-style 3x3, strided stems), depthwise
multipliers > 1 and strided depthwise layers run a general direct kernel that is, for now, much
slower than cuDNN (a later issue gives them their own kernels). :func:`swap` converts all of them
by default; ``torch_ops.swap(model, filter=torch_ops.has_fast_path)`` converts only the layers
this module accepts, and ``torch_ops.enabled(convs="fast")`` routes only such calls.

The rule is structural (the layer's settings, not its input), mirroring the CUDA algorithm
choice in ``csrc/conv1d/conv1d_cuda.cu`` and ``csrc/conv2d/conv2d_cuda.cu``:

* ``groups == in_channels == out_channels`` (1 == 1 == 1 included: single-channel signals);
* every stride 1;
* Conv1d: dilation <= 128 (the row-wise kernels keep one dilation phase per thread);
* Conv2d: the dilated filter footprint fits the depthwise kernel's shared-memory tile
  (``(64 + (KH-1)*dil_h) * round_up(71 + (KW-1)*dil_w, 8) + KH*KW <= 24576`` floats, counted
  for the widest alignment offset: square filters up to 71x71 at dilation 1).

What the rule cannot see, because it depends on the input: a Conv1d whose output rows are
shorter than 256 samples still runs the general kernel (its row-wise tiles would mostly compute
padding), and a strided depthwise Conv2d fed a ``channels_last`` input does have a specialised
kernel (``depthwise_nhwc``) though the rule leaves it out. ``torch_ops.algorithm(...)`` (or
``python -m torch_ops.info``) gives the exact choice for a given input shape.
"""
from typing import Optional, Sequence

import torch

__all__ = ["has_fast_path", "fast_path_reason", "conv_fast_path_reason"]

# Mirrors of the CUDA limits (see the module docstring; tests/test_fastpath.py checks the rule
# against torch_ops.algorithm in CUDA builds).
_CONV1D_MAX_DILATION = 128        # Conv1dRowwiseTraits::kMaxDilation (128 threads)
_DW2D_TILE_H, _DW2D_TILE_W = 64, 64  # DepthwiseTraits::kTileH / kTileW
_DW2D_MAX_SMEM_FLOATS = 24 * 1024    # DepthwiseTraits::kMaxSmemFloats
_DW2D_VEC = 8                        # widest 16-byte vector (2-byte dtypes): worst offset 7


def _tuple(v, n: int) -> tuple:
    if isinstance(v, int):
        return (v,) * n
    v = tuple(v)
    return v * n if len(v) == 1 else v


def conv_fast_path_reason(nsp: int, in_channels: int, out_channels: int, groups: int,
                          kernel_size: Sequence[int], stride, dilation) -> Optional[str]:
    """None when a ``nsp``-d convolution with these settings has a specialised gpukern kernel,
    else a one-line reason why it runs the general kernel."""
    stride, dilation = _tuple(stride, nsp), _tuple(dilation, nsp)
    kernel_size = _tuple(kernel_size, nsp)
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
    if nsp == 1:
        if dilation[0] > _CONV1D_MAX_DILATION:
            return (f"dilation {dilation[0]} > {_CONV1D_MAX_DILATION} runs gpukern's general "
                    f"kernel")
        return None
    (kh, kw), (dh, dw) = kernel_size, dilation
    rows = _DW2D_TILE_H + (kh - 1) * dh
    pitch = -(-(_DW2D_VEC - 1 + _DW2D_TILE_W + (kw - 1) * dw) // _DW2D_VEC) * _DW2D_VEC
    if rows * pitch + kh * kw > _DW2D_MAX_SMEM_FLOATS:
        return (f"dilated filter footprint {(kh - 1) * dh + 1}x{(kw - 1) * dw + 1} exceeds the "
                f"depthwise kernel's tile; runs gpukern's general kernel")
    return None


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
    (depthwise with multiplier 1 / single-channel, stride 1; see the module docstring).

    ``torch_ops.swap(model, filter=torch_ops.has_fast_path)``; layers it rejects are listed in
    ``SwapResult.skipped`` with the reason (e.g. "dense channel mixing ... runs gpukern's general
    kernel"). ``name`` is unused (the filter signature of :func:`swap`)."""
    del name
    return fast_path_reason(layer) is None
