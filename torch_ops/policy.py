"""Which layers :func:`torch_ops.swap` runs on gpukern: the policy that never makes a layer slower.

``swap(model, policy=...)``:

* ``"all"``: every converted layer runs gpukern on CUDA (tests, benchmarks, the pre-policy
  behaviour).
* ``"rules"`` (default): the rule table below decides per layer and per input signature, from the
  layer's kind (:func:`layer_kind`: dense 1x1, dense KxK, depthwise, grouped, stem), its stride,
  the input's dtype and memory layout, the output plane size, the channel counts and the filter's
  taps, whether the block runs gpukern's fused op, and the GPU's architecture. A case no rule covers runs torch: gpukern is chosen only
  where it was measured faster.
* ``"autotune"``: on the first call of each distinct input signature on CUDA, both paths run
  (their outputs are checked to agree first), are timed with CUDA events (a few warm-up and timed
  calls each), and the faster is kept for the process, like ``cudnn.benchmark``.

A decision is made at the first call with each distinct input signature (shape, strides, dtype,
device, whether a residual is given) and cached on the layer (``layer._gk_decisions``;
:meth:`torch_ops.SwapResult.table` lists them). Eager calls read the choice from a second cache,
``layer._gk_fast``, keyed by ``(x.shape, x.stride(), x.dtype, x.device, has_residual)`` (no
strings or tuple copies to build), which the layers' ``forward`` looks up inline: a layer whose
policy says torch then costs one dict lookup more than the stock layer
(benchmarks/policy_overhead.py measures it). CPU inputs do not use the policy: they run
gpukern's CPU kernels when the model was swapped with ``cpu=True`` and torch's otherwise.

torch.compile and CUDA graphs: nothing is timed while dynamo traces or while a CUDA graph is
being captured (timing synchronises). Inside a compiled function the decision comes from
:func:`compiled_choice`: :func:`_compiled_plan`, which dynamo calls once while tracing and
keeps as a constant (``torch._dynamo.assume_constant_result``, as :mod:`torch_ops.fastpath`
does), gives the choice or the candidate rules' bounds, which the traced code tests on the
input's sizes (a few guards per layer, each evaluated by every call of the compiled model):
the decision cached by an earlier eager call with the same signature for ``"autotune"``; for
``"rules"`` the conv-alone rules (``fused=False``) even for a fused block, since inductor fuses
torch's own BN, activation and residual add after the conv (the fused rules were measured
against torch's eager sequence). Under capture the same holds. So, for ``policy="autotune"``,
run the model eagerly once per input shape before compiling or capturing it
(``swap(..., example_inputs=...)`` does that); for ``"rules"`` nothing is needed.

The rule tables (``RULES``, and ``COMPILED_RULES`` for torch.compile) are generated:
``python3 benchmarks/derive_policy.py CENSUS.json ... --write`` rewrites the block between the
GENERATED markers from one or more census files of ``benchmarks/layers.py``
(``python3 benchmarks/derive_policy.py --help``). Each rule says where
it comes from (file, how many measured layers, their speedup range). A derived rule sends a cell
(arch, op, kind, stride, dtype, layout, fused) to gpukern only where every measured layer in it
was at least ``MARGIN`` times faster on gpukern; a cell with mixed results is split at one output
plane size where that separates them cleanly, otherwise it stays on torch.
"""
import dataclasses
import time
import weakref
from typing import Dict, List, Optional, Sequence, Tuple

import torch

__all__ = ["POLICIES", "Rule", "RULES", "Decision", "layer_kind", "layout_of", "lookup",
           "use_gpukern", "decisions"]

POLICIES = ("rules", "autotune", "all")

#: Minimum speedup of gpukern over torch's best, in every measured layer of a rule's range, for
#: the derivation to send that range to gpukern (noise margin of the census's medians).
MARGIN = 1.05


@dataclasses.dataclass(frozen=True)
class Rule:
    """One row of the table. ``"*"`` (or None for the bounds and ``fused``) matches anything.

    ``stride`` is ``"1"`` (every stride 1) or ``">1"``; ``layout`` is the input's
    (:func:`layout_of`); ``out_px`` bounds are on the output plane size per image and channel
    (H_out x W_out, or L_out), ``m_px`` bounds on the output pixels of the whole batch
    (N x out_px: the GEMM's M), ``in_ch`` / ``out_ch`` bounds on the layer's input and output
    channels, ``taps`` bounds on the filter's taps (K, or KH x KW), all inclusive; ``fused`` is True for a block running gpukern's fused
    op (conv + bias + residual + activation in one kernel), False for a plain convolution (and
    for a fused block on a build without the fused op, whose epilogue runs in torch)."""

    arch: str
    op: str
    kind: str
    stride: str
    dtype: str
    layout: str
    fused: Optional[bool]
    out_px_min: Optional[int]
    out_px_max: Optional[int]
    path: str
    source: str = ""
    in_ch_min: Optional[int] = None
    in_ch_max: Optional[int] = None
    out_ch_min: Optional[int] = None
    out_ch_max: Optional[int] = None
    m_px_min: Optional[int] = None
    m_px_max: Optional[int] = None
    taps_min: Optional[int] = None
    taps_max: Optional[int] = None

    def matches(self, key: Dict) -> bool:
        for field in ("arch", "op", "kind", "stride", "dtype", "layout"):
            want = getattr(self, field)
            if want != "*" and want != key[field]:
                return False
        if self.fused is not None and self.fused != key["fused"]:
            return False
        return self.within(key)

    def within(self, sizes: Dict) -> bool:
        """Whether sizes["out_px"], ["m_px"], ["in_ch"], ["out_ch"], ["taps"] fall inside the
        bounds (also called by the compiled path, with sizes dynamo may keep symbolic)."""
        for field in ("out_px", "m_px", "in_ch", "out_ch", "taps"):
            lo, hi = getattr(self, field + "_min"), getattr(self, field + "_max")
            if (lo is not None and sizes[field] < lo) or (hi is not None and sizes[field] > hi):
                return False
        return True


