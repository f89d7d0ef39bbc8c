"""Depthwise conv2d across shapes, for issue #32's "any depthwise layer a user sends must not be
slower than torch": plane sizes 1x1 to 256x256, strides 1 and 2, filters 3 to 31, 8 to 2048
channels, float32 and bfloat16, NCHW and channels_last. Benchmark tooling only: it measures.

    python3 benchmarks/dw_sweep.py [--quick] [--budget SECONDS] [--out results] [--list]
    python3 benchmarks/dw_sweep.py --forced results/h100_dw_sweep.json.gz [--below 1.0]
        [--min-h 14] [--max-k 7]     # every depthwise algorithm forced on those points

The grid (padding K // 2, no bias, dilation 1, groups = C):
    plane H = W in 1, 4, 7, 14, 28, 56, 112, 256 (--quick: 1, 7, 14, 28, 56, 112, 256)
    stride 1, 2;  K in 3, 5, 7, 15, 31 (--quick: 3, 5, 7, 31);  C in 8, 32, 128, 512, 2048
    (--quick: 8, 64, 512, 2048);  dtype float32, bfloat16;  layout NCHW, channels_last.
Batch N = 8, halved until the input has at most 2^25 elements (N >= 1); a point whose input
still exceeds that, or whose multiply-adds (N C OH OW K^2) exceed 2^31, is left out (listed as
skipped by --list), as is a filter wider than the padded plane.

Points are measured in a fixed shuffled order, so that a run cut by --budget covers the grid
evenly. Per point: gpukern's output (the automatic choice, raced against cuDNN on the first call;
what runs after it is recorded as the algorithm, the rules' choice as rules_algorithm) against
torch's F.conv2d in float32 on the same (rounded) inputs, norm-relative error within 1e-5
(float32) or 8e-3 (bfloat16, as benchmarks/layers.py); a wrong or failing output is reported,
not timed.
Then both are timed the same way (benchmarks/timing.py): a CUDA graph of 10 calls replayed, the
L2 flushed by reading before each replay, per-call time, median of 5 replays; torch's time is
the faster of cudnn.benchmark off and on. Points under 1.0x are timed again in 5 more rounds,
the two sides interleaved, and each side's median over all rounds replaces the first reading
(the JSON keeps it). speedup = torch / gpukern.

Writes <out>/<gpu>_dw_sweep.json (every point) and .md (a summary per dtype and layout, and the
points below 1.0x). Needs a GPU (without one: --list only).
"""
import argparse
import gzip
import json
import os
import random
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch_ops  # noqa: E402
from dw_layers import gpu_name, norm_rel_err  # noqa: E402  (the layer script's helpers)
from timing import time_cuda_graph  # noqa: E402

PLANES = (1, 4, 7, 14, 28, 56, 112, 256)
PLANES_QUICK = (1, 7, 14, 28, 56, 112, 256)
KS = (3, 5, 7, 15, 31)
KS_QUICK = (3, 5, 7, 31)
CS = (8, 32, 128, 512, 2048)
CS_QUICK = (8, 64, 512, 2048)
STRIDES = (1, 2)
DTYPES = ("float32", "bfloat16")
LAYOUTS = ("nchw", "channels_last")
MAX_IN = 1 << 25
MAX_FMA = 1 << 31
TOL = {"float32": 1e-5, "bfloat16": 8e-3}
CALLS, REPS, RECHECK = 10, 5, 5


def grid(quick):
    """[(point dict)] in measuring order, and [(skipped point, why)]."""
    out, skipped = [], []
    for dt in DTYPES:
        for lay in LAYOUTS:
            for h in (PLANES_QUICK if quick else PLANES):
                for s in STRIDES:
                    for k in (KS_QUICK if quick else KS):
                        for c in (CS_QUICK if quick else CS):
                            p = {"dtype": dt, "layout": lay, "H": h, "stride": s, "K": k, "C": c}
                            pad = k // 2
                            if k > h + 2 * pad:
                                skipped.append((p, "filter wider than the padded plane"))
                                continue
                            n = 8
                            while n > 1 and n * c * h * h > MAX_IN:
                                n //= 2
                            oh = (h + 2 * pad - k) // s + 1
                            if n * c * h * h > MAX_IN:
                                skipped.append((p, "input over 2^25 elements at batch 1"))
                                continue
                            if n * c * oh * oh * k * k > MAX_FMA:
                                skipped.append((p, "over 2^31 multiply-adds"))
                                continue
                            p["N"] = n
                            out.append(p)
    random.Random(0).shuffle(out)  # a run cut by --budget still covers the grid evenly
    return out, skipped


def label(p):
    return (f"{p['N']}x{p['C']}x{p['H']}x{p['H']} k{p['K']} s{p['stride']} "
            f"{p['dtype'][:4]} {'cl' if p['layout'] == 'channels_last' else 'nchw'}")


