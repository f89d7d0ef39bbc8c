"""gpukern: CUDA kernels for tiled 1-D/2-D convolution, matrix-vector product and reductions,
registered as PyTorch custom ops (``torch.ops.gpukern.*``), forward only.

Importing this package loads the compiled extension (which registers the ops) and their fake
kernels (for torch.compile), and re-exports the typed wrappers of :mod:`torch_ops.functional`.
"""
import torch  # noqa: F401  (the extension links against torch's libraries)

from . import _C  # noqa: F401  registers torch.ops.gpukern.*
from . import _meta  # noqa: F401  register_fake for every op
from .functional import (amax, amin, conv1d, conv1d_fused, conv2d, conv2d_fused,  # noqa: A004
                         convolve, mean, mv, sum)
from .algorithms import algorithm, force_algorithm
from . import nn  # noqa: E402  drop-in modules torch_ops.nn.Conv1d / Conv2d
from .swap import SwapResult, swap, unswap  # noqa: E402
from .fastpath import fast_path_reason, has_fast_path  # noqa: E402
from .override import enabled  # noqa: E402

__all__ = ["conv1d", "conv2d", "conv1d_fused", "conv2d_fused", "convolve", "mv", "sum", "mean",
           "amax", "amin", "has_cuda_kernels", "algorithm", "force_algorithm", "nn", "swap", "unswap",
           "SwapResult", "enabled", "has_fast_path", "fast_path_reason"]


def has_cuda_kernels() -> bool:
    """True when the extension was built with its CUDA kernels."""
    return bool(_C.WITH_CUDA)
