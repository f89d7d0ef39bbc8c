"""Host (CPU) time per call of gpukern's conv ops against F.conv2d / F.conv1d, on the real layers
whose eager models are launch-bound (batch 1, or small layers at batch 16): the time a model pays
on the CPU before the GPU does anything.

Method: for each layer, 200 calls issued back to back without synchronising, wall clock from the
first call to the last call's return (the GPU is far behind: tiny kernels queue up), median of 7
rounds; reported per call for gpukern and torch, interleaved in each round. The GPU's own time per
call (CUDA events around the same 200 calls, after a sync) is printed beside it: where the host
time is the larger, a model made of such layers runs at the host's pace.

    python3 benchmarks/host_overhead.py [--calls 200 --rounds 7]
"""
import argparse
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torch_ops  # noqa: E402,F401

# name, N, C, H (or L for 1-D), O, K, stride, padding, groups, channels_last
LAYERS = [
    ("convnext stem 4x4 s4 3->96", 1, 3, 224, 96, 4, 4, 0, 1, False),
    ("convnext down 2x2 s2 96->192", 1, 96, 56, 192, 2, 2, 0, 1, True),
    ("convnext dw 7x7 384", 1, 384, 14, 384, 7, 1, 3, 384, True),
    ("resnet stem 7x7 s2 3->64", 1, 3, 224, 64, 7, 2, 3, 1, False),
    ("resnet 3x3 64->64 56x56", 1, 64, 56, 64, 3, 1, 1, 1, False),
    ("resnet 1x1 256->64 56x56", 1, 256, 56, 64, 1, 1, 0, 1, False),
    ("resnet 1x1 256->64 56x56 cl", 1, 256, 56, 64, 1, 1, 0, 1, True),
    ("mobilenet dw 3x3 72 56x56", 1, 72, 56, 72, 3, 1, 1, 72, False),
]


def host_and_gpu_us(fn, calls, rounds):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    host, gpu = [], []
    for _ in range(rounds):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        t1 = time.perf_counter()
        end.record()
        torch.cuda.synchronize()
        host.append((t1 - t0) / calls * 1e6)
        gpu.append(start.elapsed_time(end) / calls * 1e3)
    return statistics.median(host), statistics.median(gpu)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("needs a CUDA GPU")
    print(f"# host time per call on {torch.cuda.get_device_name()} (wall from the first issue to "
          f"the last return of {args.calls} unsynchronised calls, median of {args.rounds}); "
          f"gpu = events around the same calls")
    print("| layer | dtype | gpukern algorithm | gpukern host us | torch host us | "
          "gpukern gpu us | torch gpu us |")
    print("|---|---|---|---:|---:|---:|---:|")
    for name, n, c, h, o, k, s, p, g, cl in LAYERS:
        for dtype in (torch.bfloat16, torch.float32):
            x = torch.randn(n, c, h, h, device="cuda", dtype=dtype)
            w = torch.randn(o, c // g, k, k, device="cuda", dtype=dtype) / (c // g * k * k) ** 0.5
            b = torch.randn(o, device="cuda", dtype=dtype)
            if cl:
                x = x.contiguous(memory_format=torch.channels_last)
                w = w.contiguous(memory_format=torch.channels_last)
            ours = lambda: torch.ops.gpukern.conv2d(x, w, b, [s, s], [p, p], [1, 1], g)  # noqa
            theirs = lambda: F.conv2d(x, w, b, s, p, 1, g)  # noqa: E731
            torch.testing.assert_close(ours().float(), theirs().float(), rtol=5e-2, atol=5e-2)
            algo = torch_ops.algorithm("conv2d", x, w, b, s, p, 1, g)
            gh, gg = host_and_gpu_us(ours, args.calls, args.rounds)
            th, tg = host_and_gpu_us(theirs, args.calls, args.rounds)
            print(f"| {name} | {str(dtype)[6:]} | {algo} | {gh:.1f} | {th:.1f} | {gg:.1f} | "
                  f"{tg:.1f} |", flush=True)


if __name__ == "__main__":
    main()