def build(p):
    dtype = getattr(torch, p["dtype"])
    g = torch.Generator(device="cuda").manual_seed(p["C"] * 1000 + p["H"] * 10 + p["K"])
    x = torch.randn(p["N"], p["C"], p["H"], p["H"], device="cuda", generator=g).to(dtype)
    if p["layout"] == "channels_last":
        x = x.contiguous(memory_format=torch.channels_last)
    w = (torch.randn(p["C"], 1, p["K"], p["K"], device="cuda", generator=g) / p["K"]).to(dtype)
    s, pad, c = p["stride"], p["K"] // 2, p["C"]
    ours = lambda: torch_ops.conv2d(x, w, None, s, pad, 1, c)  # noqa: E731
    theirs = lambda: F.conv2d(x, w, None, s, pad, 1, c)  # noqa: E731
    ref = F.conv2d(x.float(), w.float(), None, s, pad, 1, c)
    return x, w, ours, theirs, ref


def time_torch(theirs):
    """torch's best per-call ms: cudnn.benchmark off and on."""
    old = torch.backends.cudnn.benchmark
    best = None
    try:
        for bm in (False, True):
            torch.backends.cudnn.benchmark = bm
            theirs()  # the benchmark's search, outside the graph
            t = time_cuda_graph(theirs, calls=CALLS, reps=REPS, flush=True)
            best = t if best is None else min(best, t)
    finally:
        torch.backends.cudnn.benchmark = old
    return best


