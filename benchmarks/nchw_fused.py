"""The 1x1 fused blocks where cuBLASLt's epilogue cannot do the whole block: CUTLASS's GEMM with
the epilogue inside, against cuBLASLt's GEMM followed by an elementwise pass, against torch's
unfused sequence.

    python3 benchmarks/nchw_fused.py [--dtypes bfloat16 float16] [--layout nchw|cl]

--layout nchw (default): 16-bit NCHW blocks with a bias (cuBLASLt's batched NCHW form has no
per-channel bias): GPUKERN_IGEMM_PASS16=0 / 1. --layout cl: channels_last blocks whose activation
cuBLASLt lacks (hardswish, hardsigmoid), every dtype: GPUKERN_IGEMM_ROWPASS=0 / 1 (the pass then
applies the activation alone).

For every 1x1 stride-1 block of ResNet-50 and MobileNetV3-Large whose output planes take cuBLASLt's
batched NCHW form (at least 196 pixels; batch 16, as the layer census runs them): the fused op
y = act(conv(x, w) + bias [+ residual]) with GPUKERN_IGEMM_PASS16=0 (the CUTLASS NCHW GEMM) and =1
(cuBLASLt, then the pass), and torch's sequence (F.conv2d with the bias, + residual, activation).
Every output is checked against an fp32 reference first; each is timed as the census times: 20
calls replayed from a CUDA graph, L2 flushed by a read before each replay, median of 30 replays.
"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_ops  # noqa: E402,F401  (loads the extension)
from timing import time_cuda_graph  # noqa: E402

# C, H, O, follow-up ("act" or "add>act"): ResNet-50 and MobileNetV3-Large, batch 16.
BLOCKS = [
    (64, 56, 64, "relu"), (64, 56, 256, "add>relu"), (256, 56, 64, "relu"),
    (256, 56, 128, "relu"), (128, 28, 512, "add>relu"), (512, 28, 128, "relu"),
    (512, 28, 256, "relu"), (256, 14, 1024, "add>relu"), (1024, 14, 256, "relu"),
    (16, 112, 16, "add>none"), (16, 112, 64, "relu"), (64, 56, 24, "none"), (24, 56, 72, "relu"),
    (72, 56, 24, "add>none"), (72, 28, 40, "none"), (40, 28, 120, "relu"),
    (120, 28, 40, "add>none"), (40, 28, 240, "hardswish"), (240, 14, 80, "none"),
    (80, 14, 200, "hardswish"), (200, 14, 80, "add>none"), (80, 14, 480, "hardswish"),
    (480, 14, 112, "none"), (112, 14, 672, "hardswish"), (672, 14, 112, "add>none"),
]
# channels_last: the blocks with an activation cuBLASLt's epilogue lacks (MobileNetV3-Large).
BLOCKS_CL = [
    (40, 28, 240, "hardswish"), (80, 14, 200, "hardswish"), (80, 14, 184, "hardswish"),
    (80, 14, 480, "hardswish"), (112, 14, 672, "hardswish"), (160, 7, 960, "hardswish"),
    (16, 112, 16, "hardswish"), (24, 1, 72, "hardsigmoid"), (120, 1, 480, "hardsigmoid"),
    (240, 1, 960, "hardsigmoid"),
]
ACT = {"none": lambda y, inplace=False: y, "relu": F.relu, "hardswish": F.hardswish,
       "hardsigmoid": F.hardsigmoid}


def block_ref(x, w, b, r, act, cast):
    """act(conv(x, w) + b [+ r]) of one 1x1 block with its operands cast (r None: no residual)."""
    ref = F.conv2d(cast(x), cast(w), cast(b))
    if r is not None:
        ref = ref + cast(r)
    return ACT[act](ref)


def block_calls(x, w, b, r, act):
    """torch's unfused sequence and gpukern's fused op for one 1x1 block (r None: no residual)."""
    def torch_seq():
        y = F.conv2d(x, w, b)
        if r is not None:
            y = y.add_(r)
        return ACT[act](y, inplace=True)

    def fused():
        return torch.ops.gpukern.conv2d_fused(x, w, b, [1, 1], [0, 0], [1, 1], 1, act, r)
    return torch_seq, fused


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dtypes", nargs="+", default=["bfloat16"])
    ap.add_argument("--layout", choices=["nchw", "cl"], default="nchw")
    args = ap.parse_args()
    cl = args.layout == "cl"
    env = "GPUKERN_IGEMM_ROWPASS" if cl else "GPUKERN_IGEMM_PASS16"
    torch.manual_seed(0)
    print(f"# {torch.cuda.get_device_name()}: us per call (graph of 20, L2 flushed, median of 30)")
    for dn in args.dtypes:
        dtype = getattr(torch, dn)
        print(f"\n| block ({dn}, {args.layout}, batch 16) | torch unfused | cutlass | pass | "
              "best / torch |")
        print("|---|---:|---:|---:|---:|")
        for c, h, o, follow in (BLOCKS_CL if cl else BLOCKS):
            act = follow.split(">")[-1]
            res = follow.startswith("add")
            x = torch.randn(16, c, h, h, device="cuda").to(dtype)
            w = (torch.randn(o, c, 1, 1, device="cuda") / c ** 0.5).to(dtype)
            b = torch.randn(o, device="cuda").to(dtype)
            r = torch.randn(16, o, h, h, device="cuda").to(dtype) if res else None
            if cl:
                x = x.contiguous(memory_format=torch.channels_last)
                w = w.contiguous(memory_format=torch.channels_last)
                r = None if r is None else r.contiguous(memory_format=torch.channels_last)
            ref = block_ref(x, w, b, r, act, lambda t: t.float())
            torch_seq, fused = block_calls(x, w, b, r, act)

            times = {"torch": time_cuda_graph(torch_seq, calls=20, reps=30, flush=True)}
            for name, flag in (("cutlass", "0"), ("pass", "1")):
                os.environ[env] = flag
                out = fused()
                err = float((out.float() - ref).norm() / ref.norm())
                tol = 5e-3 if dtype == torch.float32 else 2e-2
                assert err < tol, f"{name} {c}x{h}->{o} {follow}: rel err {err:.2e}"
                times[name] = time_cuda_graph(fused, calls=20, reps=30, flush=True)
            os.environ.pop(env, None)
            best = min(times["cutlass"], times["pass"])
            print(f"| 16x{c}x{h}x{h} -> {o} {follow} | {times['torch'] * 1e3:.1f} | "
                  f"{times['cutlass'] * 1e3:.1f} | {times['pass'] * 1e3:.1f} | "
                  f"{times['torch'] / best:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
