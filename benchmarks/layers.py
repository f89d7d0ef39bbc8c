"""The layer census: every distinct conv layer of real models, torch's best against gpukern.

    python3 benchmarks/layers.py               # every model, fp32 + bf16, NCHW + channels_last
    python3 benchmarks/layers.py --models resnet50 --dtypes bfloat16 --formats channels_last
    python3 benchmarks/layers.py --quick       # 10 replays, 5 layers per model
    python3 benchmarks/layers.py --device cpu  # the CPU smoke mode (below)
    python3 benchmarks/layers.py --models conformer wav2vec2 --append  # add to an earlier run

What it measures. The models, with random weights (no downloads), in eval mode: ResNet-50,
MobileNetV3-Large and ConvNeXt-T from torchvision (batch 16, 3x224x224), torchaudio's Conformer
(144-dim, 4 heads, FFN 576, 16 blocks, depthwise kernel 31; batch 8 x 1024 frames) and wav2vec2
base (the whole model: its convolutional feature extractor and the grouped positional conv; batch 4
x 64,000 samples). Each model is put in NCHW (as the libraries build it) and in channels_last (2-D
models only: torch has no channels_last for 3-D tensors) and run once with a forward pre-hook on
every nn.Conv1d / nn.Conv2d, a real forward on --device (meta tensors would be cheaper, but the
meta kernels do not reproduce the strides the real ones give; Conformer's length mask needs
values anyway). Each call's input shape, strides (the layout the
model really feeds: ConvNeXt's blocks hand channels_last tensors to their depthwise convs even in
an NCHW model), dtype and the layer's settings (out channels, kernel, stride, padding, dilation,
groups, bias, padding_mode) are recorded, and the calls deduplicated into distinct layers with a
count per model. What follows each conv (BatchNorm, activation, residual add) is read from a
torch.fx trace where the model traces (the torchvision ones), from the next modules of an
nn.Sequential otherwise (Conformer's conv module), and left empty where neither finds it.

For each distinct layer, each dtype (float32 with torch's TF32 flags as they are, by default
cuDNN may use TF32 for float32 convolutions; --no-tf32 makes both sides true fp32; bfloat16) and
each model format, on the layer's exact input layout:
- correctness first: gpukern's output (torch_ops.conv1d / conv2d) against F.conv in float64 on
  the same rounded inputs, norm-relative error at most TOL (per dtype); torch's own error is kept
  beside it. A layer gpukern gets wrong is not timed for gpukern (status WRONG);
- conv alone: torch's best (F.conv with cudnn.benchmark off and on, the faster; labels cudnn /
  cudnn.bm) and gpukern, with the layer's own bias;
- fused block, for layers followed by BatchNorm, an activation or a residual add: torch's
  unfused sequence (BatchNorm folded into the conv's bias, the fewest kernels eager torch runs:
  F.conv with bias, then the residual add_, then the in-place activation) against gpukern's fused
  op `act(conv(x, w) + bias [+ residual])` where this build has one (torch_ops.conv2d_fused or
  torch.ops.gpukern.conv2d_fused, likewise conv1d; checked at start, "n/a" otherwise), verified
  against the float64 sequence first.
The algorithm gpukern runs for the call is torch_ops.algorithm on the same arguments after the
first call (which races the rules' choice against cuDNN, csrc/conv/vendor.h: "cudnn" where cuDNN
won; the JSON keeps the rules' choice as rules_algorithm). The fused op's own race is not in it.

How it times (docs/performance.md, "Method"; benchmarks/timing.py): on a GPU every candidate the
same way in the same run: a single call's time is one call of a CUDA graph of 20 back-to-back
calls (fewer for calls over 1 ms, so a replay stays near 20 ms; the count is kept), the replay
timed with CUDA events and divided by the calls, the L2 flushed by reading a 256 MiB buffer
before each replay; median of 30 replays (10 with --quick; fewer, at least 5, where 30 would
exceed the layer's --timeout, recorded as reps). Within a replay a layer's inputs stay in L2 from
one call to the next, as a model's next layer finds its input just written. A call that cannot be
captured is timed with flushed single calls between events (time_cuda). --timeout bounds the
time spent per layer, dtype and format: checked between measurements (a running call cannot be
interrupted), the rest of that layer is skipped with status "timeout".

Reported per layer: model, layer name(s), count, shape, dtype, format, layout, algorithm, torch us
(and which setting), gpukern us, speedup, errors; per model, dtype and format: totals (sum of
count x time) for torch and gpukern and their ratio, conv alone and fused. Files:
<out>/<name>_layers.json (every number, the census included), .md (the tables) and .png (speedup
per layer against torch's time, per-model totals; skipped with a message without matplotlib),
<name> the GPU's short name as benchmarks/run.py names it (h100, h200; cpu). The JSON and
markdown are rewritten after every model, so a run cut short keeps the models it finished.

Without a GPU (or with --device cpu) it says so and runs a CPU smoke mode: batch 1, small inputs
(64x64 images, 48 frames, 4,000 samples), the same census and correctness checks, and wall-clock
times of torch's CPU conv against gpukern's CPU kernels (median of 5; 3 with --quick). Those times
say nothing about the GPU; the mode exists so the tool can be tested anywhere.
"""
import argparse
import collections
import copy
import json
import operator
import os
import platform
import subprocess
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch_ops  # noqa: E402
from timing import time_cpu, time_cuda, time_cuda_graph  # noqa: E402

MODELS = ("resnet50", "mobilenet_v3_large", "convnext_tiny", "conformer", "wav2vec2")
FORMATS = ("nchw", "channels_last")
DTYPES = ("float32", "bfloat16", "float16")

# Norm-relative error against the float64 reference (docs/performance.md); float32 under TF32
# (10-bit mantissa inputs) gets the TF32 bound.
TOL = {"float32": 1e-5, "float32_tf32": 2e-3, "float16": 1e-3, "bfloat16": 8e-3}

GRAPH_CALLS = 20        # calls captured per CUDA graph
GRAPH_REPLAY_MS = 20.0  # fewer calls per graph for layers slower than GRAPH_REPLAY_MS / 20
REPS, QUICK_REPS, MIN_REPS = 30, 10, 5
CPU_REPS, CPU_QUICK_REPS = 5, 3
QUICK_MAX_LAYERS = 5

