"""Where the host time of one conv call goes: torch.profiler over many calls of torch's conv and
gpukern's ops on real layers, the CPU time of each op and of what runs inside it (ATen calls,
CUDA runtime calls), per call.

benchmarks/host_overhead.py gives the total per call (issued while the GPU is held); this gives
the breakdown behind it. The profiler adds its own cost to every recorded event (about a
microsecond), so compare variants with each other, not with host_overhead.py's totals.

    python3 benchmarks/host_profile.py [--calls 200] [--dtypes bfloat16 float32] [--top 12]
"""
import argparse
import collections
import os
import sys

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torch_ops  # noqa: E402,F401  (loads the ops)

# name, N, C, H, O, K, stride, padding, groups, channels_last
LAYERS = [
    ("resnet 3x3 64->64 56x56 cl", 1, 64, 56, 64, 3, 1, 1, 1, True),
    ("resnet 1x1 256->64 56x56 cl", 1, 256, 56, 64, 1, 1, 0, 1, True),
    ("mobilenet 1x1 80->200 14x14 cl b16", 16, 80, 14, 200, 1, 1, 0, 1, True),
    ("convnext dw 7x7 384 14x14", 1, 384, 14, 384, 7, 1, 3, 384, False),
    ("convnext dw 7x7 384 14x14 cl", 1, 384, 14, 384, 7, 1, 3, 384, True),
]


def breakdown(fn, calls: int):
    """{event name: (us per call of CPU time, events per call)} for `calls` calls of fn: the
    top-level events' total time and their children's self time."""
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    out = collections.defaultdict(lambda: [0.0, 0])
    for ev in prof.key_averages():
        if ev.device_type != torch.autograd.DeviceType.CPU:
            continue
        out[ev.key][0] += ev.self_cpu_time_total / calls
        out[ev.key][1] += ev.count / calls
        out["(total of " + ev.key + ")"][0] += ev.cpu_time_total / calls
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--dtypes", nargs="+", default=["bfloat16", "float32"])
    ap.add_argument("--top", type=int, default=12)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("host_profile.py needs a CUDA GPU")
    ops = torch.ops.gpukern
    print(f"# host time breakdown per call on {torch.cuda.get_device_name()} "
          f"(torch.profiler, {args.calls} calls; us per call, self CPU time)\n")
    for name, n, c, h, o, k, s, p, g, cl in LAYERS:
        for dn in args.dtypes:
            dt = getattr(torch, dn)
            x = torch.randn(n, c, h, h, device="cuda", dtype=dt)
            w = torch.randn(o, c // g, k, k, device="cuda", dtype=dt)
            b = torch.randn(o, device="cuda", dtype=dt)
            if cl:
                x = x.contiguous(memory_format=torch.channels_last)
                w = w.contiguous(memory_format=torch.channels_last)
            fns = {
                "F.conv2d": lambda: F.conv2d(x, w, b, s, p, 1, g),
                "F.conv2d+relu": lambda: torch.relu(F.conv2d(x, w, b, s, p, 1, g)),
                "gk.default": lambda: ops.conv2d.default(x, w, b, [s, s], [p, p], [1, 1], g),
                "fused.default": lambda: ops.conv2d_fused.default(
                    x, w, b, [s, s], [p, p], [1, 1], g, "relu", None),
            }
            algo = torch_ops.algorithm("conv2d", x, w, b, s, p, 1, g)
            print(f"## {name}, {dn} (gpukern: {algo})\n")
            with torch.inference_mode():
                for vn, fn in fns.items():
                    res = breakdown(fn, args.calls)
                    tops = sorted(((v[0], kk, v[1]) for kk, v in res.items()
                                   if kk.startswith("(total of")), reverse=True)
                    total = tops[0][0] if tops else 0.0
                    selfs = sorted(((v[0], kk, v[1]) for kk, v in res.items()
                                    if not kk.startswith("(total of") and v[0] > 0.05),
                                   reverse=True)[:args.top]
                    parts = ", ".join(f"{kk} {t:.1f}" + (f" x{cnt:.0f}" if cnt > 1.01 else "")
                                      for t, kk, cnt in selfs)
                    print(f"- {vn}: {total:.1f} us ({tops[0][1][10:-1] if tops else '-'}); "
                          f"self: {parts}")
            print(flush=True)


if __name__ == "__main__":
    main()
