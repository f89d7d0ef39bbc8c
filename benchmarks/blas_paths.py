"""Which kernels gpukern's 1x1 convolutions launch (the cuBLASLt forms against the CUTLASS
fallback): for NCHW and channels_last inputs, with and without a bias, plain and fused (relu +
residual), the GPU kernel names the profiler records for one call, and the output checked against
torch first.

    python3 benchmarks/blas_paths.py [--conv1d]

--conv1d: instead, wav2vec2's NCL conv1d layers (the igemm path's cols form: im2col_cols and the
batched cuBLASLt GEMM) with each kernel's GPU time, against torch's kernels for the same call.
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torch_ops  # noqa: E402
from profile_layers import kernel_table  # noqa: E402


def kernels(fn):
    fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sorted({e.name[:60] for e in prof.events() if e.device_type.name == "CUDA"})


def conv1d_layers():
    torch.backends.cudnn.allow_tf32 = True
    for dtype in (torch.bfloat16, torch.float32):
        for c, length, k, s in ((512, 12799, 3, 2), (512, 6399, 3, 2), (512, 799, 2, 2),
                                (1, 64000, 10, 5)):
            x = torch.randn(4, c, length, device="cuda", dtype=dtype)
            w = torch.randn(512, c, k, device="cuda", dtype=dtype) / (c * k) ** 0.5
            out = torch_ops.conv1d(x, w, None, s)
            ref = F.conv1d(x.double(), w.double(), None, s)
            err = ((out.double() - ref).norm() / ref.norm()).item()
            algo = torch_ops.algorithm("conv1d", x, w, None, s)
            for who, fn in (("gpukern", lambda: torch_ops.conv1d(x, w, None, s)),
                            ("torch", lambda: F.conv1d(x, w, None, s))):
                _, per = kernel_table(fn, 5)
                ks = "; ".join(f"{n[:70]} {t:.1f}" for t, n in per)
                print(f"{str(dtype)[6:]:9} {c}x{length} k{k} s{s} {who:7} ({algo}, err "
                      f"{err:.1e}): {ks}", flush=True)


def main():
    if "--conv1d" in sys.argv:
        return conv1d_layers()
    torch.backends.cudnn.allow_tf32 = True
    for dtype in (torch.float32, torch.bfloat16):
        for fmt in ("nchw", "channels_last"):
            for bias in (False, True):
                x = torch.randn(16, 256, 28, 28, device="cuda", dtype=dtype)
                w = torch.randn(128, 256, 1, 1, device="cuda", dtype=dtype) / 16
                b = torch.randn(128, device="cuda", dtype=dtype) if bias else None
                if fmt == "channels_last":
                    x = x.contiguous(memory_format=torch.channels_last)
                r = torch.randn_like(F.conv2d(x, w))
                ref = F.relu(F.conv2d(x.double(), w.double(), None if b is None else b.double())
                             + r.double())
                out = torch_ops.conv2d_fused(x, w, b, activation="relu", residual=r)
                err = ((out.double() - ref).norm() / ref.norm()).item()
                plain = kernels(lambda: torch_ops.conv2d(x, w, b))
                fused = kernels(lambda: torch_ops.conv2d_fused(x, w, b, activation="relu",
                                                               residual=r))
                print(f"{str(dtype)[6:]:9} {fmt:13} bias={bias!s:5} fused err {err:.1e} | plain: "
                      f"{'; '.join(plain)} | fused: {'; '.join(fused)}", flush=True)


if __name__ == "__main__":
    main()
