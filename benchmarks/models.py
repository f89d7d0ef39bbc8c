"""Real models, stock vs gpukern: end-to-end latency and agreement.

Builds architectures nobody here wrote, with random weights (no downloads), from the libraries
installed beside torch: torchaudio's Conformer (depthwise Conv1d in every block) and wav2vec2
feature extractor (dense strided Conv1d), torchvision's MobileNetV3-Large and ConvNeXt-Tiny
(depthwise Conv2d) and ResNet-18 (dense Conv2d only). Each runs stock and after
``torch_ops.swap`` (optionally also under ``torch_ops.enabled()``), eager and
``torch.compile``-d, in float32 and bfloat16, under ``torch.inference_mode()``.

Correctness first: every variant's output is compared with the stock model's in the same dtype
and with a float64 run of the stock model; a variant "agrees" when its norm-relative error to the
float64 reference is at most twice the stock model's own (plus a floor of 1e-5), i.e. gpukern is
no less accurate than torch at that dtype. Then latency: CUDA events, warm-up, median (wall clock
on CPU). Where gpukern makes a model slower (dense convolutions, until their own issue) the
speedup column says so. torch's defaults are kept (cuDNN may use TF32 for float32 convolutions;
gpukern computes true fp32).

    python3 benchmarks/models.py                      # GPU: realistic sizes; CPU: tiny ones
    python3 benchmarks/models.py --models conformer resnet18 --dtypes bfloat16 --compile none
    python3 benchmarks/models.py --override --out results/models

Writes models.json and models.md under --out.
"""
import argparse
import contextlib
import copy
import json
import os
import platform
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch_ops  # noqa: E402
from timing import time_cpu, time_cuda  # noqa: E402

MODELS = ("conformer", "wav2vec2_fe", "mobilenet_v3", "convnext_tiny", "resnet18")


def build(name: str, device: str, gpu: bool):
    """(model, example input tuple, what the input is) for one architecture."""
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    if name == "conformer":
        from torchaudio.models import Conformer
        # Conformer-S-like: 144-dim, 4 heads, 16 blocks, depthwise kernel 31.
        model = Conformer(input_dim=144, num_heads=4, ffn_dim=576, num_layers=16,
                          depthwise_conv_kernel_size=31)
        b, t = (8, 1024) if gpu else (1, 48)
        x = torch.randn(b, t, 144, generator=g)
        lengths = torch.full((b,), t, dtype=torch.int64)
        return model, (x, lengths), f"{b}x{t} frames x 144"
    if name == "wav2vec2_fe":
        from torchaudio.models import wav2vec2_base
        model = wav2vec2_base().feature_extractor
        b, n = (4, 16000 * 4) if gpu else (1, 4000)
        return model, (torch.randn(b, n, generator=g), None), f"{b}x{n} samples"
    import torchvision.models as tvm
    ctor = {"mobilenet_v3": tvm.mobilenet_v3_large, "convnext_tiny": tvm.convnext_tiny,
            "resnet18": tvm.resnet18}[name]
    model = ctor(weights=None)
    b, s = (16, 224) if gpu else (1, 64)
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


