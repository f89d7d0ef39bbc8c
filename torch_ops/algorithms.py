"""Which CUDA algorithm an op runs, and forcing one for tests and benchmarks.

Each op family picks its CUDA algorithm from the shape alone; :func:`algorithm` asks that choice
for a call's arguments (meta tensors are enough, no GPU needed) and :func:`force_algorithm`
overrides it inside a ``with`` block, process-wide. A forced algorithm that cannot run a shape
makes the call raise instead of silently falling back.
"""
import contextlib
from typing import Iterator, Optional

import torch

from ._args import int_list

_ops = torch.ops.gpukern

FAMILIES = ("conv1d", "conv2d", "mv", "reduce")
_REDUCE_OPS = ("sum", "mean", "amax", "amin")
OPS = ("conv1d", "conv2d", "convolve", "mv") + _REDUCE_OPS + ("conv1d_fused", "conv2d_fused")


def has_convolve_query() -> bool:
    """Whether this build has the op ``gpukern::_algorithm_convolve`` (the convolve query)."""
    return hasattr(_ops, "_algorithm_convolve")


def algorithm(op: str, *args, **kwargs) -> str:
    """The CUDA algorithm ``torch_ops.<op>(*args, **kwargs)`` would run, by name.

    ``op`` is one of conv1d, conv2d, conv1d_fused, conv2d_fused (their convolution's
    algorithm), convolve, mv, sum, mean, amax, amin; the arguments are
    those of the op (tensors may be on any device, including ``meta``), in every form the op's
    Python function takes (ints, tuples, lists, 'same'/'valid'). convolve runs conv1d's kernels,
    so ``force_algorithm("conv1d", ...)`` applies to it; its query needs a build with the op
    ``gpukern::_algorithm_convolve`` (NotImplementedError otherwise). Honours
    :func:`force_algorithm`.
    """
    if op in ("conv1d", "conv2d", "conv1d_fused", "conv2d_fused"):
        # The fused ops run their convolution's algorithm (then, where it has no native epilogue,
        # one elementwise pass): activation and residual do not change the choice.
        names = ("input", "weight", "bias", "stride", "padding", "dilation", "groups",
                 "activation", "residual")
        a = dict(zip(names, args))
        a.update(kwargs)
        op = op.removesuffix("_fused")
        stride, padding = int_list(a.get("stride", 1)), a.get("padding", 0)
        dilation, groups = int_list(a.get("dilation", 1)), a.get("groups", 1)
        q = getattr(_ops, "_algorithm_" + op)
        if isinstance(padding, str):
            return q.padding(a["input"], a["weight"], stride, padding, dilation, groups)
        return q.default(a["input"], a["weight"], stride, int_list(padding), dilation, groups)
    if op == "convolve":
        if not has_convolve_query():
            raise NotImplementedError("torch_ops.algorithm: this build of gpukern has no "
                                      "convolve query (gpukern::_algorithm_convolve)")
        a = dict(zip(("x", "h", "mode"), args))
        a.update(kwargs)
        return _ops._algorithm_convolve(a["x"], a["h"], a.get("mode", "full"))
    if op == "mv":
        return _ops._algorithm_mv(*args, **kwargs)
    if op in _REDUCE_OPS:
        x = args[0]
        dim = args[1] if len(args) > 1 else kwargs.get("dim")
        return _ops._algorithm_reduce(x, None if dim is None else int_list(dim), op)
    raise ValueError(f"torch_ops.algorithm: unknown op {op!r}; expected one of "
                     f"{', '.join(OPS)}")


def forced_algorithm(family: str) -> Optional[str]:
    """The algorithm forced for a family, or None when the choice is automatic."""
    name = _ops._forced_algorithm(family)
    return name or None


@contextlib.contextmanager
def force_algorithm(family: str, name: str) -> Iterator[None]:
    """Run a family's CUDA calls with the named algorithm inside the block (restored after).

    ``family`` is conv1d, conv2d, mv or reduce. Calls whose shape the algorithm cannot run raise
    RuntimeError; an unknown name raises at the first call, naming the valid ones.
    """
    previous = _ops._forced_algorithm(family)
    _ops._set_algorithm(family, name)
    try:
        yield
    finally:
        _ops._set_algorithm(family, previous)
