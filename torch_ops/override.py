"""``with torch_ops.enabled():`` routes torch calls made inside the block to gpukern.

A :class:`torch.overrides.TorchFunctionMode` sees every torch function call made while it is
active; this one answers ``F.conv1d``, ``F.conv2d`` (so ``nn.Conv1d``/``nn.Conv2d`` layers too),
``torch.mv`` / ``Tensor.mv`` and the reductions ``torch.sum`` / ``Tensor.sum``, ``mean``, ``amax``,
``amin`` with gpukern's ops, and passes every other call to torch unchanged. The model's code is
not touched; outside the block nothing changes.

A call goes to gpukern only when gpukern computes exactly what torch would, so the answer is
decided from the arguments alone, in this order; anything else falls through to torch:

* the call form is one gpukern's schema covers (positional or keyword arguments by aten's names;
  no ``out=``, no named dims, no unknown keyword);
* every tensor argument is a plain ``torch.Tensor`` / ``nn.Parameter`` (no subclass, no named
  dims), all on one device: cuda (in a CUDA build), and cpu only with ``enabled(cpu=True)``.
  By default CPU calls run torch: gpukern's CPU kernels are reference kernels, slower than
  torch's, and a drop-in must not make a model slower;
* the dtypes are ones gpukern computes in (one list, :func:`torch_ops._checks.supported_dtypes`):
  float32, float16, bfloat16, and float64 on CPU only; ``sum`` also takes bool, uint8, int8,
  int16, int32 and int64 inputs (summed to int64). Anything else (uint16/32/64, complex, float8)
  runs torch;
* no gradient is needed: grad mode off (``torch.no_grad()``, ``torch.inference_mode()``) or no
  tensor argument requires grad. gpukern is forward only, so a training step inside the block
  simply runs torch;
* gpukern's own argument checks (:mod:`torch_ops._checks`, the mirror of the C++ ones) accept the
  call, and it is not an edge case gpukern leaves to torch (a convolution of an empty input).
  A call gpukern would reject (a dim out of range, mismatched shapes, bad groups, a weight with
  zero output channels) runs torch, so the exception is torch's own (IndexError for a dim out of
  range, as torch raises).

``enabled(convs="fast")`` routes only the convolutions gpukern has a specialised kernel for
(depthwise with multiplier 1 or single-channel, stride 1: the rule of :mod:`torch_ops.fastpath`,
applied to the call's weight shape, groups, stride and dilation); dense and grouped convolutions,
whose general gpukern kernel is slower than cuDNN for now, then run torch.

The mode traces under ``torch.compile(fullgraph=True)`` when it is
entered outside the compiled function.
"""
import contextlib
from typing import Iterable, Iterator, Optional

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from . import _checks
from . import functional as gk
from .fastpath import conv_fast_path_reason

__all__ = ["enabled", "GpukernMode", "OPS", "CONV_POLICIES"]

OPS = ("conv1d", "conv2d", "mv", "sum", "mean", "amax", "amin")
CONV_POLICIES = ("all", "fast")

_PLAIN = (torch.Tensor, torch.nn.Parameter)

_CONV_ARGS = ("input", "weight", "bias", "stride", "padding", "dilation", "groups")
_SUM_ARGS = ("input", "dim", "keepdim", "dtype")
_MAX_ARGS = ("input", "dim", "keepdim")
_MV_ARGS = ("input", "vec")


def _bind(names, args, kwargs) -> Optional[dict]:
    """Arguments by name, or None when the call form is not one of `names` (too many positional
    arguments, an unknown or repeated keyword: out=, axis=, ...)."""
    if len(args) > len(names):
        return None
    bound = dict(zip(names, args))
    for key, value in kwargs.items():
        if key not in names or key in bound:
            return None
        bound[key] = value
    return bound


def _is_int_list(v, n: int) -> bool:
    if isinstance(v, int) and not isinstance(v, bool):
        return True
    return (isinstance(v, (tuple, list)) and len(v) in (1, n)
            and all(isinstance(e, int) and not isinstance(e, bool) for e in v))


