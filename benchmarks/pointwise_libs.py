"""Experiment: which library runs a 1x1 convolution fastest, on the real models' 1x1 layers.

A 1x1, stride-1, unpadded convolution is a GEMM: over channels_last, one GEMM of the N*H*W pixel
rows ([NHW, C] @ [C, O]); over NCHW, one GEMM per image with no transpose (y[n] = W @ x[n], W
[O, C], x[n] [C, HW]). For every distinct such layer of ResNet-50 and MobileNetV3-Large (batch 16
as the census runs them, float32 with TF32 allowed as convolutions are, and bfloat16; NCHW and
channels_last), the output of each candidate is checked against cuDNN first, then each is timed as
the layer census times (benchmarks/layers.py: 20 calls replayed from a CUDA graph, L2 flushed by
reading before each replay, median of the replays, per-call time):

- torch: F.conv2d, the faster of cudnn.benchmark off and on;
- gpukern: torch_ops.conv2d (the tensor-core path: CUTLASS GEMMs);
- cublas: torch.mm over the pixel rows (channels_last) or torch.bmm with the weight broadcast
  (stride-0 batch) over the images (NCHW), TF32 allowed for float32 (cuBLAS through torch; its
  heuristics pick the kernel).

- gpukern variants (`--variants`): gpukern's op under environment settings, e.g.
  `notune=GPUKERN_BLAS_TUNE=0` (cuBLASLt's first heuristic choice, untimed) or
  `img49=GPUKERN_BLAS_MIN_PLANE=49` (the batched NCHW form from 7x7 planes up).

    python3 benchmarks/pointwise_libs.py [--json out.json] [--models resnet50 mobilenet_v3_large]
        [--variants notune=GPUKERN_BLAS_TUNE=0 ...]
"""
import argparse
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_ops  # noqa: E402
from layers import build, census  # noqa: E402
from timing import time_cuda_graph  # noqa: E402


def pointwise_layers(models):
    """Distinct (N, C, H, W, O, bias) of the models' 1x1 stride-1 unpadded dense layers."""
    seen = {}
    for name in models:
        model, inputs, _ = build(name, gpu=True)
        for lay in census(model, inputs, device="cuda"):
            if (lay["op"] == "conv2d" and lay["groups"] == 1 and lay["kernel"] == [1, 1]
                    and lay["stride"] == [1, 1] and lay["padding"] == [0, 0]):
                n, c, h, w = lay["input_shape"]
                key = (n, c, h, w, lay["out_channels"], lay["bias"])
                seen.setdefault(key, name)
        del model
    return [(k, v) for k, v in seen.items()]


def cublas_fn(x, w2, fmt):
    """cuBLAS through torch: the 1x1 conv's GEMM without a copy of x."""
    n, c, h, wd = x.shape
    o = w2.shape[0]
    if fmt == "channels_last":
        rows = x.permute(0, 2, 3, 1).reshape(n * h * wd, c)  # a view for channels_last x
        assert rows.data_ptr() == x.data_ptr()
        wt = w2.t()

        def f():
            return torch.mm(rows, wt).view(n, h, wd, o).permute(0, 3, 1, 2)
        return f
    x3 = x.view(n, c, h * wd)
    wb = w2.unsqueeze(0).expand(n, o, c)

    def g():
        return torch.bmm(wb, x3).view(n, o, h, wd)
    return g


def with_env(env, fn):
    """fn called with the environment variables `env` (a dict) set, then restored."""
    def g():
        old = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            return fn()
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    return g


