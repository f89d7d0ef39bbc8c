"""Real models, stock vs gpukern: end-to-end latency and agreement.

Builds architectures nobody here wrote, with random weights (no downloads), from the libraries
installed beside torch. By default the issue's five: torchvision's ResNet-50 (dense Conv2d
only), MobileNetV3-Large and ConvNeXt-Tiny (depthwise Conv2d), torchaudio's Conformer (depthwise
Conv1d in every block) and wav2vec2-base (the whole model: the dense strided Conv1d feature
extractor and the encoder's grouped positional Conv1d; batch 4 x 64000 samples on GPU, as
benchmarks/layers.py builds it). ``--models`` also takes wav2vec2_fe (the feature extractor
alone), mobilenet_v3 (the same MobileNetV3-Large, the older name) and resnet18. Each runs stock, after the default
``torch_ops.swap(model)`` ("swap": Conv -> BatchNorm -> add -> activation blocks fused, the
per-layer rule table choosing gpukern or torch, then swap's end-to-end check on the example input
keeping the fastest configuration; the model run is ``result.model``), after
``torch_ops.swap(model, policy="all")`` ("swap(all)": the same blocks, gpukern on every layer),
optionally after ``torch_ops.swap(model, filter=torch_ops.has_fast_path, policy="all")``
("swap(fast)": only the layers gpukern has a specialised kernel for) and under
``torch_ops.enabled()`` ("override", "override(fast)"), eager and ``torch.compile``-d, in float32
and bfloat16, under ``torch.inference_mode()``. The swapped variants are swapped with the example
input (``example_inputs=``), so every per-layer decision is made before anything is timed or
compiled.

Correctness first: every variant's output is compared with the stock model's in the same dtype
and with a float64 run of the stock model; a variant "agrees" when its norm-relative error to the
float64 reference is at most twice the stock model's own (plus a floor of 1e-5), i.e. gpukern is
no less accurate than torch at that dtype. Then latency: CUDA events, warm-up, median (wall clock
on CPU). Where gpukern makes a model slower (dense convolutions, until their own issue) the
speedup column says so. To fit the time box, a variant slower than --max-slowdown (5x) times stock
in eager is not compiled (its compiled row says so), and a variant whose one call takes over
--slow-ms (50 ms) is timed over 3 calls after 1 warm-up. The run ends with one summary line per
model: each gpukern variant's best speedup. torch's defaults are kept (cuDNN may use TF32 for float32 convolutions;
gpukern computes true fp32).

    python3 benchmarks/models.py                      # GPU: realistic sizes; CPU: tiny ones
    python3 benchmarks/models.py --models conformer resnet18 --dtypes bfloat16 --compile none
    python3 benchmarks/models.py --variants swap(fast) override(fast) --max-slowdown 0
    python3 benchmarks/models.py --override --out results/models
    python3 benchmarks/models.py --batch 16 1 --formats contiguous channels_last   # the issue's grid

Timing: every variant of a (model, batch, format, dtype, mode) is timed in --rounds interleaved
rounds (the order rotated each round) and its time is the median over the rounds, so that clock
or thermal drift during the run does not fall on whichever variant is timed last. The "paired"
column is the median over the rounds of stock's time / the variant's time in that round (each
round's times are recorded in the JSON, rounds_ms): a host-bound model's time follows the host,
and a slow spell that lands on one variant's median and not on stock's shows in the A/A rows
(stock(again)) of the median column far more than in the paired one. --cpus pins the process to
some cores; the compiled rows are compiled in this process (--compile-threads 1), so that no
compile worker pool shares those cores.

Writes models.json, models.md and models.png (a bar chart of the default swap's paired speedup
per model and configuration, with the A/A pair) under --out; --render rewrites the table and the
chart of an earlier run from its JSON.
"""
import argparse
import collections
import contextlib
import copy
import json
import os
import platform
import re
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch_ops  # noqa: E402
from timing import time_cpu, time_cuda  # noqa: E402

MODELS = ("resnet50", "mobilenet_v3_large", "convnext_tiny", "conformer", "wav2vec2",
          "wav2vec2_fe", "mobilenet_v3", "resnet18")
