"""Issue #32's NCHW depthwise layers: torch's best against every NCHW depthwise algorithm forced.

    python3 benchmarks/dw_nchw_layers.py                     # fp32 + bf16, batch 16, 30 replays
    python3 benchmarks/dw_nchw_layers.py --dtypes bfloat16 --reps 10
    python3 benchmarks/dw_nchw_layers.py --algos depthwise_small depthwise_strided
    python3 benchmarks/dw_nchw_layers.py --act hardswish     # also the fused block (below)

The layers: MobileNetV3-Large's NCHW depthwise convolutions on small planes or with stride 2
(batch 16, 'same' padding K // 2, no bias: BatchNorm follows them), the ones the issue lists.
For each layer and dtype (float32 as true fp32 on both sides: cuDNN's TF32 is switched off unless
--tf32; bfloat16; float16 on request):

- correctness first: every candidate's output against F.conv2d in float64 on the CPU on the same
  rounded inputs, norm-relative error at most TOL[dtype] (benchmarks/layers.py's bounds); a
  candidate that fails is reported WRONG and not timed;
- torch: F.conv2d with cudnn.benchmark off and on (labels cudnn, cudnn.bm), the faster is
  "torch best";
- gpukern: the automatic choice (its name in the table), then every NCHW depthwise algorithm
  forced (torch_ops.force_algorithm("conv2d", name)); an algorithm that cannot run the shape is
  "n/a".

Timing (benchmarks/timing.py, the method of benchmarks/layers.py): one call's time is a CUDA graph
of 20 back-to-back calls replayed and divided by 20, the L2 flushed by reading a 256 MiB buffer
before each replay (outside the timed span), median of --reps replays. Within a replay the
layer's input stays in L2 from one call to the next, as a model's next layer finds its input.

With --act NAME (relu, hardswish, ...), each layer is also timed as the fused block
act(conv + bias): torch's unfused sequence (F.conv2d with a bias, then the in-place activation)
against gpukern's conv2d_fused forced to each algorithm (the algorithms with a native epilogue
apply it in registers, the others add one elementwise pass).

Writes a markdown table to stdout (and --json PATH: every number). Needs a GPU.
"""
import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch_ops  # noqa: E402
from timing import time_cuda_graph  # noqa: E402

# (label, channels, input plane, K, stride); batch from --batch.
LAYERS = [
    ("64ch 112x112 3x3 s2", 64, 112, 3, 2),
    ("72ch 56x56 5x5 s2", 72, 56, 5, 2),
    ("240ch 28x28 3x3 s2", 240, 28, 3, 2),
    ("184ch 14x14 3x3 s1", 184, 14, 3, 1),
    ("200ch 14x14 3x3 s1", 200, 14, 3, 1),
    ("480ch 14x14 3x3 s1", 480, 14, 3, 1),
    ("672ch 14x14 3x3 s1", 672, 14, 3, 1),
    ("672ch 14x14 5x5 s2", 672, 14, 5, 2),
    ("960ch 7x7 5x5 s1", 960, 7, 5, 1),
]

# Every conv2d algorithm that takes NCHW depthwise shapes (csrc/conv/dispatch_2d.cu's table).
NCHW_ALGOS = ["depthwise_small", "depthwise_strided", "depthwise_rows", "depthwise_tma",
              "depthwise_plane", "depthwise_nchw", "depthwise_large"]

TOL = {"float32": 1e-5, "float32_tf32": 2e-3, "float16": 1e-3, "bfloat16": 8e-3}
GRAPH_CALLS = 20

ACTS = {
    "relu": lambda y: F.relu(y, inplace=True),
    "relu6": lambda y: F.relu6(y, inplace=True),
    "silu": lambda y: F.silu(y, inplace=True),
    "hardswish": lambda y: F.hardswish(y, inplace=True),
    "sigmoid": lambda y: y.sigmoid_(),
    "gelu": lambda y: F.gelu(y),
    "gelu_tanh": lambda y: F.gelu(y, approximate="tanh"),
}


def norm_rel_err(out, ref):
    o, r = out.detach().double().cpu(), ref.detach().double().cpu()
    if o.shape != r.shape or (torch.isnan(o).any() and not torch.isnan(r).any()):
        return float("inf")
    denom = r.norm().item()
    return (o - r).norm().item() / (denom if denom > 0 else 1.0)


