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

Policy: a layer converted by :func:`torch_ops.swap` carries the swap's policy
(``gpukern_policy``: "rules", "autotune" or "all"; see :mod:`torch_ops.policy`) and, on CUDA,
runs gpukern or torch per input signature as the policy decides. A layer built directly runs
gpukern on every CUDA input ("all").

``FusedConv1d`` / ``FusedConv2d`` are what :func:`torch_ops.swap` puts in place of a fused block
(Conv -> BatchNorm -> residual add -> activation, each part optional): ``act(conv(x, w) + bias +
residual)`` with the BatchNorm folded into ``weight`` and ``bias``. ``forward(x, residual=None)``
runs gpukern's fused op (``torch.ops.gpukern.conv{1,2}d_fused``) where the policy picks gpukern,
and torch's sequence (convolution with the folded weights, ``+ residual``, activation) where it
picks torch, so fusion alone never forces gpukern. A build without the fused op runs gpukern's
convolution and the epilogue in torch on the gpukern path.
"""
from typing import Callable, Optional, TypeVar

import torch
import torch.nn.functional as F
import torch.nn.utils.parametrize  # noqa: F401  (its module name, for _parametrized_base)

from . import functional as gk
from . import policy as _policy
from .policy import compiled_choice as _compiled_choice

__all__ = ["Conv1d", "Conv2d", "FusedConv1d", "FusedConv2d", "ACTIVATIONS", "has_fused_op"]

_M = TypeVar("_M", bound=torch.nn.Module)
_ops = torch.ops.gpukern
_is_compiling = torch.compiler.is_compiling


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
    #: The torch class's _conv_forward, as a method of this class (set per subclass below). The
    #: torch path calls it rather than ``self._torch_class._conv_forward``: under torch.compile,
    #: dynamo guards a class attribute read like that as a chain through the class's __dict__,
    #: which made every swapped layer's guard subtree unsafe for its dict-tag fast path (a
    #: compiled swapped ConvNeXt-T checked 25-26 us of guards a call against stock's 18-19).
    _stock_conv_forward: Callable
    _gk_op: str

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "_torch_class" in cls.__dict__:
            cls._stock_conv_forward = cls._torch_class._conv_forward
    #: Whether CPU inputs run gpukern's CPU kernel (True) or torch's convolution (False).
    gpukern_cpu: bool = True
    #: Which CUDA inputs run gpukern (torch_ops.policy): "all" unless swap set another.
    gpukern_policy: str = "all"

    def _gk_runs_fused_op(self) -> bool:
        return False

    def _gpukern_conv(self, input: torch.Tensor, weight: torch.Tensor,
                      bias: Optional[torch.Tensor]) -> torch.Tensor:
        if self.padding_mode != "zeros":
            input = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return self._gk_fn(input, weight, bias, self.stride, 0, self.dilation, self.groups)
        # The op's overload directly, with the layer's (torch-validated) settings as lists: the
        # typed wrapper's argument normalisation and the overload resolution cost a few us a
        # call, which host-bound models pay per layer (eager only: traced graphs keep the
        # wrapper's op, gpukern.conv1d / conv2d).
        if _is_compiling():
            return self._gk_fn(input, weight, bias, self.stride, self.padding, self.dilation,
                               self.groups)
        if isinstance(self.padding, str):
            return self._gk_packet.padding(input, weight, bias, list(self.stride), self.padding,
                                           list(self.dilation), self.groups)
        return self._gk_packet.default(input, weight, bias, list(self.stride), list(self.padding),
                                       list(self.dilation), self.groups)

    def _run_torch(self, x: torch.Tensor, residual=None) -> torch.Tensor:
        return self._stock_conv_forward(x, self.weight, self.bias)

    def _run_gpukern(self, x: torch.Tensor, residual=None) -> torch.Tensor:
        return self._gpukern_conv(x, self.weight, self.bias)

    def _conv_forward(self, input: torch.Tensor, weight: torch.Tensor,
                      bias: Optional[torch.Tensor]) -> torch.Tensor:
        if not _policy.use_gpukern(self, input):
            return self._stock_conv_forward(input, weight, bias)
        return self._gpukern_conv(input, weight, bias)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        # The policy's eager cache looked up inline (one dict lookup on a cheap key; see
        # torch_ops.policy.use_gpukern): a layer whose policy says torch then runs what the
        # stock layer runs (torch's _conv_forward) with no further Python in between.
        if _is_compiling():
            gk = _compiled_choice(self, input)
        else:
            fast = self.__dict__.get("_gk_fast")
            gk = None if fast is None else fast.get(
                (input.shape, input.stride(), input.dtype, input.device, False))
            if gk is None:
                gk = _policy._decide(self, input)
        if gk:
            return self._gpukern_conv(input, self.weight, self.bias)
        return self._stock_conv_forward(input, self.weight, self.bias)

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
    _gk_op = "conv1d"
    _gk_fn = staticmethod(gk.conv1d)
    _gk_packet = _ops.conv1d


class Conv2d(_FromModule, torch.nn.Conv2d):
    """``torch.nn.Conv2d`` computed by ``gpukern::conv2d`` (same arguments and state_dict)."""

    _torch_class = torch.nn.Conv2d
    _gk_op = "conv2d"
    _gk_fn = staticmethod(gk.conv2d)
    _gk_packet = _ops.conv2d


# torch class -> gpukern class, for swap().
GPUKERN_CLASS = {torch.nn.Conv1d: Conv1d, torch.nn.Conv2d: Conv2d}


def _parametrized_base(cls: type) -> Optional[type]:
    """The torch conv class under a class made by ``torch.nn.utils.parametrize`` (e.g.
    ``nn.utils.parametrizations.weight_norm``: wav2vec2's positional conv), else None. Such a
    class (``Parametrized<Conv>``, one per module) adds only the parametrized tensors' properties
    and the (de)serialisation hooks to the exact torch class; its forward is torch's."""
    bases = cls.__bases__
    if (len(bases) != 1 or bases[0] not in GPUKERN_CLASS
            or cls.__name__ != f"Parametrized{bases[0].__name__}"
            or cls.__module__ != torch.nn.utils.parametrize.__name__):
        return None
    plain = {"__getstate__", "__deepcopy__", "__module__", "__doc__", "__dict__", "__weakref__",
             "__slotnames__",  # copyreg caches it on the class at the first deepcopy
             "_gk_converted_class"}
    if all(k in plain or isinstance(v, property) for k, v in vars(cls).items()):
        return bases[0]
    return None


def gpukern_class(cls: type) -> Optional[type]:
    """The gpukern class :func:`torch_ops.swap` converts a layer of class ``cls`` to, or None:
    ``torch_ops.nn.Conv1d`` / ``Conv2d`` for the exact torch classes; for a parametrized one
    (:func:`_parametrized_base`) a subclass of both, made once per class, whose ``weight`` is the
    parametrization's (recomputed per call, as torch's layer does) and whose convolution is
    gpukern's. ``_gk_torch_class_of`` names the class to turn back into."""
    if cls in GPUKERN_CLASS:
        return GPUKERN_CLASS[cls]
    base = _parametrized_base(cls)
    if base is None:
        return None
    made = cls.__dict__.get("_gk_converted_class")
    if made is None:
        made = type(f"Gpukern{cls.__name__}", (cls, GPUKERN_CLASS[base]),
                    {"_gk_torch_class_of": cls, "__module__": __name__})
        cls._gk_converted_class = made
    return made


def torch_class_of(cls: type) -> Optional[type]:
    """The torch class a gpukern class made by :func:`gpukern_class` came from (None for other
    classes)."""
    for torch_cls, gk_cls in GPUKERN_CLASS.items():
        if cls is gk_cls:
            return torch_cls
    return cls.__dict__.get("_gk_torch_class_of")


# ---------------------------------------------------------------------------------------------
# Fused blocks

#: The fused op's activations ("none": no activation).
ACTIVATIONS = ("none", "relu", "relu6", "silu", "gelu", "gelu_tanh", "hardswish", "sigmoid",
               "hardsigmoid")


def has_fused_op(op: str) -> bool:
    """Whether this build has ``torch.ops.gpukern.<op>_fused`` (op: conv1d or conv2d)."""
    return hasattr(torch.ops.gpukern, f"{op}_fused")


def apply_activation(y: torch.Tensor, activation: str, inplace: bool = False) -> torch.Tensor:
    """torch's activation by the fused op's name (in place where torch's module would be)."""
    if activation == "none":
        return y
    if activation == "relu":
        return torch.relu_(y) if inplace else torch.relu(y)
    if activation == "relu6":
        return F.relu6(y, inplace=inplace)
    if activation == "silu":
        return F.silu(y, inplace=inplace)
    if activation == "gelu":
        return F.gelu(y)
    if activation == "gelu_tanh":
        return F.gelu(y, approximate="tanh")
    if activation == "hardswish":
        return F.hardswish(y, inplace=inplace)
    if activation == "hardsigmoid":
        return F.hardsigmoid(y, inplace=inplace)
    if activation == "sigmoid":
        return y.sigmoid_() if inplace else torch.sigmoid(y)
    raise ValueError(f"unknown activation {activation!r}; expected one of {ACTIVATIONS}")


_FUSED_PACKETS = {}


def _fused_packet(op: str):
    """torch.ops.gpukern.<op>_fused, looked up once (the attribute lookup and the name's
    formatting cost about a microsecond a call)."""
    packet = _FUSED_PACKETS.get(op)
    if packet is None:
        packet = _FUSED_PACKETS[op] = getattr(torch.ops.gpukern, f"{op}_fused")
    return packet


class _FusedConvNd(torch.nn.Module):
    """``act(conv(x, weight) + bias + residual)``; see the module docstring."""

    _nsp: int
    _gk_op: str
    _torch_conv = None
    _gpukern_fn = None
    gpukern_cpu: bool = True
    gpukern_policy: str = "all"

    def __init__(self, weight: torch.Tensor, bias: Optional[torch.Tensor], stride, padding,
                 dilation, groups: int, activation: str = "none", fused: str = "",
                 residual: bool = False) -> None:
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {activation!r}; expected one of "
                             f"{ACTIVATIONS}")
        if weight.dim() != self._nsp + 2:
            raise ValueError(f"{type(self).__name__}: weight must be {self._nsp + 2}-D")
        as_param = (lambda t: t if isinstance(t, torch.nn.Parameter)
                    else torch.nn.Parameter(t.detach(), requires_grad=False))
        self.weight = as_param(weight)
        self.bias = None if bias is None else as_param(bias)
        n = self._nsp
        tup = (lambda v: tuple(int(i) for i in v) if isinstance(v, (tuple, list))
               else (int(v),) * n)
        self.stride, self.dilation = tup(stride), tup(dilation)
        self.padding = padding if isinstance(padding, str) else tup(padding)
        self.groups = int(groups)
        self.out_channels = int(weight.shape[0])
        self.in_channels = int(weight.shape[1]) * self.groups
        self.kernel_size = tuple(int(k) for k in weight.shape[2:])
        self.activation = activation
        #: What the block replaced after the convolution, e.g. "bn+add+relu" ("" for none).
        self.fused = fused
        #: Whether forward expects a residual (the block had an add).
        self.has_residual = bool(residual)
        self._fused_op = has_fused_op(self._gk_op)

    @classmethod
    def from_conv(cls, conv: torch.nn.Module, bn: Optional[torch.nn.Module] = None,
                  activation: str = "none", residual: bool = False, fused: str = ""):
        """The block ``conv [-> bn] [-> + residual] [-> activation]``. ``bn`` (eval mode, running
        statistics) is folded with ``torch.nn.utils.fusion.fuse_conv_bn_eval`` into new
        Parameters; without it the block shares the conv's Parameter objects. ``conv`` must use
        padding_mode 'zeros'."""
        if conv.padding_mode != "zeros":
            raise ValueError("fused blocks need padding_mode='zeros'")
        weight, bias = conv.weight, conv.bias
        if bn is not None:
            from torch.nn.utils.fusion import fuse_conv_bn_eval
            folded = fuse_conv_bn_eval(conv, bn)
            weight, bias = folded.weight, folded.bias
        return cls(weight, bias, conv.stride, conv.padding, conv.dilation, conv.groups,
                   activation=activation, fused=fused, residual=residual)

    def extra_repr(self) -> str:
        k = "x".join(str(i) for i in self.kernel_size)
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={k}, stride={self.stride}, "
             f"padding={self.padding}")
        if any(d != 1 for d in self.dilation):
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        s += f", bias={self.bias is not None}, activation={self.activation!r}"
        return s + (f", fused={self.fused!r}" if self.fused else "")

    def _gk_runs_fused_op(self) -> bool:
        return self._fused_op

    def _out_size(self, x: torch.Tensor) -> list:
        sizes = [x.shape[0], self.out_channels] if x.dim() == self._nsp + 2 \
            else [self.out_channels]
        for i, size in enumerate(x.shape[-self._nsp:]):
            if isinstance(self.padding, str):
                if self.padding == "same":
                    sizes.append(size)
                    continue
                pad = 0
            else:
                pad = self.padding[i]
            span = self.dilation[i] * (self.kernel_size[i] - 1) + 1
            sizes.append((size + 2 * pad - span) // self.stride[i] + 1)
        return sizes

    def _epilogue(self, y: torch.Tensor, residual: Optional[torch.Tensor]) -> torch.Tensor:
        inplace = not (torch.is_grad_enabled() and y.requires_grad)
        if residual is not None:
            if inplace and residual.shape == y.shape and residual.dtype == y.dtype:
                y = y.add_(residual)
            else:  # broadcasting or type promotion: as the model's own add
                y = y + residual
        return apply_activation(y, self.activation, inplace=inplace)

    def _run_torch(self, x: torch.Tensor, residual: Optional[torch.Tensor] = None):
        y = self._torch_conv(x, self.weight, self.bias, self.stride, self.padding, self.dilation,
                             self.groups)
        return self._epilogue(y, residual)

    def _residual_fits(self, x: torch.Tensor, residual: torch.Tensor) -> bool:
        """Whether the fused op takes ``residual``: exactly the output's shape (the model's own
        add may broadcast), x's dtype and device. Eager calls look the output size up per input
        shape (computing it took about 1 us of Python a call)."""
        if residual.dtype != x.dtype or residual.device != x.device:
            return False
        if _is_compiling():
            return list(residual.shape) == self._out_size(x)
        sizes = self.__dict__.get("_gk_out_sizes")
        if sizes is None:
            sizes = self.__dict__["_gk_out_sizes"] = {}
        out = sizes.get(x.shape)
        if out is None:
            if len(sizes) >= 64:
                sizes.clear()
            out = sizes[x.shape] = torch.Size(self._out_size(x))
        return residual.shape == out

    def _run_gpukern(self, x: torch.Tensor, residual: Optional[torch.Tensor] = None):
        if self._fused_op and (residual is None or self._residual_fits(x, residual)):
            op = _fused_packet(self._gk_op)
            if isinstance(self.padding, str):
                return op.padding(x, self.weight, self.bias, list(self.stride), self.padding,
                                  list(self.dilation), self.groups, self.activation, residual)
            return op.default(x, self.weight, self.bias, list(self.stride), list(self.padding),
                              list(self.dilation), self.groups, self.activation, residual)
        y = self._gpukern_fn(x, self.weight, self.bias, self.stride, self.padding,
                             self.dilation, self.groups)
        return self._epilogue(y, residual)

    def _eager_call(self):
        """The fused op's overload and its settings as the op takes them (lists), for eager
        calls: made at the first call and again whenever one of the settings changed (one
        tuple comparison, against the 1-2 us the op's lookup and the list copies cost per call
        of a host-bound model's block). None where the fused op is not built or the padding is
        a string (``_run_gpukern`` handles both)."""
        src = (self.stride, self.padding, self.dilation, self.groups, self.activation)
        call = self.__dict__.get("_gk_call")
        if call is not None and call[0] == src:
            return call
        if not self._fused_op or isinstance(self.padding, str):
            return None
        call = (src, _fused_packet(self._gk_op).default, list(self.stride), list(self.padding),
                list(self.dilation))
        self.__dict__["_gk_call"] = call
        return call

    def forward(self, x: torch.Tensor, residual: Optional[torch.Tensor] = None) -> torch.Tensor:
        # As _FromModule.forward: the policy's eager cache inline; the torch path is the stock
        # sequence (conv with the folded weights, + residual, activation).
        if _is_compiling():
            gk = _compiled_choice(self, x, residual)
        else:
            fast = self.__dict__.get("_gk_fast")
            gk = None if fast is None else fast.get(
                (x.shape, x.stride(), x.dtype, x.device, residual is not None))
            if gk is None:
                gk = _policy._decide(self, x, residual)
            if gk and (residual is None or self._residual_fits(x, residual)):
                call = self._eager_call()
                if call is not None:
                    return call[1](x, self.weight, self.bias, call[2], call[3], call[4],
                                   self.groups, self.activation, residual)
        if gk:
            return self._run_gpukern(x, residual)
        y = self._torch_conv(x, self.weight, self.bias, self.stride, self.padding, self.dilation,
                             self.groups)
        if residual is None and self.activation == "none":
            return y
        return self._epilogue(y, residual)


class FusedConv1d(_FusedConvNd):
    """A fused Conv1d block: ``act(conv1d(x, weight) + bias + residual)``."""

    _nsp = 1
    _gk_op = "conv1d"
    _torch_conv = staticmethod(F.conv1d)
    _gpukern_fn = staticmethod(gk.conv1d)


class FusedConv2d(_FusedConvNd):
    """A fused Conv2d block: ``act(conv2d(x, weight) + bias + residual)``."""

    _nsp = 2
    _gk_op = "conv2d"
    _torch_conv = staticmethod(F.conv2d)
    _gpukern_fn = staticmethod(gk.conv2d)


FUSED_CLASS = {torch.nn.Conv1d: FusedConv1d, torch.nn.Conv2d: FusedConv2d,
               Conv1d: FusedConv1d, Conv2d: FusedConv2d}
