"""The channels_last depthwise layers of issue #32 (ConvNeXt-T 7x7, MobileNetV3 3x3 / 5x5 at
batch 16), torch's best against every gpukern algorithm that runs them.

    python3 benchmarks/dw_layers.py                      # fp32 + bf16, every layer
    python3 benchmarks/dw_layers.py --dtypes bfloat16 --layers convnext
    python3 benchmarks/dw_layers.py --reps 10            # quicker

For each layer and dtype, on a channels_last input [16, C, H, H] with padding K // 2 and a bias
where the model has one (ConvNeXt: yes; MobileNetV3: no, BatchNorm follows):
- the float64 reference (F.conv2d in float64 on the GPU), then every candidate's output checked
  against it (norm-relative error at most TOL[dtype]; a candidate that fails is reported WRONG
  and not timed, one that cannot run the shape "n/a");
- torch: F.conv2d with cudnn.benchmark off and on (the faster is torch's best);
- gpukern: the automatic choice ("auto", the algorithm it names beside it), each channels_last
  depthwise algorithm forced (depthwise_nhwc, depthwise_nhwc_tile, depthwise_nhwc_reg), and
  depthwise_nhwc_reg with each tile variant forced (GPUKERN_NHWC_REG_TILE=big / small / stage
  / lean / lean2 (stage: 16-bit 7x7 stride 1 only; lean, lean2: 16-bit 3x3 stride 2 only;
  elsewhere the automatic choice), read by the launch at capture time).
Timing as benchmarks/layers.py (benchmarks/timing.py): a CUDA graph of 20 back-to-back calls,
replayed with the L2 flushed (a 256 MiB read) before each replay, CUDA events around the replay,
per-call time = replay / 20; median of --reps replays (30). Writes <out>/<gpu>_dw_layers.md and
.json (gpu: the short name, e.g. h100) and prints the table.
"""
import argparse
import json
import os
import sys
from contextlib import contextmanager

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch_ops  # noqa: E402
from timing import time_cuda, time_cuda_graph  # noqa: E402

# (model, C, H = W, K, stride), batch 16, padding K // 2
LAYERS = [
    ("convnext", 96, 56, 7, 1), ("convnext", 192, 28, 7, 1), ("convnext", 384, 14, 7, 1),
    ("convnext", 768, 7, 7, 1),
    ("mobilenet", 16, 112, 3, 1), ("mobilenet", 64, 112, 3, 2), ("mobilenet", 72, 56, 3, 1),
    ("mobilenet", 72, 56, 5, 2), ("mobilenet", 120, 28, 5, 1), ("mobilenet", 240, 28, 3, 2),
    ("mobilenet", 200, 14, 3, 1), ("mobilenet", 184, 14, 3, 1), ("mobilenet", 480, 14, 3, 1),
    ("mobilenet", 672, 14, 3, 1), ("mobilenet", 672, 14, 5, 2), ("mobilenet", 960, 7, 5, 1),
]
BATCH = 16
# gpukern candidates: (label, forced algorithm or None, GPUKERN_NHWC_REG_TILE or None)
CANDIDATES = [
    ("auto", None, None),
    ("depthwise_nhwc", "depthwise_nhwc", None),
    ("depthwise_nhwc_tile", "depthwise_nhwc_tile", None),
    ("depthwise_nhwc_reg", "depthwise_nhwc_reg", None),
    ("reg:big", "depthwise_nhwc_reg", "big"),
    ("reg:small", "depthwise_nhwc_reg", "small"),
    # the shared-memory staged kernel: 16-bit 7x7 stride 1 only (elsewhere the knob falls back
    # to the automatic choice)
    ("reg:stage", "depthwise_nhwc_reg", "stage"),
    # the lean instances (<= 80 registers, 3 blocks of 256 per SM): 16-bit 3x3 stride 2 only,
    # 1 x 2 tiles; lean2: 2 x 2 (elsewhere the knob falls back to the automatic choice)
    ("reg:lean", "depthwise_nhwc_reg", "lean"),
    ("reg:lean2", "depthwise_nhwc_reg", "lean2"),
]
# Norm-relative error against float64 (benchmarks/layers.py's bounds).
TOL = {"float32": 1e-5, "float16": 1e-3, "bfloat16": 8e-3}
GRAPH_CALLS = 20
ENV = "GPUKERN_NHWC_REG_TILE"