def timed_us(fn, reps, setup=None):
    """Microseconds per call: a CUDA graph of GRAPH_CALLS calls, L2 flushed before each replay.
    `setup` (a context manager factory) wraps the warm-up and the capture (forcing, cudnn flag)."""
    if setup is None:
        return time_cuda_graph(fn, calls=GRAPH_CALLS, reps=reps, flush=True) * 1e3
    with setup():
        return time_cuda_graph(fn, calls=GRAPH_CALLS, reps=reps, flush=True) * 1e3


class _Cudnn:
    def __init__(self, bm):
        self.bm = bm

    def __enter__(self):
        self.old = torch.backends.cudnn.benchmark
        torch.backends.cudnn.benchmark = self.bm

    def __exit__(self, *exc):
        torch.backends.cudnn.benchmark = self.old


def forced(name):
    return lambda: torch_ops.force_algorithm("conv2d", name)


def can_run(name, x, w, b, stride, pad, c):
    with torch_ops.force_algorithm("conv2d", name):
        try:
            torch_ops.algorithm("conv2d", x, w, b, stride, pad, 1, c)
            return True
        except RuntimeError:
            return False


def time_cudnn(row, conv_torch, reps):
    """row["us"]: cuDNN with benchmark off and on, and the better of the two ("torch best")."""
    for label_t, bm in (("cudnn", False), ("cudnn.bm", True)):
        row["us"][label_t] = timed_us(conv_torch, reps, lambda bm=bm: _Cudnn(bm))
    row["us"]["torch best"] = min(row["us"]["cudnn"], row["us"]["cudnn.bm"])


def time_candidates(store, fn, ref, tol, reps, candidates, runnable):
    """Checks and times gpukern's automatic choice and each forced algorithm of `candidates`
    (names; runnable(name) says whether one can run the call) running fn(): store["err"][name]
    (when store has "err"), store["status"][name] ("ok", "n/a" or "WRONG (err)") and
    store["us"][name] (only for correct ones); "auto" is the automatic choice."""
    for cand, name in [("auto", None)] + [(n, n) for n in candidates]:
        if name is not None and not runnable(name):
            store["status"][cand] = "n/a"
            continue
        setup = forced(name) if name is not None else None
        if setup is None:
            out = fn()
        else:
            with setup():
                out = fn()
        err = norm_rel_err(out, ref)
        if "err" in store:
            store["err"][cand] = err
        if not err <= tol:
            store["status"][cand] = f"WRONG ({err:.1e})"
            continue
        store["us"][cand] = timed_us(fn, reps, setup)
        store["status"][cand] = "ok"


def run_layer(label, c, hw, k, stride, dtype_name, args):
    dtype = getattr(torch, dtype_name)
    tol = TOL["float32_tf32" if dtype_name == "float32" and args.tf32 else dtype_name]
    g = torch.Generator().manual_seed(c * 31 + k)
    x = torch.randn(args.batch, c, hw, hw, generator=g).to("cuda", dtype)
    w = (torch.randn(c, 1, k, k, generator=g) / k).to("cuda", dtype)
    b = torch.randn(c, generator=g).to("cuda", dtype) if args.bias else None
    pad = k // 2
    ref = F.conv2d(x.double().cpu(), w.double().cpu(), None if b is None else b.double().cpu(),
                   stride, pad, 1, c)
    row = dict(layer=label, dtype=dtype_name, shape=f"{args.batch}x{c}x{hw}x{hw} k{k} s{stride}",
               auto=torch_ops.algorithm("conv2d", x, w, b, stride, pad, 1, c), us={}, err={},
               status={})

    def conv_torch():
        return F.conv2d(x, w, b, stride, pad, 1, c)

    def conv_gk():
        return torch_ops.conv2d(x, w, b, stride, pad, 1, c)

    with torch.inference_mode():
        row["err"]["torch"] = norm_rel_err(conv_torch(), ref)
        time_cudnn(row, conv_torch, args.reps)
        time_candidates(row, conv_gk, ref, tol, args.reps, args.algos,
                        lambda n: can_run(n, x, w, b, stride, pad, c))
        if args.act:
            run_fused(row, x, w, c, k, stride, pad, dtype, tol, args)
    torch.cuda.empty_cache()
    return row


