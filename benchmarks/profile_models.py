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

--split: host / GPU / wall time per forward of every variant (host_gpu_ms). --module-host: host
time per forward inside each kind of leaf module, stock against swap (module_host_us: forward
hooks, the GPU held), to find which modules a swapped host-bound model spends its extra host time
in (``--device cpu`` runs it on the CPU, for the Python side alone).
"""
import argparse
import collections
import copy
import os
import statistics
import sys
import time

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


def sleep_cycles(sleep_ms):
    """The argument of torch.cuda._sleep that holds the GPU for about sleep_ms (its clock,
    measured)."""
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    torch.cuda._sleep(10 ** 7)
    b.record()
    b.synchronize()
    return int(10 ** 7 * sleep_ms / a.elapsed_time(b))


def host_gpu_ms(fns, rounds=15, calls=2, sleep_ms=40.0):
    """{name: (host ms, GPU ms, wall ms)} per call of each fn, interleaved in `rounds` rounds
    (the order rotated each round), medians. Host: the CPU time of `calls` forwards issued while
    the GPU is held by a sleep kernel (they only enqueue: the Python and launch cost alone). GPU:
    events around the same forwards, which the GPU then runs back to back (the kernels' own time,
    no launch gaps). Wall: events around `calls` forwards issued with the GPU idle. A round whose
    enqueueing outlasted the sleep is dropped from the GPU figure (the GPU caught up with the
    host)."""
    cycles = sleep_cycles(sleep_ms)
    names = list(fns)
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    host, gpu, wall = ({n: [] for n in names} for _ in range(3))
    for r in range(rounds):
        for n in names[r % len(names):] + names[:r % len(names)]:
            f = fns[n]
            torch.cuda.synchronize()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(cycles)
            a.record()
            t0 = time.perf_counter()
            for _ in range(calls):
                f()
            t1 = time.perf_counter()
            b.record()
            b.synchronize()
            host[n].append((t1 - t0) * 1e3 / calls)
            if (t1 - t0) * 1e3 < 0.8 * sleep_ms:
                gpu[n].append(a.elapsed_time(b) / calls)
            torch.cuda.synchronize()
            a.record()
            for _ in range(calls):
                f()
            b.record()
            b.synchronize()
            wall[n].append(a.elapsed_time(b) / calls)
    med = (lambda v: statistics.median(v) if v else float("nan"))
    return {n: (med(host[n]), med(gpu[n]), med(wall[n])) for n in names}


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


def module_host_us(model, x, rounds=7, calls=2, sleep_ms=40.0):
    """Host time per forward spent inside each kind of leaf module (forward pre / post hooks,
    perf_counter), with the GPU held by a sleep kernel so that only the enqueueing is timed:
    {module class name: (calls per forward, us per forward)}, plus "(outside leaf modules)" for
    the rest of the forward (container modules' Python, functional ops between modules) and
    "(forward)" for the whole. Medians over rounds. The hooks cost the same per leaf call in
    every variant; compare kinds across variants, not the total with an unhooked forward."""
    leaves = [m for m in model.modules() if not list(m.children())]
    stack, acc, cnt = [], collections.Counter(), collections.Counter()

    def pre(m, args):
        stack.append(time.perf_counter())

    def post(m, args, out):
        t = time.perf_counter() - stack.pop()
        acc[type(m).__name__] += t
        cnt[type(m).__name__] += 1

    hooks = [h for m in leaves for h in (m.register_forward_pre_hook(pre),
                                         m.register_forward_hook(post))]
    cuda = torch.cuda.is_available() and any(
        isinstance(t, torch.Tensor) and t.is_cuda for t in x)
    cycles = sleep_cycles(sleep_ms) if cuda else 0
    per_round = []
    try:
        model(*x)
        for _ in range(rounds):
            acc.clear()
            cnt.clear()
            if cuda:
                torch.cuda.synchronize()
                torch.cuda._sleep(cycles)
            t0 = time.perf_counter()
            for _ in range(calls):
                model(*x)
            total = time.perf_counter() - t0
            if cuda:
                torch.cuda.synchronize()
            r = {k: (cnt[k] / calls, acc[k] * 1e6 / calls) for k in acc}
            r["(outside leaf modules)"] = (0, (total - sum(acc.values())) * 1e6 / calls)
            r["(forward)"] = (1, total * 1e6 / calls)
            per_round.append(r)
    finally:
        for h in hooks:
            h.remove()
    keys = set().union(*per_round)
    return {k: (max(r.get(k, (0, 0))[0] for r in per_round),
                statistics.median(r.get(k, (0, 0.0))[1] for r in per_round)) for k in keys}


def variants(stock, x):
    yield "stock", stock
    yield "fx", torch.fx.symbolic_trace(copy.deepcopy(stock)) if _traceable(stock) else None
    res = torch_ops.swap(copy.deepcopy(stock), example_inputs=x)
    if os.environ.get("GPUKERN_PRINT_SWAP"):
        print(res.summary())
        print(res.table())
    yield "swap", res.model
    # the layers the policy sends to torch kept converted (their per-call policy lookup)
    yield "swap(no prune)", torch_ops.swap(copy.deepcopy(stock), example_inputs=x,
                                           prune=False).model
    # gpukern on every depthwise layer and nothing else (host cost: gpukern's depthwise calls
    # against cuDNN's conv + bias)
    yield "swap(dw all)", torch_ops.swap(
        copy.deepcopy(stock), filter=lambda n, m: m.groups > 1 and m.groups == m.in_channels,
        policy="all", example_inputs=x).model
    saved = list(policy.RULES)
    policy.RULES.clear()  # every layer decides torch (decisions are cached at the first call)
    try:
        m = torch_ops.swap(copy.deepcopy(stock), example_inputs=x, prune=False).model
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
    p.add_argument("--split", action="store_true",
                   help="instead of the profiler: host time, GPU time and wall time per call "
                        "of every variant, interleaved rounds (host_gpu_ms)")
    p.add_argument("--rounds", type=int, default=15, help="rounds for --split")
    p.add_argument("--compile", action="store_true",
                   help="torch.compile (fullgraph) the stock and swapped models instead")
    p.add_argument("--module-host", action="store_true",
                   help="instead of the profiler: host time per forward inside each kind of "
                        "leaf module, stock against swap (module_host_us)")
    p.add_argument("--device", default="cuda")
    a = p.parse_args()
    dev = a.device
    if a.module_host:
        print(f"# {torch.cuda.get_device_name() if dev == 'cuda' else 'CPU'}; host us per "
              f"forward inside each kind of leaf module (GPU held), median of {a.rounds} rounds\n")
        print("| model | batch | format | dtype | variant | module | calls | host us |")
        print("|---|---:|---|---|---|---|---:|---:|")
    elif a.split:
        print(f"# {torch.cuda.get_device_name()}; per call, medians of {a.rounds} interleaved "
              f"rounds (host_gpu_ms): host = CPU time to issue a forward while the GPU is held; "
              f"gpu = the same forwards run back to back; wall = events around forwards issued "
              f"with the GPU idle; speedups stock / variant\n")
        print("| model | batch | format | dtype | variant | host ms | gpu ms | wall ms | host x "
              "| gpu x | wall x |")
        print("|---|---:|---|---|---|---:|---:|---:|---:|---:|---:|")
    else:
        print(f"# {torch.cuda.get_device_name()}; wall = events around 30 unsynchronised calls; "
              f"gpu = sum of kernel times (profiler) per call\n")
        print("| model | batch | format | dtype | variant | wall ms | gpu ms | kernels | top "
              "kernels (us) |")
        print("|---|---:|---|---|---|---:|---:|---:|---|")
    for name in a.models:
        for batch in a.batch:
            for fmt in a.formats:
                base, inputs, _ = build(name, dev, dev == "cuda", batch)
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
                        if a.module_host:
                            ms = {"stock": stock,
                                  "swap": torch_ops.swap(copy.deepcopy(stock),
                                                         example_inputs=x).model}
                            for vn, m in ms.items():
                                res = module_host_us(m, x, rounds=a.rounds)
                                for k, (c, us) in sorted(res.items(), key=lambda kv: -kv[1][1]):
                                    print(f"| {name} | {batch} | {fmt} | {dn} | {vn} | {k} | "
                                          f"{c:.0f} | {us:.1f} |", flush=True)
                            continue
                        if a.split:
                            ms = {vn: m for vn, m in variants(stock, x) if m is not None}
                            ms["stock again"] = stock  # the same model twice: the noise floor
                            # a deep copy, as the swap variants start from (the copy alone)
                            ms["stock copy"] = copy.deepcopy(stock)
                            res = host_gpu_ms({vn: (lambda m=m: m(*x)) for vn, m in ms.items()},
                                              rounds=a.rounds)
                            h0, g0, w0 = res["stock"]
                            for vn, (h, g, w) in res.items():
                                print(f"| {name} | {batch} | {fmt} | {dn} | {vn} | {h:.3f} | "
                                      f"{g:.3f} | {w:.3f} | {h0 / h:.3f}x | {g0 / g:.3f}x | "
                                      f"{w0 / w:.3f}x |", flush=True)
                            continue
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
