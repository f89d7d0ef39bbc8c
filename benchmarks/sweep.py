"""Size sweep: gpukern against torch at every size, for the issue "Never slower than ATen or cuBLAS
at any size". Benchmark tooling only: it measures, it changes nothing.

    python3 benchmarks/sweep.py [--families sum mv ...] [--dtypes bfloat16 float32] [--quick]
                                [--max-elems N] [--budget SECONDS] [--out results] [--device cpu]
    python3 benchmarks/sweep.py --list [--quick]        # the grid's point counts, nothing timed
    python3 benchmarks/sweep.py --from-json results/h100_sweep.json.gz   # the .md and .png again

The grids (sizes are powers of 2 and 3 * 2^k; "elements" are the input's):
- sum, mean, amax (bfloat16, float32):
  rows   x [R, L] contiguous reduced over dim -1 (the contiguous dim), R, L = 1 .. 2^28, R*L <= 2^28
  cols   x [L, R] contiguous reduced over dim 0 (the strided dim), same grid
  full   x [n] reduced to one value, n = 1 .. 2^28
  bnd    (sum, bfloat16 only) x [B, N, D] summed over N, N in {1000, 1024}, D < 128
- mv (bfloat16, float32): A [M, N] contiguous ("A") and A = [N, M].t() ("A.t"), M, N = 1 .. 2^28,
  M*N <= 2^28 (few rows x long N included)
- conv1d (float32): x [1, 1, N], w [1, 1, 16], padding 15 ("full"), N = 1 .. 2^26
- conv2d (float32): x [1, 1, H, H], w [1, 1, K, K], K in {5, 7}, padding 'same', H = 32 .. 8192

Each point: gpukern's output is checked against torch in float64 (norm-relative error within
benchmarks/cases.py's tolerance per dtype, the one benchmarks/run.py applies; torch's own error is
recorded beside it); a wrong or failing output is reported and not timed. Then both are timed the
same way in the same run, with benchmarks/timing.py's helpers: a first estimate (the per-call
time of a CUDA graph of 10 calls, no host time in it) picks the method for the point, the same
for every side: below ~40 us per call, a CUDA graph of 50-100 calls replayed (time_cuda_graph: no launch gaps; inputs stay in L2),
else one call between CUDA events with the L2 flushed by reading before each (time_cuda, median
of 20). If a graph cannot be captured, every side of that point is timed with events instead.
Then every point whose speedup came out below 1.1x is timed again (--recheck ROUNDS, default 5): ROUNDS rounds, gpukern and each
baseline one after the other in every round, the same method for all; each side's median over the rounds replaces the first pass, which the JSON keeps as "first".
A single noisy reading then neither flags a point nor clears it. A point still below 0.97x after
that is timed in 3 x ROUNDS more interleaved rounds, and each side's median over all 4 x ROUNDS
rounds replaces it (the JSON keeps every round's time under "rounds_ms").
speedup = torch's time / gpukern's time; for the convolutions torch's time is the faster of
F.conv*d with cudnn.benchmark off and on (allow_tf32 off, as run.py). Points below 0.97x are
flagged SLOW.

--quick keeps about every 4th point: on a 1-D sweep every 4th power of 2 and every 4th 3 * 2^k,
on a 2-D grid every 2nd value of each axis; the bnd grid every 4th point. Without --quick the
coarse points are measured first, then the rest, so a run cut short by --budget (or by a SIGTERM,
e.g. `timeout`) has covered every family coarsely first; the points left are listed as skipped,
and the files are written either way. A first pass cut by --budget still rechecks the points it
measured (the recheck then runs until it ends or a SIGTERM stops it).

--device cpu (or no GPU visible) is a smoke mode: a tiny grid (at most 4096 elements, conv2d up
to 64x64), wall-clock medians of gpukern's CPU kernels against torch's CPU ops. Its speedups say
nothing about the GPU.

Writes <out>/<name>_sweep.json (every point), .md (summary, the points below 0.97x, one table per
series) and .png (speedup against size per family, one line per layout/dtype: the lowest speedup
over the shapes of each size, every point as a dot; horizontal lines at 1.0 and 0.97). <name> is
the GPU's short name (h100, h200; cpu), as benchmarks/run.py names its files.
"""
import argparse
import gzip
import json
import math
import os
import signal
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Optional, Tuple

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch_ops  # noqa: E402
from cases import _TOL  # noqa: E402  (the tolerance per dtype run.py applies)
from run import result_name  # noqa: E402
from timing import time_cpu, time_cuda, time_cuda_graph  # noqa: E402
from plot import try_plot  # noqa: E402

