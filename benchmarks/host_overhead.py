"""Host (CPU) time per call of gpukern's conv ops and swapped modules against torch's, on real
layers: the time a launch-bound eager model (batch 1, or host-bound bf16 models such as
ConvNeXt-T at batch 16) pays on the CPU per layer before the GPU does anything.

Method (``profile_models.host_gpu_ms``): per variant, ``--calls`` calls issued while the GPU is
held by a sleep kernel, so that they only enqueue: the CPU time per call is the Python, dispatcher
and launch cost alone, whatever the kernels' own time. Variants interleaved in ``--rounds`` rounds
(order rotated each round), medians. Outputs are checked against F.conv2d first.

Variants per layer:
  F.conv2d          torch.nn.functional.conv2d (what nn.Conv2d runs)
  nn.Conv2d         the stock module (its Python forward, then F.conv2d)
  aten.conv.default torch.ops.aten.convolution.default (the dispatcher path, no Python wrapper)
  gk.default        torch.ops.gpukern.conv2d.default (our op through the dispatcher, no wrapper)
  gk.packet         torch.ops.gpukern.conv2d (overload resolution per call)
  torch_ops.conv2d  the typed Python wrapper
  swapped module    torch_ops.nn.Conv2d from the stock module, policy "all"
  fused.default     torch.ops.gpukern.conv2d_fused.default with relu (one call for conv + act)
  conv+relu         stock nn.Conv2d then torch.relu (what fused.default replaces)

    python3 benchmarks/host_overhead.py [--calls 50 --rounds 9]
"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torch_ops  # noqa: E402
from profile_models import host_gpu_ms  # noqa: E402

# name, N, C, H, O, K, stride, padding, groups, channels_last
LAYERS = [
    ("convnext dw 7x7 384 14x14", 1, 384, 14, 384, 7, 1, 3, 384, False),
    ("convnext dw 7x7 384 14x14 cl", 1, 384, 14, 384, 7, 1, 3, 384, True),
    ("convnext dw 7x7 96 56x56 b16", 16, 96, 56, 96, 7, 1, 3, 96, False),
    ("convnext down 2x2 s2 96->192", 1, 96, 56, 192, 2, 2, 0, 1, False),
    ("convnext stem 4x4 s4 3->96", 1, 3, 224, 96, 4, 4, 0, 1, False),
    ("resnet 3x3 64->64 56x56", 1, 64, 56, 64, 3, 1, 1, 1, False),
    ("resnet 1x1 256->64 56x56", 1, 256, 56, 64, 1, 1, 0, 1, False),
    ("resnet 1x1 256->64 56x56 cl", 1, 256, 56, 64, 1, 1, 0, 1, True),
    ("mobilenet dw 3x3 72 56x56", 1, 72, 56, 72, 3, 1, 1, 72, False),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--dtypes", nargs="+", default=["bfloat16", "float32"])
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("host_overhead.py needs a CUDA GPU")
    print(f"# host us per call on {torch.cuda.get_device_name()}: {args.calls} calls issued "
          f"while the GPU is held, median of {args.rounds} interleaved rounds\n")
    names = None
    for name, n, c, h, o, k, s, p, g, cl in LAYERS:
        for dn in args.dtypes:
            dt = getattr(torch, dn)
            conv = torch.nn.Conv2d(c, o, k, s, p, groups=g).to("cuda", dt).eval()
            conv.requires_grad_(False)
            x = torch.randn(n, c, h, h, device="cuda", dtype=dt)
            if cl:
                conv = conv.to(memory_format=torch.channels_last)
                x = x.contiguous(memory_format=torch.channels_last)
            w, b = conv.weight, conv.bias
            swapped = torch_ops.nn.Conv2d.from_module(conv)
            ops = torch.ops.gpukern
            fns = {
                "F.conv2d": lambda: F.conv2d(x, w, b, s, p, 1, g),
                "nn.Conv2d": lambda: conv(x),
                "aten.conv.default": lambda: torch.ops.aten.convolution.default(
                    x, w, b, [s, s], [p, p], [1, 1], False, [0, 0], g),
                "gk.default": lambda: ops.conv2d.default(x, w, b, [s, s], [p, p], [1, 1], g),
                "gk.packet": lambda: ops.conv2d(x, w, b, [s, s], [p, p], [1, 1], g),
                "torch_ops.conv2d": lambda: torch_ops.conv2d(x, w, b, s, p, 1, g),
                "swapped module": lambda: swapped(x),
                "fused.default": lambda: ops.conv2d_fused.default(
                    x, w, b, [s, s], [p, p], [1, 1], g, "relu", None),
                "conv+relu": lambda: torch.relu(conv(x)),
            }
            with torch.inference_mode():
                ref = F.conv2d(x, w, b, s, p, 1, g).float()
                for vn, f in fns.items():
                    got = f().float()
                    want = ref.relu() if vn in ("fused.default", "conv+relu") else ref
                    torch.testing.assert_close(got, want, rtol=3e-2, atol=3e-2, msg=vn)
                algo = torch_ops.algorithm("conv2d", x, w, b, s, p, 1, g)
                res = host_gpu_ms(fns, rounds=args.rounds, calls=args.calls, sleep_ms=20.0)
            if names is None:
                names = list(fns)
                print("| layer | dtype | gpukern algorithm | " + " | ".join(names) +
                      " | gpu us torch / gk |")
                print("|---|---|---|" + "---:|" * len(names) + "---:|")
            row = " | ".join(f"{res[vn][0] * 1e3:.1f}" for vn in names)
            print(f"| {name} | {dn} | {algo} | {row} | {res['F.conv2d'][1] * 1e3:.1f} / "
                  f"{res['gk.default'][1] * 1e3:.1f} |", flush=True)


if __name__ == "__main__":
    main()
