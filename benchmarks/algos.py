"""Every algorithm of a family forced on each of a list of shapes, against torch: which one wins
where (the evidence behind the automatic choice's rules in csrc/reduce/dispatch.cu and
csrc/mv/dispatch.cu). Benchmark tooling only: it measures, it changes nothing.

    python3 benchmarks/algos.py [--family reduce mv] [--dtypes bf16 fp32] [--shapes sweep]
                                [--json results/algos.json]
    python3 benchmarks/algos.py --from-sweep results/h100_sweep.json.gz --dtypes bf16 \
                                [--below 0.97] [--max-elems 16777216] [--list]

Shapes: the sweep's (benchmarks/sweep.py) rows/cols/A/A.t layouts at the sizes where the first
H200 sweep found gpukern below 0.97x, plus neighbours. Each point: the output of every algorithm
that can run the shape is checked against torch in float64 (the sweep's tolerance), then every
side is timed the way the sweep times it (a CUDA graph of calls when a call is short, else events
with the L2 flushed), in the same run. Prints one line per point: torch's time, the automatic
choice and each algorithm's time, the best marked.
"""
import argparse
import gzip
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torch_ops  # noqa: E402
from timing import time_cuda, time_cuda_graph  # noqa: E402

DT = {"bf16": torch.bfloat16, "fp32": torch.float32}
RED_ALGOS = ["small", "seg_contig", "seg", "row", "col_vec", "col", "row_vec", "seg_runs", "flat",
             "copy", "periodic"]
MV_ALGOS = ["rows_vec", "rows", "cols_vec", "cols", "rows_mma", "rows_short", "cols_short",
            "cols_periodic"]

# (layout, rows, cols): reduce "rows" = x [a, b] over dim -1, "cols" = x [a, b] over dim 0;
# mv "A" = A [a, b], "A.t" = A [b, a].t() (a rows of the product, b the reduced length).
REDUCE_SHAPES = [
    ("rows", 16, 16384), ("rows", 256, 16384), ("rows", 384, 24576), ("rows", 1024, 16384),
    ("rows", 256, 65536), ("rows", 4096, 1536), ("rows", 4096, 4096), ("rows", 6144, 4096),
    ("rows", 16, 1 << 24), ("rows", 4096, 65536), ("rows", 65536, 1536), ("rows", 1 << 20, 1),
    ("rows", 384, 24576), ("rows", 1536, 1536), ("rows", 1024, 1536), ("rows", 64, 65536),
    ("cols", 1, 1 << 24), ("cols", 4, 1 << 22), ("cols", 6, 1 << 20), ("cols", 16, 1 << 20),
    ("cols", 96, 65536), ("cols", 1 << 24, 4), ("cols", 1 << 22, 6), ("cols", 1 << 20, 16),
    ("cols", 1 << 22, 16), ("cols", 1 << 20, 24), ("cols", 1 << 22, 64), ("cols", 1 << 20, 256),
    ("cols", 65536, 24), ("cols", 1536, 4), ("cols", 24576, 96), ("cols", 24, 393216),
    ("cols", 64, 262144), ("cols", 4, 16), ("cols", 256, 24),
]
MV_SHAPES = [
    ("A", 4096, 256), ("A", 65536, 256), ("A", 1 << 20, 256), ("A", 256, 16), ("A", 1 << 20, 16),
    ("A", 4096, 4096), ("A", 8192, 8192), ("A", 64, 1 << 20),
    ("A.t", 64, 1 << 20), ("A.t", 16, 1 << 24), ("A.t", 64, 1 << 22), ("A.t", 256, 256),
    ("A.t", 4096, 256), ("A.t", 1 << 20, 16), ("A.t", 4096, 4096), ("A.t", 8192, 8192),
]


def _time(fn, est_us):
    if est_us < 40:
        return time_cuda_graph(fn, calls=100 if est_us < 10 else 50) * 1e3
    return time_cuda(fn, reps=20) * 1e3


