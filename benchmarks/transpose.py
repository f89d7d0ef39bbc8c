"""The layout conversions (gpukern::_to_nhwc, gpukern::_nhwc_copy_to) on real activations: to NHWC
on the wide kernel (16-byte NCHW-side vectors) and on the tiled kernel (GPUKERN_LAYOUT_WIDE=0),
back on the tiled kernel, and aten's own conversion (x.contiguous(memory_format=channels_last),
nchw.copy_(nhwc)). Each result is checked equal to aten's first; times are per call over graph
replays that rotate through enough inputs (>= 160 MB) that each call reads from HBM, not L2.
Batch 16.

    python3 benchmarks/transpose.py [--out results/<gpu>_transpose.md]"""
import argparse
import math
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)
import torch_ops  # noqa: E402,F401
from timing import time_cuda_rotated  # noqa: E402

ops = torch.ops.gpukern
# (channels, plane side): ResNet-50's and MobileNetV3-Large's NCHW activations
SHAPES = [(64, 112), (64, 56), (128, 56), (256, 56), (128, 28), (512, 28), (256, 14), (1024, 14),
          (16, 112), (24, 56), (40, 28), (112, 14), (480, 14)]
ROTATE_BYTES = 160 << 20


def timed(fns, env):
    """us per call of the rotation fns, captured with GPUKERN_LAYOUT_WIDE = env (None: unset)."""
    old = os.environ.pop("GPUKERN_LAYOUT_WIDE", None)
    if env is not None:
        os.environ["GPUKERN_LAYOUT_WIDE"] = env
    try:
        return time_cuda_rotated(fns, rounds=4)[0] * 1e3
    finally:
        os.environ.pop("GPUKERN_LAYOUT_WIDE", None)
        if old is not None:
            os.environ["GPUKERN_LAYOUT_WIDE"] = old


def row(dtype, c, s):
    xs_bytes = 16 * c * s * s * torch.tensor([], dtype=dtype).element_size()
    k = max(2, math.ceil(ROTATE_BYTES / (2 * xs_bytes)))
    xs = [torch.randn(16, c, s, s, device="cuda").to(dtype) for _ in range(k)]
    ys = [x.contiguous(memory_format=torch.channels_last) for x in xs]
    outs = [torch.empty_like(x) for x in xs]
    for env in (None, "0"):  # check both kernels against aten first
        os.environ.pop("GPUKERN_LAYOUT_WIDE", None)
        if env is not None:
            os.environ["GPUKERN_LAYOUT_WIDE"] = env
        assert torch.equal(ops._to_nhwc(xs[0], 1), ys[0]), (dtype, c, s, env)
        outs[0].fill_(0)
        ops._nhwc_copy_to(ys[0], outs[0])
        assert torch.equal(outs[0], xs[0]), (dtype, c, s, env)
    os.environ.pop("GPUKERN_LAYOUT_WIDE", None)
    to = [lambda x=x: ops._to_nhwc(x, 1) for x in xs]
    to_aten = [lambda x=x: x.contiguous(memory_format=torch.channels_last) for x in xs]
    back = [lambda y=y, o=o: ops._nhwc_copy_to(y, o) for y, o in zip(ys, outs)]
    back_aten = [lambda y=y, o=o: o.copy_(y) for y, o in zip(ys, outs)]
    t = {"to aten": timed(to_aten, None), "to tiled": timed(to, "0"), "to wide": timed(to, None),
         "back aten": timed(back_aten, None), "back": timed(back, None)}
    mb = xs_bytes / 1e6
    tbs = 2 * xs_bytes / 1e6  # bytes moved (read + write) / us = TB/s * 1e6 / 1e6
    name = {torch.float32: "fp32", torch.bfloat16: "bf16"}[dtype]
    return (f"| {name} {c}x{s}x{s} | {mb:.1f} | {t['to aten']:.2f} | {t['to tiled']:.2f} | "
            f"{t['to wide']:.2f} | {tbs / t['to wide']:.2f} | {t['back aten']:.2f} | "
            f"{t['back']:.2f} | {tbs / t['back']:.2f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="also write the table here")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("transpose.py: no CUDA device here; nothing to time.")
        return
    lines = [f"# Layout conversions on {torch.cuda.get_device_name()} (batch 16, us per call, "
             "HBM-resident inputs; TB/s: bytes read + written / time)", "",
             "| activation | MB | to NHWC: aten | tiled | wide | TB/s | back: aten | gpukern "
             "| TB/s |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    print("\n".join(lines), flush=True)
    for dtype in (torch.float32, torch.bfloat16):
        for c, s in SHAPES:
            lines.append(row(dtype, c, s))
            print(lines[-1], flush=True)
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
