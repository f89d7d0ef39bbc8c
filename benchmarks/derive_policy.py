"""Derive torch_ops.policy's rule table from layer census files (benchmarks/layers.py JSON).

    python3 benchmarks/derive_policy.py results/h100_layers.json              # print the table
    python3 benchmarks/derive_policy.py a.json b.json --write                 # rewrite policy.py
    python3 benchmarks/derive_policy.py a.json --margin 1.1 --arch sm_90      # stricter / forced

Every measured row (status ok, gpukern and torch's best timed) is classified as swap's policy
classifies a call (torch_ops.policy.rule_key: GPU arch, op, layer kind, stride 1 or >1, dtype,
input layout, fused or not) with its speedup (torch's best / gpukern) and output plane size. Rows
of a fused block (the "fused" entries, where gpukern's fused op was timed against torch's unfused
sequence) make the fused=True cells; the conv-alone rows the fused=False ones (which also serve
fused blocks where no fused measurement exists). Per cell:

- every row at least --margin (1.05) faster on gpukern: a gpukern rule for the whole cell;
- every row below: a torch rule (documentation: unmatched calls run torch anyway);
- mixed: the cell is split at one output plane size where one side holds only rows at least
  --margin faster (gpukern for out_px >= t, or <= t, whichever covers more calls; both where both
  exist), the rest of the cell torch; no clean split: torch.

The GPU arch is read from the census (its info.archs, e.g. sm_90a -> sm_90) unless --arch is
given. --write replaces the block between "# BEGIN GENERATED RULES" and "# END GENERATED RULES"
in torch_ops/policy.py (or --policy-file); without it the table is printed.
"""
import argparse
import collections
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from torch_ops import policy  # noqa: E402

CELL = ("arch", "op", "kind", "stride", "dtype", "layout", "fused")


def _arch(info, forced):
    if forced:
        return forced
    archs = (info.get("archs") or "").replace(",", ";").split(";")
    first = archs[0].strip() if archs and archs[0].strip() else ""
    m = re.match(r"(?:sm_)?(\d+)", first)
    if not m:
        raise SystemExit(f"derive_policy: no GPU arch in the census info ({info.get('archs')!r});"
                         " pass --arch sm_XX")
    return f"sm_{m.group(1)}"


def measurements(paths, arch=None):
    """[(cell dict, out_px, speedup, count, file)] for every timed row of the census files."""
    out = []
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        a = _arch(data["info"], arch)
        name = os.path.basename(path)
        for r in data["rows"]:
            (op, shape, strides, _wstride, out_ch, kernel, stride, padding, dilation, groups,
             _bias, padding_mode) = json.loads(r["key"])
            if padding_mode != "zeros":
                continue
            key = policy.rule_key(a, op, shape[1], out_ch, groups, kernel, stride, padding,
                                  dilation, shape, strides, r["dtype"], fused=False)
            if r.get("status") == "ok" and r.get("speedup"):
                out.append((key, r["speedup"], r["count"], name))
            for f in r.get("fused", []):
                if f.get("status") == "ok" and f.get("speedup"):
                    out.append((dict(key, fused=True), f["speedup"], f["count"], name))
    return out


def _src(rows, files, what):
    sp = [s for _, s, _ in rows]
    return (f"{'+'.join(sorted(files))}: {len(rows)} layer(s){what}, gpukern/torch "
            f"{min(sp):.2f}x-{max(sp):.2f}x")


def derive(meas, margin=policy.MARGIN):
    """The rule list for the measurements (module docstring)."""
    cells = collections.OrderedDict()
    for key, speedup, count, name in meas:
        cell = tuple(key[k] for k in CELL)
        cells.setdefault(cell, []).append((key["out_px"], speedup, count, name))
    rules = []
    for cell, rows in sorted(cells.items(), key=lambda kv: tuple(str(v) for v in kv[0])):
        c = dict(zip(CELL, cell))
        files = {n for *_, n in rows}
        pts = [(px, s, n) for px, s, n, _ in rows]

        def rule(path, lo, hi, source):
            return policy.Rule(c["arch"], c["op"], c["kind"], c["stride"], c["dtype"],
                               c["layout"], c["fused"], lo, hi, path, source)
        fast = [p for p in pts if p[1] >= margin]
        slow = [p for p in pts if p[1] < margin]
        if not slow:
            rules.append(rule("gpukern", None, None, _src(pts, files, "")))
            continue
        if not fast:
            rules.append(rule("torch", None, None, _src(pts, files, "")))
            continue
        max_slow, min_slow = max(p[0] for p in slow), min(p[0] for p in slow)
        above = [p for p in fast if p[0] > max_slow]
        below = [p for p in fast if p[0] < min_slow]
        if above:
            lo = min(p[0] for p in above)
            rules.append(rule("gpukern", lo, None, _src(above, files, f", out_px >= {lo}")))
        if below:
            hi = max(p[0] for p in below)
            rules.append(rule("gpukern", None, hi, _src(below, files, f", out_px <= {hi}")))
        rest = [p for p in pts if p not in above and p not in below]
        rules.append(rule("torch", None, None, _src(rest, files, " (mixed; the rest)")))
    return rules


def render(rules):
    lines = ["RULES: List[Rule] = ["]
    for r in rules:
        lines.append(f"    Rule({r.arch!r}, {r.op!r}, {r.kind!r}, {r.stride!r}, {r.dtype!r}, "
                     f"{r.layout!r}, {r.fused!r}, {r.out_px_min!r}, {r.out_px_max!r}, "
                     f"{r.path!r},")
        lines.append(f"         {r.source!r}),")
    lines.append("]")
    return "\n".join(lines)


def write(path, text):
    with open(path) as f:
        src = f.read()
    begin, end = "# BEGIN GENERATED RULES\n", "# END GENERATED RULES"
    i, j = src.index(begin) + len(begin), src.index(end)
    with open(path, "w") as f:
        f.write(src[:i] + text + "\n" + src[j:])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("census", nargs="+", help="benchmarks/layers.py JSON files")
    p.add_argument("--margin", type=float, default=policy.MARGIN,
                   help=f"minimum gpukern speedup per layer (default {policy.MARGIN})")
    p.add_argument("--arch", default=None, help="GPU arch of the census, e.g. sm_90")
    p.add_argument("--write", action="store_true", help="rewrite the table in policy.py")
    p.add_argument("--policy-file", default=os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "torch_ops", "policy.py"))
    args = p.parse_args(argv)
    rules = derive(measurements(args.census, args.arch), args.margin)
    text = render(rules)
    n_gk = sum(r.path == "gpukern" for r in rules)
    if args.write:
        write(args.policy_file, text)
        print(f"wrote {len(rules)} rules ({n_gk} gpukern) to {args.policy_file}")
    else:
        print(text)
        print(f"# {len(rules)} rules, {n_gk} gpukern")
    return 0


if __name__ == "__main__":
    sys.exit(main())
