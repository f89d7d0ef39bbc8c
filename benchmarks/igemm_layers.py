"""A handful of real dense conv layers: gpukern's tensor-core implicit-GEMM path ("igemm", forced
by name) against torch's best (F.conv1d / F.conv2d, cudnn.benchmark off and on, the faster),
bf16 and fp32 (torch's default TF32 for convolutions, as both sides run), channels_last and NCHW.

Method (docs/performance.md): each output is verified first (norm-relative error against an fp32
reference with TF32 off); single calls between CUDA events, median of 30, L2 flushed by reading a
256 MiB buffer before each; layers under 40 us are re-timed as 100 calls replayed from a CUDA graph
(the graph column). TFLOP/s = 2 * N * O * OH * OW * C * KH * KW / time. The bf16 dense peak is a
cuBLAS 8192^3 bf16 matmul measured in the same run. The four tile configurations (large
128x128, small 64x64, medium 64x128, narrow 128x64) are timed, forced through GPUKERN_IGEMM_CONFIG; "auto" is
the one the rule picks (the best of the four is the "gpukern" column; the rule's miss shows when
they differ).
1x1 stride-1 layers run as GEMMs; their row also gives the implicit-GEMM conv kernel's time
(GPUKERN_IGEMM_GEMM=0), the measurement behind that choice.

    python3 benchmarks/igemm_layers.py [--json out.json] [--quick]
"""
import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_ops  # noqa: E402
from timing import time_cuda, time_cuda_graph  # noqa: E402

GRAPH_BELOW_MS = 0.040
TOL = {torch.bfloat16: 1e-2, torch.float32: 2e-3}

# name, N, C, (H, W) or L, O, (KH, KW) or K, stride, padding
LAYERS = [
    ("resnet50 1x1 64->256 56x56", 16, 64, (56, 56), 256, (1, 1), 1, 0),
    ("resnet50 3x3 256->256 56x56 b64", 64, 256, (56, 56), 256, (3, 3), 1, 1),
    ("resnet50 3x3 s2 128->128 56->28", 16, 128, (56, 56), 128, (3, 3), 2, 1),
    ("mobilenet 1x1 16->64 112x112", 16, 16, (112, 112), 64, (1, 1), 1, 0),
    ("convnext 2x2 s2 96->192 56x56", 16, 96, (56, 56), 192, (2, 2), 2, 0),
    ("wav2vec2 conv1d 512->512 K3 s2 L12799", 4, 512, 12799, 512, 3, 2, 0),
    ("mobilenet SE 1x1 480->120 1x1", 16, 480, (1, 1), 120, (1, 1), 1, 0),
    ("resnet50 stem 7x7 s2 3->64", 16, 3, (224, 224), 64, (7, 7), 2, 3),
    ("resnet50 3x3 64->64 56x56", 16, 64, (56, 56), 64, (3, 3), 1, 1),
    ("resnet50 3x3 256->256 14x14", 16, 256, (14, 14), 256, (3, 3), 1, 1),
    ("resnet50 3x3 s2 256->256 28->14", 16, 256, (28, 28), 256, (3, 3), 2, 1),
    ("resnet50 3x3 512->512 7x7", 16, 512, (7, 7), 512, (3, 3), 1, 1),
    ("resnet50 3x3 s2 512->512 14->7", 16, 512, (14, 14), 512, (3, 3), 2, 1),
    ("resnet50 1x1 2048->512 7x7", 16, 2048, (7, 7), 512, (1, 1), 1, 0),
    ("resnet50 1x1 1024->256 14x14", 16, 1024, (14, 14), 256, (1, 1), 1, 0),
]


def flops(n, c, o, k, out_sizes):
    taps = k[0] * k[1] if isinstance(k, tuple) else k
    pixels = 1
    for s in out_sizes:
        pixels *= s
    return 2.0 * n * o * pixels * c * taps


def bf16_peak():
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    ms = time_cuda(lambda: a @ b, reps=20, flush=False)
    return 2.0 * 8192 ** 3 / (ms * 1e-3) / 1e12


def timed(fn):
    """(ms, method): every candidate the same way, as the layer census does: calls replayed from
    a CUDA graph (100 per replay under GRAPH_BELOW_MS, 10 above), L2 flushed before each
    replay; flushed single calls between events only when the call cannot be captured."""
    ms = time_cuda(fn, reps=5)
    try:
        return time_cuda_graph(fn, calls=100 if ms < GRAPH_BELOW_MS else 10, reps=10,
                               flush=True), "graph"
    except RuntimeError:
        torch.cuda.synchronize()
    return time_cuda(fn, reps=30), "events"