@contextmanager
def setting(algo, variant):
    """gpukern forced to `algo` (None: the automatic choice), the reg tile variant forced."""
    old = os.environ.get(ENV)
    if variant is None:
        os.environ.pop(ENV, None)
    else:
        os.environ[ENV] = variant
    try:
        if algo is None:
            yield
        else:
            with torch_ops.force_algorithm("conv2d", algo):
                yield
    finally:
        if old is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = old


def norm_rel_err(out, ref):
    o, r = out.double(), ref.double()
    if o.shape != r.shape or (torch.isnan(o).any() and not torch.isnan(r).any()):
        return float("inf")
    d = r.norm().item()
    return (o - r).norm().item() / (d if d > 0 else 1.0)


def time_ms(fn, reps):
    """Per-call milliseconds: graph of GRAPH_CALLS calls, L2 flushed before each replay."""
    time_cuda(fn, reps=3, warmup=2, flush=True)  # warm-up (cudnn.benchmark tunes here)
    return time_cuda_graph(fn, calls=GRAPH_CALLS, reps=reps, flush=True)


def gpu_name():
    words = torch.cuda.get_device_name().lower().replace("-", " ").split()
    words = [w for w in words if w not in ("nvidia", "geforce", "tesla", "quadro")] or ["gpu"]
    stem = "_".join(words[:2]) if words[0].isalpha() and len(words) > 1 else words[0]
    return "".join(c if c.isalnum() or c == "_" else "_" for c in stem)


def run_layer(layer, dtype_name, reps, only=None):
    model, c, h, k, s = layer
    dtype = getattr(torch, dtype_name)
    g = torch.Generator(device="cuda").manual_seed(c * 100 + h + k)
    x = torch.randn(BATCH, c, h, h, device="cuda", generator=g).to(dtype)
    x = x.contiguous(memory_format=torch.channels_last)
    w = torch.randn(c, 1, k, k, device="cuda", generator=g).to(dtype)
    # The bias as the model has it: ConvNeXt's depthwise convs have one, MobileNetV3's do not
    # (BatchNorm follows them). With a bias cuDNN adds it in a second kernel, which on the small
    # MobileNet layers doubled torch's time: the first runs of this script gave every layer a
    # bias and so overstated gpukern's lead there (benchmarks/results/h*_dw_layers.md; the
    # census, benchmarks/layers.py, has the models' own layers).
    b = torch.randn(c, device="cuda", generator=g).to(dtype) if model == "convnext" else None
    pad = k // 2
    ref = F.conv2d(x.double(), w.double(), None if b is None else b.double(), s, pad, 1, c)
    row = {"model": model, "shape": f"{BATCH}x{c}x{h}x{h} k{k} s{s}", "dtype": dtype_name,
           "torch": {}, "gpukern": {}, "err": {}}
    # torch's best: cudnn.benchmark off and on
    tfn = lambda: F.conv2d(x, w, b, s, pad, 1, c)  # noqa: E731
    old = torch.backends.cudnn.benchmark
    try:
        for label, bm in (("cudnn", False), ("cudnn.bm", True)):
            torch.backends.cudnn.benchmark = bm
            row["err"][label] = norm_rel_err(tfn(), ref)
            row["torch"][label] = time_ms(tfn, reps) * 1e3
    finally:
        torch.backends.cudnn.benchmark = old
    # Floors in the same timing: an elementwise pass over x (reads x, writes an x-sized tensor
    # of the same layout: a stride-1 layer's bytes) and a one-element kernel (what a call costs
    # in the graph before any byte moves).
    xs, one = torch.empty_like(x), torch.ones(1, device="cuda", dtype=dtype)
    one_out = torch.empty_like(one)
    row["floor"] = {"x*1": time_ms(lambda: torch.mul(x, 1, out=xs), reps) * 1e3,
                    "1 elem": time_ms(lambda: torch.mul(one, 1, out=one_out), reps) * 1e3}
    row["auto_algo"] = torch_ops.algorithm("conv2d", x, w, b, s, pad, 1, c)
    gfn = lambda: torch_ops.conv2d(x, w, b, s, pad, 1, c)  # noqa: E731
    for label, algo, variant in CANDIDATES:
        if only and label not in only:
            continue
        with setting(algo, variant):
            try:
                out = gfn()
            except RuntimeError as e:
                if "cannot run this shape" not in str(e):
                    raise
                row["gpukern"][label] = "n/a"
                continue
            err = norm_rel_err(out, ref)
            row["err"][label] = err
            if not err <= TOL[dtype_name]:
                row["gpukern"][label] = "WRONG"
                continue
            row["gpukern"][label] = time_ms(gfn, reps) * 1e3
    return row


