"""The reduce kernels' launch shapes swept on the shapes where the size sweep finds gpukern
slower than torch: seg_contig's blocks per row, the col kernels' output lanes and splits of R,
each forced through the experiment knobs of csrc/reduce/dispatch.cu (GPUKERN_REDUCE_KNOBS=1,
GPUKERN_REDUCE_BPS / _LGW / _SPLITS); and mv's rows kernel's rows a block and splits of N
(csrc/mv/dispatch.cu: GPUKERN_MV_KNOBS=1, GPUKERN_MV_RPB / _SPLITS). Benchmark tooling only: it measures, it changes nothing.

    GPUKERN_REDUCE_KNOBS=1 GPUKERN_MV_KNOBS=1 python3 benchmarks/reduce_knobs.py [--json F]

Each point: torch.sum, gpukern's automatic choice, then every knob value; each output checked
against float64 first, every side timed the way benchmarks/algos.py times it (CUDA graph replay
under ~40 us, else events with the L2 flushed; the lesser of two such timings). One line per
point, the fastest marked.
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torch_ops  # noqa: E402
from algos import _err, _estimate, _time  # noqa: E402

DT = {"bf16": torch.bfloat16, "fp32": torch.float32}
# (layout, a, b, dtype, algorithm, knob, values): rows = x [a, b] over dim -1, cols over dim 0.
ROWS_BPS = [1, 2, 3, 4, 6, 8, 12, 16]
COL_LGW = [5, 6, 7, 8]
COL_SPLITS = [1, 2, 4, 8]
COL_GRID = [(lg, sp) for lg in COL_LGW for sp in (1, 2, 4)]  # (LGW, SPLITS) together
MV_GRID = [(r, sp) for r in (1, 8) for sp in (1, 2, 4, 8, 16, 32)]  # mv rows: (RPB, SPLITS)
POINTS = (
    [("rows", a, b, dt, "seg_contig", "BPS", ROWS_BPS)
     for a, b, dt in [(384, 24576, "fp32"), (256, 65536, "bf16"), (64, 16384, "bf16"),
                      (96, 16384, "bf16"), (256, 16384, "fp32"), (256, 24576, "fp32"),
                      (96, 98304, "fp32"), (64, 24576, "bf16"), (24, 16384, "bf16")]]
    + [("rows", a, b, dt, algo, "BPS", [1, 2] if algo == "seg_contig" else [0])
       for a, b, dt in [(4096, 1536, "bf16"), (4096, 4096, "bf16"), (6144, 1536, "bf16"),
                        (6144, 1536, "fp32"), (16384, 1536, "bf16"), (1024, 4096, "bf16")]
       for algo in ("row", "seg_contig")]
    + [("A", a, b, dt, algo, "RPB+SPLITS", MV_GRID)
       for a, b, dt, algo in [(96, 16384, "fp32", "rows_vec"), (4, 393216, "fp32", "rows_vec"),
                              (256, 4096, "fp32", "rows_vec"), (24, 65536, "fp32", "rows_vec"),
                              (1536, 4096, "fp32", "rows_vec"), (256, 24576, "bf16", "rows_vec"),
                              (64, 98304, "bf16", "rows_vec"), (1536, 1536, "bf16", "rows_vec"),
                              (256, 16384, "fp32", "rows_vec"), (6, 393216, "fp32", "rows_vec")]]
    + [("cols", a, b, dt, algo, "LGW+SPLITS", COL_GRID)
       for a, b, dt, algo in [(4, 65536, "bf16", "col"), (4, 262144, "bf16", "col"),
                              (4, 65536, "bf16", "col_vec"), (4, 262144, "bf16", "col_vec"),
                              (16, 65536, "bf16", "col_vec"), (16, 393216, "bf16", "col"),
                              (16, 393216, "bf16", "col_vec"), (16, 262144, "fp32", "col_vec"),
                              (24, 393216, "fp32", "col_vec"), (96, 98304, "fp32", "col_vec"),
                              (96, 65536, "bf16", "col_vec"), (24, 393216, "bf16", "col_vec"),
                              (96, 24576, "fp32", "col_vec"), (4, 16384, "bf16", "col"),
                              (64, 262144, "bf16", "col_vec"), (256, 65536, "bf16", "col_vec"),
                              (96, 16384, "fp32", "col_vec"), (4, 24576, "fp32", "col_vec")]]
)


def _t(fn):
    """The lesser of two timings (each a graph replay's median or events' median): a reading
    that host or clock noise lengthened is not kept."""
    est = _estimate(fn)
    return min(_time(fn, est), _time(fn, est))


def set_knob(name, value, family="REDUCE"):
    """name "A" or "A+B" (value then a tuple); None clears every knob."""
    for fam in ("REDUCE", "MV"):
        for k in ("BPS", "LGW", "SPLITS", "RPB"):
            os.environ.pop(f"GPUKERN_{fam}_{k}", None)
    if name:
        names = name.split("+")
        values = value if isinstance(value, tuple) else (value,)
        for n, v in zip(names, values):
            os.environ[f"GPUKERN_{family}_{n}"] = str(v)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--json", default=None)
    args = p.parse_args()
    if os.environ.get("GPUKERN_REDUCE_KNOBS") != "1" or os.environ.get("GPUKERN_MV_KNOBS") != "1":
        sys.exit("reduce_knobs.py: run with GPUKERN_REDUCE_KNOBS=1 GPUKERN_MV_KNOBS=1 in the "
                 "environment")
    if not torch.cuda.is_available():
        sys.exit("reduce_knobs.py: needs a CUDA device")
    print(f"# {torch.cuda.get_device_name()}; times in us; * = fastest")
    rows = []
    for layout, a, b, dt, algo, knob, vals in POINTS:
        g = torch.Generator(device="cuda").manual_seed(0)
        tol = 2e-2 if dt == "bf16" else 1e-4
        set_knob(None, 0)
        if layout in ("A", "A.t"):  # mv: A [a, b] (A.t: [b, a].t())
            fam, kfam = "mv", "MV"
            A = (torch.randn(a, b, device="cuda", generator=g) if layout == "A"
                 else torch.randn(b, a, device="cuda", generator=g).t()).to(DT[dt])
            v = torch.randn(b, device="cuda", generator=g).to(DT[dt])
            ref = torch.mv(A.double(), v.double())
            torch_fn = lambda: torch.mv(A, v)  # noqa: E731
            ours = lambda: torch_ops.mv(A, v)  # noqa: E731
            auto = torch_ops.algorithm("mv", A, v)
        else:
            fam, kfam = "reduce", "REDUCE"
            x = torch.randn(a, b, device="cuda", generator=g).to(DT[dt])
            dim = -1 if layout == "rows" else 0
            ref = x.double().sum(dim)
            torch_fn = lambda: torch.sum(x, dim)  # noqa: E731
            ours = lambda: torch_ops.sum(x, dim)  # noqa: E731
            auto = torch_ops.algorithm("sum", x, dim)
        r = {"layout": layout, "shape": [a, b], "dtype": dt, "algo": algo, "knob": knob,
             "auto": auto,
             "torch_us": _t(torch_fn), "auto_us": _t(ours), "knobs": {}}
        with torch_ops.force_algorithm(fam, algo):
            for kv in vals:
                set_knob(knob, kv, kfam)
                err = _err(ours(), ref)
                if not err <= tol:
                    r["knobs"][str(kv)] = {"error": err}
                    continue
                r["knobs"][str(kv)] = {"us": _t(ours)}
        set_knob(None, 0)
        rows.append(r)
        timed = {v: d["us"] for v, d in r["knobs"].items() if "us" in d}
        best = min(timed, key=timed.get) if timed else None
        cells = " ".join(f"{v.replace(' ', '')}{'*' if v == best else ''}={d['us']:.1f}"
                         if "us" in d else
                         f"{v}=WRONG" for v, d in r["knobs"].items())
        print(f"{layout} {dt} {a}x{b} {algo} {knob}: torch={r['torch_us']:.1f} "
              f"auto={r['auto']} {r['auto_us']:.1f} | {cells}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
