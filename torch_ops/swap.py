"""``torch_ops.swap(model)``: run a model's convolution layers on gpukern, in place.

Each ``torch.nn.Conv1d`` / ``torch.nn.Conv2d`` that gpukern can run is converted by reassigning
its ``__class__`` to ``torch_ops.nn.Conv1d`` / ``Conv2d`` (subclasses that add no state and only
replace the convolution call). The layer stays the same object, so everything that refers to it
stays valid: its Parameters (the same objects, so an optimizer or a tied weight still points at
them), buffers, forward hooks and pre-hooks (and the handles that remove them), its training flag,
a layer reachable under two names, and any outside reference to the layer. Nothing is allocated
or copied. :meth:`SwapResult.restore` (or :func:`unswap`) turns the layers back.

Layers gpukern cannot run are left alone and listed with a one-line reason: subclasses of the
torch classes (they may override ``forward``, e.g. weight-normalised or quantisation-aware layers,
lazy layers), complex or non-floating weights, float64 on CUDA, devices other than cpu/cuda, CUDA
tensors in a build without CUDA kernels. The check looks at the weight as it is now: swap after
moving the model to its final device and dtype.

CPU: by default a converted layer runs torch's own convolution on CPU inputs (gpukern's CPU
kernels are reference kernels, several times slower than torch's: a drop-in must not make a
model slower); ``swap(model, cpu=True)`` makes CPU inputs run gpukern's CPU kernels too. CUDA
inputs always run gpukern. The choice is made per call from the input's device, so a model swapped
on CPU and moved to CUDA afterwards runs gpukern there.

gpukern's fast kernels are the depthwise / single-channel ones; dense and grouped convolutions run
a general kernel that is slower than cuDNN for now. ``swap(model, filter=torch_ops.has_fast_path)``
converts only the layers with a specialised kernel (see :mod:`torch_ops.fastpath`), listing the
others as skipped with the reason.
"""
import dataclasses
from typing import Callable, List, Optional, Tuple

import torch

from . import _checks
from .fastpath import fast_path_reason, has_fast_path
from .nn import GPUKERN_CLASS

__all__ = ["swap", "unswap", "SwapResult", "skip_reason"]



@dataclasses.dataclass
class SwapResult:
    """What :func:`swap` did.

    ``replaced``: ``(qualified_name, layer)`` for every converted layer, in ``named_modules``
    order; ``layer`` is the layer object itself (converted in place; its torch class is kept in
    ``original_class``). ``skipped``: ``(qualified_name, reason)`` for every torch convolution
    left alone. ``len(result)`` is the number of layers replaced.
    """

    replaced: List[Tuple[str, torch.nn.Module]] = dataclasses.field(default_factory=list)
    skipped: List[Tuple[str, str]] = dataclasses.field(default_factory=list)
    original_class: dict = dataclasses.field(default_factory=dict, repr=False)

    def __len__(self) -> int:
        return len(self.replaced)

    def restore(self) -> None:
        """Turn the replaced layers back into their torch classes (same objects again)."""
        for _, layer in self.replaced:
            cls = self.original_class.get(id(layer))
            if cls is not None:
                layer.__class__ = cls
                layer.__dict__.pop("gpukern_cpu", None)

    def summary(self) -> str:
        lines = [f"gpukern.swap: replaced {len(self.replaced)} layer(s), "
                 f"skipped {len(self.skipped)}"]
        lines += [f"  skipped {name or '<root>'}: {reason}" for name, reason in self.skipped]
        return "\n".join(lines)


def skip_reason(module: torch.nn.Module) -> Optional[str]:
    """None if :func:`swap` can convert ``module``, else a one-line reason why not."""
    cls = type(module)
    if cls in GPUKERN_CLASS.values():
        return "already a gpukern layer"
    if cls not in GPUKERN_CLASS:
        for base in GPUKERN_CLASS:
            if isinstance(module, base):
                return (f"{cls.__module__}.{cls.__qualname__} subclasses "
                        f"torch.nn.{base.__name__} and may override its forward")
        return f"{cls.__qualname__} is not a torch.nn.Conv1d or Conv2d"
    weight = module.weight
    if isinstance(weight, torch.nn.parameter.UninitializedParameter):
        return "weight is not initialised (lazy layer)"
    tensors = [weight] + ([module.bias] if module.bias is not None else [])
    dev = weight.device
    if dev.type not in ("cpu", "cuda"):
        return f"device {dev} is not supported (gpukern runs on cpu and cuda)"
    if any(t.device != dev or t.dtype != weight.dtype for t in tensors):
        return "weight and bias differ in device or dtype"
    if type(weight) not in (torch.nn.Parameter, torch.Tensor):
        return f"weight is a tensor subclass ({type(weight).__qualname__})"
    if weight.dtype.is_complex:
        return f"complex dtype {weight.dtype} is not supported"
    if weight.dtype == torch.float64:
        if dev.type != "cpu":
            return "float64 runs on CPU only in gpukern"
    elif weight.dtype not in _checks.FLOAT_DTYPES:
        return f"dtype {weight.dtype} is not supported (float32, float16, bfloat16, float64 on CPU)"
    if dev.type == "cuda":
        from . import has_cuda_kernels
        if not has_cuda_kernels():
            return "gpukern was built without CUDA kernels"
    return None


def swap(model: torch.nn.Module,
         filter: Optional[Callable[[str, torch.nn.Module], bool]] = None,  # noqa: A002
         cpu: bool = False) -> SwapResult:
    """Convert, in place and recursively, the ``torch.nn.Conv1d`` / ``Conv2d`` layers of
    ``model`` (``model`` itself included) that gpukern can run into ``torch_ops.nn`` layers.

    CUDA inputs then run gpukern; CPU inputs run torch's convolution unless ``cpu=True``, which
    routes them to gpukern's CPU kernels (reference kernels, slower than torch's).

    ``filter(qualified_name, layer) -> bool`` limits the conversion to the layers it accepts
    (the others are listed as skipped, "excluded by filter"). ``filter=torch_ops.has_fast_path``
    keeps only the layers gpukern has a specialised kernel for (depthwise with multiplier 1 or
    single-channel, stride 1); the others are skipped with the rule's reason. Returns a
    :class:`SwapResult`.
    """
    result = SwapResult()
    seen = set()
    for name, module in model.named_modules(remove_duplicate=False):
        if not isinstance(module, tuple(GPUKERN_CLASS)) or id(module) in seen:
            continue
        seen.add(id(module))
        if type(module) in GPUKERN_CLASS.values():
            continue
        reason = skip_reason(module)
        if reason is None and filter is not None and not filter(name, module):
            reason = "excluded by filter"
            if filter is has_fast_path:
                reason = f"excluded by has_fast_path: {fast_path_reason(module)}"
        if reason is not None:
            result.skipped.append((name, reason))
            continue
        result.original_class[id(module)] = type(module)
        module.__class__ = GPUKERN_CLASS[type(module)]
        module.gpukern_cpu = bool(cpu)
        result.replaced.append((name, module))
    return result


def unswap(model: torch.nn.Module) -> int:
    """Turn every ``torch_ops.nn`` layer of ``model`` back into its torch class; returns how
    many."""
    back = {v: k for k, v in GPUKERN_CLASS.items()}
    n = 0
    for module in model.modules():
        cls = back.get(type(module))
        if cls is not None:
            module.__class__ = cls
            module.__dict__.pop("gpukern_cpu", None)
            n += 1
    return n
