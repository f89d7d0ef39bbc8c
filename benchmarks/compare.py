"""Compare two benchmark runs case by case (e.g. the code before and after a change, measured in
one session on one GPU):

    python benchmarks/compare.py BEFORE.json AFTER.json [--tolerance 0.03]

For every case in both files it prints our time before and after (the rotated timing where the
case has one, as its status is judged on it, else the single-call timing), the ratio after /
before, and the best baseline's ratio between the two runs, which shows how much the machine
itself moved between them. Cases slower by more than the tolerance are flagged; the exit status is
1 when any is.
"""
import argparse
import json
import sys


def our_time(row):
    """(milliseconds, which timing) of our op in a row of run.py's JSON."""
    if row.get("ours_rot_ms") is not None:
        return row["ours_rot_ms"], "rot"
    return row.get("ours_ms"), "event"


def base_time(row):
    if row.get("best_rot_ms") is not None:
        return row["best_rot_ms"]
    return row.get("best_ms")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("before")
    p.add_argument("after")
    p.add_argument("--tolerance", type=float, default=0.03,
                   help="flag cases whose time grew by more than this fraction (default 0.03)")
    args = p.parse_args(argv)
    runs = []
    for path in (args.before, args.after):
        with open(path) as f:
            runs.append(json.load(f))
    before = {r["id"]: r for r in runs[0]["rows"]}
    after = {r["id"]: r for r in runs[1]["rows"]}
    print(f"before: {runs[0]['info'].get('gpu', runs[0]['info'].get('device'))} "
          f"{runs[0]['info'].get('time')}; after: "
          f"{runs[1]['info'].get('gpu', runs[1]['info'].get('device'))} {runs[1]['info'].get('time')}")
    print(f"{'case':<22} {'timing':<6} {'before_us':>10} {'after_us':>10} {'after/bef':>9} "
          f"{'base a/b':>8}  flag")
    slower, ratios = [], []
    for cid, b in before.items():
        a = after.get(cid)
        if a is None:
            print(f"{cid:<22} missing after")
            continue
        (tb, kind), (ta, _) = our_time(b), our_time(a)
        if not tb or not ta:
            print(f"{cid:<22} no time (before {b.get('status')}, after {a.get('status')})")
            continue
        ratio = ta / tb
        ratios.append(ratio)
        bb, ba = base_time(b), base_time(a)
        base_ratio = f"{ba / bb:8.3f}" if bb and ba else f"{'-':>8}"
        flag = "SLOWER" if ratio > 1 + args.tolerance else ""
        if flag:
            slower.append(cid)
        print(f"{cid:<22} {kind:<6} {tb * 1e3:10.2f} {ta * 1e3:10.2f} {ratio:9.3f} {base_ratio}  {flag}")
    if ratios:
        geo = 1.0
        for r in ratios:
            geo *= r
        geo **= 1 / len(ratios)
        print(f"{len(ratios)} cases: after/before geomean {geo:.3f}, max {max(ratios):.3f}, "
              f"min {min(ratios):.3f}; slower by more than {args.tolerance:.0%}: "
              f"{', '.join(slower) or 'none'}")
    return 1 if slower else 0


if __name__ == "__main__":
    sys.exit(main())
