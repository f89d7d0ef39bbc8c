"""Check of the cuBLASLt algorithm timing (csrc/conv/igemm/blas.h): for 1x1 layers, gpukern's op
with the timed choice (default) and with the heuristic's first choice (GPUKERN_BLAS_TUNE=0), each
timed two ways: replayed from a CUDA graph of 20 calls after an L2 flush (the census's timing) and
as 20 calls queued on the stream behind a spin kernel (the tuner's own timing). If the two ways
disagree about which choice is faster, the tuner measures something the census does not.

    python3 benchmarks/blas_tune_check.py
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_ops  # noqa: E402
from timing import time_cuda_graph  # noqa: E402

# (N, C, H, W, O, dtype, format)
LAYERS = [
    (16, 16, 112, 112, 16, "bfloat16", "channels_last"),
    (16, 16, 112, 112, 16, "bfloat16", "nchw"),
    (16, 64, 56, 56, 64, "float32", "channels_last"),
    (16, 256, 56, 56, 128, "bfloat16", "nchw"),
    (16, 480, 1, 1, 120, "float32", "nchw"),
    (16, 1024, 14, 14, 512, "float32", "nchw"),
    (16, 40, 28, 28, 240, "bfloat16", "channels_last"),
]


def queued(fn, calls=20, reps=5):
    """Per-call ms of `calls` calls queued behind a spin kernel, best of `reps`."""
    best = float("inf")
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(reps):
        torch.cuda._sleep(2000000)  # ~1 ms: longer than queueing the calls
        s.record()
        for _ in range(calls):
            fn()
        e.record()
        e.synchronize()
        best = min(best, s.elapsed_time(e) / calls)
    return best


def main():
    torch.backends.cudnn.allow_tf32 = True
    print(f"# {torch.cuda.get_device_name()}: us per call, graph (census) / queued (tuner)")
    print("| layer | dtype | format | tuned graph | tuned queued | first graph | first queued |")
    print("|---|---|---|---:|---:|---:|---:|")
    for n, c, h, w, o, dt, fmt in LAYERS:
        dtype = getattr(torch, dt)
        x = torch.randn(n, c, h, w, device="cuda").to(dtype)
        wt = (torch.randn(o, c, 1, 1, device="cuda") * c ** -0.5).to(dtype)
        if fmt == "channels_last":
            x = x.contiguous(memory_format=torch.channels_last)
            wt = wt.contiguous(memory_format=torch.channels_last)
        row = []
        for setting in ("1", "0"):
            os.environ["GPUKERN_BLAS_TUNE"] = setting
            f = lambda: torch_ops.conv2d(x, wt)  # noqa: E731
            f()
            torch.cuda.synchronize()
            row += [time_cuda_graph(f, calls=20, reps=10, flush=True) * 1e3, queued(f) * 1e3]
        os.environ.pop("GPUKERN_BLAS_TUNE")
        print(f"| {n}x{c}x{h}x{w}->{o} | {dt} | {fmt} | " + " | ".join(f"{v:.1f}" for v in row)
              + " |", flush=True)


if __name__ == "__main__":
    main()
