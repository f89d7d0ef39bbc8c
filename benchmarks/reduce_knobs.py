"""The reduce kernels' launch shapes swept on the shapes where the size sweep finds gpukern
slower than torch: seg_contig's blocks per row, the col kernels' output lanes and splits of R,
each forced through the experiment knobs of csrc/reduce/dispatch.cu (GPUKERN_REDUCE_KNOBS=1,
GPUKERN_REDUCE_BPS / _LGW / _SPLITS). Benchmark tooling only: it measures, it changes nothing.

    GPUKERN_REDUCE_KNOBS=1 python3 benchmarks/reduce_knobs.py [--json out.json]

Each point: torch.sum, gpukern's automatic choice, then every knob value; each output checked
against float64 first, every side timed the way benchmarks/algos.py times it (CUDA graph replay
under ~40 us, else events with the L2 flushed). One line per point, the fastest marked.
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
POINTS = (
    [("rows", a, b, dt, "seg_contig", "BPS", ROWS_BPS)
     for a, b, dt in [(384, 24576, "fp32"), (256, 65536, "bf16"), (64, 16384, "bf16"),
                      (96, 16384, "bf16"), (256, 16384, "fp32"), (256, 24576, "fp32"),
                      (96, 98304, "fp32"), (64, 24576, "bf16"), (24, 16384, "bf16")]]
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


def set_knob(name, value):
    """name "A" or "A+B" (value then a tuple); None clears every knob."""
    for k in ("BPS", "LGW", "SPLITS"):
        os.environ.pop("GPUKERN_REDUCE_" + k, None)
    if name:
        names = name.split("+")
        values = value if isinstance(value, tuple) else (value,)
        for n, v in zip(names, values):
            os.environ["GPUKERN_REDUCE_" + n] = str(v)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--json", default=None)
    args = p.parse_args()
    if os.environ.get("GPUKERN_REDUCE_KNOBS") != "1":
        sys.exit("reduce_knobs.py: run with GPUKERN_REDUCE_KNOBS=1 in the environment")
    if not torch.cuda.is_available():
        sys.exit("reduce_knobs.py: needs a CUDA device")
    print(f"# {torch.cuda.get_device_name()}; times in us; * = fastest")
    rows = []
    for layout, a, b, dt, algo, knob, vals in POINTS:
        g = torch.Generator(device="cuda").manual_seed(0)
        x = torch.randn(a, b, device="cuda", generator=g).to(DT[dt])
        dim = -1 if layout == "rows" else 0
        ref = x.double().sum(dim)
        tol = 2e-2 if dt == "bf16" else 1e-4
        set_knob(None, 0)
        torch_fn = lambda: torch.sum(x, dim)  # noqa: E731
        ours = lambda: torch_ops.sum(x, dim)  # noqa: E731
        r = {"layout": layout, "shape": [a, b], "dtype": dt, "algo": algo, "knob": knob,
             "auto": torch_ops.algorithm("sum", x, dim),
             "torch_us": _time(torch_fn, _estimate(torch_fn)),
             "auto_us": _time(ours, _estimate(ours)), "knobs": {}}
        with torch_ops.force_algorithm("reduce", algo):
            for v in vals:
                set_knob(knob, v)
                err = _err(ours(), ref)
                if not err <= tol:
                    r["knobs"][str(v)] = {"error": err}
                    continue
                r["knobs"][str(v)] = {"us": _time(ours, _estimate(ours))}
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