def run_model(name, args, device, gpu):
    base, inputs, described = build(name, device, gpu)
    base = base.to(device)
    calibrate_batchnorm(base, _cast(inputs, device, torch.float32))
    base.eval()
    dw, other = conv_census(base)
    timer = (lambda f: time_cuda(f, reps=args.reps, warmup=3, flush=False)) if gpu else \
        (lambda f: time_cpu(f, reps=max(3, args.reps // 6)))
    rows = []
    with torch.inference_mode():
        ref64 = _first(copy.deepcopy(base).double()(*_cast(inputs, device, torch.float64)))
        for dtype_name in args.dtypes:
            dtype = getattr(torch, dtype_name)
            stock = copy.deepcopy(base).to(dtype)
            swapped = copy.deepcopy(stock)
            report = torch_ops.swap(swapped)
            x = _cast(inputs, device, dtype)
            variants = [("stock", stock, contextlib.nullcontext),
                        ("swap", swapped, contextlib.nullcontext)]
            if args.override:
                variants.append(("override", stock, torch_ops.enabled))
            for mode in args.modes:
                results = {}
                for vname, model, ctx in variants:
                    torch._dynamo.reset()
                    note = ""
                    with ctx():
                        fn = model
                        if mode != "eager":
                            try:
                                fn = torch.compile(model, fullgraph=True, **args.compile_kw)
                                fn(*x)
                            except Exception as e:  # noqa: BLE001  (report, then allow breaks)
                                note = f"graph breaks ({type(e).__name__})"
                                torch._dynamo.reset()
                                fn = torch.compile(model, **args.compile_kw)
                        t0 = time.perf_counter()
                        out = _first(fn(*x)).clone()
                        first_ms = (time.perf_counter() - t0) * 1e3
                        ms = timer(lambda: fn(*x))
                    results[vname] = (out, ms, note, first_ms)
                s_out, s_ms = results["stock"][0], results["stock"][1]
                _, stock_rel64 = _errors(s_out, ref64)
                for vname, (out, ms, note, _) in results.items():
                    max_abs, rel = _errors(out, s_out)
                    _, rel64 = _errors(out, ref64)
                    agree = bool(torch.isfinite(out).all()) and rel64 <= 2 * stock_rel64 + 1e-5
                    rows.append(dict(
                        model=name, input=described, dtype=dtype_name, mode=mode,
                        variant=vname, ms=ms, speedup=s_ms / ms, max_abs_vs_stock=max_abs,
                        rel_vs_stock=rel, rel_vs_fp64=rel64, stock_rel_vs_fp64=stock_rel64,
                        agree=agree, note=note, replaced=len(report.replaced),
                        skipped=len(report.skipped), convs_depthwise=dw, convs_other=other,
                        skip_reasons=sorted({r for _, r in report.skipped})))
                    print(_fmt_row(rows[-1]), flush=True)
            del stock, swapped
            if gpu:
                torch.cuda.empty_cache()
    return rows


HEADER = (f"{'model':<14} {'dtype':<9} {'mode':<8} {'variant':<8} {'ms':>9} {'speedup':>8} "
          f"{'rel/stock':>10} {'rel/fp64':>9} {'stock/fp64':>10} {'agree':>5}  convs dw/other "
          f"swapped")


def _fmt_row(r):
    return (f"{r['model']:<14} {r['dtype']:<9} {r['mode']:<8} {r['variant']:<8} "
            f"{r['ms']:>9.3f} {r['speedup']:>7.2f}x {r['rel_vs_stock']:>10.2e} "
            f"{r['rel_vs_fp64']:>9.2e} {r['stock_rel_vs_fp64']:>10.2e} "
            f"{'yes' if r['agree'] else 'NO':>5}  {r['convs_depthwise']}/{r['convs_other']} "
            f"{r['replaced']}{(' ' + r['note']) if r['note'] else ''}")


def markdown(rows, env):
    lines = [f"# Real models, stock vs gpukern ({env['device']})", "",
             f"torch {env['torch']}, CUDA {env['cuda']}, gpukern CUDA kernels: "
             f"{env['gpukern_cuda']} ({env['archs'] or '-'}); compile: {env['compile']}", "",
             "| model | input | dtype | mode | variant | ms | speedup | rel err vs stock | "
             "rel err vs fp64 (stock's) | agree | convs dw/other | swapped | note |",
             "|---|---|---|---|---|---:|---:|---:|---:|---|---|---:|---|"]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['input']} | {r['dtype']} | {r['mode']} | {r['variant']} | "
            f"{r['ms']:.3f} | {r['speedup']:.2f}x | {r['rel_vs_stock']:.2e} | "
            f"{r['rel_vs_fp64']:.2e} ({r['stock_rel_vs_fp64']:.2e}) | "
            f"{'yes' if r['agree'] else 'NO'} | {r['convs_depthwise']}/{r['convs_other']} | "
            f"{r['replaced']} | {r['note']} |")
    reasons = sorted({(r["model"], s) for r in rows for s in r["skip_reasons"]})
    if reasons:
        lines += ["", "Layers swap left alone:"] + [f"- {m}: {s}" for m, s in reasons]
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    p.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"],
                   choices=["float32", "bfloat16", "float16"])
    p.add_argument("--compile", default=None,
                   choices=["none", "default", "reduce-overhead", "max-autotune-no-cudagraphs"],
                   help="torch.compile mode for the compiled rows (default: 'default' on GPU, "
                        "'none' on CPU, where inductor's C++ compile takes minutes)")
    p.add_argument("--override", action="store_true",
                   help="also run the stock model under torch_ops.enabled()")
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--out", default=None, help="folder for models.json / models.md")
    args = p.parse_args()
    gpu = args.device == "cuda"
    if gpu and not torch_ops.has_cuda_kernels():
        sys.exit("models.py: gpukern was built without CUDA kernels; use --device cpu")
    compile_mode = args.compile or ("default" if gpu else "none")
    args.modes = ["eager"] + ([] if compile_mode == "none" else ["compiled"])
    args.compile_kw = {} if compile_mode in ("none", "default") else {"mode": compile_mode}
    env = dict(device=torch.cuda.get_device_name() if gpu else f"CPU ({platform.processor()})",
               torch=torch.__version__, cuda=torch.version.cuda,
               gpukern_cuda=torch_ops.has_cuda_kernels(),
               archs=getattr(torch_ops._C, "CUDA_ARCHS", ""), compile=compile_mode)
    if not gpu:
        print("models.py: no GPU, timing gpukern's CPU kernels on tiny inputs")
    print(HEADER)
    rows = []
    for name in args.models:
        try:
            rows += run_model(name, args, args.device, gpu)
        except ImportError as e:
            print(f"{name}: skipped ({e})")
    out = args.out or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                   "models_" + ("gpu" if gpu else "cpu"))
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "models.json"), "w") as f:
        json.dump(dict(env=env, rows=rows), f, indent=1)
    with open(os.path.join(out, "models.md"), "w") as f:
        f.write(markdown(rows, env))
    print(f"wrote {out}/models.json and models.md")
    return 0 if all(r["agree"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
