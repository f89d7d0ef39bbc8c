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
- mixed: the cell is split recursively (a small decision tree, at most MAX_DEPTH levels) on the
  output plane size, the input and output channel counts and the filter's taps (a 7x7
  depthwise layer apart from a 3x3 one), each split the one that puts the
  most calls into a side whose rows are all at least --margin faster (else the one leaving the
  fewest misplaced calls); every leaf whose rows are all that fast becomes a gpukern rule bounded
  by its rows' ranges (the tightest box around them, so a shape between measured ones that fell
  on different sides runs torch), the other leaves' rows one torch rule.

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


def measurements(paths, arch=None, skip_batch1=False):
    """[(cell dict, out_px, speedup, count, file)] for every timed row of the census files
    (``skip_batch1``: not those of a batch-1 census, ``layers.py --batch 1``)."""
    out = []
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        if skip_batch1 and data["info"].get("batch") == 1:
            continue
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
                saved = (r["torch_best_ms"] - r["gpukern_ms"]) * 1e3
                out.append((key, r["speedup"], r["count"], name, saved))
            for f in r.get("fused", []):
                if f.get("status") == "ok" and f.get("speedup"):
                    saved = (f["torch_unfused_ms"] - f["gpukern_fused_ms"]) * 1e3
                    out.append((dict(key, fused=True), f["speedup"], f["count"], name, saved))
    return out


#: (op, kind, dtype) cells ("*": any dtype) that stay on torch under torch.compile whatever the
#: census says, so the compiled table has no rule for them (an unmatched layer runs torch). The
#: census times a convolution alone; compiled, inductor fuses what is around torch's convolution
#: (the bias, permutes, LayerNorm), and the whole model is often host-bound, so a faster kernel
#: alone need not pay. Measured on an H100 (benchmarks/compiled_probe.py, ConvNeXt-T, batch 16,
#: bf16, compiled, paired medians over 21-31 rounds against compiled stock):
#: - 2-D stems: the default swap ran 0.952x with its 4x4 stem on gpukern, 1.007x with the stem
#:   kept on torch (the 18 depthwise layers on gpukern in both);
#: - bf16 2-D depthwise: with the stem on torch, 0.938x with the 18 depthwise 7x7 layers on
#:   gpukern (GPU kernels 1.24 ms per forward against stock's 1.32; the forward takes 2.1-2.3 ms,
#:   host-bound) and 0.995x with them on torch.
COMPILED_TORCH_CELLS = (("conv2d", "stem", "*"), ("conv2d", "depthwise", "bfloat16"))


def _compiled_torch_cell(key) -> bool:
    return any(key["op"] == op and key["kind"] == kind and dtype in ("*", key["dtype"])
               for op, kind, dtype in COMPILED_TORCH_CELLS)


def compiled_measurements(paths, arch=None):
    """The rows COMPILED_RULES is derived from: plain convolutions of the batched censuses, but
    for the cells in COMPILED_TORCH_CELLS."""
    return [m for m in measurements(paths, arch, skip_batch1=True)
            if not m[0]["fused"] and not _compiled_torch_cell(m[0])]


def _src(rows, files, what):
    sp = [p["speedup"] for p in rows]
    return (f"{'+'.join(sorted(files))}: {len(rows)} layer(s){what}, gpukern/torch "
            f"{min(sp):.2f}x-{max(sp):.2f}x")


#: The features a cell is split on (rule_key's fields), and how deep the splits go.
FEATURES = ("out_px", "in_ch", "out_ch", "taps", "m_px")
MAX_DEPTH = 4
#: A plain convolution (no fused epilogue) goes to gpukern only where it also saves at least this
#: much GPU time per call: its only gain is kernel time, while its host cost per call is above
#: cuDNN's (benchmarks/profile_models.py --cpu-top: ~33 us of self CPU time per igemm call
#: against ~20 us per cudnn_convolution), which decides whenever the model is host-bound (batch
#: 1, and most eager models at batch 16).
MIN_SAVED_US = 5.0
#: Layer kinds exempt from MIN_SAVED_US: gpukern's host cost per call is at or below cuDNN's.
#: Depthwise: benchmarks/profile_models.py --split, ConvNeXt-T batch 1 (host-bound), every
#: depthwise layer on gpukern ("swap(dw all)") against stock, H100: host time 0.97-1.01x of
#: stock's in fp32 / bf16, NCHW / channels_last, with 1.25x less GPU time; per call
#: (h100_host_overhead.md) gpukern's depthwise op 11-15 us against F.conv2d's 11-12 (NCHW) and
#: 17-20 (channels_last).
HOST_CHEAP_KINDS = ("depthwise",)


