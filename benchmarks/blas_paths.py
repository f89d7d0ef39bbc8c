"""Which kernels gpukern's 1x1 convolutions launch (the cuBLASLt forms against the CUTLASS
fallback): for NCHW and channels_last inputs, with and without a bias, plain and fused (relu +
residual), the GPU kernel names the profiler records for one call, and the output checked against
torch first.

    python3 benchmarks/blas_paths.py
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torch_ops  # noqa: E402


def kernels(fn):
    fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sorted({e.name[:60] for e in prof.events() if e.device_type.name == "CUDA"})


def main():
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