def markdown(rows, device, only=None):
    labels = [c[0] for c in CANDIDATES if not only or c[0] in only]
    head = ["layer", "dtype", "torch best", "x*1", "1 elem", *labels, "auto / torch",
            "best gpukern"]
    lines = [f"# channels_last depthwise layers, batch {BATCH} ({device})", "",
             "us per call (CUDA graph of 20 calls, L2 flushed before each replay); "
             "'auto / torch': torch's best time over the automatic choice's (> 1: gpukern "
             "faster). auto names the algorithm it picked. Floors in the same timing: 'x*1' "
             "an elementwise pass over the input (a stride-1 layer's bytes), '1 elem' a "
             "one-element kernel.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        tl = min(r["torch"], key=r["torch"].get)
        t = r["torch"][tl]
        fl = r.get("floor", {})
        cells = [f"{r['model']} {r['shape']}", r["dtype"], f"{t:.1f} ({tl})",
                 *(f"{fl[k]:.1f}" if k in fl else "-" for k in ("x*1", "1 elem"))]
        timed = {}
        for label in labels:
            v = r["gpukern"].get(label)
            if isinstance(v, float):
                timed[label] = v
                cell = f"{v:.1f}"
                if label == "auto":
                    cell += f" [{r['auto_algo']}]"
            else:
                cell = str(v)
            cells.append(cell)
        auto = timed.get("auto")
        cells.append(f"{t / auto:.2f}x" if auto else "-")
        if timed:
            best = min((lb for lb in timed if lb != "auto"), key=timed.get, default="auto")
            cells.append(f"{best} {t / timed[best]:.2f}x")
        else:
            cells.append("-")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"],
                   choices=sorted(TOL))
    p.add_argument("--layers", nargs="+", default=["convnext", "mobilenet"],
                   choices=["convnext", "mobilenet"])
    p.add_argument("--reps", type=int, default=30, help="replays per candidate (median)")
    p.add_argument("--candidates", nargs="+", choices=[c[0] for c in CANDIDATES],
                   help="time only these gpukern candidates (default: all)")
    p.add_argument("--sizes", nargs="+", type=int,
                   help="only the layers of these channel counts (e.g. 200 672)")
    p.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                 "results"))
    args = p.parse_args()
    if not torch.cuda.is_available() or not torch_ops.has_cuda_kernels():
        sys.exit("dw_layers.py needs a CUDA device and the CUDA build of gpukern")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False  # true fp32 on both sides
    device = torch.cuda.get_device_name()
    rows = []
    for dtype_name in args.dtypes:
        for layer in LAYERS:
            if layer[0] not in args.layers or (args.sizes and layer[1] not in args.sizes):
                continue
            row = run_layer(layer, dtype_name, args.reps, args.candidates)
            rows.append(row)
            print(json.dumps(row), flush=True)
    md = markdown(rows, device, args.candidates)
    print(md)
    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, f"{gpu_name()}_dw_layers")
    with open(stem + ".md", "w") as f:
        f.write(md)
    with open(stem + ".json", "w") as f:
        json.dump({"device": device, "batch": BATCH, "rows": rows}, f, indent=1)
    print(f"wrote {stem}.md and .json")


if __name__ == "__main__":
    main()
