"""Split-K on the implicit GEMM (fp32 as TF32): the layers whose output tiles fill few SMs while
each walks a long K, run as one kernel (GPUKERN_IGEMM_SPLIT=1), and with the input channels cut
into 2, 4 or 8 slices on concurrent streams plus a reduction that applies the epilogue
(csrc/conv/igemm/igemm.cpp splits_for / run_split, splitk.cu).

    python3 benchmarks/split_igemm.py [--batches 16 4 1] [--formats nchw channels_last]

Per layer (ResNet-50's 3x3 blocks from 28x28 on, with BN folded into a bias and
ReLU): torch's convolution alone and torch's unfused sequence (conv, batch_norm in eval mode,
+ residual, relu), then gpukern's fused op forced onto the igemm path with 1 / 2 / 4 / 8 slices
and with the automatic count (splits_for's rule), and gpukern's automatic choice (the race
against cuDNN). Every gpukern output is checked against an fp32 reference first; each call is
timed as the layer census times it: 20 calls replayed from a CUDA graph, L2 flushed by a read
before each replay, median of 30 replays.
"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_ops  # noqa: E402  (loads the extension)
from timing import time_cuda_graph  # noqa: E402

# C, H (input), O, kernel, stride, follow-up.
LAYERS = [
    (512, 7, 512, 3, 1, "relu"), (512, 14, 512, 3, 2, "relu"), (256, 14, 256, 3, 1, "relu"),
    (256, 28, 256, 3, 2, "relu"), (128, 28, 128, 3, 1, "relu"), (128, 56, 128, 3, 2, "relu"),
]


def timed(fn):
    return time_cuda_graph(fn, calls=20, reps=30, flush=True) * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batches", nargs="+", type=int, default=[16, 4, 1])
    ap.add_argument("--formats", nargs="+", default=["nchw", "channels_last"])
    args = ap.parse_args()
    torch.manual_seed(0)
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}: fp32 (TF32), us per call "
          "(graph of 20, L2 flushed, median of 30); target: torch unfused / 1.3")
    for fmt in args.formats:
        mf = torch.channels_last if fmt == "channels_last" else torch.contiguous_format
        print(f"\n| layer ({fmt}) | torch conv | torch unfused | split 1 | 2 | 4 | 8 | "
              "rule | rule's count | auto (race) | auto / unfused |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|")
        for n in args.batches:
            for c, h, o, k, s, act in LAYERS:
                pad = k // 2
                x = torch.randn(n, c, h, h, device="cuda").contiguous(memory_format=mf)
                w = (torch.randn(o, c, k, k, device="cuda") / (c * k * k) ** 0.5).contiguous(
                    memory_format=mf)
                mean, var = torch.randn(o, device="cuda"), torch.rand(o, device="cuda") + 0.5
                gamma, beta = torch.randn(o, device="cuda"), torch.randn(o, device="cuda")
                scale = gamma / (var + 1e-5).sqrt()
                wf = (w * scale.view(-1, 1, 1, 1)).contiguous(memory_format=mf)
                bf = beta - mean * scale

                def torch_seq():
                    y = F.batch_norm(F.conv2d(x, w, None, s, pad), mean, var, gamma, beta, False)
                    return F.relu(y, inplace=True)

                def conv_only():
                    return F.conv2d(x, w, None, s, pad)

                def fused():
                    return torch.ops.gpukern.conv2d_fused(x, wf, bf, [s, s], [pad, pad], [1, 1],
                                                          1, act, None)

                ref = F.relu(F.conv2d(x, wf, bf, s, pad))
                times = {"conv": timed(conv_only), "torch": timed(torch_seq)}
                names = {}
                for split in ("1", "2", "4", "8", None):
                    if split is None:
                        os.environ.pop("GPUKERN_IGEMM_SPLIT", None)
                    else:
                        os.environ["GPUKERN_IGEMM_SPLIT"] = split
                    names[split] = torch.ops.gpukern._igemm_config_conv2d(
                        x, wf, [s, s], [pad, pad], [1, 1])

                    def call(f=fused):
                        with torch_ops.force_algorithm("conv2d", "igemm"):
                            return f()
                    out = call()
                    err = float((out - ref).norm() / ref.norm())
                    assert err < 5e-3, f"split {split} {c}x{h}->{o} k{k} s{s}: rel err {err:.2e}"
                    times[split] = timed(call)
                os.environ.pop("GPUKERN_IGEMM_SPLIT", None)
                out = fused()
                err = float((out - ref).norm() / ref.norm())
                assert err < 5e-3, f"auto {c}x{h}->{o} k{k} s{s}: rel err {err:.2e}"
                times["auto"] = timed(fused)
                cells = " | ".join(f"{times[k]:.1f}" if names[k].startswith("split" + k) or
                                   k == "1" else "-" for k in ("1", "2", "4", "8"))
                print(f"| {n}x{c}x{h}x{h} -> {o} k{k} s{s} {act} | {times['conv']:.1f} | "
                      f"{times['torch']:.1f} | {cells} | {times[None]:.1f} | {names[None]} | "
                      f"{times['auto']:.1f} | {times['torch'] / times['auto']:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