MAX_ELEMS = 1 << 28
CONV1D_MAX = 1 << 26
CONV2D_SIDES = (32, 8192)
CPU_MAX_ELEMS = 1 << 12
CPU_CONV2D_MAX_SIDE = 64
GRAPH_BELOW_US = 40.0  # estimated call time under which a point is timed by graph replay
FLAG_BELOW = 0.97
EVENT_REPS = 20
CHECKPOINT_S = 60.0
RECHECK_ROUNDS = 5
RECHECK_BELOW = 1.1  # first-pass speedups under this are timed again (both sides, interleaved)
ESCALATE = 3  # points still below FLAG_BELOW after the recheck: this many times its rounds more
REDUCE_OPS = ("sum", "mean", "amax")
FAMILIES = REDUCE_OPS + ("mv", "conv1d", "conv2d")
DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32, "float16": torch.float16}
SHORT = {torch.bfloat16: "bf16", torch.float32: "fp32", torch.float16: "fp16"}
BND_N = (1000, 1024)
BND_D = (1, 2, 3, 4, 8, 12, 16, 24, 32, 48, 64, 96, 100, 127)
BND_B = (1, 4, 16, 64, 256, 1024)


# ----------------------------------------------------------------------------- the grid

def axis(lo, hi):
    """Powers of 2 and 3 * 2^k in [lo, hi], ascending."""
    vals = {1 << k for k in range(63) if lo <= (1 << k) <= hi}
    vals |= {3 << k for k in range(63) if lo <= (3 << k) <= hi}
    return sorted(vals)


