"""Tuning experiment: the implicit-GEMM conv kernel's tile and cluster shapes on the real layers
where it trails cuDNN (channels_last, the kernel alone, no bias, batch 16, as the census runs
them).

    GPUKERN_IGEMM_VARIANTS=1 python3 setup.py build_ext --inplace   # links the variants
    python3 benchmarks/igemm_variants.py [--json out.json]

Candidates per layer and dtype: the dispatch's own choice ("auto"), the four shipped tiles forced
through GPUKERN_IGEMM_CONFIG (large 128x128, small 64x64, medium 64x128, narrow 128x64) and the
variants of csrc/conv/igemm/igemm_variants.cu of that dtype (GPUKERN_IGEMM_VARIANT), against
torch's best (cudnn.benchmark off and on). Every output is checked against torch's first; each
candidate is timed as the census times: 20 calls replayed from a CUDA graph, L2 flushed by a read
before each replay, median of 30 replays.
"""
import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_ops  # noqa: E402,F401  (loads the extension)
from timing import time_cuda_graph  # noqa: E402

BUCKETS = ["large", "small", "medium", "narrow"]
VARIANTS = {
    torch.bfloat16: ["bf16_256x64x64", "bf16_128x64x64_c2x1", "bf16_64x64x64_c1x2"],
    torch.float32: ["tf32_64x64x32_c1x2", "tf32_64x64x32_c2x1", "tf32_64x128x32_c1x2",
                    "tf32_128x64x32_c2x1", "tf32_256x64x32"],
}
# name, N, C, H, O, K, stride, padding: ResNet-50's layers below 0.85x of cuDNN in the census.
LAYERS = [
    ("resnet50 3x3 64->64 56x56", 16, 64, 56, 64, 3, 1, 1),
    ("resnet50 3x3 512->512 7x7", 16, 512, 7, 512, 3, 1, 1),
    ("resnet50 3x3 s2 512->512 14->7", 16, 512, 14, 512, 3, 2, 1),
    ("resnet50 3x3 256->256 14x14", 16, 256, 14, 256, 3, 1, 1),
    ("resnet50 1x1 s2 256->512 56->28", 16, 256, 56, 512, 1, 2, 0),
    ("resnet50 1x1 s2 512->1024 28->14", 16, 512, 28, 1024, 1, 2, 0),
    ("resnet50 1x1 s2 1024->2048 14->7", 16, 1024, 14, 2048, 1, 2, 0),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json")
    ap.add_argument("--dtypes", nargs="+", default=["bfloat16", "float32"])
    args = ap.parse_args()
    torch.manual_seed(0)
    rows = []
    print(f"# {torch.cuda.get_device_name()}: us per call (graph of 20, L2 flushed, median of 30)")
    for dn in args.dtypes:
        dtype = getattr(torch, dn)
        cands = ["auto"] + BUCKETS + VARIANTS[dtype]
        print(f"\n| layer | {dn} | torch | " + " | ".join(cands) + " | best |")
        print("|---|---|---:|" + "---:|" * len(cands) + "---|")
        for name, n, c, h, o, k, s, p in LAYERS:
            x = torch.randn(n, c, h, h, device="cuda").to(dtype).contiguous(
                memory_format=torch.channels_last)
            w = (torch.randn(o, c, k, k, device="cuda") / (c * k * k) ** 0.5).to(dtype).contiguous(
                memory_format=torch.channels_last)
            ref = F.conv2d(x.float(), w.float(), None, s, p)
            t_torch = []
            for bench in (False, True):
                torch.backends.cudnn.benchmark = bench
                t_torch.append(time_cuda_graph(lambda: F.conv2d(x, w, None, s, p), calls=20,
                                               reps=30, flush=True))
            torch.backends.cudnn.benchmark = False
            times = {}
            for cand in cands:
                os.environ.pop("GPUKERN_IGEMM_CONFIG", None)
                os.environ.pop("GPUKERN_IGEMM_VARIANT", None)
                if cand in BUCKETS:
                    os.environ["GPUKERN_IGEMM_CONFIG"] = cand
                elif cand != "auto":
                    os.environ["GPUKERN_IGEMM_VARIANT"] = cand

                def call():
                    return torch.ops.gpukern.conv2d(x, w, None, [s, s], [p, p], [1, 1], 1)
                try:
                    out = call()
                    err = float((out.float() - ref).norm() / ref.norm())
                    if err > (2e-2 if dtype == torch.bfloat16 else 5e-3):
                        print(f"# {cand} WRONG on {name}: rel err {err:.2e}")
                        times[cand] = None
                        continue
                    times[cand] = time_cuda_graph(call, calls=20, reps=30, flush=True)
                except RuntimeError as e:
                    print(f"# {cand} failed on {name}: {str(e).splitlines()[0][:160]}")
                    times[cand] = None
            os.environ.pop("GPUKERN_IGEMM_CONFIG", None)
            os.environ.pop("GPUKERN_IGEMM_VARIANT", None)
            ok = {kk: t for kk, t in times.items() if t is not None}
            best = min(ok, key=ok.get) if ok else "-"
            print(f"| {name} | {dn} | {min(t_torch) * 1e3:.1f} | " + " | ".join(
                "-" if times[cc] is None else f"{times[cc] * 1e3:.1f}" for cc in cands)
                + f" | {best} |", flush=True)
            rows.append({"layer": name, "dtype": dn, "torch_ms": min(t_torch), "ms": times,
                         "best": best})
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"gpu": torch.cuda.get_device_name(), "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
