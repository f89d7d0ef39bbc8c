"""Run gpukern's call of the chosen benchmark cases a few times inside an NVTX range "ours", for
Nsight Compute: ncu --nvtx --nvtx-include "ours/" --set detailed python3 benchmarks/profile_cases.py --cases ...
(the inputs and references are built outside the range, so only our kernels are profiled)."""
import argparse
import sys

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from cases import select  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--cases", nargs="+", required=True)
    p.add_argument("--calls", type=int, default=2)
    args = p.parse_args()
    for case in select(args.cases):
        built = case.make("cuda", 1.0)
        built.ours()  # warm-up: plans, caches, lazy module loading
        torch.cuda.synchronize()
        for _ in range(args.calls):
            torch.cuda.nvtx.range_push("ours")
            built.ours()
            torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
        print(case.id, "done", flush=True)


if __name__ == "__main__":
    main()
