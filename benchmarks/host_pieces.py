"""Where a swapped layer's host time goes: the Python pieces of a fused block's eager forward
timed alone, and whole calls (stock block, swapped block, the op itself) timed with the GPU held.

A host-bound eager model (MobileNetV3 at batch 16, anything at batch 1) pays each layer's CPU
time per forward; swap's gain there is the host time its fused blocks save. This splits that
time: (1) pure-Python pieces (no kernel launched), mean of many back-to-back calls; (2) whole
calls issued while the GPU is held by a sleep kernel (``profile_models.host_gpu_ms``), medians of
interleaved rounds.

    python3 benchmarks/host_pieces.py [--rounds 9 --calls 50]
"""
import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torch_ops  # noqa: E402
from torch_ops import policy as gk_policy  # noqa: E402
from profile_models import host_gpu_ms  # noqa: E402

# name, N, C, H, O, K, stride, padding, groups, channels_last
LAYERS = [
    ("mnv3 1x1 40->120 28x28 cl", 16, 40, 28, 120, 1, 1, 0, 1, True),
    ("mnv3 dw 3x3 120 28x28 cl", 16, 120, 28, 120, 3, 1, 1, 120, True),
    ("resnet 3x3 64->64 56x56 cl", 1, 64, 56, 64, 3, 1, 1, 1, True),
]


def mean_us(fn, n=20000):
    for _ in range(200):
        fn()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) * 1e6 / n


def fused_block(c, o, k, s, p, g, dt, cl):
    seq = torch.nn.Sequential(torch.nn.Conv2d(c, o, k, s, p, groups=g, bias=False),
                              torch.nn.BatchNorm2d(o), torch.nn.ReLU()).to("cuda", dt).eval()
    if cl:
        seq = seq.to(memory_format=torch.channels_last)
    return seq


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("host_pieces.py needs a CUDA GPU")
    dev = torch.cuda.get_device_name()
    print(f"# host us per call on {dev}\n")
    torch.set_grad_enabled(False)
    for name, n, c, h, o, k, s, p, g, cl in LAYERS:
        for dn in args.dtypes:
            dt = getattr(torch, dn)
            x = torch.randn(n, c, h, h, device="cuda", dtype=dt)
            if cl:
                x = x.contiguous(memory_format=torch.channels_last)
            stock = fused_block(c, o, k, s, p, g, dt, cl)
            import copy
            res = torch_ops.swap(copy.deepcopy(stock), policy="all", channels_last=False)
            block = res.fused[0].module if res.fused else None
            assert block is not None, res.summary()
            swapped_seq = res.model
            w, b = block.weight, block.bias
            ops = torch.ops.gpukern
            st, pd, dl = [s, s], [p, p], [1, 1]
            fast = {}
            key = (x.shape, x.stride(), x.dtype, x.device, False)
            fast[key] = True
            pieces = {
                "torch.compiler.is_compiling()": torch.compiler.is_compiling,
                "key (shape, stride, dtype, device)": lambda: (x.shape, x.stride(), x.dtype,
                                                               x.device, False),
                "dict lookup of the key": lambda: fast.get(key),
                "x.device": lambda: x.device,
                "x.stride()": lambda: x.stride(),
                "x.shape": lambda: x.shape,
                "block.weight (nn.Module __getattr__)": lambda: block.weight,
                "3 x list(tuple)": lambda: (list(block.stride), list(block.padding),
                                            list(block.dilation)),
                "use_gpukern(block, x)": lambda: gk_policy.use_gpukern(block, x),
            }
            print(f"## {name}, {dn}\n")
            for pn, f in pieces.items():
                print(f"- {pn}: {mean_us(f):.2f} us")
            fns = {
                "F.conv2d": lambda: F.conv2d(x, w, b, s, p, 1, g),
                "stock conv+bn+relu (Sequential)": lambda: stock(x),
                "swapped block (FusedConv2d module)": lambda: block(x),
                "swapped Sequential": lambda: swapped_seq(x),
                "conv2d_fused.default, lists built": lambda: ops.conv2d_fused.default(
                    x, w, b, st, pd, dl, g, "relu", None),
                "conv2d.default": lambda: ops.conv2d.default(x, w, b, st, pd, dl, g),
                "block._run_gpukern(x)": lambda: block._run_gpukern(x),
                "torch.relu(F.conv2d)": lambda: torch.relu(F.conv2d(x, w, b, s, p, 1, g)),
            }
            with torch.inference_mode():
                ref = stock(x).float()
                for vn in ("stock conv+bn+relu (Sequential)", "swapped block (FusedConv2d module)",
                           "conv2d_fused.default, lists built"):
                    torch.testing.assert_close(fns[vn]().float(), ref, rtol=3e-2, atol=3e-2,
                                               msg=vn)
                algo = torch_ops.algorithm("conv2d", x, w, b, s, p, 1, g)
                hg = host_gpu_ms(fns, rounds=args.rounds, calls=args.calls, sleep_ms=20.0)
            print(f"\ngpukern algorithm: {algo}; host us per call (GPU us):\n")
            for vn, (host, gpu, _) in hg.items():
                print(f"- {vn}: {host * 1e3:.1f} ({gpu * 1e3:.1f})")
            print(flush=True)


if __name__ == "__main__":
    main()