#: The issue's five models (the default --models); the others stay selectable by name.
DEFAULT_MODELS = ("resnet50", "mobilenet_v3_large", "convnext_tiny", "conformer", "wav2vec2")


def build(name: str, device: str, gpu: bool, batch=None):
    """(model, example input tuple, what the input is) for one architecture; batch overrides the
    model's default batch (16 images, 8 Conformer utterances, 4 wav2vec2 clips on a GPU)."""
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    if name == "conformer":
        from torchaudio.models import Conformer
        # Conformer-S-like: 144-dim, 4 heads, 16 blocks, depthwise kernel 31.
        model = Conformer(input_dim=144, num_heads=4, ffn_dim=576, num_layers=16,
                          depthwise_conv_kernel_size=31)
        b, t = (batch or 8, 1024) if gpu else (batch or 1, 48)
        x = torch.randn(b, t, 144, generator=g)
        lengths = torch.full((b,), t, dtype=torch.int64)
        return model, (x, lengths), f"{b}x{t} frames x 144"
    if name == "wav2vec2":
        # The whole model (feature extractor + transformer encoder), as benchmarks/layers.py.
        from torchaudio.models import wav2vec2_base
        model = wav2vec2_base()
        b, n = (batch or 4, 64000) if gpu else (batch or 1, 4000)
        return model, (torch.randn(b, n, generator=g), None), f"{b}x{n} samples"
    if name == "wav2vec2_fe":
        from torchaudio.models import wav2vec2_base
        model = wav2vec2_base().feature_extractor
        b, n = (batch or 4, 16000 * 4) if gpu else (batch or 1, 4000)
        return model, (torch.randn(b, n, generator=g), None), f"{b}x{n} samples"
    import torchvision.models as tvm
    # "mobilenet_v3" is the older name of the same MobileNetV3-Large.
    ctor = {"mobilenet_v3": tvm.mobilenet_v3_large, "mobilenet_v3_large": tvm.mobilenet_v3_large,
            "convnext_tiny": tvm.convnext_tiny, "resnet18": tvm.resnet18,
            "resnet50": tvm.resnet50}[name]
    # ConvNeXt's default layer-scale init (1e-6) scales every block's branch, depthwise conv
    # included, below bfloat16's resolution of the residual stream, so the output would not
    # depend on the convolutions under test; trained models have scales of ~0.1-1.
    kwargs = {"layer_scale": 0.5} if name == "convnext_tiny" else {}
    model = ctor(weights=None, **kwargs)
    b, s = (batch or 16, 224) if gpu else (batch or 1, 64)
    return model, (torch.randn(b, 3, s, s, generator=g),), f"{b}x3x{s}x{s}"


def calibrate_batchnorm(model, inputs):
    """Random weights drive activations of deep BatchNorm nets towards 0 (1e-10 at MobileNetV3's
    output), which would make the comparison meaningless: set each BatchNorm's running
    statistics from two forward passes on the example input, as training would."""
    bns = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return
    for m in bns:
        m.reset_running_stats()
        m.momentum = None  # cumulative average
    model.train()
    with torch.no_grad():
        for _ in range(2):
            model(*inputs)
    model.eval()


def _first(out):
    return out[0] if isinstance(out, (tuple, list)) else out


def _cast(args, device, dtype):
    return tuple(a.to(device, dtype) if isinstance(a, torch.Tensor) and a.is_floating_point()
                 else (a.to(device) if isinstance(a, torch.Tensor) else a) for a in args)


def _errors(out, ref):
    o, r = out.double(), ref.double()
    return float((o - r).abs().max()), float((o - r).norm() / r.norm().clamp_min(1e-300))


def conv_census(model):
    """Counts of the model's torch convolutions: depthwise and other (dense or grouped)."""
    dw = other = 0
    for m in model.modules():
        if isinstance(m, (torch.nn.Conv1d, torch.nn.Conv2d)):
            if m.groups == m.in_channels and m.groups > 1:
                dw += 1
            else:
                other += 1
    return dw, other


VARIANTS = ("stock", "swap", "swap(all)", "swap(fast)", "override", "override(fast)",
            "stock(again)", "stock(copy)")


