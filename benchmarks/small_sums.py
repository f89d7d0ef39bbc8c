"""Full reductions of small and middle sizes (GPU only): gpukern's automatic choice, the flat
kernel forced, and torch, as kernel time per call replayed from a CUDA graph of 100 calls (inputs
stay in L2), for sum / amax / mean / amin in float32, bfloat16 and float16 from 1K to 1M
elements, including the sizes between the benchmark cases. Each output is checked against a
float64 reference (exact for amax/amin) before it is timed; a wrong one is marked BAD.

    python benchmarks/small_sums.py [--out results] [--ops sum amax] [--sizes 1024 4096]

The ratio column is torch's time over ours (PERF.md: >= 2x from 1K to 1M elements).
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch_ops  # noqa: E402
from timing import time_cuda_graph  # noqa: E402

# |out - ref| <= TOL * sum(|x|): the bound tests/test_reduce.py applies to float sums.
TOL = {torch.float32: 2e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}
SIZES = [1024, 1025, 1500, 2048, 3000, 4096, 5000, 6000, 8192, 10000, 12288, 16384, 20000, 24576,
         32768, 40000, 49152, 65536, 65537, 100000, 131072, 262144, 524288, 1048576]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--ops", nargs="+", default=["sum", "amax", "mean", "amin"])
    ap.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16", "float16"])
    ap.add_argument("--sizes", nargs="+", type=int, default=SIZES)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("small_sums.py: no CUDA device; nothing to time")
        return
    lines = [f"{torch.cuda.get_device_name()}  torch {torch.__version__}  (us per call, CUDA graph)"]
    print(lines[0], flush=True)
    g = torch.Generator(device="cuda").manual_seed(0)
    for op in args.ops:
        for dt in [getattr(torch, d) for d in args.dtypes]:
            for n in args.sizes:
                x = torch.randn(n, device="cuda", generator=g).to(dt)
                x64 = x.double()
                ref = getattr(x64, op)()
                ours = lambda: getattr(torch_ops, op)(x)  # noqa: E731
                theirs = lambda: getattr(torch, op)(x)  # noqa: E731
                out = ours().double()
                if op in ("sum", "mean"):
                    scale = x64.abs().sum() if op == "sum" else x64.abs().mean()
                    ok = abs(float(out - ref)) <= TOL[dt] * float(scale)
                else:
                    ok = float(out) == float(ref)
                t_auto = time_cuda_graph(ours) * 1e3
                with torch_ops.force_algorithm("reduce", "flat"):
                    t_flat = time_cuda_graph(ours) * 1e3
                t_torch = time_cuda_graph(theirs) * 1e3
                ratio = t_torch / t_auto
                line = (f"{op:4s} {str(dt)[6:]:8s} n={n:8d}  {torch_ops.algorithm(op, x):5s} "
                        f"{t_auto:5.2f}  flat {t_flat:5.2f}  torch {t_torch:5.2f}  {ratio:4.2f}x"
                        f"{'' if ratio >= 2 else '  BELOW 2x'}{'' if ok else '  BAD'}")
                print(line, flush=True)
                lines.append(line)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "small_sums.txt"), "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
