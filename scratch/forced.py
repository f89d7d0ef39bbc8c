"""Scratch: forced conv1d timings (each output checked against float64 first)."""
import os, sys, argparse
import torch
import torch.nn.functional as F
sys.path.insert(0, "benchmarks")
import torch_ops
from timing import time_cuda, measure_ceilings

M = 2**20
CASES = {
    "dw1_k31": (16, 768, 2048, 31, 15),
    "dw1_k28": (16, 768, 2048, 28, 14),
    "dw1_k33": (16, 768, 2048, 33, 16),
    "dw1_k64": (16, 768, 2048, 64, 32),
    "dw1_k31_L4099": (8, 512, 4099, 31, 15),
    "c1_b64_k64": (64, 1, M, 64, 63),
    "c1_k127_64M": (1, 1, 64 * M, 127, 126),
    "c1_k28_64M": (1, 1, 64 * M, 28, 27),
    "c1_k511_1M": (1, 1, M, 511, 510),
    "c1_k1024_500k": (1, 1, 500000, 1024, 1023),
    "c1_k64_1M": (1, 1, M, 64, 63),
    "b256_L300_k40": (256, 64, 300, 40, 20),
    "dw1_k16": (16, 768, 2048, 16, 8),
    "dw1_k20": (16, 768, 2048, 20, 10),
    "dw1_k24": (16, 768, 2048, 24, 12),
    "dw1_k27": (16, 768, 2048, 27, 13),
    "c1_k16_64M": (1, 1, 64 * M, 16, 15),
    "c1_k20_64M": (1, 1, 64 * M, 20, 19),
    "c1_k24_64M": (1, 1, 64 * M, 24, 23),
    "dw4_k16": (8, 4096, 4096, 16, 8),
    "dw4_k24": (8, 4096, 4096, 24, 12),
    "seed_k16": (1, 1, 1024000, 16, 15),
    "c1_k3_64M": (1, 1, 64 * M, 3, 2),
    "c1_k5_64M": (1, 1, 64 * M, 5, 4),
    "c1_k8_64M": (1, 1, 64 * M, 8, 7),
    "c1_k12_64M": (1, 1, 64 * M, 12, 11),
    "dw4_k3": (8, 4096, 4096, 3, 1),
    "dw4_k4": (8, 4096, 4096, 4, 3),
    "dw4_k5": (8, 4096, 4096, 5, 2),
    "dw4_k8": (8, 4096, 4096, 8, 4),
    "dw4_k12": (8, 4096, 4096, 12, 6),
    "dw1_k3": (16, 768, 2048, 3, 1),
    "dw1_k5": (16, 768, 2048, 5, 2),
    "dw1_k8": (16, 768, 2048, 8, 4),
    "dw1_k12": (16, 768, 2048, 12, 6),
    "c1_k16_1M": (1, 1, M, 16, 15),
    "b4_k16_256k": (4, 1, 256 * 1024, 16, 15),
}

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--algos", nargs="+", default=["rowwise16", "rowwise16_old"])
    ap.add_argument("--cases", nargs="+", default=list(CASES))
    ap.add_argument("--dtypes", nargs="+", default=["float32"])
    a = ap.parse_args()
    bw, fl = measure_ceilings()
    print(f"copy {bw/1e12:.2f} TB/s fma {fl/1e12:.1f} TFLOP/s segs={os.environ.get('GPUKERN_EXP_SEGS', '4')}", flush=True)
    for name in a.cases:
        N, C, L, K, pad = CASES[name]
        for dt in a.dtypes:
            dtype = getattr(torch, dt)
            g = torch.Generator(device="cuda").manual_seed(1)
            x = torch.randn(N, C, L, device="cuda", dtype=dtype, generator=g)
            w = torch.randn(C, 1, K, device="cuda", dtype=dtype, generator=g)
            b = torch.randn(C, device="cuda", dtype=dtype, generator=g)
            ref = None
            if N * C * L * K < 2**33:
                ref = F.conv1d(x.double(), w.double(), b.double(), 1, pad, 1, C)
            line = f"{name:14s} {dt:9s}"
            for algo in a.algos:
                try:
                    with torch_ops.force_algorithm("conv1d", algo):
                        out = torch_ops.conv1d(x, w, b, 1, pad, 1, C)
                        if ref is not None:
                            err = (out.double() - ref).abs().max().item() / (ref.abs().max().item() + 1e-30)
                            tol = 1e-5 if dtype == torch.float32 else 2e-2
                            assert err < tol, (algo, err)
                        ms = time_cuda(lambda: torch_ops.conv1d(x, w, b, 1, pad, 1, C))
                    Lo = out.shape[-1]
                    bytes_ = (x.numel() + out.numel()) * x.element_size()
                    t_mem = bytes_ / bw; t_fma = 2 * N * C * Lo * K / fl
                    roof = max(t_mem, t_fma)
                    line += f" | {algo} {ms*1e3:7.1f} us ({roof/(ms*1e-3)*100:4.0f}%)"
                except Exception as e:  # noqa
                    line += f" | {algo} n/a ({str(e)[:60]})"
            print(line, flush=True)

main()
