"""Fake (meta) kernels: output shape, dtype and layout of every gpukern op, for torch.compile and
FakeTensor tracing. They mirror the checks of csrc/common/conv_args.cpp and csrc/reduce only as far
as shapes need; the real kernels raise the full errors."""
from typing import Optional, Sequence, Union

import torch

lib = "gpukern::"


def _expand(values: Sequence[int], n: int) -> list:
    values = list(values)
    return values * n if len(values) == 1 else values


def _conv_shape(nsp, input, weight, stride, padding, dilation):
    batched = input.dim() == nsp + 2
    sizes = list(input.shape[-nsp:])
    ks = list(weight.shape[2:])
    stride = _expand(stride, nsp)
    dilation = _expand(dilation, nsp)
    if isinstance(padding, str):
        if padding == "same":
            totals = [d * (k - 1) for d, k in zip(dilation, ks)]
            pads = [(t // 2, t - t // 2) for t in totals]
        elif padding == "valid":
            pads = [(0, 0)] * nsp
        else:
            raise RuntimeError(f"gpukern::conv{nsp}d: padding must be 'same' or 'valid', "
                               f"got '{padding}'")
    else:
        pads = [(p, p) for p in _expand(padding, nsp)]
    out = [(n + lo + hi - d * (k - 1) - 1) // s + 1
           for n, (lo, hi), d, k, s in zip(sizes, pads, dilation, ks, stride)]
    shape = ([input.shape[0]] if batched else []) + [weight.shape[0]] + out
    return batched, shape


def _is_channels_last(t: torch.Tensor) -> bool:
    return t.dim() == 4 and torch._prims_common.suggest_memory_format(t) == torch.channels_last


def _conv_out(nsp, input, weight, stride, padding, dilation):
    batched, shape = _conv_shape(nsp, input, weight, stride, padding, dilation)
    fmt = torch.contiguous_format
    if nsp == 2 and batched and (_is_channels_last(input) or _is_channels_last(weight)):
        fmt = torch.channels_last
    return torch.empty(shape, dtype=input.dtype, device=input.device, memory_format=fmt)


@torch.library.register_fake(lib + "conv1d")
def _conv1d_fake(input, weight, bias=None, stride=(1,), padding=(0,), dilation=(1,), groups=1):
    return _conv_out(1, input, weight, stride, padding, dilation)


@torch.library.register_fake(lib + "conv1d.padding")
def _conv1d_padding_fake(input, weight, bias=None, stride=(1,), padding="valid", dilation=(1,),
                         groups=1):
    return _conv_out(1, input, weight, stride, padding, dilation)


@torch.library.register_fake(lib + "conv2d")
def _conv2d_fake(input, weight, bias=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1),
                 groups=1):
    return _conv_out(2, input, weight, stride, padding, dilation)


@torch.library.register_fake(lib + "conv2d.padding")
def _conv2d_padding_fake(input, weight, bias=None, stride=(1, 1), padding="valid",
                         dilation=(1, 1), groups=1):
    return _conv_out(2, input, weight, stride, padding, dilation)


def convolve_length(n: int, k: int, mode: str) -> int:
    """Output length of gpukern::convolve (numpy.convolve's modes)."""
    if mode == "full":
        return n + k - 1
    if mode == "same":
        return max(n, k)
    if mode == "valid":
        return max(n, k) - min(n, k) + 1
    raise RuntimeError(f"gpukern::convolve: mode must be 'full', 'same' or 'valid', got '{mode}'")


@torch.library.register_fake(lib + "convolve")
def _convolve_fake(x, h, mode="full"):
    lead = torch.broadcast_shapes(x.shape[:-1], h.shape[:-1])
    return x.new_empty(list(lead) + [convolve_length(x.shape[-1], h.shape[-1], mode)])


@torch.library.register_fake(lib + "mv")
def _mv_fake(self, vec):
    return self.new_empty((self.shape[0],))


def reduced_shape(shape: Sequence[int], dim: Optional[Union[int, Sequence[int]]],
                  keepdim: bool) -> list:
    """Output shape of a reduction of `shape` over `dim` (None or [] means every dim)."""
    ndim = len(shape)
    if dim is None or (not isinstance(dim, int) and len(dim) == 0):
        dims = set(range(ndim))
    else:
        dims = {d % max(ndim, 1) for d in ([dim] if isinstance(dim, int) else dim)}
    if keepdim:
        return [1 if i in dims else s for i, s in enumerate(shape)]
    return [s for i, s in enumerate(shape) if i not in dims]


def sum_dtype(input_dtype: torch.dtype, dtype: Optional[torch.dtype]) -> torch.dtype:
    """torch.sum's result dtype: `dtype` if given, int64 for bool/integer input, else the input's."""
    if dtype is not None:
        return dtype
    if input_dtype == torch.bool or not (input_dtype.is_floating_point or input_dtype.is_complex):
        return torch.int64
    return input_dtype


@torch.library.register_fake(lib + "sum")
def _sum_fake(self, *, dtype=None):
    return self.new_empty((), dtype=sum_dtype(self.dtype, dtype))


@torch.library.register_fake(lib + "sum.dim_IntList")
def _sum_dim_fake(self, dim, keepdim=False, *, dtype=None):
    return self.new_empty(reduced_shape(self.shape, dim, keepdim),
                          dtype=sum_dtype(self.dtype, dtype))


@torch.library.register_fake(lib + "mean")
def _mean_fake(self, *, dtype=None):
    return self.new_empty((), dtype=dtype or self.dtype)


@torch.library.register_fake(lib + "mean.dim")
def _mean_dim_fake(self, dim, keepdim=False, *, dtype=None):
    return self.new_empty(reduced_shape(self.shape, dim, keepdim), dtype=dtype or self.dtype)


@torch.library.register_fake(lib + "amax")
def _amax_fake(self, dim=(), keepdim=False):
    return self.new_empty(reduced_shape(self.shape, dim, keepdim))


@torch.library.register_fake(lib + "amin")
def _amin_fake(self, dim=(), keepdim=False):
    return self.new_empty(reduced_shape(self.shape, dim, keepdim))
