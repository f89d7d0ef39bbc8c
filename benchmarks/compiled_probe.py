"""Probe: why a swapped model compiled with torch.compile can trail the compiled stock model.

For one model, dtype and batch (benchmarks/models.py builds it), compiles the stock model, the
default swap and the default swap with some layers kept on torch (``--keep-torch`` name prefixes,
swap's ``filter``), checks each output against the stock one, then times them in interleaved
rounds (paired per round, as models.py) and lists each variant's GPU kernels from torch.profiler
(time per forward, top kernels), so that a loss can be placed: GPU kernels or host.

    python3 benchmarks/compiled_probe.py --model convnext_tiny --dtype bfloat16 \
        --keep-torch features.0.0 features.1,features.3,features.5,features.7
"""
import argparse
import collections
import copy
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_ops  # noqa: E402
from models import build, calibrate_batchnorm, _cast, _first  # noqa: E402


def events_ms(fn, x, reps):
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a.record()
        fn(*x)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def kernels(fn, x, calls=5):
    """({kernel: GPU us per forward}, {kernel: launches per forward}, {CPU op: self host us per
    forward})."""
    from torch.profiler import profile, ProfilerActivity
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn(*x)
        torch.cuda.synchronize()
    per = collections.Counter()
    count = collections.Counter()
    host = collections.Counter()
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            per[e.name] += e.device_time / calls
            count[e.name] += 1 / calls
        else:
            host[e.name] += e.self_cpu_time_total / calls
    return per, count, host


def print_differences(title, times, base, top):
    """The `top` largest differences times - base (us per forward, by name)."""
    diff = {name: times.get(name, 0.0) - base.get(name, 0.0) for name in set(times) | set(base)}
    print(f"\n{title}, largest differences (us per forward):")
    for name, us in sorted(diff.items(), key=lambda kv: -abs(kv[1]))[:top]:
        print(f"  {us:+8.1f}  {name[:110]}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="convnext_tiny")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--keep-torch", nargs="*", default=[],
                   help="variants of the swap keeping layers on torch: each argument a "
                        "comma-separated list of module-name prefixes (one variant each)")
    p.add_argument("--rounds", type=int, default=21)
    p.add_argument("--reps", type=int, default=4)
    p.add_argument("--top", type=int, default=12)
    args = p.parse_args()
    dev = "cuda"
    base, inputs, described = build(args.model, dev, True, args.batch)
    base = base.to(dev)
    calibrate_batchnorm(base, _cast(inputs, dev, torch.float32))
    base.eval()
    dtype = getattr(torch, args.dtype)
    x = _cast(inputs, dev, dtype)
    variants = {}
    with torch.inference_mode():
        stock = copy.deepcopy(base).to(dtype)
        variants["stock"] = stock
        variants["swap"] = torch_ops.swap(copy.deepcopy(stock), example_inputs=x).model
        for spec in args.keep_torch:
            keep = tuple(spec.split(","))
            variants[f"keep({spec})"] = torch_ops.swap(
                copy.deepcopy(stock), example_inputs=x,
                filter=lambda name, m, keep=keep: not name.startswith(keep)).model
        compiled = {}
        ref = None
        for name, m in variants.items():
            fn = torch.compile(m, fullgraph=True)
            out = _first(fn(*x)).float()
            ref = out if ref is None else ref
            err = float((out - ref).norm() / ref.norm())
            print(f"{name}: compiled, rel err vs stock {err:.2e}", flush=True)
            compiled[name] = fn
        names = list(compiled)
        for _ in range(20):
            for n in names:
                compiled[n](*x)
        per = {n: [] for n in names}
        for k in range(args.rounds):
            for n in names[k % len(names):] + names[:k % len(names)]:
                per[n].append(events_ms(compiled[n], x, args.reps))
        print(f"\n{args.model} {described} {args.dtype} compiled, {args.rounds} rounds")
        for n in names:
            paired = statistics.median(s / v for s, v in zip(per["stock"], per[n]))
            print(f"{n:40} median {statistics.median(per[n]):.3f} ms  min {min(per[n]):.3f}  "
                  f"paired speedup {paired:.3f}")
        prof = {n: kernels(compiled[n], x) for n in names}
        for n in names:
            tot = sum(prof[n][0].values()) / 1e3
            print(f"\n{n}: GPU kernel time {tot:.3f} ms per forward, "
                  f"{sum(prof[n][1].values()):.0f} kernels")
            for kname, us in prof[n][0].most_common(args.top):
                print(f"  {us:8.1f} us  x{prof[n][1][kname]:.0f}  {kname[:110]}")
        for n in names:
            print(f"\n{n}: host self time per forward by CPU op (profiled), top {args.top}")
            for op, us in prof[n][2].most_common(args.top):
                print(f"  {us:8.1f} us  {op[:110]}")
        for n in names[1:]:
            print_differences(f"{n} - stock, host self time by CPU op", prof[n][2],
                              prof["stock"][2], args.top)
            print_differences(f"{n} - stock, GPU time by kernel", prof[n][0], prof["stock"][0],
                              args.top)

if __name__ == "__main__":
    main()
