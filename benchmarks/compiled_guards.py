"""Host cost of a compiled model's guards: every call of a torch.compile'd model first evaluates
the guards dynamo installed while tracing.

Compiles a torchvision model, stock or after ``torch_ops.swap`` (``prune=False``: every converted
layer kept; CPU inputs follow the policy as CUDA inputs do), with a backend that runs nothing,
so that a call's time is the guards and the frame alone, and prints the guard count and the min
and median over the samples (each 50 calls). Runs on the CPU: the guards are host work, the same
whatever device the model's tensors are on. Run one variant per process (two compiled entries of
one forward would each see the other's guards).

    python3 benchmarks/compiled_guards.py convnext_tiny stock
    python3 benchmarks/compiled_guards.py convnext_tiny swap
"""
import argparse
import copy
import os
import statistics
import sys
import time

import torch
import torchvision

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torch_ops  # noqa: E402
import torch_ops.policy as gk_policy  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("model", help="a torchvision.models constructor, e.g. convnext_tiny")
    p.add_argument("variant", choices=["stock", "swap"])
    p.add_argument("--samples", type=int, default=40)
    p.add_argument("--size", type=int, default=64, help="input images' height and width")
    args = p.parse_args()
    gk_policy._RULED_DEVICE_TYPES = ("cuda", "cpu")
    torch.manual_seed(0)
    model = getattr(torchvision.models, args.model)(weights=None).eval()
    x = torch.randn(1, 3, args.size, args.size)
    out = torch.zeros(1, 1000)

    def nothing(gm, example_inputs):  # the backend: the traced graph never runs
        return lambda *a: (out,)

    with torch.inference_mode():
        if args.variant == "swap":
            model = torch_ops.swap(copy.deepcopy(model), example_inputs=(x,), prune=False).model
        guards = len(torch._dynamo.explain(model)(x).out_guards)
        torch._dynamo.reset()
        fn = torch.compile(model, backend=nothing, fullgraph=True)
        fn(x)
        fn(x)
        samples = []
        for _ in range(args.samples):
            t0 = time.perf_counter()
            for _ in range(50):
                fn(x)
            samples.append((time.perf_counter() - t0) / 50 * 1e6)
    print(f"{args.model} {args.variant}: {guards} guards, min {min(samples):.1f} us, median "
          f"{statistics.median(samples):.1f} us per call (guards + frame)")


if __name__ == "__main__":
    main()