# The tables: the layer censuses benchmarks/results/h100_layers.json (NVIDIA H100 80GB HBM3;
# batch 16 images, 8 Conformer utterances, 4 waveforms), h100_b1_layers.json (batch 1) and
# h100_b16a_layers.json (Conformer and wav2vec2 at batch 16), benchmarks/layers.py over resnet50,
# mobilenet_v3_large, convnext_tiny, conformer and wav2vec2 (float32 with torch's default TF32
# flags and bfloat16; NCHW and channels_last), torch 2.11, cuDNN 9.19, derived by
#   python3 benchmarks/derive_policy.py benchmarks/results/h100_layers.json \
#       benchmarks/results/h100_b1_layers.json benchmarks/results/h100_b16a_layers.json --write
# (per cell a small decision tree; a leaf goes to gpukern only where every layer in it was at
# least MARGIN faster and, for a plain convolution other than depthwise, saved at least
# derive_policy.MIN_SAVED_US per call; see benchmarks/derive_policy.py, which also checks that
# no measured slower layer falls under a gpukern rule, as tests/test_policy_table.py does).
# RULES serve eager calls; COMPILED_RULES (plain convolutions only, every kind held to
# MIN_SAVED_US, batched censuses only, no 2-D stems and no bf16 2-D depthwise layers:
# derive_policy.COMPILED_TORCH_CELLS) serve calls traced by torch.compile
# (_compiled_rules_choice). Only the gpukern rules matter (anything unmatched runs torch); the
# torch rules document the measured cells. float16 was not measured: it runs torch under "rules".
# BEGIN GENERATED RULES
RULES: List[Rule] = [
    Rule('sm_90', 'conv1d', 'dense1x1', '1', 'bfloat16', 'contiguous', False, None, None, 'torch',
         'h100_b16a_layers.json+h100_b1_layers.json+h100_layers.json: 3 layer(s), gpukern/torch 0.83x-1.24x'),
    Rule('sm_90', 'conv1d', 'dense1x1', '1', 'bfloat16', 'strided', False, None, None, 'gpukern',
         'h100_b16a_layers.json+h100_b1_layers.json+h100_layers.json: 2 layer(s), m_px >= 8192, gpukern/torch 1.59x-1.75x', m_px_min=8192),
    Rule('sm_90', 'conv1d', 'dense1x1', '1', 'bfloat16', 'strided', False, None, None, 'torch',
         'h100_b16a_layers.json+h100_b1_layers.json+h100_layers.json: 1 layer(s) (mixed; the rest), gpukern/torch 1.12x-1.12x'),
    Rule('sm_90', 'conv1d', 'dense1x1', '1', 'float32', 'contiguous', False, None, None, 'torch',
         'h100_b16a_layers.json+h100_b1_layers.json+h100_layers.json: 3 layer(s), gpukern/torch 1.05x-1.15x'),
    Rule('sm_90', 'conv1d', 'dense1x1', '1', 'float32', 'strided', False, None, None, 'gpukern',
         'h100_b16a_layers.json+h100_b1_layers.json+h100_layers.json: 2 layer(s), m_px >= 8192, gpukern/torch 1.49x-1.76x', m_px_min=8192),
    Rule('sm_90', 'conv1d', 'dense1x1', '1', 'float32', 'strided', False, None, None, 'torch',
         'h100_b16a_layers.json+h100_b1_layers.json+h100_layers.json: 1 layer(s) (mixed; the rest), gpukern/torch 0.87x-0.87x'),
    Rule('sm_90', 'conv1d', 'denseKxK', '>1', 'bfloat16', 'contiguous', False, None, 1599, 'gpukern',
         'h100_b16a_layers.json+h100_b1_layers.json+h100_layers.json: 6 layer(s), out_px <= 1599, m_px 199..1599, gpukern/torch 1.46x-2.08x', m_px_min=199, m_px_max=1599),
    Rule('sm_90', 'conv1d', 'denseKxK', '>1', 'bfloat16', 'contiguous', False, 1599, None, 'gpukern',
         'h100_b16a_layers.json+h100_b1_layers.json+h100_layers.json: 3 layer(s), out_px >= 1599, taps >= 3, m_px 3199..6399, gpukern/torch 1.17x-1.47x', m_px_min=3199, m_px_max=6399, taps_min=3),
    Rule('sm_90', 'conv1d', 'denseKxK', '>1', 'bfloat16', 'contiguous', False, None, None, 'torch',
         'h100_b16a_layers.json+h100_b1_layers.json+h100_layers.json: 9 layer(s) (mixed; the rest), gpukern/torch 0.78x-1.12x'),
    Rule('sm_90', 'conv1d', 'denseKxK', '>1', 'float32', 'contiguous', False, None, 1599, 'gpukern',
         'h100_b16a_layers.json+h100_b1_layers.json+h100_layers.json: 6 layer(s), out_px <= 1599, m_px 199..1599, gpukern/torch 1.31x-1.97x', m_px_min=199, m_px_max=1599),
    Rule('sm_90', 'conv1d', 'denseKxK', '>1', 'float32', 'contiguous', False, 799, 3199, 'gpukern',
         'h100_b16a_layers.json+h100_b1_layers.json+h100_layers.json: 2 layer(s), out_px 799..3199, taps >= 3, m_px 3196..3199, gpukern/torch 1.14x-1.46x', m_px_min=3196, m_px_max=3199, taps_min=3),
    Rule('sm_90', 'conv1d', 'denseKxK', '>1', 'float32', 'contiguous', False, None, None, 'torch',
         'h100_b16a_layers.json+h100_b1_layers.json+h100_layers.json: 10 layer(s) (mixed; the rest), gpukern/torch 0.75x-1.07x'),
    Rule('sm_90', 'conv1d', 'depthwise', '1', 'bfloat16', 'contiguous', False, None, None, 'gpukern',
         'h100_b16a_layers.json+h100_b1_layers.json+h100_layers.json: 3 layer(s), m_px >= 1024, gpukern/torch 1.71x-6.10x', m_px_min=1024),
    Rule('sm_90', 'conv1d', 'depthwise', '1', 'bfloat16', 'contiguous', True, None, None, 'gpukern',
         'h100_b16a_layers.json+h100_b1_layers.json+h100_layers.json: 3 layer(s), gpukern/torch 1.44x-4.19x'),
    Rule('sm_90', 'conv1d', 'depthwise', '1', 'float32', 'contiguous', False, None, None, 'gpukern',
         'h100_b16a_layers.json+h100_b1_layers.json+h100_layers.json: 3 layer(s), m_px >= 1024, gpukern/torch 1.87x-5.09x', m_px_min=1024),
    Rule('sm_90', 'conv1d', 'depthwise', '1', 'float32', 'contiguous', True, None, None, 'gpukern',
         'h100_b16a_layers.json+h100_b1_layers.json+h100_layers.json: 3 layer(s), gpukern/torch 1.53x-3.44x'),
    Rule('sm_90', 'conv1d', 'grouped', '1', 'bfloat16', 'strided', False, None, None, 'gpukern',
         'h100_b16a_layers.json+h100_b1_layers.json+h100_layers.json: 3 layer(s), m_px >= 200, gpukern/torch 10.17x-45.35x', m_px_min=200),
    Rule('sm_90', 'conv1d', 'grouped', '1', 'float32', 'strided', False, None, None, 'gpukern',
         'h100_b16a_layers.json+h100_b1_layers.json+h100_layers.json: 2 layer(s), m_px 200..800, gpukern/torch 1.28x-1.82x', m_px_min=200, m_px_max=800),
    Rule('sm_90', 'conv1d', 'grouped', '1', 'float32', 'strided', False, None, None, 'torch',
         'h100_b16a_layers.json+h100_b1_layers.json+h100_layers.json: 1 layer(s) (mixed; the rest), gpukern/torch 0.47x-0.47x'),
    Rule('sm_90', 'conv1d', 'stem', '>1', 'bfloat16', 'contiguous', False, None, None, 'gpukern',
         'h100_b16a_layers.json+h100_b1_layers.json+h100_layers.json: 3 layer(s), m_px >= 12799, gpukern/torch 2.21x-3.09x', m_px_min=12799),
    Rule('sm_90', 'conv1d', 'stem', '>1', 'float32', 'contiguous', False, None, None, 'gpukern',
         'h100_b16a_layers.json+h100_b1_layers.json+h100_layers.json: 2 layer(s), m_px >= 51196, gpukern/torch 1.41x-1.72x', m_px_min=51196),
    Rule('sm_90', 'conv1d', 'stem', '>1', 'float32', 'contiguous', False, None, None, 'torch',
         'h100_b16a_layers.json+h100_b1_layers.json+h100_layers.json: 1 layer(s) (mixed; the rest), gpukern/torch 1.18x-1.18x'),
    Rule('sm_90', 'conv2d', 'dense1x1', '1', 'bfloat16', 'channels_last', False, None, None, 'torch',
         'h100_b1_layers.json+h100_layers.json: 66 layer(s), gpukern/torch 0.83x-2.26x'),
    Rule('sm_90', 'conv2d', 'dense1x1', '1', 'bfloat16', 'channels_last', True, None, None, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 66 layer(s), gpukern/torch 1.21x-3.37x'),
    Rule('sm_90', 'conv2d', 'dense1x1', '1', 'bfloat16', 'contiguous', False, 49, 49, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 1 layer(s), out_px 49..49, in_ch 160..160, out_ch 960..960, m_px 784..784, gpukern/torch 1.66x-1.66x', in_ch_min=160, in_ch_max=160, out_ch_min=960, out_ch_max=960, m_px_min=784, m_px_max=784),
    Rule('sm_90', 'conv2d', 'dense1x1', '1', 'bfloat16', 'contiguous', False, None, None, 'torch',
         'h100_b1_layers.json+h100_layers.json: 105 layer(s) (mixed; the rest), gpukern/torch 0.58x-3.21x'),
    Rule('sm_90', 'conv2d', 'dense1x1', '1', 'bfloat16', 'contiguous', True, None, 1, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 40 layer(s), out_px <= 1, in_ch 24..960, out_ch 24..960, m_px <= 16, gpukern/torch 1.45x-2.23x', in_ch_min=24, in_ch_max=960, out_ch_min=24, out_ch_max=960, m_px_max=16),
    Rule('sm_90', 'conv2d', 'dense1x1', '1', 'bfloat16', 'contiguous', True, 784, 3136, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 6 layer(s), out_px 784..3136, in_ch 64..256, out_ch 24..64, m_px 784..3136, gpukern/torch 1.20x-1.61x', in_ch_min=64, in_ch_max=256, out_ch_min=24, out_ch_max=64, m_px_min=784, m_px_max=3136),
    Rule('sm_90', 'conv2d', 'dense1x1', '1', 'bfloat16', 'contiguous', True, 784, None, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 18 layer(s), out_px >= 784, in_ch <= 512, out_ch <= 512, m_px >= 12544, gpukern/torch 1.36x-2.13x', in_ch_max=512, out_ch_max=512, m_px_min=12544),
    Rule('sm_90', 'conv2d', 'dense1x1', '1', 'bfloat16', 'contiguous', True, None, None, 'torch',
         'h100_b1_layers.json+h100_layers.json: 42 layer(s) (mixed; the rest), gpukern/torch 0.77x-2.80x'),
    Rule('sm_90', 'conv2d', 'dense1x1', '1', 'float32', 'channels_last', False, None, None, 'torch',
         'h100_b1_layers.json+h100_layers.json: 66 layer(s) (mixed; the rest), gpukern/torch 0.75x-1.42x'),
    Rule('sm_90', 'conv2d', 'dense1x1', '1', 'float32', 'channels_last', True, 3136, None, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 6 layer(s), out_px >= 3136, in_ch <= 24, out_ch <= 72, m_px >= 3136, gpukern/torch 1.19x-3.77x', in_ch_max=24, out_ch_max=72, m_px_min=3136),
    Rule('sm_90', 'conv2d', 'dense1x1', '1', 'float32', 'channels_last', True, 196, 196, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 4 layer(s), out_px 196..196, in_ch 80..80, out_ch 184..200, m_px 196..3136, gpukern/torch 1.21x-1.39x', in_ch_min=80, in_ch_max=80, out_ch_min=184, out_ch_max=200, m_px_min=196, m_px_max=3136),
    Rule('sm_90', 'conv2d', 'dense1x1', '1', 'float32', 'channels_last', True, 3136, 3136, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 2 layer(s), out_px 3136..3136, in_ch 64..64, out_ch 256..256, m_px 3136..50176, gpukern/torch 2.25x-3.45x', in_ch_min=64, in_ch_max=64, out_ch_min=256, out_ch_max=256, m_px_min=3136, m_px_max=50176),
    Rule('sm_90', 'conv2d', 'dense1x1', '1', 'float32', 'channels_last', True, None, 3136, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 40 layer(s), out_px <= 3136, in_ch >= 112, out_ch >= 40, m_px <= 50176, gpukern/torch 1.11x-2.40x', in_ch_min=112, out_ch_min=40, m_px_max=50176),
    Rule('sm_90', 'conv2d', 'dense1x1', '1', 'float32', 'channels_last', True, None, None, 'torch',
         'h100_b1_layers.json+h100_layers.json: 14 layer(s) (mixed; the rest), gpukern/torch 0.79x-2.58x'),
    Rule('sm_90', 'conv2d', 'dense1x1', '1', 'float32', 'contiguous', False, None, None, 'torch',
         'h100_b1_layers.json+h100_layers.json: 106 layer(s) (mixed; the rest), gpukern/torch 0.50x-2.03x'),
    Rule('sm_90', 'conv2d', 'dense1x1', '1', 'float32', 'contiguous', True, None, 1, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 40 layer(s), out_px <= 1, in_ch 24..960, out_ch 24..960, m_px <= 16, gpukern/torch 1.27x-2.62x', in_ch_min=24, in_ch_max=960, out_ch_min=24, out_ch_max=960, m_px_max=16),
    Rule('sm_90', 'conv2d', 'dense1x1', '1', 'float32', 'contiguous', True, 784, 3136, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 3 layer(s), out_px 784..3136, in_ch 24..40, out_ch 72..240, m_px 784..3136, gpukern/torch 1.36x-1.37x', in_ch_min=24, in_ch_max=40, out_ch_min=72, out_ch_max=240, m_px_min=784, m_px_max=3136),
    Rule('sm_90', 'conv2d', 'dense1x1', '1', 'float32', 'contiguous', True, 784, None, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 18 layer(s), out_px >= 784, in_ch <= 512, out_ch <= 512, m_px >= 12544, gpukern/torch 1.08x-1.93x', in_ch_max=512, out_ch_max=512, m_px_min=12544),
    Rule('sm_90', 'conv2d', 'dense1x1', '1', 'float32', 'contiguous', True, None, None, 'torch',
         'h100_b1_layers.json+h100_layers.json: 45 layer(s) (mixed; the rest), gpukern/torch 0.69x-1.72x'),
    Rule('sm_90', 'conv2d', 'dense1x1', '>1', 'bfloat16', 'channels_last', False, None, None, 'torch',
         'h100_b1_layers.json+h100_layers.json: 6 layer(s), gpukern/torch 0.73x-1.31x'),
    Rule('sm_90', 'conv2d', 'dense1x1', '>1', 'bfloat16', 'channels_last', True, None, None, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 6 layer(s), gpukern/torch 1.49x-2.19x'),
    Rule('sm_90', 'conv2d', 'dense1x1', '>1', 'bfloat16', 'contiguous', False, 784, None, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 1 layer(s), out_px >= 784, in_ch <= 256, out_ch <= 512, m_px >= 12544, gpukern/torch 1.97x-1.97x', in_ch_max=256, out_ch_max=512, m_px_min=12544),
    Rule('sm_90', 'conv2d', 'dense1x1', '>1', 'bfloat16', 'contiguous', False, None, None, 'torch',
         'h100_b1_layers.json+h100_layers.json: 5 layer(s) (mixed; the rest), gpukern/torch 0.87x-1.57x'),
    Rule('sm_90', 'conv2d', 'dense1x1', '>1', 'bfloat16', 'contiguous', True, None, 49, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 1 layer(s), out_px <= 49, in_ch >= 1024, out_ch >= 2048, m_px <= 49, gpukern/torch 1.19x-1.19x', in_ch_min=1024, out_ch_min=2048, m_px_max=49),
    Rule('sm_90', 'conv2d', 'dense1x1', '>1', 'bfloat16', 'contiguous', True, 196, None, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 4 layer(s), out_px >= 196, in_ch <= 512, out_ch <= 1024, m_px >= 196, gpukern/torch 1.27x-2.00x', in_ch_max=512, out_ch_max=1024, m_px_min=196),
    Rule('sm_90', 'conv2d', 'dense1x1', '>1', 'bfloat16', 'contiguous', True, None, None, 'torch',
         'h100_b1_layers.json+h100_layers.json: 1 layer(s) (mixed; the rest), gpukern/torch 0.84x-0.84x'),
    Rule('sm_90', 'conv2d', 'dense1x1', '>1', 'float32', 'channels_last', False, None, None, 'torch',
         'h100_b1_layers.json+h100_layers.json: 6 layer(s), gpukern/torch 0.80x-1.24x'),
    Rule('sm_90', 'conv2d', 'dense1x1', '>1', 'float32', 'channels_last', True, None, None, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 6 layer(s), gpukern/torch 1.54x-2.06x'),
    Rule('sm_90', 'conv2d', 'dense1x1', '>1', 'float32', 'contiguous', False, 196, 196, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 1 layer(s), out_px 196..196, in_ch 512..512, out_ch 1024..1024, m_px 3136..3136, gpukern/torch 1.42x-1.42x', in_ch_min=512, in_ch_max=512, out_ch_min=1024, out_ch_max=1024, m_px_min=3136, m_px_max=3136),
    Rule('sm_90', 'conv2d', 'dense1x1', '>1', 'float32', 'contiguous', False, 784, None, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 2 layer(s), out_px >= 784, in_ch <= 256, out_ch <= 512, m_px >= 784, gpukern/torch 1.66x-1.87x', in_ch_max=256, out_ch_max=512, m_px_min=784),
    Rule('sm_90', 'conv2d', 'dense1x1', '>1', 'float32', 'contiguous', False, None, None, 'torch',
         'h100_b1_layers.json+h100_layers.json: 3 layer(s) (mixed; the rest), gpukern/torch 0.89x-1.10x'),
    Rule('sm_90', 'conv2d', 'dense1x1', '>1', 'float32', 'contiguous', True, None, 49, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 1 layer(s), out_px <= 49, in_ch >= 1024, out_ch >= 2048, m_px <= 49, gpukern/torch 1.08x-1.08x', in_ch_min=1024, out_ch_min=2048, m_px_max=49),
    Rule('sm_90', 'conv2d', 'dense1x1', '>1', 'float32', 'contiguous', True, 196, None, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 4 layer(s), out_px >= 196, in_ch <= 512, out_ch <= 1024, m_px >= 196, gpukern/torch 1.38x-2.06x', in_ch_max=512, out_ch_max=1024, m_px_min=196),
    Rule('sm_90', 'conv2d', 'dense1x1', '>1', 'float32', 'contiguous', True, None, None, 'torch',
         'h100_b1_layers.json+h100_layers.json: 1 layer(s) (mixed; the rest), gpukern/torch 0.83x-0.83x'),
    Rule('sm_90', 'conv2d', 'denseKxK', '1', 'bfloat16', 'channels_last', False, None, None, 'torch',
         'h100_b1_layers.json+h100_layers.json: 8 layer(s), gpukern/torch 0.79x-1.32x'),
    Rule('sm_90', 'conv2d', 'denseKxK', '1', 'bfloat16', 'channels_last', True, None, None, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 8 layer(s), gpukern/torch 1.20x-2.10x'),
    Rule('sm_90', 'conv2d', 'denseKxK', '1', 'bfloat16', 'contiguous', False, None, None, 'torch',
         'h100_b1_layers.json+h100_layers.json: 8 layer(s), gpukern/torch 0.80x-1.00x'),
    Rule('sm_90', 'conv2d', 'denseKxK', '1', 'bfloat16', 'contiguous', True, None, None, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 8 layer(s), gpukern/torch 1.05x-1.25x'),
    Rule('sm_90', 'conv2d', 'denseKxK', '1', 'float32', 'channels_last', False, None, None, 'torch',
         'h100_b1_layers.json+h100_layers.json: 8 layer(s), gpukern/torch 0.60x-1.25x'),
    Rule('sm_90', 'conv2d', 'denseKxK', '1', 'float32', 'channels_last', True, 784, 784, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 1 layer(s), out_px 784..784, in_ch 128..128, out_ch 128..128, m_px 784..784, gpukern/torch 1.39x-1.39x', in_ch_min=128, in_ch_max=128, out_ch_min=128, out_ch_max=128, m_px_min=784, m_px_max=784),
    Rule('sm_90', 'conv2d', 'denseKxK', '1', 'float32', 'channels_last', True, 196, None, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 4 layer(s), out_px >= 196, in_ch <= 256, out_ch <= 256, m_px >= 3136, gpukern/torch 1.41x-1.84x', in_ch_max=256, out_ch_max=256, m_px_min=3136),
    Rule('sm_90', 'conv2d', 'denseKxK', '1', 'float32', 'channels_last', True, None, None, 'torch',
         'h100_b1_layers.json+h100_layers.json: 3 layer(s) (mixed; the rest), gpukern/torch 0.79x-0.99x'),
    Rule('sm_90', 'conv2d', 'denseKxK', '1', 'float32', 'contiguous', False, None, None, 'torch',
         'h100_b1_layers.json+h100_layers.json: 8 layer(s), gpukern/torch 0.78x-1.07x'),
    Rule('sm_90', 'conv2d', 'denseKxK', '1', 'float32', 'contiguous', True, 196, 784, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 2 layer(s), out_px 196..784, in_ch 128..256, out_ch 128..256, m_px 784..3136, gpukern/torch 1.09x-1.27x', in_ch_min=128, in_ch_max=256, out_ch_min=128, out_ch_max=256, m_px_min=784, m_px_max=3136),
    Rule('sm_90', 'conv2d', 'denseKxK', '1', 'float32', 'contiguous', True, 3136, None, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 2 layer(s), out_px >= 3136, in_ch <= 64, out_ch <= 64, m_px >= 3136, gpukern/torch 1.07x-1.08x', in_ch_max=64, out_ch_max=64, m_px_min=3136),
    Rule('sm_90', 'conv2d', 'denseKxK', '1', 'float32', 'contiguous', True, None, None, 'torch',
         'h100_b1_layers.json+h100_layers.json: 4 layer(s) (mixed; the rest), gpukern/torch 0.95x-1.04x'),
    Rule('sm_90', 'conv2d', 'denseKxK', '>1', 'bfloat16', 'channels_last', False, None, None, 'torch',
         'h100_b1_layers.json+h100_layers.json: 18 layer(s) (mixed; the rest), gpukern/torch 0.87x-1.93x'),
    Rule('sm_90', 'conv2d', 'denseKxK', '>1', 'bfloat16', 'channels_last', True, None, None, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 6 layer(s), gpukern/torch 1.20x-1.81x'),
    Rule('sm_90', 'conv2d', 'denseKxK', '>1', 'bfloat16', 'contiguous', False, None, None, 'torch',
         'h100_b1_layers.json+h100_layers.json: 6 layer(s), gpukern/torch 0.81x-1.00x'),
    Rule('sm_90', 'conv2d', 'denseKxK', '>1', 'bfloat16', 'contiguous', True, None, None, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 5 layer(s), m_px <= 3136, gpukern/torch 1.05x-1.16x', m_px_max=3136),
    Rule('sm_90', 'conv2d', 'denseKxK', '>1', 'bfloat16', 'contiguous', True, None, None, 'torch',
         'h100_b1_layers.json+h100_layers.json: 1 layer(s) (mixed; the rest), gpukern/torch 0.99x-0.99x'),
    Rule('sm_90', 'conv2d', 'denseKxK', '>1', 'float32', 'channels_last', False, None, 49, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 2 layer(s), out_px <= 49, in_ch 384..384, out_ch >= 768, taps <= 4, m_px 784..784, gpukern/torch 1.43x-2.02x', in_ch_min=384, in_ch_max=384, out_ch_min=768, m_px_min=784, m_px_max=784, taps_max=4),
    Rule('sm_90', 'conv2d', 'denseKxK', '>1', 'float32', 'channels_last', False, None, None, 'torch',
         'h100_b1_layers.json+h100_layers.json: 16 layer(s) (mixed; the rest), gpukern/torch 0.60x-1.53x'),
    Rule('sm_90', 'conv2d', 'denseKxK', '>1', 'float32', 'channels_last', True, 196, 196, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 1 layer(s), out_px 196..196, in_ch 256..256, out_ch 256..256, m_px 3136..3136, gpukern/torch 1.57x-1.57x', in_ch_min=256, in_ch_max=256, out_ch_min=256, out_ch_max=256, m_px_min=3136, m_px_max=3136),
    Rule('sm_90', 'conv2d', 'denseKxK', '>1', 'float32', 'channels_last', True, 784, None, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 2 layer(s), out_px >= 784, in_ch <= 128, out_ch <= 128, m_px >= 784, gpukern/torch 1.39x-1.52x', in_ch_max=128, out_ch_max=128, m_px_min=784),
    Rule('sm_90', 'conv2d', 'denseKxK', '>1', 'float32', 'channels_last', True, None, None, 'torch',
         'h100_b1_layers.json+h100_layers.json: 3 layer(s) (mixed; the rest), gpukern/torch 0.79x-1.00x'),
    Rule('sm_90', 'conv2d', 'denseKxK', '>1', 'float32', 'contiguous', False, None, None, 'torch',
         'h100_b1_layers.json+h100_layers.json: 6 layer(s), gpukern/torch 0.84x-0.97x'),
    Rule('sm_90', 'conv2d', 'denseKxK', '>1', 'float32', 'contiguous', True, 196, 196, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 1 layer(s), out_px 196..196, in_ch 256..256, out_ch 256..256, m_px 3136..3136, gpukern/torch 1.12x-1.12x', in_ch_min=256, in_ch_max=256, out_ch_min=256, out_ch_max=256, m_px_min=3136, m_px_max=3136),
    Rule('sm_90', 'conv2d', 'denseKxK', '>1', 'float32', 'contiguous', True, None, None, 'torch',
         'h100_b1_layers.json+h100_layers.json: 5 layer(s) (mixed; the rest), gpukern/torch 0.96x-1.04x'),
    Rule('sm_90', 'conv2d', 'depthwise', '1', 'bfloat16', 'channels_last', False, 196, 196, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 3 layer(s), out_px 196..196, in_ch 184..480, out_ch 184..480, taps <= 9, m_px 3136..3136, gpukern/torch 1.06x-1.43x', in_ch_min=184, in_ch_max=480, out_ch_min=184, out_ch_max=480, m_px_min=3136, m_px_max=3136, taps_max=9),
    Rule('sm_90', 'conv2d', 'depthwise', '1', 'bfloat16', 'channels_last', False, None, 3136, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 20 layer(s), out_px <= 3136, in_ch >= 96, out_ch >= 96, taps >= 25, m_px 49..50176, gpukern/torch 1.25x-2.96x', in_ch_min=96, out_ch_min=96, m_px_min=49, m_px_max=50176, taps_min=25),
    Rule('sm_90', 'conv2d', 'depthwise', '1', 'bfloat16', 'channels_last', False, None, None, 'torch',
         'h100_b1_layers.json+h100_layers.json: 9 layer(s) (mixed; the rest), gpukern/torch 0.76x-0.94x'),
    Rule('sm_90', 'conv2d', 'depthwise', '1', 'bfloat16', 'channels_last', True, None, None, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 16 layer(s), gpukern/torch 1.77x-2.38x'),
    Rule('sm_90', 'conv2d', 'depthwise', '1', 'bfloat16', 'contiguous', False, None, 196, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 10 layer(s), out_px <= 196, in_ch >= 184, out_ch >= 184, m_px 49..3136, gpukern/torch 1.09x-1.67x', in_ch_min=184, out_ch_min=184, m_px_min=49, m_px_max=3136),
    Rule('sm_90', 'conv2d', 'depthwise', '1', 'bfloat16', 'contiguous', False, 784, None, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 5 layer(s), out_px >= 784, in_ch <= 120, out_ch <= 120, m_px >= 3136, gpukern/torch 1.16x-5.75x', in_ch_max=120, out_ch_max=120, m_px_min=3136),
    Rule('sm_90', 'conv2d', 'depthwise', '1', 'bfloat16', 'contiguous', False, None, None, 'torch',
         'h100_b1_layers.json+h100_layers.json: 1 layer(s) (mixed; the rest), gpukern/torch 0.30x-0.30x'),
    Rule('sm_90', 'conv2d', 'depthwise', '1', 'bfloat16', 'contiguous', True, None, 196, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 10 layer(s), out_px <= 196, in_ch >= 184, out_ch >= 184, m_px <= 3136, gpukern/torch 1.45x-2.03x', in_ch_min=184, out_ch_min=184, m_px_max=3136),
    Rule('sm_90', 'conv2d', 'depthwise', '1', 'bfloat16', 'contiguous', True, 784, None, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 4 layer(s), out_px >= 784, in_ch <= 120, out_ch <= 120, m_px >= 12544, gpukern/torch 1.06x-3.41x', in_ch_max=120, out_ch_max=120, m_px_min=12544),
    Rule('sm_90', 'conv2d', 'depthwise', '1', 'bfloat16', 'contiguous', True, None, None, 'torch',
         'h100_b1_layers.json+h100_layers.json: 2 layer(s) (mixed; the rest), gpukern/torch 0.38x-0.97x'),
    Rule('sm_90', 'conv2d', 'depthwise', '1', 'float32', 'channels_last', False, None, 49, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 1 layer(s), out_px <= 49, in_ch >= 960, out_ch >= 960, taps 25..25, m_px 784..784, gpukern/torch 1.48x-1.48x', in_ch_min=960, out_ch_min=960, m_px_min=784, m_px_max=784, taps_min=25, taps_max=25),
    Rule('sm_90', 'conv2d', 'depthwise', '1', 'float32', 'channels_last', False, None, 3136, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 16 layer(s), out_px <= 3136, in_ch 96..768, out_ch 96..768, taps >= 49, m_px 49..50176, gpukern/torch 1.19x-2.22x', in_ch_min=96, in_ch_max=768, out_ch_min=96, out_ch_max=768, m_px_min=49, m_px_max=50176, taps_min=49),
    Rule('sm_90', 'conv2d', 'depthwise', '1', 'float32', 'channels_last', False, None, None, 'torch',
         'h100_b1_layers.json+h100_layers.json: 15 layer(s) (mixed; the rest), gpukern/torch 0.62x-1.11x'),
    Rule('sm_90', 'conv2d', 'depthwise', '1', 'float32', 'channels_last', True, None, None, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 16 layer(s), gpukern/torch 1.55x-2.39x'),
    Rule('sm_90', 'conv2d', 'depthwise', '1', 'float32', 'contiguous', False, None, 196, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 10 layer(s), out_px <= 196, in_ch >= 184, out_ch >= 184, m_px 49..3136, gpukern/torch 1.22x-1.70x', in_ch_min=184, out_ch_min=184, m_px_min=49, m_px_max=3136),
    Rule('sm_90', 'conv2d', 'depthwise', '1', 'float32', 'contiguous', False, 784, None, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 4 layer(s), out_px >= 784, in_ch <= 120, out_ch <= 120, m_px >= 12544, gpukern/torch 1.37x-3.10x', in_ch_max=120, out_ch_max=120, m_px_min=12544),
    Rule('sm_90', 'conv2d', 'depthwise', '1', 'float32', 'contiguous', False, None, None, 'torch',
         'h100_b1_layers.json+h100_layers.json: 2 layer(s) (mixed; the rest), gpukern/torch 0.41x-0.69x'),
    Rule('sm_90', 'conv2d', 'depthwise', '1', 'float32', 'contiguous', True, None, 196, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 10 layer(s), out_px <= 196, in_ch >= 184, out_ch >= 184, m_px <= 3136, gpukern/torch 1.45x-2.14x', in_ch_min=184, out_ch_min=184, m_px_max=3136),
    Rule('sm_90', 'conv2d', 'depthwise', '1', 'float32', 'contiguous', True, 784, 784, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 1 layer(s), out_px 784..784, in_ch 120..120, out_ch 120..120, taps >= 25, m_px 12544..12544, gpukern/torch 1.46x-1.46x', in_ch_min=120, in_ch_max=120, out_ch_min=120, out_ch_max=120, m_px_min=12544, m_px_max=12544, taps_min=25),
    Rule('sm_90', 'conv2d', 'depthwise', '1', 'float32', 'contiguous', True, 3136, None, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 2 layer(s), out_px >= 3136, in_ch <= 72, out_ch <= 72, taps <= 9, m_px >= 50176, gpukern/torch 2.17x-2.40x', in_ch_max=72, out_ch_max=72, m_px_min=50176, taps_max=9),
    Rule('sm_90', 'conv2d', 'depthwise', '1', 'float32', 'contiguous', True, None, None, 'torch',
         'h100_b1_layers.json+h100_layers.json: 3 layer(s) (mixed; the rest), gpukern/torch 0.58x-1.02x'),
    Rule('sm_90', 'conv2d', 'depthwise', '>1', 'bfloat16', 'channels_last', False, None, None, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 7 layer(s), m_px 49..12544, gpukern/torch 1.10x-1.39x', m_px_min=49, m_px_max=12544),
    Rule('sm_90', 'conv2d', 'depthwise', '>1', 'bfloat16', 'channels_last', False, None, None, 'torch',
         'h100_b1_layers.json+h100_layers.json: 1 layer(s) (mixed; the rest), gpukern/torch 0.79x-0.79x'),
    Rule('sm_90', 'conv2d', 'depthwise', '>1', 'bfloat16', 'channels_last', True, None, None, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 8 layer(s), gpukern/torch 1.72x-2.35x'),
    Rule('sm_90', 'conv2d', 'depthwise', '>1', 'bfloat16', 'contiguous', False, 784, None, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 4 layer(s), out_px >= 784, in_ch <= 72, out_ch <= 72, m_px >= 784, gpukern/torch 1.13x-1.65x', in_ch_max=72, out_ch_max=72, m_px_min=784),
    Rule('sm_90', 'conv2d', 'depthwise', '>1', 'bfloat16', 'contiguous', False, None, None, 'torch',
         'h100_b1_layers.json+h100_layers.json: 4 layer(s) (mixed; the rest), gpukern/torch 0.82x-1.04x'),
    Rule('sm_90', 'conv2d', 'depthwise', '>1', 'bfloat16', 'contiguous', True, None, 49, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 1 layer(s), out_px <= 49, in_ch >= 672, out_ch >= 672, taps >= 25, m_px <= 49, gpukern/torch 1.15x-1.15x', in_ch_min=672, out_ch_min=672, m_px_max=49, taps_min=25),
    Rule('sm_90', 'conv2d', 'depthwise', '>1', 'bfloat16', 'contiguous', True, 196, None, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 6 layer(s), out_px >= 196, in_ch <= 240, out_ch <= 240, m_px >= 196, gpukern/torch 1.26x-1.84x', in_ch_max=240, out_ch_max=240, m_px_min=196),
    Rule('sm_90', 'conv2d', 'depthwise', '>1', 'bfloat16', 'contiguous', True, None, None, 'torch',
         'h100_b1_layers.json+h100_layers.json: 1 layer(s) (mixed; the rest), gpukern/torch 0.92x-0.92x'),
    Rule('sm_90', 'conv2d', 'depthwise', '>1', 'float32', 'channels_last', False, None, 49, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 1 layer(s), out_px <= 49, in_ch >= 672, out_ch >= 672, taps >= 25, m_px 784..784, gpukern/torch 1.27x-1.27x', in_ch_min=672, out_ch_min=672, m_px_min=784, m_px_max=784, taps_min=25),
    Rule('sm_90', 'conv2d', 'depthwise', '>1', 'float32', 'channels_last', False, 784, 784, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 1 layer(s), out_px 784..784, in_ch 72..72, out_ch 72..72, taps >= 25, m_px 12544..12544, gpukern/torch 1.40x-1.40x', in_ch_min=72, in_ch_max=72, out_ch_min=72, out_ch_max=72, m_px_min=12544, m_px_max=12544, taps_min=25),
    Rule('sm_90', 'conv2d', 'depthwise', '>1', 'float32', 'channels_last', False, None, None, 'torch',
         'h100_b1_layers.json+h100_layers.json: 6 layer(s) (mixed; the rest), gpukern/torch 0.64x-0.86x'),
    Rule('sm_90', 'conv2d', 'depthwise', '>1', 'float32', 'channels_last', True, None, None, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 8 layer(s), gpukern/torch 1.43x-2.16x'),
    Rule('sm_90', 'conv2d', 'depthwise', '>1', 'float32', 'contiguous', False, None, 49, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 1 layer(s), out_px <= 49, in_ch >= 672, out_ch >= 672, taps >= 25, m_px 49..49, gpukern/torch 1.22x-1.22x', in_ch_min=672, out_ch_min=672, m_px_min=49, m_px_max=49, taps_min=25),
    Rule('sm_90', 'conv2d', 'depthwise', '>1', 'float32', 'contiguous', False, 196, None, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 6 layer(s), out_px >= 196, in_ch <= 240, out_ch <= 240, m_px >= 196, gpukern/torch 1.14x-1.69x', in_ch_max=240, out_ch_max=240, m_px_min=196),
    Rule('sm_90', 'conv2d', 'depthwise', '>1', 'float32', 'contiguous', False, None, None, 'torch',
         'h100_b1_layers.json+h100_layers.json: 1 layer(s) (mixed; the rest), gpukern/torch 0.96x-0.96x'),
    Rule('sm_90', 'conv2d', 'depthwise', '>1', 'float32', 'contiguous', True, None, None, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 8 layer(s), gpukern/torch 1.13x-1.97x'),
    Rule('sm_90', 'conv2d', 'stem', '>1', 'bfloat16', 'channels_last', False, None, None, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 3 layer(s), m_px >= 50176, gpukern/torch 1.25x-2.34x', m_px_min=50176),
    Rule('sm_90', 'conv2d', 'stem', '>1', 'bfloat16', 'channels_last', False, None, None, 'torch',
         'h100_b1_layers.json+h100_layers.json: 3 layer(s) (mixed; the rest), gpukern/torch 0.51x-1.07x'),
    Rule('sm_90', 'conv2d', 'stem', '>1', 'bfloat16', 'channels_last', True, None, None, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 1 layer(s), out_ch <= 16, taps <= 9, m_px >= 200704, gpukern/torch 1.66x-1.66x', out_ch_max=16, m_px_min=200704, taps_max=9),
    Rule('sm_90', 'conv2d', 'stem', '>1', 'bfloat16', 'channels_last', True, None, None, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 2 layer(s), out_ch >= 64, taps >= 49, gpukern/torch 1.39x-1.72x', out_ch_min=64, taps_min=49),
    Rule('sm_90', 'conv2d', 'stem', '>1', 'bfloat16', 'channels_last', True, None, None, 'torch',
         'h100_b1_layers.json+h100_layers.json: 1 layer(s) (mixed; the rest), gpukern/torch 0.88x-0.88x'),
    Rule('sm_90', 'conv2d', 'stem', '>1', 'bfloat16', 'contiguous', False, None, None, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 2 layer(s), out_ch >= 64, taps >= 16, m_px >= 50176, gpukern/torch 1.44x-1.54x', out_ch_min=64, m_px_min=50176, taps_min=16),
    Rule('sm_90', 'conv2d', 'stem', '>1', 'bfloat16', 'contiguous', False, None, None, 'torch',
         'h100_b1_layers.json+h100_layers.json: 4 layer(s) (mixed; the rest), gpukern/torch 0.44x-1.00x'),
    Rule('sm_90', 'conv2d', 'stem', '>1', 'bfloat16', 'contiguous', True, None, None, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 1 layer(s), out_ch <= 16, taps <= 9, m_px >= 200704, gpukern/torch 1.45x-1.45x', out_ch_max=16, m_px_min=200704, taps_max=9),
    Rule('sm_90', 'conv2d', 'stem', '>1', 'bfloat16', 'contiguous', True, None, None, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 2 layer(s), out_ch >= 64, taps >= 49, gpukern/torch 1.09x-1.85x', out_ch_min=64, taps_min=49),
    Rule('sm_90', 'conv2d', 'stem', '>1', 'bfloat16', 'contiguous', True, None, None, 'torch',
         'h100_b1_layers.json+h100_layers.json: 1 layer(s) (mixed; the rest), gpukern/torch 0.79x-0.79x'),
    Rule('sm_90', 'conv2d', 'stem', '>1', 'float32', 'channels_last', False, None, 3136, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 1 layer(s), out_px <= 3136, out_ch >= 96, taps 16..16, m_px 50176..50176, gpukern/torch 1.71x-1.71x', out_ch_min=96, m_px_min=50176, m_px_max=50176, taps_min=16, taps_max=16),
    Rule('sm_90', 'conv2d', 'stem', '>1', 'float32', 'channels_last', False, None, None, 'torch',
         'h100_b1_layers.json+h100_layers.json: 5 layer(s) (mixed; the rest), gpukern/torch 0.64x-1.10x'),
    Rule('sm_90', 'conv2d', 'stem', '>1', 'float32', 'channels_last', True, None, None, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 2 layer(s), out_ch <= 16, taps <= 9, gpukern/torch 1.17x-1.64x', out_ch_max=16, taps_max=9),
    Rule('sm_90', 'conv2d', 'stem', '>1', 'float32', 'channels_last', True, None, None, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 1 layer(s), out_ch >= 64, taps >= 49, m_px >= 200704, gpukern/torch 1.17x-1.17x', out_ch_min=64, m_px_min=200704, taps_min=49),
    Rule('sm_90', 'conv2d', 'stem', '>1', 'float32', 'channels_last', True, None, None, 'torch',
         'h100_b1_layers.json+h100_layers.json: 1 layer(s) (mixed; the rest), gpukern/torch 0.97x-0.97x'),
    Rule('sm_90', 'conv2d', 'stem', '>1', 'float32', 'contiguous', False, None, None, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 2 layer(s), taps <= 16, m_px >= 50176, gpukern/torch 1.24x-1.33x', m_px_min=50176, taps_max=16),
    Rule('sm_90', 'conv2d', 'stem', '>1', 'float32', 'contiguous', False, None, None, 'torch',
         'h100_b1_layers.json+h100_layers.json: 4 layer(s) (mixed; the rest), gpukern/torch 0.58x-0.87x'),
    Rule('sm_90', 'conv2d', 'stem', '>1', 'float32', 'contiguous', True, None, None, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 2 layer(s), out_ch <= 16, taps <= 9, gpukern/torch 1.06x-2.01x', out_ch_max=16, taps_max=9),
    Rule('sm_90', 'conv2d', 'stem', '>1', 'float32', 'contiguous', True, None, None, 'gpukern',
         'h100_b1_layers.json+h100_layers.json: 1 layer(s), out_ch >= 64, taps >= 49, m_px >= 200704, gpukern/torch 1.26x-1.26x', out_ch_min=64, m_px_min=200704, taps_min=49),
    Rule('sm_90', 'conv2d', 'stem', '>1', 'float32', 'contiguous', True, None, None, 'torch',
         'h100_b1_layers.json+h100_layers.json: 1 layer(s) (mixed; the rest), gpukern/torch 0.89x-0.89x'),
]
COMPILED_RULES: List[Rule] = [
    Rule('sm_90', 'conv1d', 'dense1x1', '1', 'bfloat16', 'contiguous', False, None, None, 'torch',
         'h100_b16a_layers.json+h100_layers.json: 2 layer(s), gpukern/torch 1.14x-1.24x'),
    Rule('sm_90', 'conv1d', 'dense1x1', '1', 'bfloat16', 'strided', False, None, None, 'gpukern',
         'h100_b16a_layers.json+h100_layers.json: 2 layer(s), m_px >= 8192, gpukern/torch 1.59x-1.75x', m_px_min=8192),
    Rule('sm_90', 'conv1d', 'dense1x1', '1', 'float32', 'contiguous', False, None, None, 'torch',
         'h100_b16a_layers.json+h100_layers.json: 2 layer(s), gpukern/torch 1.06x-1.15x'),
    Rule('sm_90', 'conv1d', 'dense1x1', '1', 'float32', 'strided', False, None, None, 'gpukern',
         'h100_b16a_layers.json+h100_layers.json: 2 layer(s), m_px >= 8192, gpukern/torch 1.49x-1.76x', m_px_min=8192),
    Rule('sm_90', 'conv1d', 'denseKxK', '>1', 'bfloat16', 'contiguous', False, None, 399, 'gpukern',
         'h100_b16a_layers.json+h100_layers.json: 2 layer(s), out_px <= 399, taps <= 2, m_px 796..1596, gpukern/torch 1.46x-1.47x', m_px_min=796, m_px_max=1596, taps_max=2),
    Rule('sm_90', 'conv1d', 'denseKxK', '>1', 'bfloat16', 'contiguous', False, None, None, 'torch',
         'h100_b16a_layers.json+h100_layers.json: 10 layer(s) (mixed; the rest), gpukern/torch 0.78x-1.17x'),
    Rule('sm_90', 'conv1d', 'denseKxK', '>1', 'float32', 'contiguous', False, None, 399, 'gpukern',
         'h100_b16a_layers.json+h100_layers.json: 2 layer(s), out_px <= 399, taps <= 2, m_px 796..1596, gpukern/torch 1.31x-1.36x', m_px_min=796, m_px_max=1596, taps_max=2),
    Rule('sm_90', 'conv1d', 'denseKxK', '>1', 'float32', 'contiguous', False, 799, 799, 'gpukern',
         'h100_b16a_layers.json+h100_layers.json: 1 layer(s), out_px 799..799, taps >= 3, m_px 3196..3196, gpukern/torch 1.14x-1.14x', m_px_min=3196, m_px_max=3196, taps_min=3),
    Rule('sm_90', 'conv1d', 'denseKxK', '>1', 'float32', 'contiguous', False, None, None, 'torch',
         'h100_b16a_layers.json+h100_layers.json: 9 layer(s) (mixed; the rest), gpukern/torch 0.75x-1.04x'),
    Rule('sm_90', 'conv1d', 'depthwise', '1', 'bfloat16', 'contiguous', False, None, None, 'gpukern',
         'h100_b16a_layers.json+h100_layers.json: 2 layer(s), m_px >= 8192, gpukern/torch 4.62x-6.10x', m_px_min=8192),
    Rule('sm_90', 'conv1d', 'depthwise', '1', 'float32', 'contiguous', False, None, None, 'gpukern',
         'h100_b16a_layers.json+h100_layers.json: 2 layer(s), m_px >= 8192, gpukern/torch 4.09x-5.09x', m_px_min=8192),
    Rule('sm_90', 'conv1d', 'grouped', '1', 'bfloat16', 'strided', False, None, None, 'gpukern',
         'h100_b16a_layers.json+h100_layers.json: 2 layer(s), m_px >= 800, gpukern/torch 10.17x-30.91x', m_px_min=800),
    Rule('sm_90', 'conv1d', 'grouped', '1', 'float32', 'strided', False, None, None, 'gpukern',
         'h100_b16a_layers.json+h100_layers.json: 1 layer(s), m_px 800..800, gpukern/torch 1.28x-1.28x', m_px_min=800, m_px_max=800),
    Rule('sm_90', 'conv1d', 'grouped', '1', 'float32', 'strided', False, None, None, 'torch',
         'h100_b16a_layers.json+h100_layers.json: 1 layer(s) (mixed; the rest), gpukern/torch 0.47x-0.47x'),
    Rule('sm_90', 'conv1d', 'stem', '>1', 'bfloat16', 'contiguous', False, None, None, 'gpukern',
         'h100_b16a_layers.json+h100_layers.json: 2 layer(s), m_px >= 51196, gpukern/torch 2.89x-3.09x', m_px_min=51196),
    Rule('sm_90', 'conv1d', 'stem', '>1', 'float32', 'contiguous', False, None, None, 'gpukern',
         'h100_b16a_layers.json+h100_layers.json: 2 layer(s), m_px >= 51196, gpukern/torch 1.41x-1.72x', m_px_min=51196),
    Rule('sm_90', 'conv2d', 'dense1x1', '1', 'bfloat16', 'channels_last', False, None, None, 'torch',
         'h100_layers.json: 33 layer(s), gpukern/torch 0.83x-2.26x'),
    Rule('sm_90', 'conv2d', 'dense1x1', '1', 'bfloat16', 'contiguous', False, 49, 49, 'gpukern',
         'h100_layers.json: 1 layer(s), out_px 49..49, in_ch 160..160, out_ch 960..960, m_px 784..784, gpukern/torch 1.66x-1.66x', in_ch_min=160, in_ch_max=160, out_ch_min=960, out_ch_max=960, m_px_min=784, m_px_max=784),
    Rule('sm_90', 'conv2d', 'dense1x1', '1', 'bfloat16', 'contiguous', False, 196, 196, 'gpukern',
         'h100_layers.json: 4 layer(s), out_px 196..196, in_ch 80..112, out_ch 184..672, m_px 3136..3136, gpukern/torch 2.25x-3.21x', in_ch_min=80, in_ch_max=112, out_ch_min=184, out_ch_max=672, m_px_min=3136, m_px_max=3136),
    Rule('sm_90', 'conv2d', 'dense1x1', '1', 'bfloat16', 'contiguous', False, None, None, 'torch',
         'h100_layers.json: 48 layer(s) (mixed; the rest), gpukern/torch 0.73x-2.37x'),
    Rule('sm_90', 'conv2d', 'dense1x1', '1', 'float32', 'channels_last', False, 12544, None, 'gpukern',
         'h100_layers.json: 1 layer(s), out_px >= 12544, in_ch <= 16, out_ch <= 16, m_px >= 200704, gpukern/torch 1.42x-1.42x', in_ch_max=16, out_ch_max=16, m_px_min=200704),
    Rule('sm_90', 'conv2d', 'dense1x1', '1', 'float32', 'channels_last', False, None, None, 'torch',
         'h100_layers.json: 32 layer(s) (mixed; the rest), gpukern/torch 0.77x-1.32x'),
    Rule('sm_90', 'conv2d', 'dense1x1', '1', 'float32', 'contiguous', False, None, None, 'torch',
         'h100_layers.json: 53 layer(s) (mixed; the rest), gpukern/torch 0.58x-2.03x'),
    Rule('sm_90', 'conv2d', 'dense1x1', '>1', 'bfloat16', 'channels_last', False, None, None, 'torch',
         'h100_layers.json: 3 layer(s), gpukern/torch 0.73x-0.99x'),
    Rule('sm_90', 'conv2d', 'dense1x1', '>1', 'bfloat16', 'contiguous', False, 784, None, 'gpukern',
         'h100_layers.json: 1 layer(s), out_px >= 784, in_ch <= 256, out_ch <= 512, m_px >= 12544, gpukern/torch 1.97x-1.97x', in_ch_max=256, out_ch_max=512, m_px_min=12544),
    Rule('sm_90', 'conv2d', 'dense1x1', '>1', 'bfloat16', 'contiguous', False, None, None, 'torch',
         'h100_layers.json: 2 layer(s) (mixed; the rest), gpukern/torch 0.87x-1.17x'),
    Rule('sm_90', 'conv2d', 'dense1x1', '>1', 'float32', 'channels_last', False, None, None, 'torch',
         'h100_layers.json: 3 layer(s), gpukern/torch 0.80x-1.10x'),
    Rule('sm_90', 'conv2d', 'dense1x1', '>1', 'float32', 'contiguous', False, 196, None, 'gpukern',
         'h100_layers.json: 2 layer(s), out_px >= 196, in_ch <= 512, out_ch <= 1024, m_px >= 3136, gpukern/torch 1.42x-1.66x', in_ch_max=512, out_ch_max=1024, m_px_min=3136),
    Rule('sm_90', 'conv2d', 'dense1x1', '>1', 'float32', 'contiguous', False, None, None, 'torch',
         'h100_layers.json: 1 layer(s) (mixed; the rest), gpukern/torch 0.89x-0.89x'),
    Rule('sm_90', 'conv2d', 'denseKxK', '1', 'bfloat16', 'channels_last', False, None, None, 'torch',
         'h100_layers.json: 4 layer(s), gpukern/torch 0.79x-1.09x'),
    Rule('sm_90', 'conv2d', 'denseKxK', '1', 'bfloat16', 'contiguous', False, None, None, 'torch',
         'h100_layers.json: 4 layer(s), gpukern/torch 0.80x-1.00x'),
    Rule('sm_90', 'conv2d', 'denseKxK', '1', 'float32', 'channels_last', False, None, None, 'torch',
         'h100_layers.json: 4 layer(s), gpukern/torch 0.81x-1.25x'),
    Rule('sm_90', 'conv2d', 'denseKxK', '1', 'float32', 'contiguous', False, None, None, 'torch',
         'h100_layers.json: 4 layer(s), gpukern/torch 0.81x-1.07x'),
    Rule('sm_90', 'conv2d', 'denseKxK', '>1', 'bfloat16', 'channels_last', False, None, None, 'torch',
         'h100_layers.json: 9 layer(s) (mixed; the rest), gpukern/torch 0.92x-1.80x'),
    Rule('sm_90', 'conv2d', 'denseKxK', '>1', 'bfloat16', 'contiguous', False, None, None, 'torch',
         'h100_layers.json: 3 layer(s), gpukern/torch 0.81x-1.00x'),
    Rule('sm_90', 'conv2d', 'denseKxK', '>1', 'float32', 'channels_last', False, None, 49, 'gpukern',
         'h100_layers.json: 2 layer(s), out_px <= 49, in_ch 384..384, out_ch >= 768, taps <= 4, m_px 784..784, gpukern/torch 1.43x-2.02x', in_ch_min=384, in_ch_max=384, out_ch_min=768, m_px_min=784, m_px_max=784, taps_max=4),
    Rule('sm_90', 'conv2d', 'denseKxK', '>1', 'float32', 'channels_last', False, None, None, 'torch',
         'h100_layers.json: 7 layer(s) (mixed; the rest), gpukern/torch 0.82x-1.37x'),
    Rule('sm_90', 'conv2d', 'denseKxK', '>1', 'float32', 'contiguous', False, None, None, 'torch',
         'h100_layers.json: 3 layer(s), gpukern/torch 0.85x-0.97x'),
    Rule('sm_90', 'conv2d', 'depthwise', '1', 'float32', 'channels_last', False, None, 3136, 'gpukern',
         'h100_layers.json: 8 layer(s), out_px <= 3136, in_ch 96..768, out_ch 96..768, taps >= 49, m_px 784..50176, gpukern/torch 1.76x-2.22x', in_ch_min=96, in_ch_max=768, out_ch_min=96, out_ch_max=768, m_px_min=784, m_px_max=50176, taps_min=49),
    Rule('sm_90', 'conv2d', 'depthwise', '1', 'float32', 'channels_last', False, None, None, 'torch',
         'h100_layers.json: 8 layer(s) (mixed; the rest), gpukern/torch 0.72x-1.48x'),
    Rule('sm_90', 'conv2d', 'depthwise', '1', 'float32', 'contiguous', False, 196, 196, 'gpukern',
         'h100_layers.json: 2 layer(s), out_px 196..196, in_ch 480..672, out_ch 480..672, taps <= 9, m_px 3136..3136, gpukern/torch 1.58x-1.63x', in_ch_min=480, in_ch_max=672, out_ch_min=480, out_ch_max=672, m_px_min=3136, m_px_max=3136, taps_max=9),
    Rule('sm_90', 'conv2d', 'depthwise', '1', 'float32', 'contiguous', False, 784, None, 'gpukern',
         'h100_layers.json: 3 layer(s), out_px >= 784, in_ch <= 120, out_ch <= 120, m_px >= 12544, gpukern/torch 1.68x-3.10x', in_ch_max=120, out_ch_max=120, m_px_min=12544),
    Rule('sm_90', 'conv2d', 'depthwise', '1', 'float32', 'contiguous', False, None, None, 'torch',
         'h100_layers.json: 3 layer(s) (mixed; the rest), gpukern/torch 1.27x-1.70x'),
    Rule('sm_90', 'conv2d', 'depthwise', '>1', 'float32', 'channels_last', False, None, None, 'torch',
         'h100_layers.json: 4 layer(s), gpukern/torch 0.85x-1.40x'),
    Rule('sm_90', 'conv2d', 'depthwise', '>1', 'float32', 'contiguous', False, 784, None, 'gpukern',
         'h100_layers.json: 2 layer(s), out_px >= 784, in_ch <= 72, out_ch <= 72, m_px >= 12544, gpukern/torch 1.26x-1.69x', in_ch_max=72, out_ch_max=72, m_px_min=12544),
    Rule('sm_90', 'conv2d', 'depthwise', '>1', 'float32', 'contiguous', False, None, None, 'torch',
         'h100_layers.json: 2 layer(s) (mixed; the rest), gpukern/torch 0.96x-1.14x'),
]
# END GENERATED RULES


# ---------------------------------------------------------------------------------------------
# Layer and input classification (shared with benchmarks/derive_policy.py)

def layer_kind(in_channels: int, out_channels: int, groups: int,
               kernel_size: Sequence[int]) -> str:
    """``"depthwise"`` (groups == in_channels, one filter per input channel, single-channel
    signals and images included), ``"stem"`` (dense with at most 4 input channels: RGB stems,
    raw waveforms), ``"dense1x1"``, ``"denseKxK"`` or ``"grouped"``."""
    if groups == in_channels and (groups > 1 or out_channels == 1):
        return "depthwise"
    if groups == 1:
        if in_channels <= 4:
            return "stem"
        return "dense1x1" if all(int(k) == 1 for k in kernel_size) else "denseKxK"
    return "grouped"


def layout_of(shape: Sequence[int], stride: Sequence[int]) -> str:
    """``"contiguous"``, ``"channels_last"`` (4-D) or ``"strided"`` (as benchmarks/layers.py:
    a tensor that is both, e.g. H = W = 1, reads as contiguous)."""
    def dense(order):
        expected = 1
        for d in order:
            if shape[d] != 1 and stride[d] != expected:
                return False
            expected *= shape[d]
        return True
    n = len(shape)
    if dense(range(n - 1, -1, -1)):
        return "contiguous"
    if n == 4 and dense((1, 3, 2, 0)):
        return "channels_last"
    return "strided"


def out_plane(in_sizes: Sequence[int], kernel: Sequence[int], stride: Sequence[int],
              padding, dilation: Sequence[int]) -> int:
    """Output elements per image and channel (H_out x W_out or L_out)."""
    n = 1
    for i, size in enumerate(in_sizes):
        if isinstance(padding, str):
            if padding == "same":
                n *= size
                continue
            pad = 0
        else:
            pad = padding[i]
        n *= max(0, (size + 2 * pad - dilation[i] * (kernel[i] - 1) - 1) // stride[i] + 1)
    return n


def rule_key(arch: str, op: str, in_channels: int, out_channels: int, groups: int,
             kernel: Sequence[int], stride: Sequence[int], padding, dilation: Sequence[int],
             shape: Sequence[int], strides: Sequence[int], dtype: str, fused: bool) -> Dict:
    nsp = 1 if op == "conv1d" else 2
    out_px = out_plane(list(shape[-nsp:]), kernel, stride, padding, dilation)
    batch = int(shape[0]) if len(shape) == nsp + 2 else 1
    return dict(arch=arch, op=op, kind=layer_kind(in_channels, out_channels, groups, kernel),
                stride="1" if all(int(s) == 1 for s in stride) else ">1", dtype=dtype,
                layout=layout_of(shape, strides), fused=bool(fused),
                in_ch=int(in_channels), out_ch=int(out_channels), out_px=out_px,
                m_px=batch * out_px, taps=filter_taps(kernel))


def filter_taps(kernel: Sequence[int]) -> int:
    """Taps of the filter (K or KH x KW): the rules tell a 7x7 depthwise layer from a 3x3 one."""
    n = 1
    for k in kernel:
        n *= int(k)
    return n


def lookup(key: Dict, rules: Optional[Sequence[Rule]] = None) -> Tuple[str, str]:
    """(path, reason) for a rule key: the first matching rule; for a fused block a rule for
    fused blocks first, then one for the plain convolution; torch where nothing matches."""
    rules = RULES if rules is None else rules
    tries = [key] + ([dict(key, fused=False)] if key["fused"] else [])
    for k in tries:
        for rule in rules:
            if rule.matches(k):
                return rule.path, f"rule: {rule.source or 'hand-written'}"
    return "torch", (f"no measured rule for {key['arch']} {key['op']} {key['kind']} stride "
                     f"{key['stride']} {key['dtype']} {key['layout']}: torch")


# ---------------------------------------------------------------------------------------------
# Per-layer decisions

@dataclasses.dataclass
class Decision:
    """One cached decision: ``path`` "gpukern" or "torch", why, the CUDA algorithm gpukern runs
    for it (where known) and, for autotune, the times measured (ms per call)."""

    path: str
    reason: str
    algorithm: Optional[str] = None
    times: Optional[Dict[str, float]] = None


_LAYERS: "weakref.WeakValueDictionary[int, torch.nn.Module]" = weakref.WeakValueDictionary()
_NEXT_UID = [0]
# Device types whose inputs follow the policy (tests add "cpu" to exercise it without a GPU).
_RULED_DEVICE_TYPES = ("cuda",)
# Autotune: warm-up and timed calls per path.
AUTOTUNE_WARMUP, AUTOTUNE_REPS = 3, 10
# Norm-relative difference allowed between the two paths before autotune trusts the timing
# (float32 allows cuDNN's TF32 against gpukern's true fp32).
AGREE_TOL = {torch.float32: 5e-3, torch.float16: 5e-3, torch.bfloat16: 3e-2,
             torch.float64: 1e-9}


def register(layer: torch.nn.Module, policy: str, cpu: bool) -> None:
    """Give a layer its policy, CPU choice, a process-unique id and an empty decision cache."""
    if policy not in POLICIES:
        raise ValueError(f"policy={policy!r}: expected one of {', '.join(POLICIES)}")
    layer.gpukern_policy = policy
    layer.gpukern_cpu = bool(cpu)
    _NEXT_UID[0] += 1
    # A string, not an int: dynamo may treat an int attribute whose value differs between
    # compiles of the same code as a dynamic (symbolic) int, which _compiled_choice, a constant
    # lookup, cannot take (seen in the suite after other models were compiled); strings stay
    # constants.
    layer._gk_uid = f"gk{_NEXT_UID[0]}"
    layer._gk_decisions = {}
    layer._gk_fast = {}
    _LAYERS[layer._gk_uid] = layer


def unregister(layer: torch.nn.Module) -> None:
    for attr in ("gpukern_policy", "gpukern_cpu", "_gk_uid", "_gk_decisions", "_gk_fast",
                 "_gk_last_choice"):
        layer.__dict__.pop(attr, None)


def decisions(layer: torch.nn.Module) -> Dict[tuple, Decision]:
    """The layer's cached decisions, keyed by input signature
    ``(shape, strides, dtype, device, has_residual)``."""
    return layer.__dict__.get("_gk_decisions", {})


def _arch(device_type: str, index: Optional[int]) -> str:
    if device_type != "cuda":
        return device_type
    major, minor = torch.cuda.get_device_capability(index)
    return f"sm_{major}{minor}"


def _layer_key(layer, shape, strides, dtype, device_type, index) -> Dict:
    return rule_key(_arch(device_type, index), layer._gk_op, layer.in_channels,
                    layer.out_channels, layer.groups, layer.kernel_size, layer.stride,
                    layer.padding, layer.dilation, shape, strides,
                    str(dtype).replace("torch.", ""), layer._gk_runs_fused_op())


def _rules_decision(layer, shape, strides, dtype, device_type, index) -> Decision:
    key = _layer_key(layer, shape, strides, dtype, device_type, index)
    path, reason = lookup(key)
    return Decision(path, reason)


def _algorithm(layer, shape, strides, dtype) -> Optional[str]:
    """The CUDA algorithm gpukern runs for the call, from meta tensors (None without CUDA
    kernels or where the query fails)."""
    from . import has_cuda_kernels
    from .algorithms import algorithm
    if not has_cuda_kernels():
        return None
    try:
        x = torch.empty_strided(tuple(shape), tuple(strides), dtype=dtype, device="meta")
        w = torch.empty(layer.weight.shape, dtype=dtype, device="meta")
        return algorithm(layer._gk_op, x, w, None, layer.stride, layer.padding, layer.dilation,
                         layer.groups)
    except Exception:  # noqa: BLE001  (a name for the table only)
        return None


# Called by dynamo while tracing and kept as a constant: a pure lookup (no timing, no sync).
@torch._dynamo.assume_constant_result
def _compiled_cached(uid: str) -> Optional[bool]:
    """For "autotune": the layer's choice cached by its last eager decision (None if none yet)."""
    layer = _LAYERS.get(uid)
    if layer is None or layer.gpukern_policy != "autotune":
        return None
    return layer.__dict__.get("_gk_last_choice")


@torch._dynamo.assume_constant_result
def _compiled_candidates(device_type: str, index: Optional[int], op: str, kind: str, stride: str,
                         dtype: str) -> tuple:
    """Indices into COMPILED_RULES of the rules a plain convolution of this cell can match, in
    table order: every field but the shape-dependent ones (layout, bounds) already checked."""
    key = dict(arch=_arch(device_type, index), op=op, kind=kind, stride=stride, dtype=dtype)
    return tuple(i for i, rule in enumerate(COMPILED_RULES)
                 if rule.fused in (None, False)
                 and all(getattr(rule, f) in ("*", key[f]) for f in key))


_BOUND_FIELDS = ("out_px", "m_px", "in_ch", "out_ch", "taps")


@torch._dynamo.assume_constant_result
def _compiled_plan(uid: str, policy: str, cpu: bool, dtype: str, device_type: str,
                   index: Optional[int]):
    """What a traced call of the layer registered as ``uid`` needs, computed in plain Python
    while dynamo traces and kept as a constant: True / False where the choice does not depend on
    the input's sizes and layout; else (the candidate COMPILED_RULES as (layout, bounds, gpukern?)
    tuples, the layer's geometry: spatial dims, kernel, stride, padding, dilation, channels in and
    out); None where no layer is registered under ``uid`` (the caller then traces
    _compiled_use). One call instead of the rule lookup traced op by op, whose attribute reads
    and module-global lookups each became a guard that every call of the compiled model
    evaluates: a swapped ConvNeXt-T spent about 130 us a forward in guards on a 2-core host,
    against the stock model's 50 (the layers' geometry stays guarded where torch reads it)."""
    layer = _LAYERS.get(uid)
    if layer is None:
        return None
    if device_type == "cpu" and device_type not in _RULED_DEVICE_TYPES:
        return bool(cpu)
    if device_type not in ("cpu", "cuda"):
        return True
    if policy == "all":
        return True
    if policy == "autotune":
        cached = layer.__dict__.get("_gk_last_choice")
        if cached is not None:
            return cached
    kind = layer_kind(layer.in_channels, layer.out_channels, layer.groups, layer.kernel_size)
    stride = "1" if all(int(v) == 1 for v in layer.stride) else ">1"
    cands = _compiled_candidates(device_type, index, layer._gk_op, kind, stride, dtype)
    if not cands:
        return False
    rules = tuple((COMPILED_RULES[i].layout,
                   tuple((getattr(COMPILED_RULES[i], f + "_min"),
                          getattr(COMPILED_RULES[i], f + "_max")) for f in _BOUND_FIELDS),
                   COMPILED_RULES[i].path == "gpukern") for i in cands)
    padding = layer.padding if isinstance(layer.padding, str) else tuple(layer.padding)
    geometry = (int(getattr(layer, "_nsp", len(layer.kernel_size))), tuple(layer.kernel_size),
                tuple(layer.stride), padding, tuple(layer.dilation), int(layer.in_channels),
                int(layer.out_channels))
    return rules, geometry


def _traced_layout(x: torch.Tensor) -> str:
    """x's layout as the compiled rules name it, read in traced code (a layout dynamo cannot
    prove, e.g. under symbolic strides, reads as "strided")."""
    if x.is_contiguous():
        return "contiguous"
    if x.dim() == 4 and x.is_contiguous(memory_format=torch.channels_last):
        return "channels_last"
    return "strided"


def compiled_choice(layer: torch.nn.Module, x: torch.Tensor,
                    residual: Optional[torch.Tensor] = None) -> bool:
    """The choice while dynamo traces (a swapped layer's forward calls it under compile): the
    constant plan (_compiled_plan), then, where it leaves the choice to the input, its layout
    and size bounds tested on x in traced code (sizes dynamo keeps symbolic are guarded on
    exactly those comparisons, as in _compiled_rules_choice)."""
    policy = layer.gpukern_policy
    if policy == "all":  # also every layer built directly (no uid): no rule to look up
        return _compiled_use(layer, x, residual)
    device = x.device
    cpu = layer.gpukern_cpu if device.type == "cpu" else False
    plan = _compiled_plan(layer._gk_uid, policy, cpu, str(x.dtype).replace("torch.", ""),
                          device.type, device.index)
    if plan is None:
        return _compiled_use(layer, x, residual)
    if plan is True or plan is False:
        return plan
    rules, (nsp, kernel, stride, padding, dilation, in_ch, out_ch) = plan
    layout = _traced_layout(x)
    out_px = out_plane(list(x.shape[x.dim() - nsp:]), kernel, stride, padding, dilation)
    sizes = (out_px, out_px * (x.shape[0] if x.dim() == nsp + 2 else 1), in_ch, out_ch,
             filter_taps(kernel))
    for rule_layout, bounds, gpukern in rules:
        if rule_layout != "*" and rule_layout != layout:
            continue
        for v, (lo, hi) in zip(sizes, bounds):
            if (lo is not None and v < lo) or (hi is not None and v > hi):
                break
        else:  # every bound holds
            return gpukern
    return False


def _compiled_rules_choice(layer, x: torch.Tensor) -> bool:
    """The rules' choice while dynamo traces. The cell's candidate rules come from a constant
    lookup; their layout and size bounds are then tested on x here, in traced code, so that
    dynamo guards on exactly the comparisons made: sizes it keeps symbolic (automatic dynamic
    shapes, after a recompile with another batch size) are fine, and a layout it cannot prove
    (symbolic strides) reads as "strided". The table is COMPILED_RULES: the conv-alone rules with
    every plain convolution held to derive_policy's MIN_SAVED_US, depthwise layers included (the
    eager table exempts them, their host cost being at or below cuDNN's; compiled, on an H100,
    MobileNetV3-Large float32 batch 16 ran 0.85x of compiled stock with six small depthwise
    layers (1.3-1.5x faster alone, under 5 us saved each) on gpukern, and 1.10x without them).
    Also for a fused block: the fused
    rules compare gpukern's fused op with torch's eager sequence (a kernel per op); compiled,
    inductor fuses torch's BN, activation and residual add into one pass after the conv, so only
    the conv's own speed carries over (measured on an H100: ResNet-50 float32, batch 16,
    compiled, 0.82x of compiled stock with the fused rules)."""
    nsp = layer._nsp if hasattr(layer, "_nsp") else x.dim() - 2
    kind = layer_kind(layer.in_channels, layer.out_channels, layer.groups, layer.kernel_size)
    stride = "1" if all(int(v) == 1 for v in layer.stride) else ">1"
    cands = _compiled_candidates(x.device.type, x.device.index, layer._gk_op, kind, stride,
                                 str(x.dtype).replace("torch.", ""))
    if not cands:
        return False
    layout = _traced_layout(x)
    out_px = out_plane(list(x.shape[x.dim() - nsp:]), layer.kernel_size, layer.stride,
                       layer.padding, layer.dilation)
    sizes = {"out_px": out_px, "m_px": out_px * (x.shape[0] if x.dim() == nsp + 2 else 1),
             "in_ch": layer.in_channels, "out_ch": layer.out_channels,
             "taps": filter_taps(layer.kernel_size)}
    for i in cands:
        rule = COMPILED_RULES[i]
        if rule.layout in ("*", layout) and rule.within(sizes):
            return rule.path == "gpukern"
    return False


def _norm_rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.detach().double(), b.detach().double()
    if a.shape != b.shape:
        return float("inf")
    d = b.norm().item()
    return (a - b).norm().item() / (d if d > 0 else 1.0)


def _time_ms(fn, device: torch.device) -> float:
    for _ in range(AUTOTUNE_WARMUP):
        fn()
    if device.type == "cuda":
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(AUTOTUNE_REPS):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / AUTOTUNE_REPS
    t0 = time.perf_counter()
    for _ in range(AUTOTUNE_REPS):
        fn()
    return (time.perf_counter() - t0) * 1e3 / AUTOTUNE_REPS


def _autotune(layer, x, residual) -> Decision:
    """Run both paths, check they agree, time them; the faster wins (torch on any doubt)."""
    def gk():
        return layer._run_gpukern(x, residual)

    def th():
        return layer._run_torch(x, residual)
    with torch.no_grad():
        try:
            ref = th()
            out = gk()
        except Exception as e:  # noqa: BLE001  (gpukern cannot run it: torch, with the reason)
            return Decision("torch", f"autotune: gpukern failed ({type(e).__name__}: "
                                     f"{str(e).splitlines()[0][:120]})")
        err = _norm_rel(out, ref)
        tol = AGREE_TOL.get(x.dtype, 1e-2)
        if not err <= tol:
            return Decision("torch", f"autotune: outputs differ (norm-relative {err:.1e} > "
                                     f"{tol:.0e}): torch")
        del out, ref
        t_gk = _time_ms(gk, x.device)
        t_th = _time_ms(th, x.device)
    path = "gpukern" if t_gk < t_th else "torch"
    return Decision(path, f"autotune: gpukern {t_gk * 1e3:.1f} us, torch {t_th * 1e3:.1f} us",
                    times={"gpukern": t_gk, "torch": t_th})


def _capturing(x: torch.Tensor) -> bool:
    return x.device.type == "cuda" and torch.cuda.is_current_stream_capturing()


def _eager_choice(layer, x: torch.Tensor, residual: Optional[torch.Tensor]) -> bool:
    shape, strides = tuple(x.shape), tuple(x.stride())
    sig = (shape, strides, x.dtype, f"{x.device.type}:{x.device.index}", residual is not None)
    cache = layer._gk_decisions
    hit = cache.get(sig)
    if hit is not None:
        layer._gk_last_choice = hit.path == "gpukern"
        return hit.path == "gpukern"
    if layer.gpukern_policy == "autotune" and not _capturing(x):
        decision = _autotune(layer, x, residual)
    else:
        decision = _rules_decision(layer, shape, strides, x.dtype, x.device.type,
                                   x.device.index)
        if layer.gpukern_policy == "autotune":  # capturing: decided by the rules, not cached
            return decision.path == "gpukern"
    if decision.path == "gpukern":
        decision.algorithm = _algorithm(layer, shape, strides, x.dtype)
    cache[sig] = decision
    layer._gk_last_choice = decision.path == "gpukern"  # what a compiled graph of it uses
    return decision.path == "gpukern"


def _note_cpu(layer, x: torch.Tensor, residual: Optional[torch.Tensor]) -> None:
    """Record a CPU call's path for the table (CPU inputs follow swap's cpu= flag)."""
    sig = (tuple(x.shape), tuple(x.stride()), x.dtype, "cpu:None", residual is not None)
    cache = layer._gk_decisions
    if sig not in cache:
        cache[sig] = (Decision("gpukern", "CPU input, swap(cpu=True): gpukern's CPU kernel",
                               algorithm="cpu") if layer.gpukern_cpu else
                      Decision("torch", "CPU input: torch (swap(cpu=True) runs gpukern's CPU "
                                        "kernels)"))


def fast_key(x: torch.Tensor, has_residual: bool) -> tuple:
    """The eager cache key of a call: cheap to build (no string, no tuple copies of the sizes;
    ``torch.Size`` hashes as the tuple it is)."""
    return (x.shape, x.stride(), x.dtype, x.device, has_residual)


def use_gpukern(layer: torch.nn.Module, x: torch.Tensor,
                residual: Optional[torch.Tensor] = None) -> bool:
    """Whether this call of a swapped layer runs gpukern (True) or torch (False).

    Eager calls answer from ``layer._gk_fast``, a dict from :func:`fast_key` to the choice,
    filled by the first call with each signature (:func:`_decide`); the layers' ``forward``
    inlines that lookup, this function is the general entry."""
    if torch.compiler.is_compiling():
        return compiled_choice(layer, x, residual)
    fast = layer.__dict__.get("_gk_fast")
    if fast is not None:
        hit = fast.get(fast_key(x, residual is not None))
        if hit is not None:
            return hit
    return _decide(layer, x, residual)


def _decide(layer: torch.nn.Module, x: torch.Tensor,
            residual: Optional[torch.Tensor] = None) -> bool:
    """The eager choice for a signature not in ``layer._gk_fast`` yet: made (rules, autotune,
    CPU flag), recorded for the table and cached in ``_gk_fast`` where it is final."""
    dev = x.device.type
    if dev == "cpu" and dev not in _RULED_DEVICE_TYPES:
        if "_gk_decisions" in layer.__dict__:
            _note_cpu(layer, x, residual)
        choice = bool(layer.gpukern_cpu)
    elif dev not in ("cpu", "cuda"):
        return True  # meta and the like: the op's fake kernel either way (not cached)
    elif layer.gpukern_policy == "all":
        choice = True
    else:
        if _LAYERS.get(layer.__dict__.get("_gk_uid")) is not layer:
            # a deep copy (its own id and cache), or a layer never registered
            register(layer, layer.gpukern_policy, layer.gpukern_cpu)
        choice = _eager_choice(layer, x, residual)
        if layer.gpukern_policy == "autotune" and _capturing(x):
            return choice  # decided by the rules during capture, not cached
    fast = layer.__dict__.get("_gk_fast")
    if fast is None:
        fast = layer.__dict__["_gk_fast"] = {}
    fast[fast_key(x, residual is not None)] = choice
    return choice


def _compiled_use(layer: torch.nn.Module, x: torch.Tensor,
                  residual: Optional[torch.Tensor]) -> bool:
    """The choice while dynamo traces: constants only, no cache writes."""
    dev = x.device.type
    if dev == "cpu" and dev not in _RULED_DEVICE_TYPES:
        return bool(layer.gpukern_cpu)
    if dev not in ("cpu", "cuda"):
        return True
    if layer.gpukern_policy == "all":
        return True
    cached = _compiled_cached(layer._gk_uid)
    if cached is not None:
        return cached
    return _compiled_rules_choice(layer, x)