def coarse_axis(vals, step):
    """Every `step`-th power of 2 and every `step`-th 3 * 2^k of an axis() list, counted from its
    smallest power of 2 (so the ends lo = 2^a and hi = 2^(a + j*step) stay), the 3 * 2^k points
    about midway between the powers kept."""
    pows = [v for v in vals if v & (v - 1) == 0]
    k0 = pows[0].bit_length() - 1 if pows else 0
    off = round(step / 2 - math.log2(3)) % step
    keep = []
    for v in vals:
        if v & (v - 1) == 0:
            if (v.bit_length() - 1 - k0) % step == 0:
                keep.append(v)
        elif ((v // 3).bit_length() - 1 - k0 - off) % step == 0:
            keep.append(v)
    if vals and vals[-1] not in keep and vals[-1] & (vals[-1] - 1) == 0:
        keep.append(vals[-1])  # the largest power of 2 always stays
    return keep


@dataclass
class Point:
    family: str  # sum, mean, amax, mv, conv1d, conv2d
    layout: str  # rows, cols, full, bnd; A, A.t; k16, k5, k7
    dtype: torch.dtype
    shape: Tuple[int, ...]  # the input's shape (mv: A's logical [M, N])
    coarse: bool

    @property
    def series(self):
        return f"{self.layout} {SHORT[self.dtype]}"

    @property
    def elems(self):
        return math.prod(self.shape)

    @property
    def label(self):
        s = "x".join(map(str, self.shape))
        return {"rows": s + " dim=-1", "cols": s + " dim=0", "bnd": s + " dim=1"}.get(
            self.layout, s)


def build_points(families, dtypes, max_elems, cpu):
    """Every point of the selected grids, in family order."""
    if cpu:
        max_elems = min(max_elems, CPU_MAX_ELEMS)
    pts = []
    full_axis = axis(1, max_elems)
    full_coarse = set(coarse_axis(full_axis, 4))
    axis2_coarse = set(coarse_axis(full_axis, 2))

    def grid2(family, layout, dt, transpose):
        for r in full_axis:  # outer size (outputs / rows M)
            for n in full_axis:  # reduced length / N
                if r * n <= max_elems:
                    shape = (n, r) if transpose else (r, n)
                    pts.append(Point(family, layout, dt, shape,
                                     r in axis2_coarse and n in axis2_coarse))

    for fam in families:
        if fam in REDUCE_OPS:
            for dt in dtypes:
                grid2(fam, "rows", dt, False)
                grid2(fam, "cols", dt, True)
                for n in full_axis:
                    pts.append(Point(fam, "full", dt, (n,), n in full_coarse))
            if fam == "sum" and torch.bfloat16 in dtypes:
                bnd = [(b, n, d) for n in BND_N for d in BND_D for b in BND_B
                       if b * n * d <= max_elems]
                for i, shp in enumerate(bnd):
                    pts.append(Point(fam, "bnd", torch.bfloat16, shp,
                                     i % 4 == 0 or i == len(bnd) - 1))
        elif fam == "mv":
            for dt in dtypes:
                grid2(fam, "A", dt, False)
                grid2(fam, "A.t", dt, False)
        elif fam == "conv1d" and torch.float32 in dtypes:
            ax = axis(1, min(CONV1D_MAX, max_elems))
            co = set(coarse_axis(ax, 4))
            pts += [Point(fam, "k16", torch.float32, (n,), n in co) for n in ax]
        elif fam == "conv2d" and torch.float32 in dtypes:
            hi = CPU_CONV2D_MAX_SIDE if cpu else CONV2D_SIDES[1]
            ax = [h for h in axis(CONV2D_SIDES[0], hi) if h * h <= max_elems]
            co = set(coarse_axis(ax, 4))
            for k in (5, 7):
                pts += [Point(fam, f"k{k}", torch.float32, (h, h), h in co) for h in ax]
    return pts


# ----------------------------------------------------------------------------- one point

@dataclass
class Built:
    ours: object
    baselines: dict  # name -> (fn, cudnn.benchmark flag or None)
    reference: object
    bytes: int
    dim: Optional[object] = None


def _randn(shape, dtype, device, seed):
    g = torch.Generator(device=device).manual_seed(seed)
    return torch.randn(shape, generator=g, device=device, dtype=torch.float32).to(dtype)


def make(p: Point, device) -> Built:
    es = torch.empty((), dtype=p.dtype).element_size()
    if p.family in REDUCE_OPS:
        ours_fn, base_fn = getattr(torch_ops, p.family), getattr(torch, p.family)
        x = _randn(p.shape, p.dtype, device, 7)
        dim = {"rows": -1, "cols": 0, "bnd": 1, "full": None}[p.layout]
        kw = {} if dim is None else {"dim": dim}
        out_elems = p.elems // (p.shape[dim] if dim is not None else p.elems)
        return Built(lambda: ours_fn(x, **kw),
                     {"torch." + p.family: (lambda: base_fn(x, **kw), None)},
                     lambda: base_fn(x.double(), **kw), (p.elems + out_elems) * es, dim)
    if p.family == "mv":
        m, n = p.shape
        a = _randn((n, m), p.dtype, device, 5).t() if p.layout == "A.t" else \
            _randn((m, n), p.dtype, device, 5)
        v = _randn((n,), p.dtype, device, 6)
        return Built(lambda: torch_ops.mv(a, v), {"torch.mv": (lambda: torch.mv(a, v), None)},
                     lambda: torch.mv(a.double(), v.double()), (m * n + n + m) * es)
    if p.family == "conv1d":
        (n,) = p.shape
        k = 16
        x = _randn((1, 1, n), p.dtype, device, 1)
        w = _randn((1, 1, k), p.dtype, device, 2)
        base = {"F.conv1d": (lambda: F.conv1d(x, w, None, 1, k - 1), False)}
        if device != "cpu":
            base["F.conv1d+bm"] = (lambda: F.conv1d(x, w, None, 1, k - 1), True)
        return Built(lambda: torch_ops.conv1d(x, w, None, 1, k - 1), base,
                     lambda: F.conv1d(x.double(), w.double(), None, 1, k - 1),
                     (n + k + n + k - 1) * es)
    if p.family == "conv2d":
        h, w_ = p.shape
        k = int(p.layout[1:])
        x = _randn((1, 1, h, w_), p.dtype, device, 3)
        w = _randn((1, 1, k, k), p.dtype, device, 4)
        base = {"F.conv2d": (lambda: F.conv2d(x, w, None, 1, "same"), False)}
        if device != "cpu":
            base["F.conv2d+bm"] = (lambda: F.conv2d(x, w, None, 1, "same"), True)
        return Built(lambda: torch_ops.conv2d(x, w, None, 1, "same"), base,
                     lambda: F.conv2d(x.double(), w.double(), None, 1, "same"),
                     (2 * h * w_ + k * k) * es)
    raise ValueError(p.family)


def rel_err(out, ref):
    """Norm-relative error of out against the float64 reference (run.py's norm_rel_err, computed
    on the output's device)."""
    if out.shape != ref.shape:
        return float("inf")
    o, r = out.detach().double(), ref.detach().double()
    if torch.isnan(o).any() and not torch.isnan(r).any():
        return float("inf")
    denom = r.norm().item()
    return (o - r).norm().item() / (denom if denom > 0 else 1.0)


def _with_flag(flag, fn):
    """Runs fn() with torch.backends.cudnn.benchmark = flag (None: leave it)."""
    if flag is None:
        return fn()
    old = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = flag
    try:
        return fn()
    finally:
        torch.backends.cudnn.benchmark = old


def _estimate_us(fn):
    """Per-call GPU time of fn() from a CUDA graph of 10 calls (median of 3 replays), only to
    pick the method: no host time in it, so host noise cannot flip a point between methods (the
    quick sweeps of 2026-11-26 timed single calls between events, and a 2 us reduction read
    40-500 us on a busy host and was timed with events+flush). A call that cannot be captured:
    the least of 5 single calls between events."""
    try:
        return time_cuda_graph(fn, calls=10, reps=3) * 1e3
    except RuntimeError:
        torch.cuda.synchronize()
    fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(5):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e) * 1e3)
    return min(ts)


