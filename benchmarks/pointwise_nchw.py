"""1x1 convolutions over NCHW, fp32 (TF32 allowed, torch's default) or 16-bit (--dtype): gpukern's
pointwise_nchw kernels (mma.sync, the planes read in place, the epilogue fused) against the igemm
path's other forms (CUTLASS / cuBLASLt GEMMs after NHWC conversions, or cuBLASLt's batched NCHW
GEMM then an elementwise pass), cuDNN's convolution alone and torch's unfused sequence.

    python3 benchmarks/pointwise_nchw.py [--batch 16] [--dtype bfloat16] [--tiles] [--splits]

Blocks: every 1x1 stride-1 conv + BN (+ add) + activation of ResNet-50 and MobileNetV3-Large at
batch 16 (BN folded into a bias), 7x7 planes and the squeeze-excitation 1x1 planes included.
Per block: torch's conv alone (F.conv2d without bias, the faster of cudnn.benchmark off and on),
torch's unfused sequence (conv with the bias, + residual, activation), and gpukern's fused op with
the algorithm forced to pointwise_nchw, forced to igemm, and chosen automatically (the first call
races it against cuDNN); then the plain conv (no bias): pointwise_nchw, igemm, automatic. Every
output is checked against a float64 reference first; each is timed as the layer census times: 20
calls replayed from a CUDA graph, L2 flushed by a read before each replay, median of 30 replays.

--tiles: the fused op forced to pointwise_nchw with each of the kernel's block / warp tiles
(GPUKERN_PW_TILE, csrc/conv/direct/pointwise_nchw.cu kTiles) and with the automatic choice,
against torch's conv alone and unfused sequence: the data behind choose_tile and the rule.
"""
import argparse
import os

os.environ.setdefault("GPUKERN_PW_KNOBS", "1")  # read at the first call: --tiles forces tiles
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_ops  # noqa: E402
from nchw_fused import BLOCKS, block_calls, block_ref  # noqa: E402
from timing import time_census_us, torch_best_us  # noqa: E402

EXTRA = [(1024, 14, 512, "relu"), (2048, 7, 512, "relu"), (512, 7, 2048, "add>relu"),
         (672, 7, 160, "none"), (160, 7, 960, "hardswish"), (960, 7, 160, "add>none"),
         (72, 1, 24, "relu"), (24, 1, 72, "hardsigmoid"), (960, 1, 240, "relu"),
         (240, 1, 960, "hardsigmoid")]
TOL = 5e-3  # TF32 operands against float64


def err(a, ref):
    return float((a.double() - ref).norm() / ref.norm().clamp_min(1e-30))


timed = time_census_us
torch_best = torch_best_us


