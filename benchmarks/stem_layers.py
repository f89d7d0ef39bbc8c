"""Image stems (dense conv2d over 3 input channels): torch's best against gpukern's algorithms
forced, NCHW and channels_last.

    python3 benchmarks/stem_layers.py                       # fp32 (TF32 as torch's default) + bf16
    python3 benchmarks/stem_layers.py --algos stem_direct igemm --act hardswish

The layers: the stems of MobileNetV3 (3 -> 16, 3x3 stride 2), EfficientNet / RegNet (3 -> 32,
3x3 stride 2), ResNet (3 -> 64, 7x7 stride 2) and VGG (3 -> 64, 3x3 stride 1), batch 16 (--batch)
on 224x224 images, no bias (BatchNorm follows them). For each layer, dtype and memory format:

- correctness first: every candidate against F.conv2d in float64 on the CPU on the same rounded
  inputs (norm-relative error within benchmarks/dw_nchw_layers.py's bounds; fp32 with TF32's);
  a candidate that fails is reported WRONG and not timed;
- torch: F.conv2d with cudnn.benchmark off and on, the faster is "torch best";
- gpukern: the automatic choice, then each of --algos forced ("n/a" where it cannot run).

With --act NAME the fused block act(conv + bias) is timed too: torch's unfused sequence against
gpukern's conv2d_fused (auto and forced). Timing as benchmarks/layers.py: a CUDA graph of 20
calls replayed, L2 flushed before each replay, median of --reps. Writes a markdown table (and
--json PATH). Needs a GPU.
"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch_ops  # noqa: E402
from dw_nchw_layers import (ACTS, TOL, _Cudnn, can_run, norm_rel_err,  # noqa: E402
                            report, time_candidates, time_cudnn, timed_us)

# (label, C, O, input plane, K, stride)
LAYERS = [
    ("mobilenet 3->16 3x3 s2", 3, 16, 224, 3, 2),
    ("efficientnet 3->32 3x3 s2", 3, 32, 224, 3, 2),
    ("resnet 3->64 7x7 s2", 3, 64, 224, 7, 2),
    ("vgg 3->64 3x3 s1", 3, 64, 224, 3, 1),
]
ALGOS = ["stem_direct", "igemm", "general_staged"]


def _with_groups(fn_can_run):
    """dw_nchw_layers.can_run takes groups as its last argument; stems have groups 1."""
    return lambda name, x, w, b, stride, pad: fn_can_run(name, x, w, b, stride, pad, 1)


def run_layer(label, c, o, hw, k, stride, dtype_name, fmt, args):
    dtype = getattr(torch, dtype_name)
    tol = TOL["float32_tf32" if dtype_name == "float32" else dtype_name]
    g = torch.Generator().manual_seed(o * 31 + k)
    mf = torch.channels_last if fmt == "channels_last" else torch.contiguous_format
    x = torch.randn(args.batch, c, hw, hw, generator=g).to("cuda", dtype).contiguous(
        memory_format=mf)
    w = (torch.randn(o, c, k, k, generator=g) / k).to("cuda", dtype).contiguous(memory_format=mf)
    pad = k // 2
    ref = F.conv2d(x.double().cpu(), w.double().cpu(), None, stride, pad)
    row = dict(layer=label, dtype=dtype_name, format=fmt,
               shape=f"{args.batch}x{c}x{hw}x{hw} -> {o} k{k} s{stride}",
               auto=torch_ops.algorithm("conv2d", x, w, None, stride, pad), us={}, err={},
               status={})
    runnable = _with_groups(can_run)

    def conv_torch():
        return F.conv2d(x, w, None, stride, pad)

    def conv_gk():
        return torch_ops.conv2d(x, w, None, stride, pad)

    with torch.inference_mode():
        row["err"]["torch"] = norm_rel_err(conv_torch(), ref)
        time_cudnn(row, conv_torch, args.reps)
        time_candidates(row, conv_gk, ref, tol, args.reps, args.algos,
                        lambda n: runnable(n, x, w, None, stride, pad))
        if args.act:
            run_fused(row, x, w, o, stride, pad, dtype, tol, args, runnable)
    torch.cuda.empty_cache()
    return row


def run_fused(row, x, w, o, stride, pad, dtype, tol, args, runnable):
    act = args.act
    g = torch.Generator().manual_seed(7)
    b = torch.randn(o, generator=g).to("cuda", dtype)
    ref = ACTS[act](F.conv2d(x.double().cpu(), w.double().cpu(), b.double().cpu(), stride, pad))
    row["fused"] = {"act": act, "us": {}, "status": {}}

    def unfused():
        return ACTS[act](F.conv2d(x, w, b, stride, pad))

    def fused():
        return torch_ops.conv2d_fused(x, w, b, stride, pad, activation=act)

    for label_t, bm in (("cudnn", False), ("cudnn.bm", True)):
        row["fused"]["us"][label_t] = timed_us(unfused, args.reps, lambda bm=bm: _Cudnn(bm))
    row["fused"]["us"]["torch best"] = min(row["fused"]["us"]["cudnn"],
                                           row["fused"]["us"]["cudnn.bm"])
    time_candidates(row["fused"], fused, ref, tol, args.reps, args.algos,
                    lambda n: runnable(n, x, w, b, stride, pad))


def table(rows, algos, fused=False):
    cols = ["cudnn", "cudnn.bm", "torch best", "auto"] + algos
    head = ["layer", "dtype", "format", "auto is"] + cols + ["auto vs torch", "best forced"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        if fused and "fused" not in r:
            continue
        src = r["fused"] if fused else r
        us, st = src["us"], src["status"]
        tb = us["torch best"]
        auto = f"{tb / us['auto']:.2f}x" if "auto" in us else "-"
        timed = [a for a in algos if a in us]
        best = min(timed, key=lambda a: us[a]) if timed else None
        bf = f"{tb / us[best]:.2f}x ({best})" if best else "-"
        cells = [f"{us[k]:.1f}" if k in us else st.get(k, "") for k in cols]
        lines.append("| " + " | ".join([r["layer"], r["dtype"], r["format"], r["auto"]] + cells +
                                       [auto, bf]) + " |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"],
                    choices=["float32", "bfloat16", "float16"])
    ap.add_argument("--formats", nargs="+", default=["contiguous", "channels_last"],
                    choices=["contiguous", "channels_last"])
    ap.add_argument("--algos", nargs="+", default=ALGOS)
    ap.add_argument("--layers", nargs="+", default=None,
                    help="substrings of the layer labels to keep (default: every layer)")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--reps", type=int, default=20, help="graph replays (median)")
    ap.add_argument("--act", choices=sorted(ACTS), default=None,
                    help="also time the fused block act(conv + bias)")
    ap.add_argument("--json", default=None, help="write every number here")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("stem_layers.py needs a GPU")
    layers = [lay for lay in LAYERS
              if args.layers is None or any(s in lay[0] for s in args.layers)]
    rows = []
    for dtype_name in args.dtypes:
        for fmt in args.formats:
            for lay in layers:
                r = run_layer(*lay, dtype_name, fmt, args)
                rows.append(r)
                print(f"# {r['layer']} {dtype_name} {fmt}: torch {r['us']['torch best']:.1f} us,"
                      f" auto ({r['auto']}) {r['us'].get('auto', r['status'].get('auto'))}",
                      file=sys.stderr, flush=True)
    report(f"Image stems, {torch.cuda.get_device_name()}, batch {args.batch}, torch "
           f"{torch.__version__}, fp32 with torch's default TF32 flags", rows, args, table)

if __name__ == "__main__":
    main()
