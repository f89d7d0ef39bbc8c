"""Why the conv race's cuDNN times can read higher than the census's: for a few ResNet-50 layers,
cuDNN through torch (F.conv2d) and through gpukern's forced "cudnn" algorithm, each timed three
ways: replayed from a CUDA graph (the census's way, no host in the loop), back to back from the
host after a spin kernel (the race's warm regime), and the host's own time per call.

    python3 benchmarks/race_bias.py
"""
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_ops  # noqa: E402
from timing import time_cuda_graph  # noqa: E402

LAYERS = [(256, 28, 256, 3, 2), (512, 7, 512, 3, 1), (256, 56, 64, 1, 1), (128, 56, 128, 3, 2)]


def spun(fn, calls=8, reps=5):
    """ms per call of `calls` back-to-back calls after a ~1 ms spin (the race's warm regime)."""
    out = []
    for _ in range(reps):
        torch.cuda.synchronize()
        torch.cuda._sleep(2_000_000)
        fn()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(calls):
            fn()
        e.record()
        e.synchronize()
        out.append(s.elapsed_time(e) / calls)
    return min(out)


def host(fn, calls=50):
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(calls):
        fn()
    t = (time.perf_counter() - t) / calls
    torch.cuda.synchronize()
    return t * 1e3


def main():
    torch.backends.cudnn.benchmark = True
    print(f"# {torch.cuda.get_device_name()}; us per call: graph / spun / host")
    for dt in (torch.float32, torch.bfloat16):
        for fmt in (torch.contiguous_format, torch.channels_last):
            for c, h, o, k, s in LAYERS:
                x = torch.randn(16, c, h, h, device="cuda", dtype=dt).contiguous(memory_format=fmt)
                w = torch.randn(o, c, k, k, device="cuda", dtype=dt).contiguous(memory_format=fmt)
                row = []
                for name, fn in (
                        ("torch", lambda: F.conv2d(x, w, None, s, k // 2)),
                        ("gk-cudnn", lambda: torch_ops.conv2d(x, w, None, s, k // 2)),
                        ("gk-rules", lambda: torch_ops.conv2d(x, w, None, s, k // 2))):
                    if name == "gk-cudnn":
                        with torch_ops.force_algorithm("conv2d", "cudnn"):
                            t = (time_cuda_graph(fn, 20, 20, flush=True), spun(fn), host(fn))
                    else:
                        t = (time_cuda_graph(fn, 20, 20, flush=True), spun(fn), host(fn))
                    row.append(f"{name} " + " / ".join(f"{1e3 * v:.1f}" for v in t))
                fmt_name = "cl" if fmt == torch.channels_last else "nchw"
                print(f"{str(dt)[6:]} {fmt_name} {c}x{h}->{o} k{k} s{s}: " + " | ".join(row),
                      flush=True)


if __name__ == "__main__":
    main()