def _estimate(fn):
    """The sweep's estimate: a 10-call CUDA graph's per-call time (benchmarks/sweep.py)."""
    from sweep import _estimate_us
    return _estimate_us(fn)


def _err(out, ref):
    o = out.double()
    return float((o - ref).norm() / ref.norm().clamp_min(1e-30))


def run_point(family, layout, a, b, dtype, tol, only=None):
    g = torch.Generator(device="cuda").manual_seed(0)
    if family == "reduce":
        x = torch.randn(a, b, device="cuda", generator=g).to(dtype)
        dim = -1 if layout == "rows" else 0
        torch_fn = lambda: torch.sum(x, dim)  # noqa: E731
        ours_fn = lambda: torch_ops.sum(x, dim)  # noqa: E731
        ref = x.double().sum(dim)
        names, args = RED_ALGOS, ("sum", x, dim)
    else:
        A = (torch.randn(a, b, device="cuda", generator=g) if layout == "A"
             else torch.randn(b, a, device="cuda", generator=g).t()).to(dtype)
        v = torch.randn(b, device="cuda", generator=g).to(dtype)
        torch_fn = lambda: torch.mv(A, v)  # noqa: E731
        ours_fn = lambda: torch_ops.mv(A, v)  # noqa: E731
        ref = torch.mv(A.double(), v.double())
        names, args = MV_ALGOS, ("mv", A, v)
    fam = "reduce" if family == "reduce" else "mv"
    auto = torch_ops.algorithm(*args)
    est = _estimate(torch_fn)
    row = {"family": family, "layout": layout, "shape": [a, b], "dtype": str(dtype).split(".")[-1],
           "auto": auto, "torch_us": _time(torch_fn, est), "algos": {}}
    for n in names:
        if only and n not in only and n != auto:
            continue
        with torch_ops.force_algorithm(fam, n):
            try:
                torch_ops.algorithm(*args)
            except RuntimeError:
                continue
            err = _err(ours_fn(), ref)
            if not err <= tol:
                row["algos"][n] = {"error": err}
                continue
            row["algos"][n] = {"us": _time(ours_fn, _estimate(ours_fn)), "err": err}
    return row


def sweep_shapes(path, dtypes, max_elems, below=None):
    """[(layout, a, b)] of a sweep JSON's 2-D points that algos.py can run: the sum family's
    rows / cols (the reduce kernels are the same for mean, amax, amin) and mv's A / A.t, for the
    series of the given dtypes (bf16, fp32), at most max_elems elements, and with a speedup under
    `below` if given. Sorted, without duplicates."""
    opener = gzip.open if path.endswith(".gz") else open  # earlier sweeps are kept gzipped
    with opener(path, "rt") as f:
        points = json.load(f)["points"]
    out = set()
    for p in points:
        layout, dt = (p["series"].split() + [""])[:2]
        if dt not in dtypes or len(p["shape"]) != 2:
            continue
        if not ((p["family"] == "sum" and layout in ("rows", "cols")) or
                (p["family"] == "mv" and layout in ("A", "A.t"))):
            continue
        a, b = (int(v) for v in p["shape"])
        if a * b > max_elems or a * b == 0:
            continue
        if below is not None and not (p.get("speedup") and p["speedup"] < below):
            continue
        out.add((layout, a, b))
    return sorted(out)


