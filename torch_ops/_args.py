"""The one argument normaliser of the Python side: int-or-sequence arguments (stride, padding,
dilation, kernel sizes, reduction dims) as the lists aten's schemas take, and the per-dim
expansion the shape rules need. Used by functional, algorithms, _meta/_checks, fastpath and info.
"""
from typing import Any, List, Sequence, Union

import torch

IntOrSeq = Union[int, Sequence[int]]

_SEQUENCES = (list, tuple, torch.Size)


def int_list(v: Any) -> list:
    """``v`` as aten's ``int[]`` argument: a list/tuple/torch.Size becomes a list, anything else
    (an int, a SymInt, a numpy integer) a one-element list. Element types are not checked here:
    the op's schema parser accepts and rejects them exactly as it does for aten's ops."""
    return list(v) if isinstance(v, _SEQUENCES) else [v]


def expand(v: Any, n: int) -> list:
    """``v`` with one entry per spatial dim: a single value (an int or a 1-element sequence)
    repeated ``n`` times, as aten and gpukern do; a sequence of another length is returned as it
    is (the caller's length check names the argument)."""
    values = int_list(v)
    return values * n if len(values) == 1 else values


def expand_tuple(v: Any, n: int) -> tuple:
    """:func:`expand` as a tuple (hashable, for caches and messages like ``stride (2, 2)``)."""
    return tuple(expand(v, n))