def _is_dim(v) -> bool:
    if v is None or (isinstance(v, int) and not isinstance(v, bool)):
        return True
    return isinstance(v, (tuple, list)) and all(
        isinstance(e, int) and not isinstance(e, bool) for e in v)


class GpukernMode(TorchFunctionMode):
    """The mode behind :func:`enabled`; ``ops`` is the subset of :data:`OPS` it routes,
    ``convs`` one of :data:`CONV_POLICIES` ("fast": only convolutions with a specialised
    kernel); ``cpu`` routes CPU calls too (default: only CUDA calls)."""

    def __init__(self, ops: Iterable[str] = OPS, convs: str = "all", cpu: bool = False):
        super().__init__()
        if isinstance(ops, str):
            ops = (ops,)
        ops = tuple(ops)
        unknown = [o for o in ops if o not in OPS]
        if unknown:
            raise ValueError(f"torch_ops.enabled: unknown op(s) {unknown}; expected a subset of "
                             f"{list(OPS)}")
        if convs not in CONV_POLICIES:
            raise ValueError(f"torch_ops.enabled: convs={convs!r}; expected one of "
                             f"{list(CONV_POLICIES)}")
        self._convs_fast = convs == "fast"
        from . import has_cuda_kernels
        self._devices = (("cpu",) if cpu else ()) + (("cuda",) if has_cuda_kernels() else ())
        handlers = {
            "conv1d": {F.conv1d: self._conv1d},
            "conv2d": {F.conv2d: self._conv2d},
            "mv": {torch.mv: self._mv, torch.Tensor.mv: self._mv},
            "sum": {torch.sum: self._sum, torch.Tensor.sum: self._sum},
            "mean": {torch.mean: self._mean, torch.Tensor.mean: self._mean},
            "amax": {torch.amax: self._amax, torch.Tensor.amax: self._amax},
            "amin": {torch.amin: self._amin, torch.Tensor.amin: self._amin},
        }
        self._handlers = {}
        for op in ops:
            self._handlers.update(handlers[op])

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        handler = self._handlers.get(func)
        if handler is not None:
            out = handler(args, kwargs)
            if out is not None:
                return out
        return func(*args, **kwargs)

    # ------------------------------------------------------------------ eligibility

    def _tensors_ok(self, op: str, tensors) -> bool:
        """All plain tensors on one routed device, the first of a dtype ``op`` computes in, and
        no gradient needed."""
        first = tensors[0]
        dev = first.device
        if dev.type not in self._devices:
            return False
        grad = torch.is_grad_enabled()
        for t in tensors:
            if not isinstance(t, torch.Tensor) or type(t) not in _PLAIN or t.device != dev:
                return False
            if not torch.compiler.is_compiling() and t.has_names():  # dynamo has no names
                return False
            if grad and t.requires_grad:
                return False
        return first.dtype in _checks.supported_dtypes(op, dev.type)

    def _result_dtype_ok(self, op: str, dtype, device) -> bool:
        if dtype is None:
            return True
        return isinstance(dtype, torch.dtype) and dtype in _checks.supported_dtypes(op,
                                                                                   device.type)

    # ------------------------------------------------------------------ handlers
    # Each returns gpukern's result, or None to let torch run the call.

    def _conv(self, nsp, fn, args, kwargs):
        a = _bind(_CONV_ARGS, args, kwargs)
        if a is None or "input" not in a or "weight" not in a:
            return None
        x, w, b = a["input"], a["weight"], a.get("bias")
        tensors = [x, w] if b is None else [x, w, b]
        if not self._tensors_ok(f"conv{nsp}d", tensors) or any(t.dtype != x.dtype
                                                                 for t in tensors):
            return None
        stride, padding = a.get("stride", 1), a.get("padding", 0)
        dilation, groups = a.get("dilation", 1), a.get("groups", 1)
        if not (_is_int_list(stride, nsp) and _is_int_list(dilation, nsp)
                and isinstance(groups, int) and not isinstance(groups, bool)):
            return None
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                return None
        elif not _is_int_list(padding, nsp):
            return None
        try:
            _checks.conv_check(f"conv{nsp}d", nsp, x, w, b, stride, padding, dilation, groups)
        except (RuntimeError, IndexError):
            return None  # torch runs it and raises its own error
        if x.numel() == 0:
            return None  # an empty input (zero batch or channels): torch's shapes and layout
        if self._convs_fast and conv_fast_path_reason(
                nsp, w.shape[1] * groups, w.shape[0], groups, tuple(w.shape[2:]), stride,
                dilation) is not None:
            return None  # no specialised kernel: torch runs it
        return fn(x, w, b, stride, padding, dilation, groups)

    def _conv1d(self, args, kwargs):
        return self._conv(1, gk.conv1d, args, kwargs)

    def _conv2d(self, args, kwargs):
        return self._conv(2, gk.conv2d, args, kwargs)

    def _mv(self, args, kwargs):
        a = _bind(_MV_ARGS, args, kwargs)
        if a is None or len(a) != 2:
            return None
        m, v = a["input"], a["vec"]
        if not self._tensors_ok("mv", [m, v]) or v.dtype != m.dtype:
            return None
        try:
            _checks.mv_check(m, v)
        except (RuntimeError, IndexError):
            return None  # e.g. a 0-d matrix: torch raises its IndexError
        return gk.mv(m, v)

    def _reduce(self, op, fn, names, args, kwargs, dtype_arg: bool):
        a = _bind(names, args, kwargs)
        if a is None or "input" not in a:
            return None
        x = a["input"]
        # amax/amin default to dim=() and reject None, as torch's do.
        dim, keepdim = a.get("dim", None if dtype_arg else ()), a.get("keepdim", False)
        if not isinstance(keepdim, bool) or not _is_dim(dim):
            return None
        if not self._tensors_ok(op, [x]):
            return None
        if not dtype_arg and dim is None:
            return None
        dtype = a.get("dtype") if dtype_arg else None
        if not self._result_dtype_ok(op, dtype, x.device):
            return None
        try:
            _checks.reduce_check(op, x, dim, keepdim, dtype)
        except (RuntimeError, IndexError):
            return None  # e.g. a dim out of range: torch raises its IndexError
        return fn(x, dim, keepdim, dtype=dtype) if dtype_arg else fn(x, dim, keepdim)

    def _sum(self, args, kwargs):
        return self._reduce("sum", gk.sum, _SUM_ARGS, args, kwargs, dtype_arg=True)

    def _mean(self, args, kwargs):
        return self._reduce("mean", gk.mean, _SUM_ARGS, args, kwargs, dtype_arg=True)

    def _amax(self, args, kwargs):
        return self._reduce("amax", gk.amax, _MAX_ARGS, args, kwargs, dtype_arg=False)

    def _amin(self, args, kwargs):
        return self._reduce("amin", gk.amin, _MAX_ARGS, args, kwargs, dtype_arg=False)


@contextlib.contextmanager
def enabled(ops: Optional[Iterable[str]] = None, convs: str = "all",
            cpu: bool = False) -> Iterator[GpukernMode]:
    """Route the torch calls of ``ops`` (default: all of :data:`OPS`) made inside the block to
    gpukern; calls gpukern cannot serve exactly run torch. ``convs="fast"`` routes only the
    convolutions gpukern has a specialised kernel for (see :mod:`torch_ops.fastpath`); the
    default ``"all"`` routes every convolution it can run.

    By default only CUDA calls are routed and CPU calls run torch (gpukern's CPU kernels are
    reference kernels, several times slower than torch's); ``cpu=True`` routes CPU calls to
    gpukern's CPU kernels too (for testing them). See the module docstring."""
    with GpukernMode(OPS if ops is None else ops, convs, cpu) as mode:
        yield mode