def grid_shapes(specs, max_elems, quick):
    """[(layout, a, b)]: the sweep's grid (benchmarks/sweep.py axis()) for each "LAYOUT:MAXROWS"
    spec, the outputs (cols: b, x [a, b] over dim 0; A.t: a) at most MAXROWS."""
    from sweep import axis, coarse_axis
    vals = axis(1, max_elems)
    if quick:
        vals = coarse_axis(vals, 2)
    out = []
    for spec in specs:
        layout, cap = spec.split(":")
        for r in vals:
            for n in vals:
                if r <= int(cap) and r * n <= max_elems:
                    out.append((layout, n, r) if layout == "cols" else (layout, r, n))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--family", nargs="+", default=["reduce", "mv"], choices=["reduce", "mv"])
    p.add_argument("--dtypes", nargs="+", default=["bf16", "fp32"], choices=list(DT))
    p.add_argument("--json", default=None)
    p.add_argument("--shapes", nargs="+", default=None,
                   help="instead of the built-in lists: LAYOUT:AxB, e.g. cols:16x4096 A.t:6x1024 "
                        "(rows/cols for reduce, A/A.t for mv)")
    p.add_argument("--from-sweep", default=None, metavar="SWEEP.json",
                   help="instead of the built-in lists: the 2-D rows/cols (sum) and A/A.t (mv) "
                        "points of a benchmarks/sweep.py JSON, of the --dtypes, up to "
                        "--max-elems elements (--below X: only those under X times torch)")
    p.add_argument("--max-elems", type=int, default=1 << 24)
    p.add_argument("--below", type=float, default=None)
    p.add_argument("--list", action="store_true", help="print the shapes and exit")
    p.add_argument("--algos", nargs="+", default=None,
                   help="time only these algorithms (and the automatic choice)")
    p.add_argument("--grid", nargs="+", default=None, metavar="LAYOUT:MAXROWS",
                   help="instead of the lists: every point of the sweep's 2-D grid (powers of 2 "
                        "and 3 * 2^k, at most --max-elems elements) of each LAYOUT with at most "
                        "MAXROWS outputs, e.g. cols:32 A.t:32 (--quick-grid: every 2nd value)")
    p.add_argument("--quick-grid", action="store_true")
    args = p.parse_args()
    given = None
    if args.shapes:
        given = []
        for spec in args.shapes:
            layout, ab = spec.split(":")
            a, b = (int(v) for v in ab.split("x"))
            given.append((layout, a, b))
    if args.from_sweep:
        given = sweep_shapes(args.from_sweep, args.dtypes, args.max_elems, args.below)
    if args.grid:
        given = grid_shapes(args.grid, args.max_elems, args.quick_grid)
    if args.list:
        keep = {"reduce": ("rows", "cols"), "mv": ("A", "A.t")}
        for layout, a, b in given or []:
            if any(layout in keep[f] for f in args.family):
                print(f"{layout}:{a}x{b}")
        return
    if not torch.cuda.is_available():
        sys.exit("algos.py: needs a CUDA device")
    torch.backends.cuda.matmul.allow_tf32 = False
    rows = []
    print(f"# {torch.cuda.get_device_name()}; times in us; * = fastest gpukern algorithm")
    for fam in args.family:
        shapes = REDUCE_SHAPES if fam == "reduce" else MV_SHAPES
        if given is not None:
            keep = ("rows", "cols") if fam == "reduce" else ("A", "A.t")
            shapes = [sh for sh in given if sh[0] in keep]
        for dt in args.dtypes:
            tol = 2e-2 if dt == "bf16" else 1e-4
            for layout, a, b in shapes:
                r = run_point(fam, layout, a, b, DT[dt], tol, args.algos)
                rows.append(r)
                timed = {n: v["us"] for n, v in r["algos"].items() if "us" in v}
                best = min(timed, key=timed.get) if timed else None
                cells = " ".join(f"{n}{'*' if n == best else ''}={v:.1f}" if "us" in d else
                                 f"{n}=WRONG({d['error']:.1e})"
                                 for n, d in r["algos"].items() for v in [d.get("us", 0)])
                sp = r["torch_us"] / timed[r["auto"]] if r["auto"] in timed else float("nan")
                print(f"{fam} {layout} {dt} {a}x{b}: torch={r['torch_us']:.1f} auto={r['auto']} "
                      f"({sp:.2f}x) | {cells}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