def run_fused(row, x, w, c, k, stride, pad, dtype, tol, args):
    """act(conv + bias): torch unfused against gpukern's conv2d_fused per algorithm."""
    act = args.act
    g = torch.Generator().manual_seed(7)
    b = torch.randn(c, generator=g).to("cuda", dtype)
    ref = F.conv2d(x.double().cpu(), w.double().cpu(), b.double().cpu(), stride, pad, 1, c)
    ref = ACTS[act](ref.clone())
    fused_op = getattr(torch_ops, "conv2d_fused", None)
    row["fused"] = {"act": act, "us": {}, "status": {}}

    def unfused():
        return ACTS[act](F.conv2d(x, w, b, stride, pad, 1, c))

    def fused():
        return fused_op(x, w, b, stride, pad, 1, c, activation=act)

    best = None
    for label_t, bm in (("cudnn", False), ("cudnn.bm", True)):
        t = timed_us(unfused, args.reps, lambda bm=bm: _Cudnn(bm))
        row["fused"]["us"][label_t] = t
        best = t if best is None else min(best, t)
    row["fused"]["us"]["torch best"] = best
    if fused_op is None:
        row["fused"]["status"]["auto"] = "no conv2d_fused in this build"
        return
    time_candidates(row["fused"], fused, ref, tol, args.reps, args.algos,
                    lambda n: can_run(n, x, w, b, stride, pad, c))


def cell(d_us, d_status, key):
    if key in d_us:
        return f"{d_us[key]:.1f}"
    return d_status.get(key, "")


def table(rows, algos, fused=False):
    cols = ["cudnn", "cudnn.bm", "torch best", "auto"] + algos
    head = ["layer", "dtype", "auto is"] + cols + ["auto vs torch", "best forced vs torch"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        src = r["fused"] if fused else r
        if fused and "fused" not in r:
            continue
        us, st = src["us"], src["status"]
        tb = us["torch best"]
        auto = f"{tb / us['auto']:.2f}x" if "auto" in us else "-"
        forced_t = [us[a] for a in algos if a in us]
        best_f = min(forced_t) if forced_t else None
        best_name = min((a for a in algos if a in us), key=lambda a: us[a]) if forced_t else ""
        bf = f"{tb / best_f:.2f}x ({best_name})" if best_f else "-"
        lines.append("| " + " | ".join([r["layer"], r["dtype"], r["auto"]] +
                                       [cell(us, st, k) for k in cols] + [auto, bf]) + " |")
    return "\n".join(lines)


def report(title, rows, args, table_of=None, **extra):
    """The markdown tables (conv, and the fused block with --act; table_of(rows, algos, fused),
    this file's table by default) to stdout and every number to --json: title, then "us per call
    (...)"; extra goes into the JSON beside the rows."""
    table_of = table_of or table
    print(f"## {title}; us per call (CUDA graph of {GRAPH_CALLS} calls, L2 flushed before each "
          f"replay, median of {args.reps})\n")
    print(table_of(rows, args.algos))
    if args.act:
        print(f"\n## Fused block {args.act}(conv + bias): torch unfused against conv2d_fused\n")
        print(table_of(rows, args.algos, fused=True))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=torch.cuda.get_device_name(), batch=args.batch, reps=args.reps,
                           **extra, rows=rows), f, indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"],
                    choices=["float32", "bfloat16", "float16"])
    ap.add_argument("--algos", nargs="+", default=NCHW_ALGOS)
    ap.add_argument("--layers", nargs="+", default=None,
                    help="substrings of the layer labels to keep (default: every layer)")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--reps", type=int, default=30, help="graph replays (median)")
    ap.add_argument("--bias", action="store_true", help="a bias on the conv (default none)")
    ap.add_argument("--tf32", action="store_true",
                    help="leave cuDNN's TF32 for float32 on (default: true fp32 on both sides)")
    ap.add_argument("--act", choices=sorted(ACTS), default=None,
                    help="also time the fused block act(conv + bias)")
    ap.add_argument("--json", default=None, help="write every number here")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("dw_nchw_layers.py needs a GPU")
    torch.backends.cudnn.allow_tf32 = args.tf32
    layers = [lay for lay in LAYERS
              if args.layers is None or any(s in lay[0] for s in args.layers)]
    rows = []
    for dtype_name in args.dtypes:
        for lay in layers:
            rows.append(run_layer(*lay, dtype_name, args))
            r = rows[-1]
            print(f"# {r['layer']} {dtype_name}: torch {r['us']['torch best']:.1f} us, "
                  f"auto ({r['auto']}) {cell(r['us'], r['status'], 'auto')} us",
                  file=sys.stderr, flush=True)
    report(f"NCHW depthwise layers, {torch.cuda.get_device_name()}, batch {args.batch}, torch "
           f"{torch.__version__}, {'TF32 allowed' if args.tf32 else 'true fp32'}", rows, args,
           tf32=args.tf32)

if __name__ == "__main__":
    main()
