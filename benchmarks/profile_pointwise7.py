"""Kernels (torch.profiler, graph replays, warm L2) of 1x1 blocks with 7x7 output planes over NCHW
(ResNet-50's and MobileNetV3's, and ResNet-50's stride-2 shortcut into 7x7), per path: gpukern's
fused op forced to igemm (the race skipped), the same in channels_last, and torch's unfused
sequence. What the NCHW paths spend beside the GEMM.

    python3 benchmarks/profile_pointwise7.py [--strided]"""
import os
import sys

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torch_ops  # noqa: E402

torch.manual_seed(0)
CASES = [(torch.bfloat16, 960, 7, 160, True, 1), (torch.bfloat16, 672, 7, 160, False, 1),
         (torch.float32, 2048, 7, 512, False, 1), (torch.float32, 160, 7, 960, False, 1)]
STRIDED = [(torch.float32, 1024, 14, 2048, True, 2), (torch.bfloat16, 1024, 14, 2048, True, 2)]


def run(name, f):
    f()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(20):
            f()
    g.replay()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            g.replay()
        torch.cuda.synchronize()
    agg = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            agg.setdefault(e.name[:100], []).append(e.device_time)
    st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    st.record()
    for _ in range(10):
        g.replay()
    en.record()
    torch.cuda.synchronize()
    print(f"  {name}: {st.elapsed_time(en) * 1e3 / 200:.2f} us per call")
    for k, v in sorted(agg.items(), key=lambda kv: -sum(kv[1])):
        print(f"    {sum(v) / len(v):7.2f} us x{len(v) / 100:.2f}  {k}")


for dt, c, h, o, res, st in STRIDED if "--strided" in sys.argv else CASES:
    print(f"== {dt} {c}x{h}x{h} -> {o} stride {st}{' + residual' if res else ''}")
    oh = (h - 1) // st + 1
    for fmt in (torch.contiguous_format, torch.channels_last):
        x = torch.randn(16, c, h, h, device="cuda").to(dt).contiguous(memory_format=fmt)
        w = (torch.randn(o, c, 1, 1, device="cuda") / c ** 0.5).to(dt)
        b = torch.randn(o, device="cuda").to(dt)
        r = torch.randn(16, o, oh, oh, device="cuda").to(dt).contiguous(memory_format=fmt) \
            if res else None

        def ours():
            with torch_ops.force_algorithm("conv2d", "igemm"):
                return torch.ops.gpukern.conv2d_fused(x, w, b, [st, st], [0, 0], [1, 1], 1, "relu",
                                                      r)

        def theirs():
            y = F.conv2d(x, w, b, st)
            return F.relu(y.add_(r) if r is not None else y)
        tag = "nchw" if fmt == torch.contiguous_format else "cl"
        run(f"gpukern igemm {tag}", ours)
        run(f"torch {tag}", theirs)