def parse_variants(specs):
    """['name=VAR=value,VAR2=value2', ...] -> {name: {VAR: value, ...}}"""
    out = {}
    for spec in specs:
        name, _, rest = spec.partition("=")
        out[name] = dict(kv.split("=", 1) for kv in rest.split(",") if kv)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["resnet50", "mobilenet_v3_large"])
    ap.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    ap.add_argument("--formats", nargs="+", default=["nchw", "channels_last"])
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--json")
    ap.add_argument("--variants", nargs="*", default=[],
                    help="name=VAR=value[,VAR=value]: gpukern timed under those settings too")
    args = ap.parse_args()
    torch.backends.cudnn.allow_tf32 = True
    layers = pointwise_layers(args.models)
    gpu = torch.cuda.get_device_name()
    variants = parse_variants(args.variants)
    vnames = list(variants)
    print(f"# 1x1 layers: torch (cuDNN) vs gpukern vs cuBLAS ({gpu}), {len(layers)} layers")
    print("| model | shape | dtype | format | torch us | gpukern us | cublas us | gk/torch | "
          "cublas/torch |" + "".join(f" {v} us | {v}/torch |" for v in vnames))
    print("|---|---|---|---|---:|---:|---:|---:|---:|" + "---:|---:|" * len(vnames))
    rows = []
    for (n, c, h, w, o, _bias), model in layers:
        for dtype_name in args.dtypes:
            dtype = getattr(torch, dtype_name)
            for fmt in args.formats:
                g = torch.Generator(device="cuda").manual_seed(0)
                x = torch.randn(n, c, h, w, device="cuda", generator=g).to(dtype)
                wt = (torch.randn(o, c, 1, 1, device="cuda", generator=g) * c ** -0.5).to(dtype)
                if fmt == "channels_last":
                    x = x.contiguous(memory_format=torch.channels_last)
                    wt = wt.contiguous(memory_format=torch.channels_last)
                w2 = wt.reshape(o, c).contiguous()
                ref = F.conv2d(x, wt).float()
                cands = {"torch": lambda: F.conv2d(x, wt),
                         "gpukern": lambda: torch_ops.conv2d(x, wt),
                         "cublas": cublas_fn(x, w2, fmt)}
                for v in vnames:
                    cands[v] = with_env(variants[v], lambda: torch_ops.conv2d(x, wt))
                tol = 2e-2 if dtype == torch.bfloat16 else 5e-3
                res = dict(model=model, shape=f"{n}x{c}x{h}x{w}->{o}", dtype=dtype_name,
                           format=fmt)
                old_mm = torch.backends.cuda.matmul.allow_tf32
                torch.backends.cuda.matmul.allow_tf32 = True
                try:
                    for name, f in cands.items():
                        out = f().float()
                        err = ((out - ref).norm() / ref.norm()).item()
                        if not err <= tol:
                            res[name] = None
                            res[name + "_err"] = err
                            continue
                        if name == "torch":
                            best = math.inf
                            for bm in (False, True):
                                torch.backends.cudnn.benchmark = bm
                                f()
                                best = min(best, time_cuda_graph(f, calls=20, reps=args.reps,
                                                                 flush=True))
                            torch.backends.cudnn.benchmark = False
                            res[name] = best * 1e3
                        else:
                            res[name] = time_cuda_graph(f, calls=20, reps=args.reps,
                                                        flush=True) * 1e3
                finally:
                    torch.backends.cuda.matmul.allow_tf32 = old_mm
                rows.append(res)

                def us(k):
                    return "FAIL" if res.get(k) is None else f"{res[k]:.1f}"

                def ratio(k):
                    if res.get(k) is None or res.get("torch") is None:
                        return "-"
                    return f"{res['torch'] / res[k]:.2f}x"
                print(f"| {model} | {res['shape']} | {dtype_name} | {fmt} | {us('torch')} | "
                      f"{us('gpukern')} | {us('cublas')} | {ratio('gpukern')} | "
                      f"{ratio('cublas')} |" + "".join(f" {us(v)} | {ratio(v)} |" for v in vnames),
                      flush=True)
    for dtype_name in args.dtypes:
        for fmt in args.formats:
            sel = [r for r in rows if r["dtype"] == dtype_name and r["format"] == fmt
                   and all(r.get(k) for k in ("torch", "gpukern", "cublas"))]
            if not sel:
                continue
            gm = {k: math.exp(sum(math.log(r["torch"] / r[k]) for r in sel) / len(sel))
                  for k in ("gpukern", "cublas")}
            for v in vnames:
                vs = [r for r in sel if r.get(v)]
                if vs:
                    g = math.exp(sum(math.log(r["torch"] / r[v]) for r in vs) / len(vs))
                    print(f"geomean {dtype_name} {fmt} variant {v} ({len(vs)} layers): {g:.2f}x; "
                          f"below 0.85x: {sum(r['torch'] / r[v] < 0.85 for r in vs)}")
            best = math.exp(sum(math.log(r["torch"] / min(r["gpukern"], r["cublas"]))
                                for r in sel) / len(sel))
            print(f"geomean {dtype_name} {fmt} ({len(sel)} layers): gpukern {gm['gpukern']:.2f}x,"
                  f" cublas {gm['cublas']:.2f}x, best of the two {best:.2f}x; below 0.85x: "
                  f"gpukern {sum(r['torch'] / r['gpukern'] < 0.85 for r in sel)}, cublas "
                  f"{sum(r['torch'] / r['cublas'] < 0.85 for r in sel)}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(dict(gpu=gpu, torch=torch.__version__, rows=rows), fh, indent=1)


if __name__ == "__main__":
    main()