def measure(p):
    row = dict(p)
    row["label"] = label(p)
    try:
        x, w, ours, theirs, ref = build(p)
        def query():
            return torch_ops.algorithm("conv2d", x, w, None, p["stride"], p["K"] // 2, 1, p["C"])
        row["rules_algorithm"] = query()
        row["err"] = norm_rel_err(ours(), ref)
        # After the first call, which races the rules' choice against cuDNN (csrc/conv/vendor.h):
        # what runs ("cudnn" where the race handed the point to cuDNN).
        row["algorithm"] = query()
        row["torch_err"] = norm_rel_err(theirs(), ref)
        if not row["err"] <= TOL[p["dtype"]]:
            row["status"] = "WRONG"
            return row
        row["ours_ms"] = time_cuda_graph(ours, calls=CALLS, reps=REPS, flush=True)
        row["torch_ms"] = time_torch(theirs)
        row["speedup"] = row["torch_ms"] / row["ours_ms"]
        if row["speedup"] < 1.0:  # again, the sides interleaved, medians over every round
            o, t = [row["ours_ms"]], [row["torch_ms"]]
            for _ in range(RECHECK):
                o.append(time_cuda_graph(ours, calls=CALLS, reps=REPS, flush=True))
                t.append(time_torch(theirs))
            row["first"] = {"ours_ms": row["ours_ms"], "torch_ms": row["torch_ms"],
                            "speedup": row["speedup"]}
            row["ours_ms"], row["torch_ms"] = statistics.median(o), statistics.median(t)
            row["speedup"] = row["torch_ms"] / row["ours_ms"]
        row["status"] = "ok" if row["speedup"] >= 1.0 else "SLOWER"
    except torch.OutOfMemoryError as e:
        row["status"] = "OOM"
        row["error"] = str(e).splitlines()[0][:160]
        torch.cuda.empty_cache()
    except RuntimeError as e:
        row["status"] = "FAILED"
        row["error"] = str(e).splitlines()[0][:200]
    return row


def write(stem, result):
    rows = result["points"]
    with open(stem + ".json", "w") as f:
        json.dump(result, f, indent=1)
    lines = [f"# Depthwise conv2d sweep ({result['info'].get('gpu', 'cpu')})", "",
             "`" + json.dumps(result["info"]) + "`", "",
             "us per call (CUDA graph of 10 calls, L2 flushed before each replay, median of 5; "
             "points under 1.0x timed again in 5 interleaved rounds, medians over all); torch = "
             "the faster of cudnn.benchmark off / on; speedup = torch / gpukern.", "",
             "## Summary", "",
             "| dtype | layout | points | below 1.0x | below 0.9x | min | median "
             "| wrong / failed |",
             "|---|---|---|---|---|---|---|---|"]
    for dt in DTYPES:
        for lay in LAYOUTS:
            sel = [r for r in rows if r["dtype"] == dt and r["layout"] == lay]
            sp = [r["speedup"] for r in sel if r.get("speedup") is not None]
            bad = sum(r["status"] in ("WRONG", "FAILED", "OOM") for r in sel)
            if not sel:
                continue
            lines.append(f"| {dt} | {lay} | {len(sel)} | {sum(v < 1.0 for v in sp)} | "
                         f"{sum(v < 0.9 for v in sp)} | "
                         f"{min(sp):.2f}x | {statistics.median(sp):.2f}x | {bad} |" if sp else
                         f"| {dt} | {lay} | {len(sel)} | - | - | - | - | {bad} |")
    slow = sorted((r for r in rows if r["status"] != "ok"),
                  key=lambda r: r.get("speedup", 0.0))
    lines += ["", f"## Points below 1.0x, wrong or failing ({len(slow)})", "",
              "| point | algorithm | torch us | gpukern us | speedup | status |",
              "|---|---|---|---|---|---|"]
    for r in slow:
        lines.append(f"| {r['label']} | {r.get('algorithm', '-')} | "
                     f"{r.get('torch_ms', float('nan')) * 1e3:.1f} | "
                     f"{r.get('ours_ms', float('nan')) * 1e3:.1f} | "
                     f"{r.get('speedup', float('nan')):.2f}x | {r['status']} |")
    with open(stem + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    return stem + ".json", stem + ".md"


NCHW_ALGOS = ("depthwise_small", "depthwise_strided", "depthwise_rows", "depthwise_tma",
              "depthwise_plane", "depthwise_nchw", "depthwise_large", "general_staged")
NHWC_ALGOS = ("depthwise_nhwc", "depthwise_nhwc_tile", "depthwise_nhwc_reg", "general_staged")


def forced(path, min_h, max_k, below):
    """Every depthwise algorithm forced on the points of an earlier run (JSON, plain or .gz)
    with planes of at least min_h, filters up to max_k and a speedup under `below`: per point
    torch's best and each algorithm that runs it (outputs checked first), us per call."""
    with (gzip.open if path.endswith(".gz") else open)(path, "rt") as f:
        pts = [r for r in json.load(f)["points"] if r.get("speedup") is not None and
               r["H"] >= min_h and r["K"] <= max_k and r["speedup"] < below]
    print(f"{len(pts)} points (planes >= {min_h}, K <= {max_k}, below {below}x)")
    out = []
    for r in pts:
        p = {k: r[k] for k in ("dtype", "layout", "H", "stride", "K", "C", "N")}
        x, w, ours, theirs, ref = build(p)
        row = {"label": label(p), "auto": r.get("algorithm"), "torch_us": time_torch(theirs) * 1e3,
               "algos": {}}
        for a in (NHWC_ALGOS if p["layout"] == "channels_last" else NCHW_ALGOS):
            try:
                with torch_ops.force_algorithm("conv2d", a):
                    if not norm_rel_err(ours(), ref) <= TOL[p["dtype"]]:  # NaN fails
                        row["algos"][a] = "WRONG"
                        continue
                    row["algos"][a] = time_cuda_graph(ours, calls=CALLS, reps=REPS,
                                                      flush=True) * 1e3
            except RuntimeError:
                torch.cuda.synchronize()
        best = min(((v, a) for a, v in row["algos"].items() if isinstance(v, float)),
                   default=(float("nan"), "-"))
        row["best"] = best[1]
        print(f"{row['label']:34s} torch {row['torch_us']:7.1f}  auto {row['auto']:20s} " +
              "  ".join(f"{a} {v:.1f}" if isinstance(v, float) else f"{a} {v}"
                        for a, v in row["algos"].items()) +
              f"  | best {best[1]} {row['torch_us'] / best[0]:.2f}x", flush=True)
        out.append(row)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the coarser grid")
    ap.add_argument("--budget", type=float, default=None,
                    help="seconds: no new point after this (the rest listed as not measured)")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                  "results"))
    ap.add_argument("--list", action="store_true", help="print the point counts and exit")
    ap.add_argument("--forced", default=None, metavar="JSON",
                    help="instead of the grid: every depthwise algorithm forced on the points of "
                         "an earlier run below --below (with --min-h, --max-k)")
    ap.add_argument("--below", type=float, default=1.0)
    ap.add_argument("--min-h", type=int, default=14)
    ap.add_argument("--max-k", type=int, default=7)
    args = ap.parse_args(argv)
    if args.forced:
        rows = forced(args.forced, args.min_h, args.max_k, args.below)
        with open(os.path.join(args.out, "dw_sweep_forced.json"), "w") as f:
            json.dump(rows, f, indent=1)
        return 0
    points, skipped = grid(args.quick)
    print(f"{len(points)} points, {len(skipped)} left out of the grid")
    if args.list or not torch.cuda.is_available():
        if not args.list:
            print("No GPU: nothing timed (--list gives the grid).")
        return 0
    torch.backends.cudnn.allow_tf32 = True  # irrelevant to depthwise; torch's default
    name = gpu_name()
    info = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
            "cudnn": torch.backends.cudnn.version(), "grid": "quick" if args.quick else "full",
            "time": time.strftime("%Y-%m-%d %H:%M:%S"), "budget_s": args.budget}
    result = {"info": info, "points": [], "not_measured": 0}
    t0 = time.perf_counter()
    for i, p in enumerate(points):
        if args.budget is not None and time.perf_counter() - t0 > args.budget:
            result["not_measured"] = len(points) - i
            break
        r = measure(p)
        result["points"].append(r)
        sp = f"{r['speedup']:.2f}x" if r.get("speedup") is not None else "-"
        print(f"[{i + 1}/{len(points)} {time.perf_counter() - t0:5.0f}s] {r['label']:34s} "
              f"{r.get('algorithm', '-'):20s} {sp:>7s} {r['status']}", flush=True)
    info["elapsed_s"] = round(time.perf_counter() - t0, 1)
    os.makedirs(args.out, exist_ok=True)
    print("written:", *write(os.path.join(args.out, f"{name}_dw_sweep"), result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
