"""NCHW dense blocks on the implicit GEMM: the NCHW-output epilogue against the channels_last
temporary and its transpose back, against torch's unfused sequence and cuDNN's convolution alone.

    python3 benchmarks/nchw_igemm.py [--dtypes float32 bfloat16]

For ResNet-50's dense NCHW blocks, batch 16 (its 3x3 and strided 1x1 blocks and four stride-1
1x1 blocks): gpukern's fused op y = act(conv(x, w) + bias [+ residual]) (BN folded into the bias)
forced onto the igemm path's conv kernel with GPUKERN_IGEMM_NCHW_OUT=1 (the epilogue writes NCHW;
GPUKERN_IGEMM_GEMM=0 sends the stride-1 1x1 blocks to it too), the path as it was before the
epilogue (GPUKERN_IGEMM_NCHW_OUT=0: a channels_last temporary transposed back; 1x1 blocks on the
1x1 GEMM forms), gpukern's automatic choice (the race; igemm's side takes the
epilogue by its rule, forms.h nchw_out_for), torch's unfused sequence (F.conv2d,
F.batch_norm in eval mode, + residual, the activation) and torch's convolution alone.
Every gpukern output is checked against an fp32 reference first; each call is timed as the
layer census times it: 20 calls replayed from a CUDA graph, L2 flushed by a read before each
replay, median of 30 replays.
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

# C, H (input), O, kernel, stride, follow-up: ResNet-50's 3x3 and strided 1x1 blocks, batch 16.
BLOCKS = [
    (64, 56, 64, 3, 1, "relu"), (128, 56, 128, 3, 2, "relu"), (128, 28, 128, 3, 1, "relu"),
    (256, 28, 256, 3, 2, "relu"), (256, 14, 256, 3, 1, "relu"), (512, 14, 512, 3, 2, "relu"),
    (512, 7, 512, 3, 1, "relu"), (256, 56, 512, 1, 2, "add>relu"),
    (512, 28, 1024, 1, 2, "add>relu"), (1024, 14, 2048, 1, 2, "add>relu"),
    # stride-1 1x1 blocks (the 1x1 GEMM forms by default; the conv kernel with GPUKERN_IGEMM_GEMM=0)
    (512, 28, 128, 1, 1, "relu"), (1024, 14, 256, 1, 1, "relu"), (2048, 7, 512, 1, 1, "relu"),
    (512, 7, 2048, 1, 1, "add>relu"),
]
ACTS = {"relu": F.relu, "none": lambda y, inplace=False: y}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    args = ap.parse_args()
    torch.manual_seed(0)
    print(f"# {torch.cuda.get_device_name()}: us per call (graph of 20, L2 flushed, median of "
          "30); target: torch unfused / 1.3")
    for dn in args.dtypes:
        dtype = getattr(torch, dn)
        print(f"\n| block ({dn}, NCHW, batch 16) | torch conv | torch unfused | igemm nchw-out | "
              "before | auto | auto / unfused |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for c, h, o, k, s, follow in BLOCKS:
            act = follow.split(">")[-1]
            res = follow.startswith("add")
            pad = k // 2
            x = torch.randn(16, c, h, h, device="cuda").to(dtype)
            w = (torch.randn(o, c, k, k, device="cuda") / (c * k * k) ** 0.5).to(dtype)
            mean, var = torch.randn(o, device="cuda").to(dtype), torch.rand(o, device="cuda").to(dtype) + 0.5
            gamma, beta = torch.randn(o, device="cuda").to(dtype), torch.randn(o, device="cuda").to(dtype)
            scale = gamma.float() / (var.float() + 1e-5).sqrt()
            wf = (w.float() * scale.view(-1, 1, 1, 1)).to(dtype)
            bf = (beta.float() - mean.float() * scale).to(dtype)
            oh = (h + 2 * pad - k) // s + 1
            r = torch.randn(16, o, oh, oh, device="cuda").to(dtype) if res else None

            def torch_seq():
                y = F.batch_norm(F.conv2d(x, w, None, s, pad), mean, var, gamma, beta, False)
                if r is not None:
                    y = y.add_(r)
                return ACTS[act](y, inplace=True)

            def conv_only():
                return F.conv2d(x, w, None, s, pad)

            def fused():
                return torch.ops.gpukern.conv2d_fused(x, wf, bf, [s, s], [pad, pad], [1, 1], 1,
                                                      act, r)

            ref = F.conv2d(x.float(), wf.float(), bf.float(), s, pad)
            ref = ACTS[act](ref + (r.float() if res else 0))
            times = {"conv": time_cuda_graph(conv_only, calls=20, reps=30, flush=True),
                     "torch": time_cuda_graph(torch_seq, calls=20, reps=30, flush=True)}
            for name, flag, gemm, algo in (("nchw", "1", "0", "igemm"), ("temp", "0", "1", "igemm"),
                                           ("auto", None, None, None)):
                for var, val in (("GPUKERN_IGEMM_NCHW_OUT", flag), ("GPUKERN_IGEMM_GEMM", gemm)):
                    if val is None:
                        os.environ.pop(var, None)
                    else:
                        os.environ[var] = val
                if algo is None:
                    call = fused
                else:
                    def call(f=fused, a=algo):
                        with torch_ops.force_algorithm("conv2d", a):
                            return f()
                out = call()
                err = float((out.float() - ref).norm() / ref.norm())
                tol = 5e-3 if dtype == torch.float32 else 2e-2
                assert err < tol, f"{name} {c}x{h}->{o} k{k} s{s}: rel err {err:.2e}"
                times[name] = time_cuda_graph(call, calls=20, reps=30, flush=True)
            os.environ.pop("GPUKERN_IGEMM_NCHW_OUT", None)
            os.environ.pop("GPUKERN_IGEMM_GEMM", None)
            print(f"| 16x{c}x{h}x{h} -> {o} k{k} s{s} {follow} | {times['conv'] * 1e3:.1f} | "
                  f"{times['torch'] * 1e3:.1f} | {times['nchw'] * 1e3:.1f} | "
                  f"{times['temp'] * 1e3:.1f} | {times['auto'] * 1e3:.1f} | "
                  f"{times['torch'] / times['auto']:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
