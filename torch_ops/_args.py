"""The one argument normaliser of the Python side: int-or-sequence arguments (stride, padding,
dilation, kernel sizes, reduction dims) as the lists aten's schemas take, and the per-dim
expansion the shape rules need. Used by functional, algorithms, _checks (and so _meta and the
override), fastpath and info.
"""
import operator
from typing import Any, Sequence, Union

import torch

IntOrSeq = Union[int, Sequence[int]]

_SEQUENCES = (list, tuple, torch.Size)


def _as_int(v: Any, what: str):
    """One int element as torch.nn.functional's argument parser takes it: an int or SymInt (kept
    as it is; not a bool), a 0-d integer tensor or any object with __index__ (numpy integers)."""
    if isinstance(v, (int, torch.SymInt)) and not isinstance(v, bool):
        return v
    if isinstance(v, torch.Tensor) and v.dim() == 0 and not (v.is_floating_point() or
                                                             v.is_complex()):
        return int(v)
    if not isinstance(v, (bool, float, str, torch.Tensor)) and hasattr(v, "__index__"):
        return operator.index(v)
    raise TypeError(f"{what} must be an int or a tuple/list of ints, got "
                    f"{type(v).__name__} {v!r}")


def int_arg(v: Any, what: str):
    """One int argument (groups) as torch.nn.functional's parser takes it (see _as_int); a float
    or a bool raises TypeError, as F.conv1d does."""
    return _as_int(v, what)


def bool_arg(v: Any, what: str) -> bool:
    """A bool argument (keepdim) as torch's parser takes it: a Python bool only; anything else
    (1, None, numpy.bool_) raises TypeError, as torch.sum does."""
    if not isinstance(v, bool):
        raise TypeError(f"{what} must be bool, not {type(v).__name__}")
    return v


def int_list(v: Any, what: str = "argument") -> list:
    """``v`` as aten's ``int[]`` argument, accepting what torch.nn.functional accepts: an int
    (not a bool, not even in a list), a list/tuple/torch.Size of ints, a numpy integer or a 0-d
    integer tensor. Other types raise TypeError, as F.conv1d's argument parser does. Lengths are
    not checked here (the op's checks name the argument)."""
    if isinstance(v, _SEQUENCES):
        return [_as_int(e, what) for e in v]
    return [_as_int(v, what)]


def expand(v: Any, n: int) -> list:
    """``v`` with one entry per spatial dim: a single value (an int or a 1-element sequence)
    repeated ``n`` times, as aten and gpukern do; a sequence of another length is returned as it
    is (the caller's length check names the argument)."""
    values = int_list(v)
    return values * n if len(values) == 1 else values


def expand_tuple(v: Any, n: int) -> tuple:
    """:func:`expand` as a tuple (hashable, for caches and messages like ``stride (2, 2)``)."""
    return tuple(expand(v, n))
