"""Plot one benchmark result file (benchmarks/run.py's JSON) as a PNG: per case, the speedup over
the best baseline measured in the same run, and the fraction of the roofline reached.

    python benchmarks/plot.py benchmarks/results/h100.json [--out benchmarks/results/h100.png]

Where a case was also timed with rotated inputs, the rotated numbers are plotted (the status of
such a case is judged on them; docs/performance.md says why). Needs matplotlib
(`pip install -e .[bench]`).
"""
import argparse
import json
import os
import sys


def case_values(row):
    """(speedup, roof) of one result row, preferring the rotated timing where it exists."""
    rot = row.get("ours_rot_ms") is not None
    speedup = row.get("speedup_rot" if rot else "speedup")
    roof = row.get("roof_rot" if rot else "roof")
    return speedup, roof


def plot(result, out_path):
    """Write the PNG of one result dict ({"info": ..., "rows": [...]}) to out_path. Raises
    ImportError when matplotlib is missing."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    info = result["info"]
    rows = [r for r in result["rows"] if r.get("ours_ms") is not None]
    if not rows:
        raise ValueError("no timed rows to plot")
    ids = [r["id"] for r in rows]
    speedups, roofs = zip(*(case_values(r) for r in rows))
    met = [r.get("status") != "MISS" for r in rows]

    height = max(4.0, 0.28 * len(rows) + 1.6)
    fig, (ax_sp, ax_roof) = plt.subplots(1, 2, figsize=(12, height), sharey=True)
    y = list(range(len(rows)))[::-1]

    colors = ["tab:blue" if m else "tab:red" for m in met]
    ax_sp.barh(y, [s or 0 for s in speedups], color=colors)
    ax_sp.set_xscale("log")
    valid = [s for s in speedups if s]
    if valid:
        ax_sp.set_xlim(min(0.5, min(valid) / 1.5), max(valid) * 3)
    ax_sp.axvline(1.0, color="black", linewidth=0.8)
    ax_sp.set_xlabel("speedup over the best baseline (log scale)")
    ax_sp.set_yticks(y)
    ax_sp.set_yticklabels(ids, fontsize=8)
    for yi, s in zip(y, speedups):
        if s:
            ax_sp.text(s, yi, f" {s:.2f}x", va="center", fontsize=7)

    has_roof = any(r is not None for r in roofs)
    if has_roof:
        shown = [min(r, 1.5) if r is not None else 0 for r in roofs]
        ax_roof.barh(y, shown, color=colors)
        ax_roof.axvline(1.0, color="black", linewidth=0.8)
        ax_roof.set_xlim(0, 1.75)
        ax_roof.set_xlabel("fraction of the roofline (floor / time; bars cut at 150%)")
        for yi, r in zip(y, roofs):
            if r is not None:
                ax_roof.text(min(r, 1.5), yi, f" {r:.0%}", va="center", fontsize=7)
    else:
        ax_roof.text(0.5, 0.5, "no roofline (CPU run)", ha="center", va="center",
                     transform=ax_roof.transAxes)
        ax_roof.set_xticks([])

    where = info.get("gpu") or f"CPU ({info.get('device', '?')})"
    fig.suptitle(f"gpukern on {where}, torch {info.get('torch', '?')}, {info.get('time', '')}"
                 "  (red: target missed)", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.45 / height))  # room for the title
    fig.savefig(out_path, dpi=110)
    plt.close(fig)
    return out_path


def try_plot(plot_fn, result, out_path, written):
    """plot_fn(result, out_path), appending out_path to `written` on success; without matplotlib
    or with nothing to plot, say so and carry on (the tables are the result)."""
    try:
        plot_fn(result, out_path)
        written.append(out_path)
    except ImportError:
        print("matplotlib is not installed (pip install -e .[bench]): no plot written")
    except ValueError as e:
        print(f"no plot written: {e}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("json", help="a result file written by benchmarks/run.py")
    p.add_argument("--out", help="PNG path (default: the JSON's path with .png)")
    args = p.parse_args(argv)
    with open(args.json) as f:
        result = json.load(f)
    out = args.out or os.path.splitext(args.json)[0] + ".png"
    try:
        plot(result, out)
    except ImportError:
        print("matplotlib is not installed (pip install -e .[bench]): no plot written")
        return 1
    print(f"plot written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