def _fast(p, margin, cheap=HOST_CHEAP_KINDS):
    return p["speedup"] >= margin and (p["fused"] or p["kind"] in cheap
                                       or p["saved"] >= MIN_SAVED_US)


def _split(pts, margin, cheap):
    """The best single split of a mixed region: (feature, threshold) such that the rows with
    feature <= threshold and those above are separated, chosen to put the most fast calls into a
    side holding only fast rows, else to make both sides purest (fewest slow calls among the
    fast-majority side); None when no feature separates anything."""
    best, best_score = None, None
    for f in FEATURES:
        values = sorted({p[f] for p in pts})
        for t in values[:-1]:
            sides = ([p for p in pts if p[f] <= t], [p for p in pts if p[f] > t])
            pure = max((sum(p["count"] for p in side) for side in sides
                        if all(_fast(p, margin, cheap) for p in side)), default=0)
            mixed = sum(min(sum(p["count"] for p in side if _fast(p, margin, cheap)),
                            sum(p["count"] for p in side if not _fast(p, margin, cheap)))
                        for side in sides)
            score = (pure, -mixed)
            if best_score is None or score > best_score:
                best, best_score = (f, t), score
    return best


def _leaves(pts, margin, cheap, depth=0):
    """[(rows, all fast)] of a recursive split of pts (module docstring)."""
    fast = [p for p in pts if _fast(p, margin, cheap)]
    if len(fast) == len(pts) or not fast or depth == MAX_DEPTH:
        return [(pts, len(fast) == len(pts))]
    cut = _split(pts, margin, cheap)
    if cut is None:
        return [(pts, False)]
    f, t = cut
    return (_leaves([p for p in pts if p[f] <= t], margin, cheap, depth + 1)
            + _leaves([p for p in pts if p[f] > t], margin, cheap, depth + 1))


def _bounds(rows, whole, fused):
    """Inclusive (min, max) per feature over the leaf's rows, None where the leaf spans the
    whole cell's range on that side (no bound needed). For plain convolutions the smallest
    measured batch-wide output (m_px, the GEMM's M) is always a lower bound: smaller calls (a
    batch below the census's) save less GPU time than the host time they may add."""
    out = {}
    for f in FEATURES:
        lo, hi = min(p[f] for p in rows), max(p[f] for p in rows)
        out[f] = (None if lo == min(p[f] for p in whole) else lo,
                  None if hi == max(p[f] for p in whole) else hi)
    if not fused:
        out["m_px"] = (min(p["m_px"] for p in rows), out["m_px"][1])
    return out