def _variant_models(stock, names, x):
    """(name, model, context factory, layers converted or None) for each requested variant."""
    out = []
    for vname in names:
        if vname in ("stock", "stock(again)"):
            # stock(again): the stock model once more, timed as one more variant in the same
            # interleaved rounds: its "speedup" is the run's noise floor (an A/A comparison)
            out.append((vname, stock, contextlib.nullcontext, 0))
        elif vname == "stock(copy)":
            # a deep copy of the stock model, as every swap variant starts from: an A/A pair
            # that also separates the copy from the swap
            out.append((vname, copy.deepcopy(stock), contextlib.nullcontext, 0))
        elif vname.startswith("swap"):
            model = copy.deepcopy(stock)
            fast = vname == "swap(fast)"
            report = torch_ops.swap(model, filter=torch_ops.has_fast_path if fast else None,
                                    policy="rules" if vname == "swap" else "all",
                                    example_inputs=x)
            out.append((vname, report.model, contextlib.nullcontext, report))
        else:
            convs = "fast" if vname == "override(fast)" else "all"
            out.append((vname, stock, lambda c=convs: torch_ops.enabled(convs=c), None))
    return out


def _skip_counts(report):
    """{reason, details in parentheses dropped: count} of the layers a swap left alone."""
    if report is None or isinstance(report, int):
        return {}
    counts = collections.Counter(re.sub(r" \([^)]*\)", "", r) for _, r in report.skipped)
    return dict(sorted(counts.items()))


def _paired(stock_rounds, rounds):
    """Median over rounds of stock's time / the variant's time in the same round: each ratio
    compares two timings taken in one round (well under a second apart), so a slow spell of the host (a host-bound model's
    time follows the CPU) falls on both sides of it instead of on whichever median it lands in."""
    return statistics.median(s / v for s, v in zip(stock_rounds, rounds))


def _timing_plan(est_ms, args):
    """(warmup, reps) for a variant whose one call took est_ms: slow variants (gpukern's dense
    convolutions) get a few reps so the whole table fits the time box."""
    if est_ms > args.slow_ms:
        return 1, 3
    return 3, args.reps


