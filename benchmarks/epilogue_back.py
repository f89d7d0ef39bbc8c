"""1x1 blocks over NCHW into small planes (7x7) whose output goes through the igemm path's
channels_last temporary: the epilogue on the way back (conv_epilogue_from_nhwc: the GEMM writes
conv + bias, one pass adds the residual and applies the activation) against the way before it
(GPUKERN_IGEMM_EPILOGUE_BACK=0: the residual transposed to channels_last, cuBLASLt's epilogue or an
activation pass, the plain way back); torch's unfused sequence and its conv alone beside them.
Blocks the path runs another way (the batched NCHW GEMM for small weights) time the same both
ways.

    python3 benchmarks/epilogue_back.py [--dtypes float32 bfloat16] [--out results/x.md]

Blocks: ResNet-50's and MobileNetV3-Large's 1x1 blocks into 7x7 (batch 16, BN folded into a
bias), the stride-2 shortcut 1024 -> 2048 included, and 960 -> 160 with hardswish (no listed
model has it: the way back with an activation and no residual). gpukern's fused op is forced to igemm (the
conv race skipped). Every output is checked against an fp32 reference first; each call is timed as
the layer census times it: 20 calls replayed from a CUDA graph, L2 flushed by a read before each
replay, median of 30 replays.
"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_ops  # noqa: E402
from nchw_fused import ACT  # noqa: E402
from timing import time_census_us, torch_best_us  # noqa: E402

# (C, H, O, stride, follow-up)
BLOCKS = [(160, 7, 960, 1, "hardswish"), (960, 7, 160, 1, "add>none"), (672, 7, 160, 1, "none"),
          (2048, 7, 512, 1, "relu"), (512, 7, 2048, 1, "add>relu"),
          (1024, 14, 2048, 2, "add>relu"), (960, 7, 160, 1, "hardswish")]
TOL = {torch.float32: 5e-3, torch.bfloat16: 2e-2}
SETTINGS = [("before", {"GPUKERN_IGEMM_EPILOGUE_BACK": "0"}),
            ("back", {"GPUKERN_IGEMM_EPILOGUE_BACK": "1"})]


timed = time_census_us
torch_best = torch_best_us


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    ap.add_argument("--out", default=None, help="also write the table to this file")
    args = ap.parse_args()
    torch.manual_seed(0)
    lines = [f"# {torch.cuda.get_device_name()}, torch {torch.__version__}: us per call (graph of "
             "20, L2 flushed, median of 30); gpukern forced to igemm", "",
             "| block (NCHW, batch 16) | dtype | torch conv | torch unfused | "
             + " | ".join(name for name, _ in SETTINGS) + " | back / unfused |",
             "|---|---|" + "---:|" * (len(SETTINGS) + 3)]
    for dn in args.dtypes:
        dtype = getattr(torch, dn)
        for c, h, o, s, follow in BLOCKS:
            oh = (h - 1) // s + 1
            x = torch.randn(16, c, h, h, device="cuda").to(dtype)
            w = (torch.randn(o, c, 1, 1, device="cuda") / c ** 0.5).to(dtype)
            b = (torch.randn(o, device="cuda") * 0.1).to(dtype)
            res = follow.startswith("add>")
            act = follow.split(">")[-1]
            r = torch.randn(16, o, oh, oh, device="cuda").to(dtype) if res else None
            ref = F.conv2d(x.float(), w.float(), b.float(), s)
            ref = ACT[act](ref + r.float() if res else ref)

            def torch_seq():
                y = F.conv2d(x, w, b, s)
                if r is not None:
                    y = y.add_(r)
                return ACT[act](y, inplace=True)

            def fused():
                with torch_ops.force_algorithm("conv2d", "igemm"):
                    return torch.ops.gpukern.conv2d_fused(x, w, b, [s, s], [0, 0], [1, 1], 1,
                                                          act, r)
            times = []
            for name, env in SETTINGS:
                saved = {k: os.environ.pop(k, None) for k in ("GPUKERN_IGEMM_EPILOGUE_BACK",)}
                os.environ.update(env)
                try:
                    out = fused()
                    e = float((out.float() - ref).norm() / ref.norm())
                    assert e <= TOL[dtype], (c, h, o, follow, dn, name, e)
                    times.append(timed(fused))
                finally:
                    for k, v in saved.items():
                        os.environ.pop(k, None)
                        if v is not None:
                            os.environ[k] = v
            conv = torch_best(lambda: F.conv2d(x, w, None, s))
            unfused = torch_best(torch_seq)
            row = (f"| {c}x{h}x{h} -> {o} s{s} {follow} | {dn} | {conv:.1f} | {unfused:.1f} | "
                   + " | ".join(f"{t:.1f}" for t in times) + f" | {unfused / times[-1]:.2f}x |")
            print(row, flush=True)
            lines.append(row)
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