def blocks(n, g, dtype=torch.float32):
    """Each block's (c, h, o, follow) and its operands, float64 reference and two calls."""
    for c, h, o, follow in BLOCKS + EXTRA:
        act = follow.split(">")[-1]
        x = torch.randn(n, c, h, h, device="cuda", generator=g).to(dtype)
        w = (torch.randn(o, c, 1, 1, device="cuda", generator=g) / c ** 0.5).to(dtype)
        b = torch.randn(o, device="cuda", generator=g).to(dtype)
        res = follow.startswith("add")
        r = torch.randn(n, o, h, h, device="cuda", generator=g).to(dtype) if res else None
        ref = block_ref(x, w, b, r, act, lambda t: t.double())
        yield (c, h, o, follow), (x, w, b, r, ref, *block_calls(x, w, b, r, act))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--tiles", action="store_true", help="time each tile of the kernel")
    ap.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default="float32",
                    help="the blocks' dtype (default mode; 16-bit: pointwise_nchw16.cuh)")
    ap.add_argument("--blocks", nargs="+", metavar="CxH",
                    help="only the blocks of these input channels x plane sizes")
    ap.add_argument("--splits", action="store_true",
                    help="time the split tiles at 2, 4, 8 CTAs a cluster (C >= 160, <= 14x14)")
    args = ap.parse_args()
    torch.backends.cudnn.allow_tf32 = True
    g = torch.Generator(device="cuda").manual_seed(0)
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, cuDNN "
          f"{torch.backends.cudnn.version()}: us per call (graph of 20, L2 flushed, median of 30)")
    if args.tiles:
        only = {tuple(int(v) for v in b.split("x")) for b in args.blocks} if args.blocks else None
        return tiles(args.batch, g, only)
    if args.splits:
        return splits(args.batch, g)
    dtype = getattr(torch, args.dtype)
    tol = TOL if dtype == torch.float32 else 1e-2  # 16-bit: one rounding of the output
    print(f"\n| block ({args.dtype} NCHW) | torch conv | torch unfused | pointwise | igemm | "
          "gemm80 | auto (algo) | auto / unfused | plain: pointwise | igemm | auto (algo) | "
          "auto / conv |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    n = args.batch
    only = {tuple(int(v) for v in b.split("x")) for b in args.blocks} if args.blocks else None
    for (c, h, o, follow), (x, w, b, r, ref, torch_seq, fused) in blocks(n, g, dtype):
        if only is not None and (c, h) not in only:
            continue
        ref_plain = F.conv2d(x.double(), w.double())

        def plain():
            return torch.ops.gpukern.conv2d(x, w, None, [1, 1], [0, 0], [1, 1], 1)

        t_conv = torch_best(lambda: F.conv2d(x, w))
        t_seq = torch_best(torch_seq)
        row = {}
        for name, fn, want in (("f", fused, ref), ("p", plain, ref_plain)):
            for algo in ("pointwise_nchw", "igemm", "gemm80", None):
                key = f"{name}:{algo}"
                if algo == "gemm80" and (name == "p" or (h * h) % 4 != 0):
                    row[key] = None  # fused calls only; planes of a multiple of 4 pixels
                    continue
                # gemm80: igemm's visitor-tree GEMM forced on (GPUKERN_IGEMM_GEMM80=1); the other
                # igemm column with it off; auto with its rule
                if algo == "gemm80":
                    os.environ["GPUKERN_IGEMM_GEMM80"] = "1"
                elif algo == "igemm":
                    os.environ["GPUKERN_IGEMM_GEMM80"] = "0"
                else:
                    os.environ.pop("GPUKERN_IGEMM_GEMM80", None)
                try:
                    if algo is None:
                        os.environ["GPUKERN_PW_OFF"] = "0"
                        out = fn()  # the first call races (csrc/conv/vendor.h)
                        bb = b if name == "f" else None
                        row[key + ":algo"] = torch_ops.algorithm("conv2d", x, w, bb, 1, 0)
                        e = err(out, want)
                        assert e < tol, f"{key} {c}x{h}->{o}: rel err {e:.2e}"
                        row[key] = timed(fn)
                    else:
                        # 16-bit igemm: its other 1x1 forms (GPUKERN_PW_OFF=1 keeps the calls
                        # from pointwise_nchw16)
                        os.environ["GPUKERN_PW_OFF"] = "1" if algo in ("igemm", "gemm80") else "0"
                        forced = "igemm" if algo == "gemm80" else algo
                        with torch_ops.force_algorithm("conv2d", forced):
                            e = err(fn(), want)
                            assert e < tol, f"{key} {c}x{h}->{o}: rel err {e:.2e}"
                            row[key] = timed(fn)
                except RuntimeError as ex:
                    if "cannot run" not in str(ex):
                        raise
                    row[key] = None

        def f(v):
            return "-" if v is None else f"{v:.1f}"
        print(f"| {n}x{c}x{h}x{h} -> {o} {follow} | {t_conv:.1f} | {t_seq:.1f} | "
              f"{f(row['f:pointwise_nchw'])} | {f(row['f:igemm'])} | {f(row['f:gemm80'])} | "
              f"{f(row['f:None'])} "
              f"({row['f:None:algo']}) | {t_seq / row['f:None']:.2f}x | "
              f"{f(row['p:pointwise_nchw'])} | {f(row['p:igemm'])} | {f(row['p:None'])} "
              f"({row['p:None:algo']}) | {t_conv / row['p:None']:.2f}x |", flush=True)


TILES = ["64x128 w32x32", "64x64 w32x32", "64x128 w32x64 s2 b4", "64x128 w32x32 s2 b3",
         "64x128 w32x32 plain", "64x128 w32x32 s2 b3 plain"]


def tiles(n, g, only=None):
    print("\n| block (fp32 NCHW) | torch conv | torch unfused | "
          + " | ".join(TILES) + " | auto | auto / unfused |")
    print("|---|---:|---:|" + "---:|" * (len(TILES) + 2))
    for (c, h, o, follow), (x, w, b, r, ref, torch_seq, fused) in blocks(n, g):
        if only and (c, h) not in only:
            continue
        t_conv = torch_best(lambda: F.conv2d(x, w))
        t_seq = torch_best(torch_seq)
        times = []
        with torch_ops.force_algorithm("conv2d", "pointwise_nchw"):
            for i in range(len(TILES) + 1):  # GPUKERN_PW_TILE 1..6, then 0: the automatic one
                os.environ["GPUKERN_PW_TILE"] = str((i + 1) % (len(TILES) + 1))
                e = err(fused(), ref)
                assert e < TOL, f"tile {i + 1} {c}x{h}->{o}: rel err {e:.2e}"
                times.append(timed(fused))
        os.environ.pop("GPUKERN_PW_TILE")
        print(f"| {n}x{c}x{h}x{h} -> {o} {follow} | {t_conv:.1f} | {t_seq:.1f} | "
              + " | ".join(f"{t:.1f}" for t in times) + f" | {t_seq / times[-1]:.2f}x |",
              flush=True)


SPLITS = [(2, 0), (7, 2), (7, 4), (7, 8), (8, 2), (8, 4), (8, 8)]


def splits(n, g):
    """The split tiles (GPUKERN_PW_TILE 7 permuted, 8 plain; GPUKERN_PW_SPLITS CTAs a cluster)
    against the unsplit 64 x 64 tile (2), the kernel's automatic tile, and the op unforced (its
    race), on the blocks with at least 160 input channels over 14x14 planes and smaller."""
    heads = ["64x64"] + [f"{'perm' if t == 7 else 'plain'} /{k}" for t, k in SPLITS[1:]]
    print("\n| block (fp32 NCHW) | torch conv | torch unfused | " + " | ".join(heads)
          + " | kernel auto | op (race) | op / unfused |")
    print("|---|---:|---:|" + "---:|" * (len(heads) + 3))
    for (c, h, o, follow), (x, w, b, r, ref, torch_seq, fused) in blocks(n, g):
        if c < 160 or h > 14 or h < 7:
            continue
        t_conv = torch_best(lambda: F.conv2d(x, w))
        t_seq = torch_best(torch_seq)
        times = []
        with torch_ops.force_algorithm("conv2d", "pointwise_nchw"):
            for tile, k in SPLITS + [(0, 0)]:
                os.environ["GPUKERN_PW_TILE"] = str(tile)
                os.environ["GPUKERN_PW_SPLITS"] = str(k)
                e = err(fused(), ref)
                assert e < TOL, f"tile {tile}/{k} {c}x{h}->{o}: rel err {e:.2e}"
                times.append(timed(fused))
        os.environ.pop("GPUKERN_PW_TILE")
        os.environ.pop("GPUKERN_PW_SPLITS")
        e = err(fused(), ref)  # the first unforced call races
        assert e < TOL, f"op {c}x{h}->{o}: rel err {e:.2e}"
        times.append(timed(fused))
        print(f"| {n}x{c}x{h}x{h} -> {o} {follow} | {t_conv:.1f} | {t_seq:.1f} | "
              + " | ".join(f"{t:.1f}" for t in times) + f" | {t_seq / times[-1]:.2f}x |",
              flush=True)


if __name__ == "__main__":
    main()
