"""Fake (meta) kernels: output shape, dtype and layout of every gpukern op, for torch.compile,
FakeTensor tracing and meta tensors. Each runs the checks of the real kernel first
(:mod:`torch_ops._checks`, a mirror of the C++ host entries with the same exception types and
messages), so a call the real kernel rejects is rejected here too, with the same message."""
import torch

from . import _checks

lib = "gpukern::"


def _conv_out(nsp, input, weight, bias, stride, padding, dilation, groups):
    shape, channels_last = _checks.conv_check(f"conv{nsp}d", nsp, input, weight, bias, stride,
                                              padding, dilation, groups)
    return _empty_conv_output(shape, channels_last, input)


def _empty_conv_output(shape, channels_last, input):
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    if channels_last and len(shape) == 3:  # unbatched: the batched layout without the batch dim
        return torch.empty([1] + shape, dtype=input.dtype, device=input.device,
                           memory_format=fmt).squeeze(0)
    return torch.empty(shape, dtype=input.dtype, device=input.device, memory_format=fmt)


@torch.library.register_fake(lib + "conv1d")
def _conv1d_fake(input, weight, bias=None, stride=(1,), padding=(0,), dilation=(1,), groups=1):
    return _conv_out(1, input, weight, bias, stride, padding, dilation, groups)


@torch.library.register_fake(lib + "conv1d.padding")
def _conv1d_padding_fake(input, weight, bias=None, stride=(1,), padding="valid", dilation=(1,),
                         groups=1):
    return _conv_out(1, input, weight, bias, stride, padding, dilation, groups)


@torch.library.register_fake(lib + "conv2d")
def _conv2d_fake(input, weight, bias=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1),
                 groups=1):
    return _conv_out(2, input, weight, bias, stride, padding, dilation, groups)


@torch.library.register_fake(lib + "conv2d.padding")
def _conv2d_padding_fake(input, weight, bias=None, stride=(1, 1), padding="valid",
                         dilation=(1, 1), groups=1):
    return _conv_out(2, input, weight, bias, stride, padding, dilation, groups)


def _conv_fused_out(nsp, input, weight, bias, stride, padding, dilation, groups, activation,
                    residual):
    shape, channels_last = _checks.conv_fused_check(f"conv{nsp}d_fused", nsp, input, weight,
                                                    bias, stride, padding, dilation, groups,
                                                    activation, residual)
    return _empty_conv_output(shape, channels_last, input)


@torch.library.register_fake(lib + "conv1d_fused")
def _conv1d_fused_fake(input, weight, bias=None, stride=(1,), padding=(0,), dilation=(1,),
                       groups=1, activation="none", residual=None):
    return _conv_fused_out(1, input, weight, bias, stride, padding, dilation, groups, activation,
                           residual)


@torch.library.register_fake(lib + "conv1d_fused.padding")
def _conv1d_fused_padding_fake(input, weight, bias=None, stride=(1,), padding="valid",
                               dilation=(1,), groups=1, activation="none", residual=None):
    return _conv_fused_out(1, input, weight, bias, stride, padding, dilation, groups, activation,
                           residual)


@torch.library.register_fake(lib + "conv2d_fused")
def _conv2d_fused_fake(input, weight, bias=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1),
                       groups=1, activation="none", residual=None):
    return _conv_fused_out(2, input, weight, bias, stride, padding, dilation, groups, activation,
                           residual)


@torch.library.register_fake(lib + "conv2d_fused.padding")
def _conv2d_fused_padding_fake(input, weight, bias=None, stride=(1, 1), padding="valid",
                               dilation=(1, 1), groups=1, activation="none", residual=None):
    return _conv_fused_out(2, input, weight, bias, stride, padding, dilation, groups, activation,
                           residual)


@torch.library.register_fake(lib + "convolve")
def _convolve_fake(x, h, mode="full"):
    return x.new_empty(_checks.convolve_check(x, h, mode))


@torch.library.register_fake(lib + "mv")
def _mv_fake(self, vec):
    return self.new_empty(_checks.mv_check(self, vec))


def _reduce_fake(op, self, dim, keepdim, dtype):
    shape, out_dtype = _checks.reduce_check(op, self, dim, keepdim, dtype)
    return self.new_empty(shape, dtype=out_dtype)


@torch.library.register_fake(lib + "sum")
def _sum_fake(self, *, dtype=None):
    return _reduce_fake("sum", self, None, False, dtype)


@torch.library.register_fake(lib + "sum.dim_IntList")
def _sum_dim_fake(self, dim, keepdim=False, *, dtype=None):
    return _reduce_fake("sum", self, dim, keepdim, dtype)


@torch.library.register_fake(lib + "mean")
def _mean_fake(self, *, dtype=None):
    return _reduce_fake("mean", self, None, False, dtype)


@torch.library.register_fake(lib + "mean.dim")
def _mean_dim_fake(self, dim, keepdim=False, *, dtype=None):
    return _reduce_fake("mean", self, dim, keepdim, dtype)


@torch.library.register_fake(lib + "amax")
def _amax_fake(self, dim=(), keepdim=False):
    return _reduce_fake("amax", self, dim, keepdim, None)


@torch.library.register_fake(lib + "amin")
def _amin_fake(self, dim=(), keepdim=False):
    return _reduce_fake("amin", self, dim, keepdim, None)