def pick_method(sides):
    """(method name, graph calls or None, estimate_us): the same method for every side."""
    est = max(_with_flag(flag, lambda: _estimate_us(fn)) for fn, flag in sides.values())
    if est < GRAPH_BELOW_US:
        calls = 100 if est < 20 else 50
        return f"graph{calls}", calls, est
    return "events+flush", None, est


def time_one(fn, flag, calls):
    """One side, one way: graph replay of `calls` calls, or events with the L2 flushed."""
    if calls:
        return _with_flag(flag, lambda: time_cuda_graph(fn, calls=calls))
    return _with_flag(flag, lambda: time_cuda(fn, reps=EVENT_REPS))


def time_sides(sides, device):
    """sides: {name: (fn, flag)} -> ({name: ms}, method, estimate_us), every side the same way."""
    if device == "cpu":
        return {k: time_cpu(fn) for k, (fn, _) in sides.items()}, "wall", None
    method, calls, est = pick_method(sides)
    if calls:
        try:
            return ({k: time_one(fn, flag, calls) for k, (fn, flag) in sides.items()}, method,
                    est)
        except RuntimeError:  # not capturable: every side with events
            torch.cuda.synchronize()
            method = "events+flush (no graph)"
    return ({k: time_one(fn, flag, None) for k, (fn, flag) in sides.items()}, method, est)


def recheck(p: Point, row, device, rounds):
    """A point's timing again, `rounds` rounds with the sides interleaved (gpukern, then each
    baseline, in every round), the method picked again; every side's median over the rounds
    replaces the first pass's times (kept under "first"). For the points whose first speedup is
    near or below the flag, so that one noisy reading neither flags nor clears a point."""
    built = make(p, device)
    sides = {"gpukern": (built.ours, None)}
    sides.update(built.baselines)
    method, calls, est = pick_method(sides)
    if calls is None and row["method"] == "events+flush (no graph)":
        method = row["method"]
    per = {k: [] for k in sides}
    try:
        for _ in range(rounds):
            for k, (fn, flag) in sides.items():
                per[k].append(time_one(fn, flag, calls))
    except RuntimeError:  # a graph that cannot be captured: keep the first pass
        torch.cuda.synchronize()
        return row
    if "first" not in row:
        row["first"] = {k: row[k] for k in ("method", "estimate_us", "ours_ms", "baselines_ms",
                                             "speedup")}
    # A second recheck (the points still flagged after the first) adds its rounds to the first's:
    # the median is over every round of the recheck, none dropped.
    samples = row.setdefault("rounds_ms", {})
    for k, v in per.items():
        samples.setdefault(k, []).extend(v)
    times = {k: statistics.median(samples[k]) for k in per}
    row["method"], row["estimate_us"] = f"{method} x{len(samples['gpukern'])}", est
    row["ours_ms"] = times.pop("gpukern")
    row["baselines_ms"] = times
    _set_speedup(row, built.bytes)
    return row


def _set_speedup(row, nbytes):
    times = row["baselines_ms"]
    best = min(times, key=times.get)
    row["best"], row["torch_ms"] = best, times[best]
    row["speedup"] = times[best] / row["ours_ms"] if row["ours_ms"] > 0 else None
    row["ours_GBps"] = nbytes / (row["ours_ms"] * 1e-3) / 1e9 if row["ours_ms"] > 0 else None
    row["status"] = "SLOW" if row["speedup"] is not None and row["speedup"] < FLAG_BELOW else "ok"


def measure(p: Point, device):
    row = {"family": p.family, "layout": p.layout, "dtype": SHORT[p.dtype], "series": p.series,
           "shape": list(p.shape), "label": p.label, "elems": p.elems}
    built = make(p, device)
    row["bytes"], row["dim"] = built.bytes, built.dim
    tol = _TOL[p.dtype]
    try:
        out = built.ours()
    except RuntimeError as e:
        row.update(status="ERROR", error=str(e).splitlines()[0][:160])
        return row
    ref = built.reference()
    row["err"] = rel_err(out, ref)
    first = next(iter(built.baselines.values()))[0]
    try:
        row["torch_err"] = rel_err(first(), ref)
    except RuntimeError as e:
        row["torch_err"] = None
        row["torch_error"] = str(e).splitlines()[0][:160]
    del out, ref
    if not row["err"] <= tol:
        row.update(status="WRONG", error=f"norm-relative error {row['err']:.2e} > {tol:.0e} "
                                         f"(torch's own: {row['torch_err']})")
        return row
    sides = {"gpukern": (built.ours, None)}
    sides.update(built.baselines)
    try:
        times, method, est = time_sides(sides, device)
    except RuntimeError as e:  # a baseline failing to run is reported, the point not timed
        row.update(status="ERROR", error="timing: " + str(e).splitlines()[0][:160])
        return row
    row["method"], row["estimate_us"] = method, est
    row["ours_ms"] = times.pop("gpukern")
    row["baselines_ms"] = times
    _set_speedup(row, built.bytes)
    return row


