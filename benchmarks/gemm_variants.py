"""Tuning experiment: the bf16 1x1 GEMM's tile / schedule configurations on the real 1x1 layers.

    GPUKERN_GEMM_VARIANTS=1 python3 setup.py build_ext --inplace   # builds the variants
    python3 benchmarks/gemm_variants.py [--json out.json]

For each 1x1 layer of ResNet-50 and MobileNetV3-Large (batch 16, bf16, channels_last, no bias,
as the layer census runs them), each configuration (the default ping-pong 128x128x64 and the
alternatives in csrc/conv/igemm/gemm_variants_*.cu, chosen by GPUKERN_GEMM_VARIANT) and cuDNN:
the output is verified against cuDNN first, then every candidate is timed the same way as the
census: 20 calls replayed from a CUDA graph, median of 10 replays, per-call time.
"""
import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_ops  # noqa: E402,F401  (loads the extension)
from timing import time_cuda_graph  # noqa: E402

VARIANTS = ["default", "coop_128x128x64", "coop_256x128x64", "coop_128x256x64",
            "pingpong_64x128x64", "pingpong_128x64x64"]
# (C, H, W, O): ResNet-50 and MobileNetV3-Large 1x1 stride-1 layers, batch 16.
LAYERS = [(64, 56, 56, 64), (64, 56, 56, 256), (256, 56, 56, 64), (256, 56, 56, 128),
          (128, 28, 28, 512), (512, 28, 28, 128), (512, 28, 28, 256), (256, 14, 14, 1024),
          (1024, 14, 14, 256), (1024, 14, 14, 512), (512, 7, 7, 2048), (2048, 7, 7, 512),
          (16, 112, 112, 64), (24, 56, 56, 72), (40, 28, 28, 120), (80, 14, 14, 200),
          (112, 14, 14, 672), (160, 7, 7, 960)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    args = ap.parse_args()
    torch.manual_seed(0)
    rows = []
    print("| layer | cudnn us | " + " | ".join(VARIANTS) + " | best |")
    print("|---|---:|" + "---:|" * len(VARIANTS) + "---|")
    for c, h, w, o in LAYERS:
        x = torch.randn(16, c, h, w, device="cuda").bfloat16().contiguous(
            memory_format=torch.channels_last)
        wt = (torch.randn(o, c, 1, 1, device="cuda") / c ** 0.5).bfloat16().contiguous(
            memory_format=torch.channels_last)
        ref = F.conv2d(x, wt)
        t_torch = []
        for bench in (False, True):  # cuDNN's best, as the census takes it
            torch.backends.cudnn.benchmark = bench
            t_torch.append(time_cuda_graph(lambda: F.conv2d(x, wt), calls=20, reps=10))
        torch.backends.cudnn.benchmark = False
        t_ref = min(t_torch)
        times = {}
        for v in VARIANTS:
            if v == "default":
                os.environ.pop("GPUKERN_GEMM_VARIANT", None)
            else:
                os.environ["GPUKERN_GEMM_VARIANT"] = v
            try:
                out = torch.ops.gpukern.conv2d(x, wt, None, [1, 1], [0, 0], [1, 1], 1)
                err = float((out.float() - ref.float()).norm() / ref.float().norm())
                if err > 1e-2:
                    times[v] = None
                    print(f"# {v} WRONG on {c}x{h}x{w}->{o}: rel err {err:.2e}")
                    continue
                times[v] = time_cuda_graph(
                    lambda: torch.ops.gpukern.conv2d(x, wt, None, [1, 1], [0, 0], [1, 1], 1),
                    calls=20, reps=10)
            except RuntimeError as e:
                times[v] = None
                print(f"# {v} failed on {c}x{h}x{w}->{o}: {str(e).splitlines()[0]}")
        os.environ.pop("GPUKERN_GEMM_VARIANT", None)
        ok = {k: t for k, t in times.items() if t is not None}
        best = min(ok, key=ok.get) if ok else "-"
        name = f"16x{c}x{h}x{w}->{o}"
        print(f"| {name} | {t_ref * 1e3:.1f} | " + " | ".join(
            "-" if times[v] is None else f"{times[v] * 1e3:.1f}" for v in VARIANTS)
              + f" | {best} |", flush=True)
        rows.append({"layer": name, "cudnn_ms": t_ref, "ms": times, "best": best})
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"gpu": torch.cuda.get_device_name(), "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
