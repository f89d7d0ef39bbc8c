"""Ceiling probes for the short bandwidth-bound cases (GPU only): what reading the same bytes
costs with other kernels under the same timer as benchmarks/run.py (CUDA events, L2 flushed).

    python benchmarks/probe.py [--out results]

Rows: a one-element reduction (the timer's floor: event, launch and one tiny kernel), the flat
full reduction of the same buffer (one contiguous stream, ours and torch.sum), its clone, and the
row reductions under each algorithm that can run them. A row case cannot beat the flat read of
the same bytes by much; the gap between the two is what the row kernel itself costs.
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch_ops  # noqa: E402
from timing import measure_ceilings, time_cuda  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="results")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("probe: no GPU visible; nothing to measure")
        return
    bw, _ = measure_ceilings()
    lines = [f"GPU {torch.cuda.get_device_name()}: copy {bw / 1e12:.2f} TB/s",
             f"{'probe':44s} {'us':>8s} {'GB/s read':>10s} {'vs floor':>8s}"]

    def row(name, fn, nbytes, ref=None):
        if ref is not None:
            out = fn()
            torch.testing.assert_close(out.float(), ref.float(), rtol=2e-2, atol=2e-2)
        ms = time_cuda(fn, reps=50)
        us = ms * 1e3
        floor = nbytes / bw * 1e6
        gbs = nbytes / (ms * 1e-3) / 1e9 if nbytes else 0.0
        lines.append(f"{name:44s} {us:8.2f} {gbs:10.0f} {floor / us if nbytes else 0:8.0%}")
        print(lines[-1], flush=True)

    one = torch.randn(1, device="cuda")
    row("sum of 1 element (ours): timer floor", lambda: torch_ops.sum(one), 0)
    row("sum of 1 element (torch)", lambda: torch.sum(one), 0)
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(65536, 256, device="cuda").to(dtype)
        nb = x.numel() * x.element_size()
        tag = str(dtype).replace("torch.", "")
        flat = x.view(-1)
        row(f"{tag} 64Kx256 flat sum (ours)", lambda: torch_ops.sum(flat), nb)
        row(f"{tag} 64Kx256 flat sum (torch)", lambda: torch.sum(flat), nb)
        row(f"{tag} 64Kx256 clone (read+write)", lambda: x.clone(), 2 * nb)
        ref = x.double().sum(-1)
        for algo in ("row_vec", "row", "seg_contig", "seg_runs"):
            with torch_ops.force_algorithm("reduce", algo):
                row(f"{tag} 64Kx256 sum dim=-1 [{algo}]", lambda: torch_ops.sum(x, -1), nb, ref)
        row(f"{tag} 64Kx256 sum dim=-1 (torch)", lambda: torch.sum(x, -1), nb)
        a = torch.randn(8192, 8192, device="cuda").to(dtype)
        v = torch.randn(8192, device="cuda").to(dtype)
        nb = a.numel() * a.element_size()
        row(f"{tag} 8192^2 flat sum (ours)", lambda: torch_ops.sum(a.view(-1)), nb)
        row(f"{tag} 8192^2 mv (ours)", lambda: torch_ops.mv(a, v), nb)
        row(f"{tag} 8192^2 mv (cuBLAS)", lambda: torch.mv(a, v), nb)
        del a, v, x
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "probe.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