# The fused op's activations (one run-time enum in the epilogue).
FUSED_ACTS = ("relu", "relu6", "silu", "gelu", "gelu_tanh", "hardswish", "sigmoid",
              "hardsigmoid")


# ---------------------------------------------------------------------------------------------
# The models

def build(name, gpu, batch=None):
    """(model in eval mode, example inputs, what the input is). Random weights, no downloads.
    ``batch`` replaces the GPU batch (16 images, 8 Conformer utterances, 4 waveforms)."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    if name == "conformer":
        from torchaudio.models import Conformer
        model = Conformer(input_dim=144, num_heads=4, ffn_dim=576, num_layers=16,
                          depthwise_conv_kernel_size=31)
        b, t = (batch or 8, 1024) if gpu else (1, 48)
        inputs = (torch.randn(b, t, 144, generator=g), torch.full((b,), t, dtype=torch.int64))
        return model.eval(), inputs, f"{b}x{t}x144"
    if name == "wav2vec2":
        from torchaudio.models import wav2vec2_base
        b, n = (batch or 4, 64000) if gpu else (1, 4000)
        return wav2vec2_base().eval(), (torch.randn(b, n, generator=g),), f"{b}x{n} samples"
    import torchvision.models as tvm
    ctor = {"resnet50": tvm.resnet50, "mobilenet_v3_large": tvm.mobilenet_v3_large,
            "convnext_tiny": tvm.convnext_tiny}[name]
    b, s = (batch or 16, 224) if gpu else (1, 64)
    return ctor(weights=None).eval(), (torch.randn(b, 3, s, s, generator=g),), f"{b}x3x{s}x{s}"


def is_2d(inputs):
    return inputs[0].dim() == 4


def in_format(model, inputs, fmt):
    """The model and its inputs in a memory format (channels_last applies to 4-D tensors)."""
    if fmt == "channels_last":
        model = model.to(memory_format=torch.channels_last)
        inputs = tuple(t.contiguous(memory_format=torch.channels_last)
                       if isinstance(t, torch.Tensor) and t.dim() == 4 else t for t in inputs)
    return model, inputs


# ---------------------------------------------------------------------------------------------
# What follows each conv

_BN = nn.modules.batchnorm._BatchNorm
_TRANSPARENT = (nn.Identity, nn.Dropout)
_ACT_MODULES = {nn.ReLU: "relu", nn.ReLU6: "relu6", nn.SiLU: "silu", nn.Hardswish: "hardswish",
                nn.Sigmoid: "sigmoid", nn.Hardsigmoid: "hardsigmoid", nn.GLU: "glu",
                nn.Tanh: "tanh", nn.Mish: "mish"}
_ACT_FUNCTIONS = {F.relu: "relu", torch.relu: "relu", torch.relu_: "relu", F.relu6: "relu6",
                  F.silu: "silu", F.hardswish: "hardswish", torch.sigmoid: "sigmoid",
                  F.sigmoid: "sigmoid", F.hardsigmoid: "hardsigmoid", F.glu: "glu",
                  torch.tanh: "tanh"}
_ACT_METHODS = {"relu": "relu", "relu_": "relu", "sigmoid": "sigmoid", "sigmoid_": "sigmoid"}
_ADDS = {operator.add, operator.iadd, torch.add}


def _module_act(m):
    if isinstance(m, nn.GELU):
        return "gelu_tanh" if m.approximate == "tanh" else "gelu"
    if isinstance(m, nn.Hardtanh) and (m.min_val, m.max_val) == (0.0, 6.0):
        return "relu6"
    return _ACT_MODULES.get(type(m))


def _fx_step(node, prev, modules):
    """What an fx node does to the conv's result: "bn", an activation name, "add", None to stop,
    or "" for a module that passes its input through (Identity, Dropout in eval)."""
    import torch.fx
    if node.op == "call_module":
        m = modules[node.target]
        if isinstance(m, _BN):
            return "bn"
        if isinstance(m, _TRANSPARENT):
            return ""
        return _module_act(m)
    if node.op == "call_function":
        if node.target in _ADDS:
            others = [a for a in node.args[:2] if a is not prev]
            return "add" if len(others) == 1 and isinstance(others[0], torch.fx.Node) else None
        if node.target is F.gelu:
            return "gelu_tanh" if node.kwargs.get("approximate") == "tanh" else "gelu"
        if node.target is F.hardtanh and tuple(node.args[1:3]) == (0.0, 6.0):
            return "relu6"
        return _ACT_FUNCTIONS.get(node.target)
    if node.op == "call_method":
        if node.target in ("add", "add_") and node.args and node.args[0] is prev:
            other = node.args[1] if len(node.args) == 2 else None
            return "add" if isinstance(other, torch.fx.Node) else None
        return _ACT_METHODS.get(node.target)
    return None


def _chain(steps_of):
    """Collect the ops after a conv from a step iterator, in the order the fused op can take
    them: BatchNorm first, then at most one residual add, then one activation (which ends it)."""
    chain = []
    for step in steps_of:
        if step is None or (step == "bn" and chain) or (step == "add" and "add" in chain):
            break
        if step == "":
            continue
        chain.append(step)
        if step not in ("bn", "add"):
            break
    return chain


def follow_fx(model):
    """{conv module name: [chain per call]} from a torch.fx trace; raises if it cannot trace."""
    import torch.fx
    gm = torch.fx.symbolic_trace(model)
    modules = dict(gm.named_modules())
    out = collections.defaultdict(list)

    def steps(node):
        cur = node
        while len(cur.users) == 1:
            nxt = next(iter(cur.users))
            yield _fx_step(nxt, cur, modules)
            cur = nxt
    for node in gm.graph.nodes:
        if node.op == "call_module" and isinstance(modules[node.target], (nn.Conv1d, nn.Conv2d)):
            out[node.target].append(_chain(steps(node)))
    return dict(out)


def follow_sequential(model):
    """{conv module name: [chain]} from the modules after each conv inside an nn.Sequential
    (no residual adds: a Sequential does not show them)."""
    out = {}
    for pname, parent in model.named_modules():
        if not isinstance(parent, nn.Sequential):
            continue
        children = list(parent.named_children())
        for i, (cname, child) in enumerate(children):
            if isinstance(child, (nn.Conv1d, nn.Conv2d)):
                steps = ("bn" if isinstance(m, _BN) else "" if isinstance(m, _TRANSPARENT)
                         else _module_act(m) for _, m in children[i + 1:])
                out[f"{pname}.{cname}" if pname else cname] = [_chain(steps)]
    return out


def follow_map(model):
    """(chains by conv name, source): torch.fx where the model traces, else nn.Sequential."""
    try:
        return follow_fx(model), "fx"
    except Exception:  # noqa: BLE001  (untraceable models: data-dependent control flow)
        return follow_sequential(model), "sequential"


def epilogue(chain, has_bias):
    """The fused op's arguments for a chain: bias (the conv's or BatchNorm folded into it),
    residual, activation (None when the first activation is not one the fused op takes).
    chain None: neither fx nor an nn.Sequential showed what follows (follow "unknown")."""
    if chain is None:
        return {"follow": "unknown", "bias": has_bias, "residual": False, "act": None}
    act = next((s for s in chain if s not in ("bn", "add")), None)
    return {"follow": ">".join(chain), "bias": has_bias or "bn" in chain,
            "residual": "add" in chain, "act": act if act in FUSED_ACTS else None}


def fusable(ep):
    """Whether torch runs more than the conv for this epilogue (BatchNorm, residual or act)."""
    return ep["residual"] or ep["act"] is not None or ep["follow"].startswith("bn")


# ---------------------------------------------------------------------------------------------
# The census

def layout_of(t):
    """"contiguous", "channels_last" or "strided" (a 4-D tensor that is both, where H = W = 1
    for instance, reads as contiguous)."""
    if t.is_contiguous():
        return "contiguous"
    if t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last):
        return "channels_last"
    return "strided"


def _as_list(v, n):
    if isinstance(v, str):
        return v
    return list(v) if isinstance(v, (tuple, list)) else [v] * n


def record_convs(model, inputs):
    """[(module name, call record)] for every nn.Conv1d / nn.Conv2d call of one forward."""
    calls = []
    names = {m: n for n, m in model.named_modules()}

    def hook(m, args):
        x = args[0]
        nd = 1 if isinstance(m, nn.Conv1d) else 2
        calls.append((names[m], dict(
            op=f"conv{nd}d", input_shape=list(x.shape), input_stride=list(x.stride()),
            layout=layout_of(x), weight_stride=list(m.weight.stride()),
            weight_layout=layout_of(m.weight),
            dtype=str(x.dtype).replace("torch.", ""),
            in_channels=m.in_channels, out_channels=m.out_channels,
            kernel=_as_list(m.kernel_size, nd), stride=_as_list(m.stride, nd),
            padding=_as_list(m.padding, nd), dilation=_as_list(m.dilation, nd),
            groups=m.groups, bias=m.bias is not None, padding_mode=m.padding_mode)))
    handles = [m.register_forward_pre_hook(hook) for m in model.modules()
               if isinstance(m, (nn.Conv1d, nn.Conv2d))]
    try:
        with torch.inference_mode():
            model(*inputs)
    finally:
        for h in handles:
            h.remove()
    return calls


def layer_key(rec):
    return json.dumps([rec[k] for k in ("op", "input_shape", "input_stride", "weight_stride",
                                        "out_channels", "kernel", "stride", "padding",
                                        "dilation", "groups", "bias", "padding_mode")])


def kind_of(rec):
    c, g = rec["in_channels"], rec["groups"]
    if g == 1:
        return "single-channel" if c == 1 else "dense"
    return "depthwise" if g == c else "grouped"


def census(model, inputs, device="cpu", follow=None):
    """Distinct conv layers of one forward, in order of first call: each the call record plus
    names (the modules running it), count (calls per forward), kind, and epilogues
    ([{follow, bias, residual, act, count}]). The forward runs for real on `device` (the meta
    device's kernels do not give the strides the real ones do: 52 of ResNet-50's 53 conv inputs
    read contiguous on meta in channels_last). `follow` ({name: [chain per call]}) defaults to
    follow_map."""
    model = model.to(device)
    calls = record_convs(model, tuple(t.to(device) if isinstance(t, torch.Tensor) else t
                                      for t in inputs))
    if follow is None:
        follow, source = follow_map(model)
    else:
        source = "given"
    layers, seen = {}, collections.Counter()
    for name, rec in calls:
        chains = follow.get(name)
        chain = chains[seen[name] % len(chains)] if chains else None
        seen[name] += 1
        key = layer_key(rec)
        if key not in layers:
            layers[key] = dict(rec, key=key, names=[], count=0, kind=kind_of(rec), epilogues=[])
        lay = layers[key]
        lay["count"] += 1
        if name not in lay["names"]:
            lay["names"].append(name)
        ep = epilogue(chain, rec["bias"])
        for e in lay["epilogues"]:
            if all(e[k] == ep[k] for k in ep):
                e["count"] += 1
                break
        else:
            lay["epilogues"].append(dict(ep, count=1))
    for lay in layers.values():
        lay["recorded_on"], lay["follow_source"] = str(device), source
    return list(layers.values())


# ---------------------------------------------------------------------------------------------
# One layer's tensors and calls

def _strided_randn(shape, stride, dtype, device, gen, scale=1.0):
    """Seeded normals (times scale) in exactly the recorded strides."""
    x = (torch.randn(shape, generator=gen, device="cpu") * scale).to(device=device, dtype=dtype)
    try:
        return torch.empty_strided(shape, stride, dtype=dtype, device=device).copy_(x)
    except RuntimeError:  # overlapping strides (expanded views): the dense tensor instead
        return x


def make_tensors(lay, dtype, device, seed=0):
    """(x and weight in the recorded strides, the weight scaled by 1/sqrt(fan-in), bias or None,
    conv kwargs)
    for one layer; a padding_mode other than zeros is applied to x here (F.pad, untimed on both
    sides) and the conv then runs with padding 0, as nn.Conv does."""
    gen = torch.Generator().manual_seed(seed)
    x = _strided_randn(lay["input_shape"], lay["input_stride"], dtype, device, gen)
    cin_g = lay["in_channels"] // lay["groups"]
    wshape = [lay["out_channels"], cin_g, *lay["kernel"]]
    fan_in = cin_g
    for k in lay["kernel"]:
        fan_in *= k
    w = _strided_randn(wshape, lay["weight_stride"], dtype, device, gen, scale=fan_in ** -0.5)
    b = (torch.randn(lay["out_channels"], generator=gen).to(device=device, dtype=dtype)
         if lay["bias"] else None)
    kw = dict(stride=lay["stride"], padding=lay["padding"], dilation=lay["dilation"],
              groups=lay["groups"])
    if lay["padding_mode"] != "zeros":
        pad = [p for p in reversed(lay["padding"]) for _ in range(2)]
        x = F.pad(x, pad, mode=lay["padding_mode"])
        kw["padding"] = 0
    return x, w, b, kw


def torch_conv(op):
    return F.conv1d if op == "conv1d" else F.conv2d


def gpukern_conv(op):
    return torch_ops.conv1d if op == "conv1d" else torch_ops.conv2d


def gpukern_fused(op):
    """gpukern's fused conv (`act(conv(x, w) + bias [+ residual])`) for conv1d / conv2d, or None
    where this build has none. Looked up as torch_ops.<op>_fused, then torch.ops.gpukern.<op>_fused
    (or fused_<op>); called as f(x, w, bias, stride, padding, dilation, groups,
    activation=name, residual=tensor or None)."""
    for name in (f"{op}_fused", f"fused_{op}"):
        f = getattr(torch_ops, name, None)
        if f is None and hasattr(torch.ops.gpukern, name):
            f = getattr(torch.ops.gpukern, name)
        if f is not None:
            return f
    return None


def apply_act(y, act, inplace):
    """The activation as eager torch runs it (in place where torch's module would be)."""
    if act is None:
        return y
    if act == "relu":
        return F.relu(y, inplace=inplace)
    if act == "relu6":
        return F.relu6(y, inplace=inplace)
    if act == "silu":
        return F.silu(y, inplace=inplace)
    if act == "hardswish":
        return F.hardswish(y, inplace=inplace)
    if act == "sigmoid":
        return y.sigmoid_() if inplace else torch.sigmoid(y)
    if act == "hardsigmoid":
        return F.hardsigmoid(y, inplace=inplace)
    if act in ("gelu", "gelu_tanh"):
        return F.gelu(y, approximate="tanh" if act == "gelu_tanh" else "none")
    raise ValueError(f"unknown activation {act!r}")


def norm_rel_err(out, ref):
    o, r = out.detach().double(), ref.detach().double()
    if o.shape != r.shape or (torch.isnan(o).any() and not torch.isnan(r).any()):
        return float("inf")
    denom = r.norm().item()
    return (o - r).norm().item() / (denom if denom > 0 else 1.0)


def shape_str(lay):
    """"16x64x56x56 -> 256 k1x1 s1 p0" with dilation, groups, bias, padding_mode where set."""
    j = "x".join
    pad = lay["padding"] if isinstance(lay["padding"], str) else j(map(str, lay["padding"]))
    s = (f"{j(map(str, lay['input_shape']))} -> {lay['out_channels']} "
         f"k{j(map(str, lay['kernel']))} s{j(map(str, lay['stride']))} p{pad}")
    if any(d != 1 for d in lay["dilation"]):
        s += f" d{j(map(str, lay['dilation']))}"
    if lay["groups"] != 1:
        s += f" g{lay['groups']}"
    if lay["padding_mode"] != "zeros":
        s += f" {lay['padding_mode']}"
    return s + (" +b" if lay["bias"] else "")


# ---------------------------------------------------------------------------------------------
# Timing

def plan(est_ms, reps, left_s):
    """(calls per graph, replays) for a call of about est_ms: GRAPH_CALLS calls, fewer where a
    replay would exceed GRAPH_REPLAY_MS; `reps` replays, fewer (at least MIN_REPS) where they
    would not fit the left_s seconds left. Raises TimeoutError where even that does not fit."""
    calls = max(1, min(GRAPH_CALLS, int(GRAPH_REPLAY_MS / max(est_ms, 1e-3))))
    cost = est_ms * calls / 1e3  # seconds per replay; the capture costs about one more
    if cost * (reps + 1) > left_s:
        reps = max(MIN_REPS, int(left_s / cost) - 1)
        if cost * (reps + 1) > left_s:
            raise TimeoutError
    return calls, reps


class Timer:
    """Times one candidate the same way for every candidate of a run (module docstring)."""

    def __init__(self, gpu, quick):
        self.gpu = gpu
        self.reps = (QUICK_REPS if quick else REPS) if gpu else (CPU_QUICK_REPS if quick
                                                                  else CPU_REPS)

    def __call__(self, fn, deadline):
        """(ms per call, how) or raises TimeoutError when the layer's time is spent."""
        left = deadline - time.perf_counter()
        if left <= 0:
            raise TimeoutError
        if not self.gpu:
            return time_cpu(fn, reps=self.reps, warmup=1, max_seconds=max(left, 0.1)), \
                f"wall x{self.reps}"
        est = time_cuda(fn, reps=3, warmup=1, flush=True)  # warm-up (cudnn.bm tunes here)
        left = deadline - time.perf_counter()
        calls, reps = plan(est, self.reps, left)
        try:
            return time_cuda_graph(fn, calls=calls, reps=reps, flush=True), \
                f"graph {calls}x{reps}"
        except RuntimeError:  # not capturable: flushed single calls between events
            torch.cuda.synchronize()
            return time_cuda(fn, reps=reps, flush=True, max_seconds=max(left, 1.0)), \
                f"events x{reps}"


def best_torch(timer, fn, gpu, deadline):
    """({label: ms}, {label: how timed}, best label): cudnn.benchmark off and on on a GPU,
    aten-cpu on the CPU."""
    settings = (("cudnn", False), ("cudnn.bm", True)) if gpu else (("aten-cpu", False),)
    times, hows = {}, {}
    old = torch.backends.cudnn.benchmark
    try:
        for label, bm in settings:
            torch.backends.cudnn.benchmark = bm
            times[label], hows[label] = timer(fn, deadline)
    finally:
        torch.backends.cudnn.benchmark = old
    return times, hows, min(times, key=times.get)


def run_layer(lay, dtype_name, timer, args, fused_ops):
    """One row: correctness, then torch's best and gpukern for the conv alone, then the fused
    blocks. Errors and timeouts end up in the row's status, never raise."""
    gpu, device = args.gpu, args.device
    dtype = getattr(torch, dtype_name)
    op = lay["op"]
    tol = TOL["float32_tf32" if dtype_name == "float32" and gpu and
              torch.backends.cudnn.allow_tf32 else dtype_name]
    row = dict(key=lay["key"], op=op, dtype=dtype_name, shape=shape_str(lay), kind=lay["kind"],
               layout=lay["layout"], count=lay["count"], names=lay["names"], tol=tol,
               status="ok", fused=[])
    deadline = time.perf_counter() + args.timeout
    try:
        x, w, b, kw = make_tensors(lay, dtype, device)
        tconv, gconv = torch_conv(op), gpukern_conv(op)
        def query():
            return torch_ops.algorithm(op, x, w, b, kw["stride"], kw["padding"], kw["dilation"],
                                       kw["groups"])
        # The rules' choice before the first call; after it, what runs: the first call races the
        # rules' choice against cuDNN (csrc/conv/vendor.h) and the query reports the verdict.
        row["rules_algorithm"] = row["algorithm"] = query()
        with torch.inference_mode():
            ref = tconv(x.double(), w.double(), None if b is None else b.double(), **kw)
            t_out = tconv(x, w, b, **kw)
            row["torch_err"] = norm_rel_err(t_out, ref)
            try:
                g_out = gconv(x, w, b, **kw)
                row["gpukern_err"] = norm_rel_err(g_out, ref)
                row["same_layout"] = g_out.stride() == t_out.stride()
                ok = row["gpukern_err"] <= tol
            except (RuntimeError, NotImplementedError) as e:
                row["gpukern_error"] = str(e).splitlines()[0][:160]
                ok = False
            if not ok:
                row["status"] = "WRONG" if "gpukern_error" not in row else "ERROR"
            del t_out
            row["torch_ms"], row["torch_how"], row["torch_best"] = best_torch(
                timer, lambda: tconv(x, w, b, **kw), gpu, deadline)
            row["torch_best_ms"] = row["torch_ms"][row["torch_best"]]
            if ok:
                row["gpukern_ms"], row["gpukern_how"] = timer(lambda: gconv(x, w, b, **kw),
                                                              deadline)
                row["speedup"] = row["torch_best_ms"] / row["gpukern_ms"]
                row["algorithm"] = query()
            for ep in lay["epilogues"]:
                if not fusable(ep):
                    continue
                try:
                    row["fused"].append(run_fused(lay, ep, x, w, kw, dtype, tol, timer, gpu,
                                                  fused_ops.get(op), deadline))
                except TimeoutError:
                    row["fused"].append(dict(ep, status="timeout"))
    except TimeoutError:
        row["status"] = "timeout"
    except torch.OutOfMemoryError as e:
        row["status"], row["error"] = "OOM", str(e).splitlines()[0][:160]
    except Exception as e:  # noqa: BLE001  (one layer's failure must not end the census)
        row["status"], row["error"] = "ERROR", f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
    if gpu:
        torch.cuda.empty_cache()
    return row


def run_fused(lay, ep, x, w, kw, dtype, tol, timer, gpu, fused, deadline):
    """torch's unfused conv + bias + residual + activation against gpukern's fused op."""
    gen = torch.Generator().manual_seed(1)
    res = {k: ep[k] for k in ("follow", "bias", "residual", "act", "count")}
    b = (torch.randn(lay["out_channels"], generator=gen).to(x.device, dtype)
         if ep["bias"] else None)
    tconv = torch_conv(lay["op"])
    shape_like = tconv(x, w, None, **kw)
    r = (torch.randn(shape_like.shape, generator=gen).to(x.device, dtype)
         .to(memory_format=_out_format(shape_like)) if ep["residual"] else None)
    del shape_like
    act = ep["act"]

    def unfused():
        y = tconv(x, w, b, **kw)
        if r is not None:
            y.add_(r)
        return apply_act(y, act, inplace=act not in ("gelu", "gelu_tanh"))
    ref = tconv(x.double(), w.double(), None if b is None else b.double(), **kw)
    if r is not None:
        ref = ref + r.double()
    ref = apply_act(ref, act, inplace=False)
    res["torch_err"] = norm_rel_err(unfused(), ref)
    res["torch_unfused_ms"], res["torch_how"] = timer(unfused, deadline)
    if fused is None:
        res["status"] = "n/a"
        return res

    def fused_call():
        return fused(x, w, b, kw["stride"], kw["padding"], kw["dilation"], kw["groups"],
                     activation=act or "none", residual=r)
    try:
        res["gpukern_err"] = norm_rel_err(fused_call(), ref)
    except Exception as e:  # noqa: BLE001  (a schema this script does not know yet)
        res["status"] = "ERROR"
        res["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
        return res
    if res["gpukern_err"] > tol:
        res["status"] = "WRONG"
        return res
    res["gpukern_fused_ms"], res["gpukern_how"] = timer(fused_call, deadline)
    res["speedup"] = res["torch_unfused_ms"] / res["gpukern_fused_ms"]
    res["status"] = "ok"
    return res


def _out_format(t):
    return (torch.channels_last if t.dim() == 4 and not t.is_contiguous()
            and t.is_contiguous(memory_format=torch.channels_last) else torch.contiguous_format)


# ---------------------------------------------------------------------------------------------
# Totals and reports

def totals(rows, census=()):
    """Per (model, format, dtype): sum of count x time for torch and gpukern (conv alone) and
    for torch's unfused sequence and gpukern's fused op; complete only where every distinct
    layer of the census (every row's, without one) was timed on both sides."""
    distinct = {(c["model"], c["format"]): len(c["layers"]) for c in census}
    out = []
    groups = collections.OrderedDict()
    for r in rows:
        groups.setdefault((r["model"], r["format"], r["dtype"]), []).append(r)
    for (model, fmt, dtype), rs in groups.items():
        timed = [r for r in rs if r.get("gpukern_ms") is not None]
        t = sum(r["count"] * r["torch_best_ms"] for r in timed)
        g = sum(r["count"] * r["gpukern_ms"] for r in timed)
        fused = [f for r in rs for f in r["fused"]]
        f_timed = [f for f in fused if f.get("gpukern_fused_ms") is not None]
        tu = sum(f["count"] * f["torch_unfused_ms"] for f in fused
                 if f.get("torch_unfused_ms") is not None)
        n = distinct.get((model, fmt), len(rs))
        out.append(dict(
            model=model, format=fmt, dtype=dtype, layers=n, layers_timed=len(timed),
            complete=len(timed) == n, torch_ms=t, gpukern_ms=g,
            speedup=t / g if g else None,
            torch_all_ms=sum(r["count"] * r["torch_best_ms"] for r in rs
                             if r.get("torch_best_ms") is not None),
            fused_blocks=len(fused), torch_unfused_ms=tu,
            gpukern_fused_ms=(sum(f["count"] * f["gpukern_fused_ms"] for f in f_timed)
                              if f_timed else None),
            fused_speedup=(sum(f["count"] * f["torch_unfused_ms"] for f in f_timed)
                           / sum(f["count"] * f["gpukern_fused_ms"] for f in f_timed)
                           if f_timed else None),
            not_timed=[f"{r['shape']} ({r['status']})" for r in rs
                       if r.get("gpukern_ms") is None]))
    return out


def _us(ms, width=0):
    return f"{'-':>{width}}" if ms is None else f"{ms * 1e3:>{width}.1f}"


def _x(v, width=0):
    return f"{'-':>{width}}" if v is None else f"{v:>{width}.2f}x"


def _names(r, n=2):
    names = r["names"]
    return ", ".join(names[:n]) + (f" +{len(names) - n}" if len(names) > n else "")


def _fused_cell(r):
    """"torch_us/gpukern_us" per fused block ("n/a" where the build has no fused op)."""
    cells = []
    for f in r["fused"]:
        g = ("n/a" if f["status"] == "n/a" else _us(f.get("gpukern_fused_ms"))
             if f["status"] == "ok" else f["status"])
        cells.append(f"{f['follow']}: {_us(f.get('torch_unfused_ms'))}/{g}"
                     + (f" {_x(f['speedup'])}" if f.get("speedup") else ""))
    return "; ".join(cells) or "-"


HEADER = (f"{'model':<18} {'fmt':<6} {'dtype':<8} {'n':>3} {'shape':<44} {'layout':<7} "
          f"{'algorithm':<20} {'torch_us':>9} {'best':<8} {'gk_us':>10} {'speedup':>8} "
          f"{'gk_err':>8} status  fused (torch unfused us / gpukern fused us)")


_SHORT = {"nchw": "nchw", "channels_last": "cl", "contiguous": "contig", "strided": "strided"}


def fmt_row(r):
    err = "-" if r.get("gpukern_err") is None else f"{r['gpukern_err']:.1e}"
    return (f"{r['model']:<18} {_SHORT[r['format']]:<6} {r['dtype'][:8]:<8} {r['count']:>3} "
            f"{r['shape'][:44]:<44} {_SHORT[r['layout']]:<7} "
            f"{str(r.get('algorithm', '-'))[:20]:<20} "
            f"{_us(r.get('torch_best_ms'), 9)} {str(r.get('torch_best', '-')):<8} "
            f"{_us(r.get('gpukern_ms'), 10)} {_x(r.get('speedup'), 7)} {err:>8} "
            f"{r['status']:<6}  {_fused_cell(r)}"
            + (f"  [{r.get('error') or r.get('gpukern_error')}]"
               if r.get("error") or r.get("gpukern_error") else ""))


def fmt_total(t):
    return (f"total {t['model']} {t['format']} {t['dtype']}: torch {_us(t['torch_ms'])} us, "
            f"gpukern {_us(t['gpukern_ms'])} us, {_x(t['speedup'])} over "
            f"{t['layers_timed']}/{t['layers']} distinct layers"
            + ("" if t["complete"] else " (incomplete)")
            + f"; fused blocks {t['fused_blocks']}: torch unfused {_us(t['torch_unfused_ms'])} us, "
              f"gpukern fused {_us(t['gpukern_fused_ms']) if t['gpukern_fused_ms'] else 'n/a'}")


def markdown(result):
    info, rows, tots = result["info"], result["rows"], result["totals"]
    lines = [f"# Layer census: torch's best against gpukern ({info['device_name']})", "",
             f"torch {info['torch']}, CUDA {info['cuda']}, cuDNN {info['cudnn']}, gpukern CUDA "
             f"kernels {info['gpukern_cuda']} ({info['archs'] or '-'}); "
             f"cudnn.allow_tf32 {info['cudnn_allow_tf32']}, matmul.allow_tf32 "
             f"{info['matmul_allow_tf32']}; fused op: "
             f"{info['fused_op'] or 'n/a (none in this build)'}; "
             f"timing: {info['timing']}; {info['time']}, git {info['git']}", "",
             "Inputs: " + ", ".join(f"{m} {d}" for m, d in info["inputs"].items()), "",
             "## Per model (sum of count x time over the distinct layers)", "",
             "| model | format | dtype | layers timed | torch us | gpukern us | speedup | "
             "fused blocks | torch unfused us | gpukern fused us | fused speedup |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for t in tots:
        lines.append(
            f"| {t['model']} | {t['format']} | {t['dtype']} | {t['layers_timed']}/{t['layers']}"
            f"{'' if t['complete'] else ' (incomplete)'} | {_us(t['torch_ms'])} | "
            f"{_us(t['gpukern_ms'])} | {_x(t['speedup'])} | {t['fused_blocks']} | "
            f"{_us(t['torch_unfused_ms'])} | "
            f"{_us(t['gpukern_fused_ms']) if t['gpukern_fused_ms'] else 'n/a'} | "
            f"{_x(t['fused_speedup']) if t['fused_speedup'] else 'n/a'} |")
    torch_is = ("the faster of F.conv with cudnn.benchmark off (cudnn) and on (cudnn.bm)"
                if info["device"] == "cuda" else "F.conv on the CPU (aten-cpu)")
    lines += ["", "## Per layer", "",
              f"times in us per call; torch = {torch_is}; algorithm = the CUDA algorithm gpukern "
              "runs for the call (torch_ops.algorithm after the first call: cudnn where the race "
              "handed the plain call to cuDNN); err = norm-relative error against "
              "float64; fused = per follow-up (bn, add, activation): torch's unfused sequence / "
              "gpukern's fused op, us", "",
              "| model | layers | count | shape | kind | dtype | format | layout | algorithm | "
              "torch us | best | gpukern us | speedup | gpukern err (torch's) | status | fused |",
              "|---|---|---:|---|---|---|---|---|---|---:|---|---:|---:|---|---|---|"]
    for r in rows:
        err = ("-" if r.get("gpukern_err") is None else f"{r['gpukern_err']:.1e}") + (
            f" ({r['torch_err']:.1e})" if r.get("torch_err") is not None else "")
        status = r["status"] + (f": {r.get('error') or r.get('gpukern_error')}"
                                if r.get("error") or r.get("gpukern_error") else "")
        lines.append(
            f"| {r['model']} | {_names(r)} | {r['count']} | {r['shape']} | {r['kind']} | "
            f"{r['dtype']} | {r['format']} | {r['layout']} | {r.get('algorithm', '-')} | "
            f"{_us(r.get('torch_best_ms'))} | {r.get('torch_best', '-')} | "
            f"{_us(r.get('gpukern_ms'))} | {_x(r.get('speedup'))} | {err} | {status} | "
            f"{_fused_cell(r)} |")
    return "\n".join(lines) + "\n"


def plot(result, path):
    """Left: each layer's speedup against torch's time (log-log), per model; right: each
    model's total speedup per dtype and format. Raises ImportError without matplotlib."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in result["rows"] if r.get("speedup")]
    tots = [t for t in result["totals"] if t["speedup"]]
    if not rows:
        raise ValueError("no timed layers to plot")
    short = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16", "nchw": "NCHW",
             "channels_last": "CL"}
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(15, 6), gridspec_kw={"width_ratios": [3, 2]})
    models = list(dict.fromkeys(r["model"] for r in rows))
    colors = {m: f"C{i}" for i, m in enumerate(models)}
    markers = {("float32", "nchw"): "o", ("float32", "channels_last"): "s",
               ("bfloat16", "nchw"): "^", ("bfloat16", "channels_last"): "D"}
    for r in rows:
        ax.scatter(r["torch_best_ms"] * 1e3, r["speedup"], color=colors[r["model"]],
                   marker=markers.get((r["dtype"], r["format"]), "x"), s=22, alpha=0.8)
    for m in models:
        ax.scatter([], [], color=colors[m], label=m)
    for (d, f), mk in markers.items():
        ax.scatter([], [], color="gray", marker=mk, label=f"{short[d]} {short[f]}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xlabel("torch's best, us per call (log)")
    ax.set_ylabel("speedup of gpukern over torch's best (log)")
    ax.set_title("per distinct layer")
    ax.legend(fontsize=7, loc="best")
    labels = [f"{t['model']}\n{short[t['dtype']]} {short[t['format']]}" for t in tots]
    bx.barh(range(len(tots))[::-1], [t["speedup"] for t in tots],
            color=[colors.get(t["model"], "gray") for t in tots])
    bx.set_yticks(range(len(tots))[::-1])
    bx.set_yticklabels(labels, fontsize=6)
    bx.set_xscale("log")
    bx.axvline(1.0, color="black", linewidth=0.8)
    bx.set_xlabel("model conv time, torch / gpukern (log)")
    bx.set_title("per model (sum of count x time)")
    fig.suptitle(f"Layer census, {result['info']['device_name']}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def result_name(info):
    """The GPU's short name as benchmarks/run.py names its files ("cpu" without a GPU)."""
    from run import result_name as run_result_name
    return run_result_name(info)


def write(out_dir, stem, result, with_plot):
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, stem)
    with open(path + ".json", "w") as f:
        json.dump(result, f, indent=1)
    with open(path + ".md", "w") as f:
        f.write(markdown(result))
    written = [path + ".json", path + ".md"]
    if with_plot:
        try:
            plot(result, path + ".png")
            written.append(path + ".png")
        except ImportError:
            print("matplotlib is not installed (pip install -e .[bench]): no plot written")
        except ValueError as e:
            print(f"no plot written: {e}")
    return written


# ---------------------------------------------------------------------------------------------

def _git_rev():
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, cwd=os.path.dirname(os.path.abspath(__file__)),
                              timeout=10).stdout.strip() or "-"
    except (OSError, subprocess.SubprocessError):
        return "-"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    p.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"], choices=DTYPES)
    p.add_argument("--formats", nargs="+", default=list(FORMATS), choices=FORMATS,
                   help="the model's memory format (channels_last: 2-D models only)")
    p.add_argument("--max-layers", type=int, default=None,
                   help=f"at most N distinct layers per model, in order of first call "
                        f"(--quick: {QUICK_MAX_LAYERS})")
    p.add_argument("--quick", action="store_true",
                   help=f"{QUICK_REPS} replays instead of {REPS} (noisier medians) and "
                        f"{QUICK_MAX_LAYERS} layers per model unless --max-layers says otherwise")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                   help="cuda (default; without a GPU: the CPU smoke mode) or cpu")
    p.add_argument("--timeout", type=float, default=60.0,
                   help="seconds per layer, dtype and format (default 60)")
    p.add_argument("--no-tf32", action="store_true",
                   help="torch.backends.cudnn.allow_tf32 = False: float32 is true fp32 on both "
                        "sides (default: torch's flags as they are)")
    p.add_argument("--out", default="results", help="folder for the files (default: results)")
    p.add_argument("--name", default=None,
                   help="file stem before _layers (default: the GPU's short name, e.g. h100; cpu)")
    p.add_argument("--append", action="store_true",
                   help="keep the other models' results already in <out>/<name>_layers.json "
                        "(a census split over several commands; the info is this run's)")
    p.add_argument("--no-plot", action="store_true")
    p.add_argument("--batch", type=int, default=None,
                   help="batch of every model's input on the GPU (default: 16 images, 8 "
                        "Conformer utterances, 4 waveforms; 1 for the latency rules)")
    args = p.parse_args(argv)

    if args.device == "cuda" and not torch.cuda.is_available():
        print("layers.py: no CUDA GPU visible: CPU smoke mode (batch 1, small inputs, "
              "correctness checks and CPU wall-clock times only; no number here says anything "
              "about a GPU)")
        args.device = "cpu"
    args.gpu = args.device == "cuda"
    if args.gpu and not torch_ops.has_cuda_kernels():
        print("layers.py: gpukern was built without CUDA kernels; rebuild on a machine with nvcc "
              "or use --device cpu")
        return 2
    if args.no_tf32:
        torch.backends.cudnn.allow_tf32 = False
    if args.quick and args.max_layers is None:
        args.max_layers = QUICK_MAX_LAYERS
    fused_ops = {op: gpukern_fused(op) for op in ("conv1d", "conv2d")}
    timer = Timer(args.gpu, args.quick)
    reps = timer.reps
    info = dict(
        device=args.device, torch=torch.__version__, cuda=torch.version.cuda,
        cudnn=torch.backends.cudnn.version() if args.gpu else None,
        gpukern_cuda=torch_ops.has_cuda_kernels(), archs=getattr(torch_ops._C, "CUDA_ARCHS", ""),
        cudnn_allow_tf32=torch.backends.cudnn.allow_tf32,
        matmul_allow_tf32=torch.backends.cuda.matmul.allow_tf32,
        fused_op=", ".join(f"{op}: {getattr(f, '__name__', str(f))}"
                           for op, f in fused_ops.items() if f) or None,
        timing=(f"CUDA graph of up to {GRAPH_CALLS} calls, L2 flushed by reading before each "
                f"replay, median of {reps} replays" if args.gpu
                else f"CPU wall clock, median of {reps}"),
        tol=TOL, time=time.strftime("%F %T"), git=_git_rev(), argv=sys.argv[1:], inputs={},
        batch=args.batch)
    if args.gpu:
        info["gpu"] = torch.cuda.get_device_name()
    info["device_name"] = info.get("gpu") or f"CPU ({platform.processor() or platform.machine()})"
    stem = (args.name or result_name(info)) + "_layers"
    if not any(fused_ops.values()):
        print("layers.py: this build of gpukern has no fused conv op "
              "(torch.ops.gpukern.conv2d_fused / conv1d_fused): the fused column is n/a")
    print(f"{info['device_name']}, torch {info['torch']}, cudnn.allow_tf32 "
          f"{info['cudnn_allow_tf32']}; timing: {info['timing']}", flush=True)

    result = dict(info=info, census=[], rows=[], totals=[])
    previous = os.path.join(args.out, stem + ".json")
    if args.append and os.path.exists(previous):
        with open(previous) as f:
            old = json.load(f)
        keep = [m for m in old["info"].get("inputs", {}) if m not in args.models]
        result["census"] = [c for c in old["census"] if c["model"] in keep]
        result["rows"] = [r for r in old["rows"] if r["model"] in keep]
        result["totals"] = totals(result["rows"], result["census"])
        info["inputs"].update({m: old["info"]["inputs"][m] for m in keep})
        info["appended_to"] = dict(time=old["info"].get("time"), git=old["info"].get("git"),
                                   models=keep)
        print(f"appending to {previous}: keeping {', '.join(keep) or 'no model'}")
    t_start = time.perf_counter()
    for name in args.models:
        t0 = time.perf_counter()
        try:
            model, inputs, described = build(name, args.gpu, args.batch)
        except ImportError as e:
            print(f"{name}: skipped ({e})")
            continue
        info["inputs"][name] = described
        for fmt in args.formats:
            if fmt == "channels_last" and not is_2d(inputs):
                print(f"{name}: channels_last skipped (1-D convolutions: no 3-D channels_last)")
                continue
            m, x = in_format(copy.deepcopy(model), inputs, fmt)
            layers = census(m, x, device=args.device)
            del m
            calls = sum(lay["count"] for lay in layers)
            print(f"{name} {fmt}: {calls} conv calls, {len(layers)} distinct layers "
                  f"(recorded on {layers[0]['recorded_on'] if layers else '-'}, follow-ups "
                  f"from {layers[0]['follow_source'] if layers else '-'})", flush=True)
            result["census"].append(dict(model=name, format=fmt, input=described,
                                         calls=calls, layers=layers))
            if args.max_layers is not None and len(layers) > args.max_layers:
                print(f"{name} {fmt}: timing the first {args.max_layers} of {len(layers)}")
                layers = layers[:args.max_layers]
            print(HEADER, flush=True)
            for lay in layers:
                for dtype_name in args.dtypes:
                    row = run_layer(lay, dtype_name, timer, args, fused_ops)
                    row.update(model=name, format=fmt)
                    result["rows"].append(row)
                    print(fmt_row(row), flush=True)
        result["totals"] = totals(result["rows"], result["census"])
        for t in result["totals"]:
            if t["model"] == name:
                print(fmt_total(t))
        print(f"{name}: {time.perf_counter() - t0:.0f} s", flush=True)
        write(args.out, stem, result, with_plot=False)

    written = write(args.out, stem, result, with_plot=not args.no_plot)
    print(f"all models: {time.perf_counter() - t_start:.0f} s")
    bad = [r for r in result["rows"] if r["status"] in ("WRONG", "ERROR")
           or any(f["status"] in ("WRONG", "ERROR") for f in r["fused"])]
    if bad:
        print(f"{len(bad)} layer runs wrong or failing: "
              + ", ".join(f"{r['model']} {r['shape']} {r['dtype']}" for r in bad[:10]))
    print(f"results written to {', '.join(written)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