# ----------------------------------------------------------------------------- output

def _us(ms):
    return f"{ms * 1e3:.2f}" if ms is not None else "-"


def fmt_line(r):
    if "ours_ms" not in r:
        return (f"{r['family']:6} {r['series']:9} {r['label']:26} {r['status']}: "
                f"{r.get('error', '')}")
    return (f"{r['family']:6} {r['series']:9} {r['label']:26} ours {_us(r['ours_ms']):>9} us  "
            f"{r['best']:<12} {_us(r['torch_ms']):>9} us  {r['speedup']:6.2f}x  {r['method']:<12}"
            f" {r['status'] if r['status'] != 'ok' else ''}")


def summarize(rows, skipped):
    """{family: line}: points measured, the lowest speedup and where, points below 0.97x."""
    out = {}
    fams = list(dict.fromkeys([r["family"] for r in rows] + [s["family"] for s in skipped]))
    for fam in fams:
        rs = [r for r in rows if r["family"] == fam]
        timed = [r for r in rs if r.get("speedup") is not None]
        wrong = sum(r["status"] == "WRONG" for r in rs)
        err = sum(r["status"] in ("ERROR", "OOM") for r in rs)
        sk = sum(s["family"] == fam for s in skipped)
        if timed:
            worst = min(timed, key=lambda r: r["speedup"])
            low = sum(r["speedup"] < FLAG_BELOW for r in timed)
            line = (f"{fam}: {len(timed)} points measured, min {worst['speedup']:.2f}x at "
                    f"{worst['series']} {worst['label']}, {low} below {FLAG_BELOW}x")
        else:
            line = f"{fam}: 0 points measured"
        extra = ([f"{wrong} wrong"] * bool(wrong) + [f"{err} failed"] * bool(err)
                 + [f"{sk} skipped"] * bool(sk))
        out[fam] = line + ("; " + ", ".join(extra) if extra else "")
    return out


def _table(rows):
    lines = ["| family | series | shape | elements | method | torch | torch us | gpukern us | "
             "speedup | GB/s | status |", "|" + "---|" * 11]
    for r in rows:
        if "ours_ms" in r:
            lines.append(f"| {r['family']} | {r['series']} | {r['label']} | {r['elems']} | "
                         f"{r['method']} | {r['best']} | {_us(r['torch_ms'])} | "
                         f"{_us(r['ours_ms'])} | {r['speedup']:.3f}x | "
                         f"{r['ours_GBps']:.1f} | {r['status']} |")
        else:
            lines.append(f"| {r['family']} | {r['series']} | {r['label']} | {r['elems']} | - | - "
                         f"| - | - | - | - | {r['status']}: {r.get('error', '')} |")
    return lines


def _sort_key(r):
    return (FAMILIES.index(r["family"]) if r["family"] in FAMILIES else 99, r["series"],
            r["elems"], r["shape"])


def write_markdown(path, result):
    info, rows, skipped = result["info"], result["points"], result["skipped"]
    rows = sorted(rows, key=_sort_key)
    md = [f"# Size sweep: gpukern against torch ({info.get('gpu') or 'CPU smoke mode'})", "",
          f"`{json.dumps(info)}`", "", info["method"], "", "## Summary", ""]
    md += [f"- {line}" for line in result["summary"].values()]
    if result.get("stopped"):
        md += ["", f"Stopped early: {result['stopped']}."]
    low = [r for r in rows if r["status"] in ("SLOW", "WRONG", "ERROR", "OOM")]
    md += ["", f"## Points below {FLAG_BELOW}x, wrong or failing ({len(low)})", ""]
    md += _table(low) if low else ["none"]
    if skipped:
        md += ["", f"## Skipped ({len(skipped)}; every one in the JSON)", ""]
        by = {}
        for s in skipped:
            by.setdefault((s["family"], s["series"]), []).append(s)
        for (fam, ser), ss in by.items():
            md.append(f"- {fam} {ser}: {len(ss)} points, {min(s['elems'] for s in ss)} to "
                      f"{max(s['elems'] for s in ss)} elements")
    series = list(dict.fromkeys((r["family"], r["series"]) for r in rows))
    for fam, ser in series:
        md += ["", f"## {fam} {ser}", ""]
        md += _table([r for r in rows if r["family"] == fam and r["series"] == ser])
    with open(path, "w") as f:
        f.write("\n".join(md) + "\n")


