"""cuDNN's own fused convolution (torch.cudnn_convolution_relu: conv + bias + ReLU in one cuDNN
call, and torch.cudnn_convolution_add_relu: + residual) against torch's unfused sequence and
gpukern's fused op, on ResNet-50's conv + BN + ReLU blocks (BN folded into a bias).

    python3 benchmarks/cudnn_fused.py [--dtypes float32 bfloat16] [--formats nchw cl]

The question it answers: for a block whose convolution gpukern hands to cuDNN (the first-call
race, csrc/conv/vendor.h), does cuDNN's fused call beat cuDNN's convolution followed by gpukern's
elementwise epilogue pass? Every output is checked against a float64 reference first; each call
is timed as the layer census times it: 20 calls replayed from a CUDA graph, L2 flushed by a read
before each replay, median of 30 replays.
"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_ops  # noqa: E402
from timing import time_cuda_graph  # noqa: E402

# (C, H, O, K, stride, residual) at batch 16: ResNet-50's blocks.
LAYERS = [
    (3, 224, 64, 7, 2, False), (64, 56, 64, 3, 1, False), (256, 56, 64, 1, 1, False),
    (128, 56, 128, 3, 2, False), (512, 28, 128, 1, 1, False), (128, 28, 128, 3, 1, False),
    (256, 28, 256, 3, 2, False), (1024, 14, 256, 1, 1, False), (256, 14, 256, 3, 1, False),
    (512, 14, 512, 3, 2, False), (2048, 7, 512, 1, 1, False), (512, 7, 512, 3, 1, False),
    (64, 56, 256, 1, 1, True), (128, 28, 512, 1, 1, True), (256, 14, 1024, 1, 1, True),
    (512, 7, 2048, 1, 1, True),
]


def err(a, ref):
    return float((a.double() - ref).norm() / ref.norm().clamp_min(1e-30))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    p.add_argument("--formats", nargs="+", default=["nchw", "cl"])
    p.add_argument("--batch", type=int, default=16)
    a = p.parse_args()
    torch.backends.cudnn.benchmark = True
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"cuDNN {torch.backends.cudnn.version()}; times in us per call")
    print("| dtype | fmt | layer | torch unfused | cudnn conv | cudnn fused | gpukern fused "
          "| cudnn fused / unfused | gpukern / unfused |")
    print("|---|---|---|---|---|---|---|---|---|")
    g = torch.Generator(device="cuda").manual_seed(0)
    for dt in a.dtypes:
        dtype = getattr(torch, dt)
        for fmt in a.formats:
            mf = torch.channels_last if fmt == "cl" else torch.contiguous_format
            for c, h, o, k, s, res in LAYERS:
                x = torch.randn(a.batch, c, h, h, device="cuda", dtype=dtype,
                                generator=g).contiguous(memory_format=mf)
                w = (torch.randn(o, c, k, k, device="cuda", dtype=dtype, generator=g)
                     / (c * k * k) ** 0.5).contiguous(memory_format=mf)
                b = torch.randn(o, device="cuda", dtype=dtype, generator=g)
                pad = k // 2
                oh = (h + 2 * pad - k) // s + 1
                r = (torch.randn(a.batch, o, oh, oh, device="cuda", dtype=dtype, generator=g)
                     .contiguous(memory_format=mf) if res else None)
                ref = F.conv2d(x.double(), w.double(), b.double(), stride=s, padding=pad)
                if res:
                    ref = ref + r.double()
                ref = ref.relu()

                def unfused():
                    y = F.conv2d(x, w, b, stride=s, padding=pad)
                    if r is not None:
                        y.add_(r)
                    return y.relu_()

                def conv_only():
                    return F.conv2d(x, w, None, stride=s, padding=pad)

                def cudnn_fused():
                    if r is not None:
                        return torch.cudnn_convolution_add_relu(x, w, r, 1.0, b, (s, s),
                                                                (pad, pad), (1, 1), 1)
                    return torch.cudnn_convolution_relu(x, w, b, (s, s), (pad, pad), (1, 1), 1)

                def ours():
                    return torch_ops.conv2d_fused(x, w, b, s, pad, 1, 1, activation="relu",
                                                  residual=r)
                row = []
                tol = 3e-2 if dt != "float32" else 5e-3
                with torch.inference_mode():
                    for name, fn in (("unfused", unfused), ("conv", conv_only),
                                     ("cudnn_fused", cudnn_fused), ("gpukern", ours)):
                        try:
                            out = fn()
                            e = err(out, ref) if name != "conv" else 0.0
                            if e > tol:
                                row.append(f"WRONG {e:.1e}")
                                continue
                            row.append(1e3 * time_cuda_graph(fn, calls=20, reps=30, flush=True))
                        except RuntimeError as ex:
                            row.append("ERR " + str(ex).splitlines()[0][:40])
                f = [v if isinstance(v, str) else f"{v:.1f}" for v in row]
                ratio = [f"{row[0] / v:.2f}" if isinstance(v, float) and isinstance(row[0], float)
                         else "-" for v in (row[2], row[3])]
                print(f"| {dt} | {fmt} | {c}x{h}x{h}->{o} k{k} s{s}{' +res' if res else ''} | "
                      + " | ".join(f) + " | " + " | ".join(ratio) + " |", flush=True)


if __name__ == "__main__":
    main()
