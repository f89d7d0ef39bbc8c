"""Where a swapped model's time goes: host or GPU, and in which kernels.

For each model, dtype, memory format and batch (benchmarks/models.py builds them): the stock
model, the stock model traced by torch.fx (GraphModule overhead alone), the default swap, and the
default swap with every layer sent to torch (the swapped modules' Python and the BN folding, no
gpukern kernel): wall time per call (CUDA events around unsynchronised calls), GPU kernel time
per call and kernels per call (torch.profiler over a few calls), and the kernels that take the
most GPU time. A model whose wall time is well above its GPU time is host-bound: there the
Python and launch cost per layer decides, not the kernels.

    python3 benchmarks/profile_models.py --models resnet50 convnext_tiny --batch 16 1 \
        --formats contiguous channels_last --dtypes float32 bfloat16 [--top 8]
"""
import argparse
import collections
import copy
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torch_ops  # noqa: E402
import torch_ops.policy as policy  # noqa: E402
from models import build, calibrate_batchnorm, _cast, _first  # noqa: E402


def wall_ms(fn, reps=30, rounds=5):
    """Median over rounds of (events around `reps` back-to-back calls) / reps."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(rounds):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(reps):
            fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b) / reps)
    return statistics.median(out)


def kernel_profile(fn, calls=5, cpu=None):
    """(GPU kernel us per call, kernels per call, {kernel name: us per call}); with a dict as
    `cpu`, also fills it with {CPU op name: self CPU us per call}."""
    fn()
    torch.cuda.synchronize()
    acts = [torch.profiler.ProfilerActivity.CUDA]
    if cpu is not None:
        acts.append(torch.profiler.ProfilerActivity.CPU)
    with torch.profiler.profile(activities=acts) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    per = collections.Counter()
    n = 0
    for e in prof.events():
        if cpu is not None and e.device_type == torch.autograd.DeviceType.CPU:
            cpu[e.name] = cpu.get(e.name, 0.0) + e.self_cpu_time_total / calls
        if e.device_type == torch.autograd.DeviceType.CUDA and e.device_time > 0:
            per[e.name] += e.device_time / calls
            n += 1
    return sum(per.values()), n / calls, per


def variants(stock, x):
    yield "stock", stock
    yield "fx", torch.fx.symbolic_trace(copy.deepcopy(stock)) if _traceable(stock) else None
    yield "swap", torch_ops.swap(copy.deepcopy(stock), example_inputs=x).model
    saved = list(policy.RULES)
    policy.RULES.clear()  # every layer decides torch (decisions are cached at the first call)
    try:
        m = torch_ops.swap(copy.deepcopy(stock), example_inputs=x).model
        m(*x)
    finally:
        policy.RULES.extend(saved)
    yield "swap->torch", m


def _traceable(model):
    try:
        torch.fx.symbolic_trace(copy.deepcopy(model))
        return True
    except Exception:  # noqa: BLE001
        return False


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", nargs="+", default=["resnet50", "convnext_tiny"])
    p.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    p.add_argument("--formats", nargs="+", default=["contiguous", "channels_last"])
    p.add_argument("--batch", type=int, nargs="+", default=[16, 1])
    p.add_argument("--top", type=int, default=6)
    p.add_argument("--cpu-top", type=int, default=0,
                   help="also list the CPU ops with the most self time per call")
    p.add_argument("--compile", action="store_true",
                   help="torch.compile (fullgraph) the stock and swapped models instead")
    a = p.parse_args()
    dev = "cuda"
    print(f"# {torch.cuda.get_device_name()}; wall = events around 30 unsynchronised calls; "
          f"gpu = sum of kernel times (profiler) per call\n")
    print("| model | batch | format | dtype | variant | wall ms | gpu ms | kernels | top kernels (us) |")
    print("|---|---:|---|---|---|---:|---:|---:|---|")
    for name in a.models:
        for batch in a.batch:
            for fmt in a.formats:
                base, inputs, _ = build(name, dev, True, batch)
                if fmt == "channels_last":
                    if not any(isinstance(t, torch.Tensor) and t.dim() == 4 for t in inputs):
                        continue
                    base = base.to(memory_format=torch.channels_last)
                    inputs = tuple(t.contiguous(memory_format=torch.channels_last)
                                   if isinstance(t, torch.Tensor) and t.dim() == 4 else t
                                   for t in inputs)
                base = base.to(dev)
                calibrate_batchnorm(base, _cast(inputs, dev, torch.float32))
                base.eval()
                for dn in a.dtypes:
                    dt = getattr(torch, dn)
                    x = _cast(inputs, dev, dt)
                    with torch.inference_mode():
                        stock = copy.deepcopy(base).to(dt)
                        ref = _first(stock(*x)).float()
                        for vn, m in variants(stock, x):
                            if m is None or (a.compile and vn not in ("stock", "swap")):
                                continue
                            if a.compile:
                                torch._dynamo.reset()
                                m = torch.compile(m, fullgraph=True)
                                vn += " compiled"
                            out = _first(m(*x)).float()
                            rel = ((out - ref).norm() / ref.norm().clamp_min(1e-30)).item()
                            ms = wall_ms(lambda: m(*x))
                            cpu = {} if a.cpu_top else None
                            g, k, per = kernel_profile(lambda: m(*x), cpu=cpu)
                            top = ", ".join(f"{n[:50]} {t:.0f}" for n, t in per.most_common(a.top))
                            if cpu:
                                top += "; CPU: " + ", ".join(
                                    f"{n[:40]} {t:.0f}" for n, t in
                                    collections.Counter(cpu).most_common(a.cpu_top))
                            print(f"| {name} | {batch} | {fmt} | {dn} | {vn} | {ms:.3f} | "
                                  f"{g / 1e3:.3f} | {k:.0f} | rel {rel:.1e}; {top} |", flush=True)
                        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