def plot_sweep(result, path):
    """Speedup against size, one panel per family, one line per layout/dtype (the lowest speedup
    over the shapes of each size; every point as a dot). Raises ImportError without matplotlib."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    rows = [r for r in result["points"] if r.get("speedup")]
    if not rows:
        raise ValueError("no timed points to plot")
    fams = [f for f in FAMILIES if any(r["family"] == f for r in rows)]
    ncol = min(3, len(fams))
    nrow = -(-len(fams) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(6 * ncol, 4.3 * nrow), squeeze=False)
    for ax, fam in zip(axes.flat, fams):
        rs = [r for r in rows if r["family"] == fam]
        for i, ser in enumerate(dict.fromkeys(r["series"] for r in sorted(rs, key=_sort_key))):
            pts = [r for r in rs if r["series"] == ser]
            color = f"C{i % 10}"
            ax.scatter([r["elems"] for r in pts], [r["speedup"] for r in pts], s=6, alpha=0.3,
                       color=color, linewidths=0)
            worst = {}
            for r in pts:
                worst[r["elems"]] = min(worst.get(r["elems"], math.inf), r["speedup"])
            xs = sorted(worst)
            ax.plot(xs, [worst[x] for x in xs], color=color, linewidth=1.2, marker=".",
                    markersize=3, label=f"{ser} (min {min(worst.values()):.2f}x)")
            bad = [r for r in pts if r["speedup"] < FLAG_BELOW]
            ax.scatter([r["elems"] for r in bad], [r["speedup"] for r in bad], s=18,
                       marker="x", color="red", linewidths=0.8)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.axhline(FLAG_BELOW, color="red", linewidth=0.8, linestyle="--")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
        ax.yaxis.set_minor_formatter(FuncFormatter(
            lambda v, _: f"{v:g}x" if ax.get_ylim()[1] / ax.get_ylim()[0] < 20 else ""))
        ax.set_xlabel("input elements")
        ax.set_ylabel("speedup (torch time / gpukern time)")
        ax.set_title(result["summary"].get(fam, fam), fontsize=8)
        ax.legend(fontsize=7, loc="best")
        ax.grid(True, which="major", alpha=0.3)
    for ax in list(axes.flat)[len(fams):]:
        ax.set_visible(False)
    info = result["info"]
    where = info.get("gpu") or "CPU smoke mode (wall clock; says nothing about the GPU)"
    fig.suptitle(f"gpukern against torch by size on {where}, torch {info.get('torch')}, "
                 f"{info.get('time')}; line: lowest speedup over the shapes of a size, dots: every "
                 f"shape, red x: below {FLAG_BELOW}x", fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_all(stem, result, png=True):
    result["summary"] = summarize(result["points"], result["skipped"])
    with open(stem + ".json", "w") as f:
        json.dump(result, f, indent=1)
    write_markdown(stem + ".md", result)
    written = [stem + ".json", stem + ".md"]
    if png:
        try_plot(plot_sweep, result, stem + ".png", written)
    return written


# ----------------------------------------------------------------------------- main

class Terminated(Exception):
    pass


def _on_sigterm(signum, frame):
    raise Terminated()


def load_json(path):
    """A sweep's JSON, plain or gzipped (the results folder keeps earlier sweeps as .json.gz)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--families", nargs="+", default=list(FAMILIES),
                   help=f"any of {', '.join(FAMILIES)}, or 'reduce' (sum mean amax)")
    p.add_argument("--dtypes", nargs="+", default=["bfloat16", "float32"], choices=list(DTYPES),
                   help="for the reductions and mv (bnd: bfloat16 only; conv: float32 only)")
    p.add_argument("--quick", action="store_true", help="the coarse grid: about every 4th point")
    p.add_argument("--max-elems", type=int, default=MAX_ELEMS,
                   help=f"largest input, in elements (default 2^28; CPU mode: at most "
                        f"{CPU_MAX_ELEMS})")
    p.add_argument("--budget", type=float, default=None,
                   help="seconds: no new point starts after this; the rest are listed as skipped")
    p.add_argument("--out", default="results", help="folder for <name>_sweep.{json,md,png}")
    p.add_argument("--name", default=None, help="file stem (default: the GPU's short name; cpu)")
    p.add_argument("--device", choices=["cuda", "cpu"], default=None)
    p.add_argument("--list", action="store_true", help="print the point counts and exit")
    p.add_argument("--recheck", type=int, default=RECHECK_ROUNDS, metavar="ROUNDS",
                   help=f"time the points below {RECHECK_BELOW}x again in ROUNDS interleaved "
                        f"rounds, medians (default {RECHECK_ROUNDS}; 0: no recheck)")
    p.add_argument("--from-json", default=None, help="write the .md and .png again from a JSON")
    args = p.parse_args(argv)

    if args.from_json:
        result = load_json(args.from_json)
        stem = args.from_json[:-len(".json.gz")] if args.from_json.endswith(".gz") else \
            os.path.splitext(args.from_json)[0]
        print("written:", ", ".join(write_all(stem, result)[1:]))
        return 0

    fams = []
    for f in args.families:
        fams += list(REDUCE_OPS) if f == "reduce" else [f]
    bad = [f for f in fams if f not in FAMILIES]
    if bad:
        p.error(f"unknown families {bad}; choose from {FAMILIES} or 'reduce'")
    fams = list(dict.fromkeys(fams))
    dtypes = [DTYPES[d] for d in dict.fromkeys(args.dtypes)]
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    cpu = device == "cpu"

    points = build_points(fams, dtypes, args.max_elems, cpu)
    order = [q for q in points if q.coarse] + ([] if args.quick else
                                               [q for q in points if not q.coarse])
    if args.list:
        by = {}
        for q in order:
            by[(q.family, q.series)] = by.get((q.family, q.series), 0) + 1
        for (fam, ser), n in by.items():
            print(f"{fam:6} {ser:9} {n:6d} points")
        print(f"total {len(order)} points ({'quick' if args.quick else 'full'} grid, "
              f"{'CPU smoke' if cpu else 'GPU'} sizes)")
        return 0

    if not cpu and not torch.cuda.is_available():
        print("--device cuda: no CUDA device visible (--device cpu runs the smoke mode)")
        return 2
    if not cpu and not torch_ops.has_cuda_kernels():
        print("gpukern was built without CUDA kernels; rebuild on a machine with nvcc")
        return 2
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.deterministic = False
    info = {"torch": torch.__version__, "device": device, "time": time.strftime("%F %T"),
            "grid": "quick" if args.quick else "full", "families": fams,
            "dtypes": [SHORT[d] for d in dtypes],
            "max_elems": min(args.max_elems, CPU_MAX_ELEMS) if cpu else args.max_elems,
            "budget_s": args.budget, "points_planned": len(order)}
    if cpu:
        info["method"] = ("CPU smoke mode: tiny grid, wall-clock median of gpukern's CPU kernels "
                          "and torch's CPU ops (benchmarks/timing.py time_cpu); the speedups say "
                          "nothing about the GPU.")
        print(f"No GPU used (--device cpu or none visible): {info['method']}")
    else:
        info["gpu"] = torch.cuda.get_device_name()
        info["cudnn"] = torch.backends.cudnn.version()
        info["method"] = (f"Output checked against float64 first. Per point, every side timed the "
                          f"same way: estimated call < {GRAPH_BELOW_US:g} us: CUDA graph replay "
                          f"(time_cuda_graph, per-call time, inputs L2-resident); else one call "
                          f"between CUDA events after an L2 flush by reading (time_cuda, median "
                          f"of {EVENT_REPS}); the estimate is a 10-call graph's per-call time. "
                          f"Points whose first speedup is below {RECHECK_BELOW:g}x are timed "
                          f"again in {args.recheck} rounds, the sides interleaved in each, and "
                          f"every side's median over the rounds replaces the first pass (kept "
                          f"in the JSON as 'first'); a point still below {FLAG_BELOW:g}x then gets "
                          f"{ESCALATE * args.recheck} more rounds, the median over all of them. "
                          f"speedup = torch / gpukern; convs: best of "
                          f"cudnn.benchmark off/on, TF32 off.")
        print(f"GPU {info['gpu']}, torch {torch.__version__}, cuDNN {info['cudnn']}")
    print(f"{len(order)} points planned ({info['grid']} grid); budget "
          f"{args.budget if args.budget else 'none'} s", flush=True)

    name = (args.name or result_name(info)) + "_sweep"
    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, name)
    result = {"info": info, "points": [], "skipped": [], "stopped": None}
    rows = result["points"]
    signal.signal(signal.SIGTERM, _on_sigterm)
    t0 = last_ckpt = time.perf_counter()
    i = 0
    budget_cut = False  # the first pass stopped at --budget: its points are still rechecked
    try:
        for i, q in enumerate(order):
            if args.budget is not None and time.perf_counter() - t0 > args.budget:
                result["stopped"] = f"budget of {args.budget:g} s reached after {i} points"
                budget_cut = True
                break
            try:
                row = measure(q, device)
            except torch.OutOfMemoryError as e:
                row = {"family": q.family, "layout": q.layout, "dtype": SHORT[q.dtype],
                       "series": q.series, "shape": list(q.shape), "label": q.label,
                       "elems": q.elems, "status": "OOM", "error": str(e).splitlines()[0][:160]}
            rows.append(row)
            print(f"[{i + 1}/{len(order)} {time.perf_counter() - t0:6.0f}s] {fmt_line(row)}",
                  flush=True)
            if not cpu and (q.elems >= (1 << 26) or row["status"] == "OOM"):
                torch.cuda.empty_cache()
            if time.perf_counter() - last_ckpt > CHECKPOINT_S:
                write_all(stem, result, png=False)
                last_ckpt = time.perf_counter()
        else:
            i = len(order)
    except (Terminated, KeyboardInterrupt) as e:
        i = len(rows)
        result["stopped"] = f"{type(e).__name__} after {i} points"
    # A first pass cut by --budget still rechecks what it measured (a SIGTERM does not).
    if not cpu and args.recheck > 0 and (not result["stopped"] or budget_cut):
        again = [(q, r) for q, r in zip(order, rows)
                 if r.get("speedup") is not None and r["speedup"] < RECHECK_BELOW]
        print(f"\nrechecking {len(again)} points below {RECHECK_BELOW}x ({args.recheck} "
              f"interleaved rounds each)", flush=True)
        t1 = time.perf_counter()
        try:
            for j, (q, r) in enumerate(again):
                was = r["speedup"]
                recheck(q, r, device, args.recheck)
                print(f"[recheck {j + 1}/{len(again)} {time.perf_counter() - t1:6.0f}s] "
                      f"{fmt_line(r)} (first {was:.2f}x)", flush=True)
            # Points still flagged: ESCALATE x ROUNDS more rounds each, added to their first
            # recheck's (the median over all), so that a disturbance lasting a few rounds of
            # one side neither flags a point nor, on the other side, clears it.
            still = [(q, r) for q, r in again
                     if r.get("speedup") is not None and r["speedup"] < FLAG_BELOW]
            if still:
                more = ESCALATE * args.recheck
                print(f"\nrechecking {len(still)} points still below {FLAG_BELOW}x ({more} more "
                      f"interleaved rounds each, the median over all {more + args.recheck})",
                      flush=True)
            for j, (q, r) in enumerate(still):
                was = r["speedup"]
                recheck(q, r, device, ESCALATE * args.recheck)
                print(f"[recheck+ {j + 1}/{len(still)} {time.perf_counter() - t1:6.0f}s] "
                      f"{fmt_line(r)} (after {args.recheck} rounds {was:.2f}x, first "
                      f"{r.get('first', r)['speedup']:.2f}x)", flush=True)
        except (Terminated, KeyboardInterrupt) as e:
            result["stopped"] = (result["stopped"] + "; " if budget_cut else "") + \
                f"{type(e).__name__} during the recheck"
        info["recheck_s"] = round(time.perf_counter() - t1, 1)
        info["rechecked"] = sum("first" in r for r in rows)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    for q in order[i:]:
        result["skipped"].append({"family": q.family, "series": q.series, "label": q.label,
                                  "shape": list(q.shape), "elems": q.elems})
    elapsed = time.perf_counter() - t0
    info["elapsed_s"] = round(elapsed, 1)
    info["points_measured"] = len(rows)
    if rows:
        info["s_per_point"] = round(elapsed / len(rows), 4)

    written = write_all(stem, result)
    print(f"\n{len(rows)} points in {elapsed:.0f} s ({elapsed / max(1, len(rows)) * 1e3:.0f} ms "
          f"per point)" + (f"; stopped: {result['stopped']}" if result["stopped"] else ""))
    if result["skipped"]:
        by = {}
        for s in result["skipped"]:
            by.setdefault((s["family"], s["series"]), []).append(s["elems"])
        print(f"skipped {len(result['skipped'])} points: " + "; ".join(
            f"{fam} {ser} x{len(e)} ({min(e)}..{max(e)} elements)" for (fam, ser), e in by.items()))
    for line in result["summary"].values():
        print("summary " + line)
    print(f"results written to {', '.join(written)}")
    if any(r["status"] in ("WRONG", "ERROR") for r in rows):
        return 1
    return 3 if (result["stopped"] or "").startswith(("Terminated", "KeyboardInterrupt")) else 0


if __name__ == "__main__":
    sys.exit(main())
