"""Drop-in convolution modules: ``torch_ops.nn.Conv1d`` and ``torch_ops.nn.Conv2d``.

They subclass ``torch.nn.Conv1d`` / ``torch.nn.Conv2d``, so the constructor, the parameters, the
``state_dict``, ``repr`` and ``extra_repr`` are torch's own; only the convolution itself runs
gpukern's kernel. ``padding_mode`` other than ``'zeros'`` is handled as torch does: ``F.pad`` with
that mode, then the convolution with padding 0.

CPU inputs: a layer built directly (``torch_ops.nn.Conv1d(...)``, ``from_module``) runs
gpukern's CPU kernel; a layer converted by :func:`torch_ops.swap` runs torch's own convolution on
CPU unless swapped with ``cpu=True`` (gpukern's CPU kernels are reference kernels, slower than
torch's). The attribute ``gpukern_cpu`` (True / False) holds the choice per layer.

Forward only: called with grad mode on while the weight (a Parameter: ``requires_grad=True`` by
default) or the input requires grad, the op raises a RuntimeError saying gpukern is
inference-only. Run the model under ``torch.inference_mode()`` or ``torch.no_grad()`` (or call
``model.requires_grad_(False)``).
"""
from typing import Optional, TypeVar

import torch
import torch.nn.functional as F

from . import functional as gk

__all__ = ["Conv1d", "Conv2d"]

_M = TypeVar("_M", bound=torch.nn.Module)


def _share_state(new: torch.nn.Module, old: torch.nn.Module) -> None:
    """Give `new` the state of `old`: the same Parameter, buffer and submodule objects, and the
    same hooks, held in fresh containers so that later registrations on one do not reach the
    other."""
    state = dict(old.__dict__)
    for key, value in state.items():
        if isinstance(value, dict):
            state[key] = type(value)(value)
    new.__dict__.update(state)


class _FromModule:
    _torch_class: type
    #: Whether CPU inputs run gpukern's CPU kernel (True) or torch's convolution (False).
    gpukern_cpu: bool = True

    @classmethod
    def from_module(cls: type, module: torch.nn.Module):
        """A gpukern layer sharing ``module``'s Parameter objects (no copy), buffers, hooks,
        training flag and settings. ``module`` must be exactly a ``torch.nn.Conv{1,2}d`` of the
        matching dimensionality (or already this class); it is left unchanged."""
        if type(module) not in (cls._torch_class, cls):
            raise TypeError(f"{cls.__module__}.{cls.__name__}.from_module expects a "
                            f"{cls._torch_class.__module__}.{cls._torch_class.__name__}, got "
                            f"{type(module).__module__}.{type(module).__qualname__}")
        new = cls.__new__(cls)
        _share_state(new, module)
        return new


class Conv1d(_FromModule, torch.nn.Conv1d):
    """``torch.nn.Conv1d`` computed by ``gpukern::conv1d`` (same arguments and state_dict)."""

    _torch_class = torch.nn.Conv1d

    def _conv_forward(self, input: torch.Tensor, weight: torch.Tensor,
                      bias: Optional[torch.Tensor]) -> torch.Tensor:
        if input.device.type == "cpu" and not self.gpukern_cpu:
            return self._torch_class._conv_forward(self, input, weight, bias)
        if self.padding_mode != "zeros":
            input = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return gk.conv1d(input, weight, bias, self.stride, 0, self.dilation, self.groups)
        return gk.conv1d(input, weight, bias, self.stride, self.padding, self.dilation,
                         self.groups)


class Conv2d(_FromModule, torch.nn.Conv2d):
    """``torch.nn.Conv2d`` computed by ``gpukern::conv2d`` (same arguments and state_dict)."""

    _torch_class = torch.nn.Conv2d

    def _conv_forward(self, input: torch.Tensor, weight: torch.Tensor,
                      bias: Optional[torch.Tensor]) -> torch.Tensor:
        if input.device.type == "cpu" and not self.gpukern_cpu:
            return self._torch_class._conv_forward(self, input, weight, bias)
        if self.padding_mode != "zeros":
            input = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return gk.conv2d(input, weight, bias, self.stride, 0, self.dilation, self.groups)
        return gk.conv2d(input, weight, bias, self.stride, self.padding, self.dilation,
                         self.groups)


# torch class -> gpukern class, for swap().
GPUKERN_CLASS = {torch.nn.Conv1d: Conv1d, torch.nn.Conv2d: Conv2d}