def run_layer(layer, dtype, channels_last):
    name, n, c, hw, o, k, stride, padding = layer
    one_d = not isinstance(hw, tuple)
    family = "conv1d" if one_d else "conv2d"
    tconv = F.conv1d if one_d else F.conv2d
    gconv = torch.ops.gpukern.conv1d if one_d else torch.ops.gpukern.conv2d
    gen = torch.Generator(device="cuda").manual_seed(0)
    xs = (n, c, hw) if one_d else (n, c, *hw)
    ws = (o, c, k) if one_d else (o, c, *k)
    x = torch.randn(xs, device="cuda", generator=gen).to(dtype)
    w = (torch.randn(ws, device="cuda", generator=gen) / (c * (k if one_d else k[0] * k[1])) ** 0.5
         ).to(dtype)
    b = torch.randn(o, device="cuda", generator=gen).to(dtype)
    if channels_last and not one_d:
        x = x.contiguous(memory_format=torch.channels_last)
        w = w.contiguous(memory_format=torch.channels_last)
    stride_a = [stride] if one_d else [stride, stride]
    pad_a = [padding] if one_d else [padding, padding]

    def ours():
        return gconv(x, w, b, stride_a, pad_a, [1] if one_d else [1, 1], 1)

    tf32 = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False  # the verification reference: fp32, TF32 off
    ref = tconv(x.float(), w.float(), b.float(), stride_a, pad_a)
    torch.backends.cudnn.allow_tf32 = tf32
    per_config, errs, ok = {}, [], True
    pointwise = (k == 1 if one_d else k == (1, 1)) and stride == 1 and padding == 0
    configs = ("large", "small", "medium", "narrow", "auto") + (("conv",) if pointwise else ())
    with torch_ops.force_algorithm(family, "igemm"):
        for cfg in configs:
            # "conv": a 1x1 layer through the implicit-GEMM conv kernel instead of the GEMM
            os.environ["GPUKERN_IGEMM_GEMM"] = "0" if cfg == "conv" else "1"
            if cfg in ("auto", "conv"):
                os.environ.pop("GPUKERN_IGEMM_CONFIG", None)
            else:
                os.environ["GPUKERN_IGEMM_CONFIG"] = cfg
            out = ours()
            err = float((out.float() - ref).norm() / ref.norm())
            errs.append(err)
            ok = ok and err <= TOL[dtype] and out.shape == ref.shape
            per_config[cfg] = timed(ours)
    os.environ.pop("GPUKERN_IGEMM_CONFIG", None)
    os.environ.pop("GPUKERN_IGEMM_GEMM", None)
    err = max(errs)
    best = min(("large", "small", "medium", "narrow"), key=lambda c: per_config[c][0])
    t_ours, how_ours = per_config[best]
    torch_ms = []
    for bench in (False, True):
        torch.backends.cudnn.benchmark = bench
        t, _ = timed(lambda: tconv(x, w, b, stride_a, pad_a))
        torch_ms.append(t)
    torch.backends.cudnn.benchmark = False
    t_torch = min(torch_ms)
    f = flops(n, c, o, k, out.shape[2:])
    return {
        "layer": name, "dtype": str(dtype).replace("torch.", ""),
        "format": "ncl" if one_d else ("channels_last" if channels_last else "nchw"),
        "ok": ok, "rel_err": err, "ours_ms": t_ours, "ours_method": how_ours,
        "torch_ms": t_torch, "torch_ms_bench_off_on": torch_ms,
        "ours_tflops": f / (t_ours * 1e-3) / 1e12, "torch_tflops": f / (t_torch * 1e-3) / 1e12,
        "speedup": t_torch / t_ours, "best_config": best,
        "config_ms": {c: v[0] for c, v in per_config.items()},
        "auto_speedup": t_torch / per_config["auto"][0],
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", help="write the rows and the peak here")
    ap.add_argument("--quick", action="store_true", help="bf16 channels_last only")
    ap.add_argument("--layers", nargs="+", help="only the layers whose name contains one of these")
    args = ap.parse_args()
    if not torch.cuda.is_available() or not torch.ops.gpukern._has_igemm():
        sys.exit("needs a CUDA GPU and a build with the igemm path (torch.ops.gpukern._has_igemm())")
    torch.backends.cudnn.allow_tf32 = True  # torch's default for convolutions
    gpu = torch.cuda.get_device_name()
    peak = bf16_peak()
    print(f"# igemm layers on {gpu}; bf16 dense peak (cuBLAS 8192^3 bf16 matmul): {peak:.0f} TFLOP/s")
    print("| layer | dtype | format | ok (max rel err) | large / small / medium / narrow / auto us | torch best us "
          "| speedup (best cfg) | auto speedup | gpukern TFLOP/s (% bf16 peak) | torch TFLOP/s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    combos = [(torch.bfloat16, True)] if args.quick else [
        (torch.bfloat16, True), (torch.bfloat16, False), (torch.float32, True),
        (torch.float32, False)]
    for layer in LAYERS:
        if args.layers and not any(k in layer[0] for k in args.layers):
            continue
        one_d = not isinstance(layer[3], tuple)
        for dtype, cl in combos:
            if one_d and not cl:
                continue  # conv1d has one layout ([N, C, L])
            try:
                r = run_layer(layer, dtype, cl)
            except RuntimeError as e:
                print(f"| {layer[0]} | {dtype} | {'cl' if cl else 'nchw'} | ERROR {e} |")
                continue
            rows.append(r)
            print(f"| {r['layer']} | {r['dtype']} | {r['format']} | "
                  f"{'yes' if r['ok'] else 'NO'} ({r['rel_err']:.1e}) | "
                  + " / ".join(f"{r['config_ms'][c] * 1e3:.1f}"
                               for c in ("large", "small", "medium", "narrow", "auto"))
                  + (f" (conv kernel {r['config_ms']['conv'] * 1e3:.1f})"
                     if "conv" in r["config_ms"] else "")
                  + f"{' (graph)' if r['ours_method'] == 'graph' else ''} | "
                  f"{r['torch_ms'] * 1e3:.1f} | {r['speedup']:.2f}x ({r['best_config']}) | "
                  f"{r['auto_speedup']:.2f}x | "
                  f"{r['ours_tflops']:.0f} ({100 * r['ours_tflops'] / peak:.0f}%) | "
                  f"{r['torch_tflops']:.0f} |", flush=True)
    if rows:
        import math
        gm = math.exp(sum(math.log(r["speedup"]) for r in rows) / len(rows))
        ga = math.exp(sum(math.log(r["auto_speedup"]) for r in rows) / len(rows))
        print(f"\ngeomean speedup over torch's best: {gm:.2f}x with the better config, "
              f"{ga:.2f}x with the automatic one, over {len(rows)} rows; "
              f"all verified: {all(r['ok'] for r in rows)}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"gpu": gpu, "bf16_peak_tflops": peak, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
