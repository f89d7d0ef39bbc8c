"""Where a gpukern conv call spends its GPU time: each kernel it launches, from torch.profiler, for
a few real layers (the stem, NCHW layers that convert to NHWC and back), against torch's call.

    python3 benchmarks/profile_layers.py [--calls 20]

Prints, per layer, dtype and format, every CUDA kernel's average time per call (the layout
conversions, the im2col, the GEMM or conv kernel) for gpukern and for torch (F.conv2d, cuDNN).
A diagnostic: the timed comparisons live in layers.py and igemm_layers.py."""
import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torch_ops  # noqa: E402,F401  (registers torch.ops.gpukern)

# name, N, C, H, O, K, stride, padding
LAYERS = [
    ("resnet50 stem 7x7 s2 3->64", 16, 3, 224, 64, 7, 2, 3),
    ("resnet50 3x3 512->512 7x7", 16, 512, 7, 512, 3, 1, 1),
    ("resnet50 3x3 64->64 56x56", 16, 64, 56, 64, 3, 1, 1),
    ("resnet50 1x1 64->64 56x56", 16, 64, 56, 64, 1, 1, 0),
    ("resnet50 1x1 2048->512 7x7", 16, 2048, 7, 512, 1, 1, 0),
    ("resnet50 1x1 64->256 56x56", 16, 64, 56, 256, 1, 1, 0),
    ("mobilenet 1x1 160->960 7x7", 16, 160, 7, 960, 1, 1, 0),
    ("mobilenet 1x1 16->16 112x112", 16, 16, 112, 16, 1, 1, 0),
]


def kernel_table(fn, calls):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    rows = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            name = e.name[:90]
            rows[name] = rows.get(name, 0.0) + e.device_time_total
    total = sum(rows.values()) / calls
    return total, sorted(((t / calls, n) for n, t in rows.items()), reverse=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--no-bias", action="store_true", help="convolutions without bias")
    ap.add_argument("--layers", nargs="+", default=None, help="layer names (default: all)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("needs a CUDA GPU")
    print(f"# kernels per call on {torch.cuda.get_device_name()} (torch.profiler, "
          f"average over {args.calls} calls, us)")
    for name, n, c, h, o, k, stride, padding in LAYERS:
        if args.layers and name not in args.layers:
            continue
        for dtype in (torch.bfloat16, torch.float32):
            for cl in (True, False):
                x = torch.randn(n, c, h, h, device="cuda").to(dtype)
                w = (torch.randn(o, c, k, k, device="cuda") / (c * k * k) ** 0.5).to(dtype)
                b = None if args.no_bias else torch.randn(o, device="cuda").to(dtype)
                if cl:
                    x = x.contiguous(memory_format=torch.channels_last)
                    w = w.contiguous(memory_format=torch.channels_last)
                ours = lambda: torch.ops.gpukern.conv2d(x, w, b, [stride] * 2, [padding] * 2,  # noqa
                                                        [1, 1], 1)
                theirs = lambda: F.conv2d(x, w, b, stride, padding)  # noqa: E731
                fmt = "channels_last" if cl else "nchw"
                for who, fn in (("gpukern", ours), ("torch", theirs)):
                    total, rows = kernel_table(fn, args.calls)
                    print(f"\n{name} | {str(dtype)[6:]} | {fmt} | {who}: {total:.1f} us of kernels")
                    for t, kn in rows:
                        print(f"    {t:8.1f}  {kn}")


if __name__ == "__main__":
    main()
