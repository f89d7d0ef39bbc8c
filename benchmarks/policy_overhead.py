"""Per-call cost of swap's policy machinery, on CPU: what a swapped layer whose policy says torch
costs over the stock layer, and what torch.compile sees.

Eager: tiny inputs (the convolution itself takes a few microseconds), so the Python around it
dominates. Each case times the stock module and the swapped one interleaved, many rounds of many
calls, and reports medians per call and their difference; it also counts the Python function
calls one forward makes (``sys.setprofile``; deterministic, independent of machine load).
Cases: a plain Conv2d swapped with the default policy on CPU (CPU inputs skip the policy: torch),
the same with CPU inputs following the policy (``_RULED_DEVICE_TYPES`` + "cpu": the rule table's
lookup and cache, as on CUDA; no CPU rules exist, so torch), and a Conv -> BatchNorm -> ReLU
block fused, policy torch, against the stock three modules.

Compiled: per model, the number of graphs, graph breaks and ops dynamo produces for stock and for
the swapped model with CPU inputs following the policy (``torch._dynamo.explain``).

    python3 benchmarks/policy_overhead.py [--rounds 30 --calls 200] [--no-compile]
"""
import argparse
import contextlib
import copy
import os
import statistics
import sys
import time

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch_ops  # noqa: E402
from torch_ops import policy as gk_policy  # noqa: E402


@contextlib.contextmanager
def cpu_follows_policy(on: bool = True):
    old = gk_policy._RULED_DEVICE_TYPES
    if on:
        gk_policy._RULED_DEVICE_TYPES = ("cuda", "cpu")
    try:
        yield
    finally:
        gk_policy._RULED_DEVICE_TYPES = old


def python_calls(fn) -> int:
    """Python-level function calls (and C calls) one ``fn()`` makes."""
    n = [0]

    def prof(frame, event, arg):
        if event in ("call", "c_call"):
            n[0] += 1
    sys.setprofile(prof)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return n[0]


def per_call_us(fns, rounds: int, calls: int):
    """Median microseconds per call of each fn, timed interleaved."""
    samples = [[] for _ in fns]
    for f in fns:
        for _ in range(calls // 4):
            f()
    for _ in range(rounds):
        for i, f in enumerate(fns):
            t0 = time.perf_counter()
            for _ in range(calls):
                f()
            samples[i].append((time.perf_counter() - t0) * 1e6 / calls)
    return [statistics.median(s) for s in samples]


class ConvBnRelu(nn.Module):
    def __init__(self, c=4):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(c)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        return self.relu(self.bn(self.conv(x)))


def eager_cases(args):
    torch.manual_seed(0)
    x = torch.randn(1, 4, 4, 4)
    rows = []
    conv = nn.Conv2d(4, 4, 1).eval()
    for follows in (False, True):
        swapped = copy.deepcopy(conv)
        with cpu_follows_policy(follows):
            torch_ops.swap(swapped)
            with torch.inference_mode():
                swapped(x)  # the decision, made once
                rows.append((f"Conv2d 1x1, policy {'rules (CPU follows it)' if follows else 'CPU: torch'}",
                             per_call_us([lambda: conv(x), lambda: swapped(x)], args.rounds,
                                         args.calls),
                             (python_calls(lambda: conv(x)), python_calls(lambda: swapped(x)))))
    block = ConvBnRelu().eval()
    with torch.no_grad():
        block.bn.running_var.uniform_(0.5, 1.5)
    fused = torch_ops.swap(copy.deepcopy(block)).model
    with cpu_follows_policy(True):
        with torch.inference_mode():
            fused(x)
            rows.append(("conv+bn+relu fused, policy torch (CPU follows it)",
                         per_call_us([lambda: block(x), lambda: fused(x)], args.rounds,
                                     args.calls),
                         (python_calls(lambda: block(x)), python_calls(lambda: fused(x)))))
    print(f"{'case':<52} {'stock us':>9} {'swap us':>9} {'diff us':>8}  py calls stock/swap")
    for name, (s, w), (cs, cw) in rows:
        print(f"{name:<52} {s:9.2f} {w:9.2f} {w - s:8.2f}  {cs}/{cw}")
    return rows


def compiled_cases(args):
    import torchvision.models as tvm
    cases = {
        "resnet18": (lambda: tvm.resnet18(weights=None), (1, 3, 32, 32)),
        "mobilenet_v3_large": (lambda: tvm.mobilenet_v3_large(weights=None), (1, 3, 32, 32)),
        "convnext_tiny": (lambda: tvm.convnext_tiny(weights=None), (1, 3, 32, 32)),
    }
    print(f"\n{'model':<20} {'variant':<10} {'graphs':>6} {'breaks':>6} {'ops':>5} "
          f"{'convolution ops':>15} {'gpukern ops':>11}")
    out = {}
    for name, (ctor, shape) in cases.items():
        torch.manual_seed(0)
        stock = ctor().eval()
        x = torch.randn(*shape)
        with cpu_follows_policy(True):
            swapped = torch_ops.swap(copy.deepcopy(stock), example_inputs=(x,)).model
            for vname, m in (("stock", stock), ("swap", swapped)):
                torch._dynamo.reset()
                with torch.inference_mode():
                    ex = torch._dynamo.explain(m)(x)
                targets = [str(n.target) for g in ex.graphs for n in g.graph.nodes
                           if n.op in ("call_function", "call_method", "call_module")]
                convs = sum(1 for t in targets if "conv" in t and "gpukern" not in t)
                gks = sum(1 for t in targets if "gpukern" in t)
                out[(name, vname)] = (ex.graph_count, ex.graph_break_count, len(targets))
                print(f"{name:<20} {vname:<10} {ex.graph_count:>6} {ex.graph_break_count:>6} "
                      f"{len(targets):>5} {convs:>15} {gks:>11}")
        torch._dynamo.reset()
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--no-compile", action="store_true")
    args = p.parse_args()
    torch.set_num_threads(1)
    eager_cases(args)
    if not args.no_compile:
        compiled_cases(args)


if __name__ == "__main__":
    main()