def derive(meas, margin=policy.MARGIN, cheap=HOST_CHEAP_KINDS):
    """The rule list for the measurements (module docstring); ``cheap``: the layer kinds exempt
    from MIN_SAVED_US (none for the compiled table)."""
    cells = collections.OrderedDict()
    for key, speedup, count, name, saved in meas:
        cell = tuple(key[k] for k in CELL)
        cells.setdefault(cell, []).append(
            dict({f: key[f] for f in FEATURES}, kind=key["kind"], fused=key["fused"],
                 speedup=speedup, count=count, file=name, saved=saved))
    rules = []
    for cell, pts in sorted(cells.items(), key=lambda kv: tuple(str(v) for v in kv[0])):
        c = dict(zip(CELL, cell))
        files = {p["file"] for p in pts}

        def rule(path, b, source):
            return policy.Rule(c["arch"], c["op"], c["kind"], c["stride"], c["dtype"],
                               c["layout"], c["fused"], b["out_px"][0], b["out_px"][1], path,
                               source, in_ch_min=b["in_ch"][0], in_ch_max=b["in_ch"][1],
                               out_ch_min=b["out_ch"][0], out_ch_max=b["out_ch"][1],
                               m_px_min=b["m_px"][0], m_px_max=b["m_px"][1],
                               taps_min=b["taps"][0], taps_max=b["taps"][1])
        nobounds = {f: (None, None) for f in FEATURES}
        leaves = _leaves(pts, margin, cheap)
        if len(leaves) == 1 and not leaves[0][1]:
            rules.append(rule("torch", nobounds, _src(pts, files, "")))
            continue
        rest = []
        for rows, all_fast in leaves:
            if not all_fast:
                rest += rows
                continue
            b = _bounds(rows, pts, c["fused"])
            what = "".join(
                f", {f} {'>= ' + str(lo) if hi is None else '<= ' + str(hi) if lo is None else f'{lo}..{hi}'}"
                for f, (lo, hi) in b.items() if (lo, hi) != (None, None))
            rules.append(rule("gpukern", b, _src(rows, files, what)))
        if rest:
            rules.append(rule("torch", nobounds, _src(rest, files, " (mixed; the rest)")))
    return rules


def misplaced(rules, meas, margin=policy.MARGIN, cheap=HOST_CHEAP_KINDS):
    """The measured rows the derived table sends to gpukern although they were not fast enough
    (speedup below the margin, or a plain convolution saving under MIN_SAVED_US): each
    (file, key, speedup). Empty for a table that holds to the measurements it came from."""
    out = []
    for key, speedup, _count, name, saved in meas:
        fast = _fast(dict(speedup=speedup, fused=key["fused"], kind=key["kind"], saved=saved),
                     margin, cheap)
        if not fast and policy.lookup(key, rules)[0] == "gpukern":
            out.append((name, key, speedup))
    return out


def render(rules, name="RULES"):
    lines = [f"{name}: List[Rule] = ["]
    for r in rules:
        ch = "".join(f", {f}={getattr(r, f)!r}" for f in
                     ("in_ch_min", "in_ch_max", "out_ch_min", "out_ch_max", "m_px_min",
                      "m_px_max", "taps_min", "taps_max")
                     if getattr(r, f) is not None)
        lines.append(f"    Rule({r.arch!r}, {r.op!r}, {r.kind!r}, {r.stride!r}, {r.dtype!r}, "
                     f"{r.layout!r}, {r.fused!r}, {r.out_px_min!r}, {r.out_px_max!r}, "
                     f"{r.path!r},")
        lines.append(f"         {r.source!r}{ch}),")
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
    meas = measurements(args.census, args.arch)
    rules = derive(meas, args.margin)
    # The table torch.compile'd layers use: plain convolutions of every kind held to
    # MIN_SAVED_US (see COMPILED_RULES in torch_ops/policy.py), from the batched censuses only
    # (the smallest measured m_px bounds each rule: batch-1 calls run torch), fused rows dropped
    # (compiled, a fused block is decided by the conv-alone rules).
    plain = compiled_measurements(args.census, args.arch)
    compiled = derive(plain, args.margin, cheap=())
    bad = misplaced(rules, meas, args.margin) + misplaced(compiled, plain, args.margin, ())
    for name, key, speedup in bad:
        print(f"derive_policy: a gpukern rule covers a slow measured row: {name} {key} "
              f"{speedup:.2f}x", file=sys.stderr)
    if bad:
        return 1
    text = render(rules) + "\n" + render(compiled, "COMPILED_RULES")
    n_gk = sum(r.path == "gpukern" for r in rules)
    n_gk_c = sum(r.path == "gpukern" for r in compiled)
    if args.write:
        write(args.policy_file, text)
        print(f"wrote {len(rules)} rules ({n_gk} gpukern) and {len(compiled)} compiled rules "
              f"({n_gk_c} gpukern) to {args.policy_file}")
    else:
        print(text)
        print(f"# {len(rules)} rules, {n_gk} gpukern; {len(compiled)} compiled rules, "
              f"{n_gk_c} gpukern")
    return 0


if __name__ == "__main__":
    sys.exit(main())