def run_model(name, args, device, gpu, batch=None, fmt="contiguous"):
    base, inputs, described = build(name, device, gpu, batch)
    if fmt == "channels_last":
        if not any(isinstance(a, torch.Tensor) and a.dim() == 4 for a in inputs):
            print(f"{name}: no 4-D input, channels_last does not apply; not run", flush=True)
            return []
        # The model and its inputs in channels_last, for stock and every variant alike (the
        # swapped models are made from this stock model).
        base = base.to(memory_format=torch.channels_last)
        inputs = tuple(a.contiguous(memory_format=torch.channels_last)
                       if isinstance(a, torch.Tensor) and a.dim() == 4 else a for a in inputs)
        described += " channels_last"
    base = base.to(device)
    calibrate_batchnorm(base, _cast(inputs, device, torch.float32))
    base.eval()
    dw, other = conv_census(base)
    fast_total = sum(1 for m in base.modules()
                     if isinstance(m, (torch.nn.Conv1d, torch.nn.Conv2d))
                     and torch_ops.has_fast_path("", m))

    def timer(f, est_ms):  # one round: the variant's reps split over args.rounds rounds
        warmup, reps = _timing_plan(est_ms, args)
        reps = max(3, reps // args.rounds)
        if gpu:
            return time_cuda(f, reps=reps, warmup=warmup, flush=False, max_seconds=2.0)
        return time_cpu(f, reps=max(3, reps // 6), warmup=warmup)

    def sync():
        if gpu:
            torch.cuda.synchronize()

    rows = []
    with torch.inference_mode():
        ref64 = _first(copy.deepcopy(base).double()(*_cast(inputs, device, torch.float64)))
        for dtype_name in args.dtypes:
            dtype = getattr(torch, dtype_name)
            stock = copy.deepcopy(base).to(dtype)
            names = [v for v in args.variants
                     if not (v in ("swap(fast)", "override(fast)") and fast_total == 0)]
            if len(names) < len(args.variants) and dtype_name == args.dtypes[0]:
                print(f"{name}: no layer has a gpukern fast path; swap(fast)/override(fast) "
                      f"would equal stock, not run", flush=True)
            x = _cast(inputs, device, dtype)
            variants = _variant_models(stock, names, x)
            eager_ms = {}
            for mode in args.modes:
                results = {}
                rounds_ms = {}  # vname: its time in each round, in round order
                timed = []  # (vname, fn, ctx, est_ms): timed below in interleaved rounds
                torch._dynamo.reset()  # once per mode: every variant's compiled code stays valid
                for vname, model, ctx, report in variants:
                    note = ""
                    tuned = getattr(report, "tuned", None)
                    if mode == "eager" and tuned:  # swap's end-to-end check: what it kept
                        note = f"kept '{tuned['choice']}'"
                    if mode != "eager" and vname != "stock" and args.max_slowdown > 0:
                        slow = eager_ms[vname] / eager_ms["stock"]
                        if slow > args.max_slowdown:
                            results[vname] = (None, None, f"not compiled: eager {slow:.1f}x "
                                              f"slower than stock", report)
                            continue
                    with ctx():
                        fn = model
                        if mode != "eager":
                            try:
                                fn = torch.compile(model, fullgraph=True, **args.compile_kw)
                                fn(*x)
                            except Exception as e:  # noqa: BLE001  (report, then allow breaks)
                                note = f"graph breaks ({type(e).__name__})"
                                fn = torch.compile(model, **args.compile_kw)
                        out = _first(fn(*x)).clone()
                        sync()
                        t0 = time.perf_counter()
                        fn(*x)
                        sync()
                        est_ms = (time.perf_counter() - t0) * 1e3
                    timed.append((vname, fn, ctx, est_ms))
                    results[vname] = (out, None, note, report)
                # Every variant timed in each of args.rounds rounds, the order rotated per round,
                # median over the rounds: clock or thermal drift over the run falls on every
                # variant alike instead of on whichever was timed last.
                per = {v: [] for v, *_ in timed}
                # Untimed: every variant in turn for --warmup-s seconds first (the first rounds
                # after a switch of configuration ran up to 1.6x slower for every variant alike).
                t_warm = time.perf_counter() + (args.warmup_s if gpu else 0.0)
                while time.perf_counter() < t_warm:
                    for vname, fn, ctx, est_ms in timed:
                        with ctx():
                            fn(*x)
                    sync()
                for k in range(args.rounds):
                    for vname, fn, ctx, est_ms in timed[k % len(timed):] + timed[:k % len(timed)]:
                        with ctx():
                            per[vname].append(timer(lambda fn=fn: fn(*x), est_ms))
                for vname, *_ in timed:
                    ms = statistics.median(per[vname])
                    out, _, note, report = results[vname]
                    results[vname] = (out, ms, note, report)
                    rounds_ms[vname] = per[vname]
                    if mode == "eager":
                        eager_ms[vname] = ms
                s_out, s_ms = results["stock"][0], results["stock"][1]
                _, stock_rel64 = _errors(s_out, ref64)
                for vname, (out, ms, note, report) in results.items():
                    if report is None:
                        swapped = None
                    elif isinstance(report, int):
                        swapped = report
                    else:  # layers on gpukern-capable modules: fused blocks + the rest
                        running = {id(m) for m in report.model.modules()}
                        swapped = len(report.fused) + sum(
                            1 for _, m in report.replaced if id(m) in running)
                    row = dict(
                        model=name, input=described, batch=batch, format=fmt,
                        dtype=dtype_name, mode=mode,
                        variant=vname, ms=ms, speedup=None, paired=None, rounds_ms=None,
                        max_abs_vs_stock=None,
                        rel_vs_stock=None, rel_vs_fp64=None, stock_rel_vs_fp64=stock_rel64,
                        agree=None, note=note, replaced=swapped,
                        tuned=getattr(report, "tuned", None),
                        fused=None if report is None or isinstance(report, int)
                        else len(report.fused), convs_depthwise=dw,
                        convs_other=other, convs_fast=fast_total,
                        skip_reasons=_skip_counts(report))
                    if vname in rounds_ms:
                        row.update(rounds_ms=rounds_ms[vname],
                                   paired=_paired(rounds_ms["stock"], rounds_ms[vname]))
                    if out is not None:
                        max_abs, rel = _errors(out, s_out)
                        _, rel64 = _errors(out, ref64)
                        row.update(speedup=s_ms / ms, max_abs_vs_stock=max_abs,
                                   rel_vs_stock=rel, rel_vs_fp64=rel64,
                                   agree=bool(torch.isfinite(out).all())
                                   and rel64 <= 2 * stock_rel64 + 1e-5)
                    rows.append(row)
                    print(_fmt_row(row), flush=True)
            del stock, variants
            if gpu:
                torch.cuda.empty_cache()
    return rows


def _num(v, fmt, width):
    return f"{'-':>{width}}" if v is None else f"{v:>{width}{fmt}}"


HEADER = (f"{'model':<14} {'dtype':<9} {'mode':<8} {'variant':<14} {'ms':>9} {'speedup':>8} "
          f"{'paired':>7} "
          f"{'rel/stock':>10} {'rel/fp64':>9} {'stock/fp64':>10} {'agree':>5}  "
          f"convs dw/other/fast swapped")


def _paired_str(r):
    return "-" if r.get("paired") is None else f"{r['paired']:.2f}x"


def _agree(r):
    return "-" if r["agree"] is None else ("yes" if r["agree"] else "NO")


def _fmt_row(r):
    sp = "-" if r["speedup"] is None else f"{r['speedup']:.2f}x"
    return (f"{r['model']:<14} {r['dtype']:<9} {r['mode']:<8} {r['variant']:<14} "
            f"{_num(r['ms'], '.3f', 9)} {sp:>8} {_paired_str(r):>7} "
            f"{_num(r['rel_vs_stock'], '.2e', 10)} "
            f"{_num(r['rel_vs_fp64'], '.2e', 9)} {r['stock_rel_vs_fp64']:>10.2e} "
            f"{_agree(r):>5}  {r['convs_depthwise']}/{r['convs_other']}/{r['convs_fast']} "
            f"{'-' if r['replaced'] is None else r['replaced']}"
            f"{(' ' + r['note']) if r['note'] else ''}")


def summaries(rows):
    """One line per model: each gpukern variant's best speedup (and where), best first."""
    lines = []
    for model in dict.fromkeys(r["model"] for r in rows):
        best = {}
        for r in rows:
            if r["model"] != model or r["variant"].startswith("stock") or r["speedup"] is None:
                continue
            if r["variant"] not in best or r["speedup"] > best[r["variant"]]["speedup"]:
                best[r["variant"]] = r
        if not best:
            lines.append(f"{model}: no gpukern variant ran")
            continue
        order = sorted(best.values(), key=lambda r: -r["speedup"])
        top = order[0]
        swaps = [r for r in rows if r["model"] == model and r["variant"] == "swap"
                 and r["speedup"] is not None]
        if swaps:  # the default swap's promise is its worst case: never slower than stock
            low = min(swaps, key=lambda r: r["speedup"])
            line = (f"{model}: default swap lowest {low['speedup']:.2f}x vs stock "
                    f"({low['input']}, {low['dtype']} {low['mode']}) over {len(swaps)} "
                    f"configurations")
            paired = [r for r in swaps if r.get("paired") is not None]
            if paired:  # the paired ratio: the same rounds' stock time, for host-bound models
                low_p = min(paired, key=lambda r: r["paired"])
                line += (f"; lowest paired {low_p['paired']:.2f}x ({low_p['input']}, "
                         f"{low_p['dtype']} {low_p['mode']})")
            aa = [r["paired"] for r in rows if r["model"] == model and r.get("paired") is not None
                  and r["variant"] in ("stock(again)", "stock(copy)")]
            if aa:
                line += f"; A/A rows (stock against itself) paired {min(aa):.2f}-{max(aa):.2f}x"
            lines.append(line)
        parts = [f"{r['variant']} {r['speedup']:.2f}x ({r['dtype']} {r['mode']})" for r in order]
        fast = top["convs_fast"]
        lines.append(f"{model}: best gpukern variant {top['variant']} {top['speedup']:.2f}x vs "
                     f"stock ({top['dtype']} {top['mode']}); best per variant: "
                     + ", ".join(parts) + f"; {fast} of "
                     f"{top['convs_depthwise'] + top['convs_other']} convs have a fast path")
    return lines


def _config_label(r):
    """A row's configuration as the chart labels it: mode, batch, dtype, memory format."""
    batch = r["input"].split("x")[0]
    fmt = "channels_last" if "channels_last" in r["input"] else "contiguous"
    dtype = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}.get(r["dtype"], r["dtype"])
    return f"{r['mode']}, batch {batch}, {dtype}, {fmt}"


def chart(rows, env, path):
    """A bar chart (PNG) of the default swap's paired speedup over stock, one bar per model and
    configuration, with the same configuration's A/A pair (stock against itself) as a tick and
    a line at 1.0x. Returns False where there is nothing to plot; raises ImportError without
    matplotlib."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def value(r):
        return r.get("paired") if r.get("paired") is not None else r.get("speedup")

    swaps = [r for r in rows if r["variant"] == "swap" and value(r) is not None]
    if not swaps:
        return False
    aa = {}
    for r in rows:
        if r["variant"] in ("stock(again)", "stock(copy)") and value(r) is not None:
            aa.setdefault((r["model"], _config_label(r)), value(r))
    labels, vals, colors, ticks = [], [], [], []
    for model in dict.fromkeys(r["model"] for r in swaps):
        for r in (r for r in swaps if r["model"] == model):
            cfg = _config_label(r)
            labels.append(f"{model}: {cfg}" + (" (stock given back)" if "'stock'" in r["note"]
                                               else ""))
            vals.append(value(r))
            colors.append("#2a7ab0" if r["mode"] == "eager" else "#e08a1e")
            ticks.append(aa.get((model, cfg)))
    height = max(3.0, 0.26 * len(vals) + 1.4)
    fig, ax = plt.subplots(figsize=(12, height))
    ys = list(range(len(vals)))[::-1]
    ax.barh(ys, vals, color=colors, height=0.7)
    for y, v in zip(ys, vals):
        ax.text(v, y, f" {v:.2f}x", va="center", fontsize=7)
    tys = [y for y, t in zip(ys, ticks) if t is not None]
    txs = [t for t in ticks if t is not None]
    if txs:
        ax.plot(txs, tys, "k|", markersize=9, label="A/A (stock against itself)")
        ax.legend(loc="lower right", fontsize=7)
    ax.axvline(1.0, color="k", linewidth=0.8)
    ax.set_yticks(ys)
    ax.set_yticklabels(labels, fontsize=7)
    ax.set_xlim(0, max(vals + txs) * 1.15)
    ax.set_xlabel("paired speedup over stock (blue: eager, orange: compiled)")
    ax.set_title(f"torch_ops.swap(model) against the stock model ({env['device']})", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _write_chart(rows, env, path):
    try:
        if chart(rows, env, path):
            print(f"wrote {path}")
    except ImportError:
        print("models.py: matplotlib is not installed, no chart (pip install -e .[bench])")


def markdown(rows, env):
    lines = [f"# Real models, stock vs gpukern ({env['device']})", "",
             f"torch {env['torch']}, CUDA {env['cuda']}, gpukern CUDA kernels: "
             f"{env['gpukern_cuda']} ({env['archs'] or '-'}); compile: {env['compile']}", "",
             "Variants: stock = torch; swap = `torch_ops.swap(model, example_inputs=x)` (fused "
             "blocks, the rule table picking gpukern or torch per layer, then swap's end-to-end "
             "check keeping the table's choices or a faster configuration, or giving the "
             "model back unchanged where it was the fastest: the note column says which, "
             "`kept '<configuration>'`, `kept 'stock'`); swap(all) = `swap(model, "
             "policy=\"all\")` (fused blocks, gpukern on every layer); swap(fast) = "
             "`swap(model, filter=torch_ops.has_fast_path, policy=\"all\")` (only the "
             "depthwise / single-channel stride-1 layers gpukern has specialised kernels for); "
             "swapped = fused blocks + other converted layers (fused blocks in the JSON); "
             "override = the stock model under `torch_ops.enabled()` (override(fast): "
             "`enabled(convs=\"fast\")`); stock(again) = the stock model once more and "
             "stock(copy) = a deep copy of it, timed in the same rounds (A/A pairs: the run's "
             "noise floor). Variants more than "
             f"{env['max_slowdown']}x slower than stock in eager are not compiled (note column); "
             f"variants whose one call takes over {env['slow_ms']} ms are timed over 3 calls.",
             "", "## Summary", ""] + [f"- {s}" for s in summaries(rows)] + [
             "", "Speedup = stock's median time / the variant's; paired = the median over the "
             "rounds of stock's time / the variant's in the same round.",
             "", "| model | input | dtype | mode | variant | ms | speedup | paired | "
             "rel err vs stock | rel err vs fp64 (stock's) | agree | convs dw/other/fast | "
             "swapped | note |",
             "|---|---|---|---|---|---:|---:|---:|---:|---:|---|---|---:|---|"]
    for r in rows:
        sp = "-" if r["speedup"] is None else f"{r['speedup']:.2f}x"
        rel64 = ("-" if r["rel_vs_fp64"] is None else f"{r['rel_vs_fp64']:.2e}")
        lines.append(
            f"| {r['model']} | {r['input']} | {r['dtype']} | {r['mode']} | {r['variant']} | "
            f"{_num(r['ms'], '.3f', 0)} | {sp} | {_paired_str(r)} | "
            f"{_num(r['rel_vs_stock'], '.2e', 0)} | "
            f"{rel64} ({r['stock_rel_vs_fp64']:.2e}) | {_agree(r)} | "
            f"{r['convs_depthwise']}/{r['convs_other']}/{r['convs_fast']} | "
            f"{'-' if r['replaced'] is None else r['replaced']} | {r['note']} |")
    reasons = {(r["model"], r["variant"], s, n) for r in rows
               for s, n in r["skip_reasons"].items()}
    if reasons:
        lines += ["", "Layers swap left alone:"] + [
            f"- {m} {v}: {n} x {s}" for m, v, s, n in sorted(reasons)]
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", nargs="+", default=list(DEFAULT_MODELS), choices=MODELS,
                   help="default: the issue's five (resnet50 mobilenet_v3_large convnext_tiny "
                        "conformer wav2vec2); also wav2vec2_fe (feature extractor only), "
                        "mobilenet_v3 (= mobilenet_v3_large), resnet18")
    p.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"],
                   choices=["float32", "bfloat16", "float16"])
    p.add_argument("--compile", default=None,
                   choices=["none", "default", "reduce-overhead", "max-autotune-no-cudagraphs"],
                   help="torch.compile mode for the compiled rows (default: 'default' on GPU, "
                        "'none' on CPU, where inductor's C++ compile takes minutes)")
    p.add_argument("--variants", nargs="+", default=["stock", "swap", "swap(all)"],
                   choices=VARIANTS, help="stock always runs (the reference)")
    p.add_argument("--override", action="store_true",
                   help="also run the stock model under torch_ops.enabled() (= adding the "
                        "'override' variant)")
    p.add_argument("--max-slowdown", type=float, default=5.0,
                   help="compile a gpukern variant only when its eager time is within this "
                        "factor of stock's (0: compile every variant)")
    p.add_argument("--slow-ms", type=float, default=50.0,
                   help="variants whose one call takes longer are timed over 3 calls only")
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--rounds", type=int, default=3,
                   help="interleaved timing rounds (every variant timed in each, order rotated; "
                        "median over rounds)")
    p.add_argument("--warmup-s", type=float, default=1.0,
                   help="seconds of untimed calls (every variant in turn) before the rounds")
    p.add_argument("--batch", type=int, nargs="+", default=[None],
                   help="batch sizes (default: each model's, 16 images on a GPU); e.g. 16 1")
    p.add_argument("--formats", nargs="+", default=["contiguous"],
                   choices=["contiguous", "channels_last"],
                   help="memory formats of the image models and their inputs (channels_last "
                        "skips the audio models)")
    p.add_argument("--cpus", default=None,
                   help="pin this process to these CPU cores (e.g. 2-5 or 2,3), for a steadier "
                        "host: host-bound models' times follow the core they run on")
    p.add_argument("--compile-threads", type=int, default=1,
                   help="inductor's compile_threads for the compiled rows (default 1: compile in "
                        "this process). Its worker pool, pinned by --cpus to the same cores, left "
                        "the compiled models host-bound and noisy: on an H100, --cpus 4-5, "
                        "compiled ConvNeXt-T bf16 batch 16 ran 3.4-3.9 ms a forward with rounds "
                        "from 2.95 to 4.46 ms, and 2.26-2.43 ms with 1")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--out", default=None,
                   help="folder for models.json / models.md / models.png")
    p.add_argument("--render", default=None, metavar="JSON",
                   help="only write the markdown table and the chart of an earlier run's "
                        "models.json (to --out, default: beside it) and exit")
    args = p.parse_args()
    if args.render:
        with open(args.render) as f:
            data = json.load(f)
        md = os.path.join(args.out or os.path.dirname(os.path.abspath(args.render)),
                          os.path.basename(args.render)[:-len(".json")] + ".md")
        with open(md, "w") as f:
            f.write(markdown(data["rows"], data["env"]))
        print(f"wrote {md}")
        _write_chart(data["rows"], data["env"], md[:-len(".md")] + ".png")
        return
    if args.cpus:
        cores = set()
        for part in args.cpus.split(","):
            lo, _, hi = part.partition("-")
            cores.update(range(int(lo), int(hi or lo) + 1))
        os.sched_setaffinity(0, cores)
    gpu = args.device == "cuda"
    if gpu and not torch_ops.has_cuda_kernels():
        sys.exit("models.py: gpukern was built without CUDA kernels; use --device cpu")
    args.variants = ["stock"] + [v for v in VARIANTS[1:] if v in args.variants
                                 or (v == "override" and args.override)]
    compile_mode = args.compile or ("default" if gpu else "none")
    args.modes = ["eager"] + ([] if compile_mode == "none" else ["compiled"])
    args.compile_kw = {} if compile_mode in ("none", "default") else {"mode": compile_mode}
    if compile_mode != "none" and args.compile_threads > 0:
        import torch._inductor.config as inductor_config
        inductor_config.compile_threads = args.compile_threads
    env = dict(device=torch.cuda.get_device_name() if gpu else f"CPU ({platform.processor()})",
               torch=torch.__version__, cuda=torch.version.cuda,
               gpukern_cuda=torch_ops.has_cuda_kernels(),
               archs=getattr(torch_ops._C, "CUDA_ARCHS", ""), compile=compile_mode,
               max_slowdown=args.max_slowdown, slow_ms=args.slow_ms, cpus=args.cpus,
               compile_threads=args.compile_threads if compile_mode != "none" else None,
               rounds=args.rounds)
    if not gpu:
        print("models.py: no GPU, timing gpukern's CPU kernels on tiny inputs")
    print(HEADER)
    out = args.out or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                   "models_" + ("gpu" if gpu else "cpu"))
    os.makedirs(out, exist_ok=True)

    def write(rows):  # after every model, so a run cut short by a timeout keeps its rows
        with open(os.path.join(out, "models.json"), "w") as f:
            json.dump(dict(env=env, rows=rows), f, indent=1)
        with open(os.path.join(out, "models.md"), "w") as f:
            f.write(markdown(rows, env))

    rows = []
    t_start = time.perf_counter()
    for name in args.models:
        for batch in args.batch:
            for fmt in args.formats:
                t0 = time.perf_counter()
                try:
                    rows += run_model(name, args, args.device, gpu, batch, fmt)
                except ImportError as e:
                    print(f"{name}: skipped ({e})")
                print(f"{name} (batch {batch or 'default'}, {fmt}): "
                      f"{time.perf_counter() - t0:.0f} s", flush=True)
                write(rows)
    print(f"\nall models: {time.perf_counter() - t_start:.0f} s")
    _write_chart(rows, env, os.path.join(out, "models.png"))
    for line in summaries(rows):
        print("summary " + line)
    print(f"wrote {out}/models.json and models.md")
    return 0 if all(r["agree"] is not False for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
