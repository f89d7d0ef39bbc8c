"""The algorithm each mv and reduction query names over a grid of sizes at every bound of the
dispatch rules (each constant -1, itself, +1), on meta tensors (no GPU needed): dump it before and
after a change to the rules and diff the two files to show the choices did not move.

    python3 benchmarks/query_grid.py mv before_mv.json      # then rebuild and again into after
    python3 benchmarks/query_grid.py reduce before_red.json
    python3 -c "import json,sys; a,b=(json.load(open(f)) for f in sys.argv[1:]); \
        print([k for k in a if a[k] != b.get(k)])" before_mv.json after_mv.json

mv: row-major A and column-major A.t(), fp32 / bf16 / fp16, M and N over the grid. reduce: sum
and amax over the last dim (rows) and dim 0 (columns) of [R, n] tensors, and over dim 1 of
[B, 1000, D] ones.
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torch_ops  # noqa: E402

# Every size bound of the mv and reduce rules (csrc/mv/dispatch.cu, csrc/reduce/dispatch.cu).
CONSTS = [1, 2, 4, 5, 6, 7, 16, 17, 24, 32, 48, 49, 64, 65, 95, 96, 100, 112, 127, 128, 192, 256,
          257, 383, 384, 512, 767, 768, 1023, 1024, 1025, 1535, 1536, 2047, 2048, 4095, 4096,
          4097, 6143, 6144, 8191, 8192, 16383, 16384, 16385, 20479, 20480, 24575, 24576, 49151,
          49152, 65535, 65536, 65537, 98303, 98304, 98305, 131071, 131072, 262143, 262144,
          393216, 393217, 1 << 20, (1 << 20) + 1, (1 << 22) - 1, 1 << 22]
DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def meta(*shape, dtype):
    return torch.empty(*shape, device="meta", dtype=dtype)


def sizes():
    return sorted(set(v for c in CONSTS for v in (c - 1, c, c + 1) if v >= 1))


def mv_grid():
    out = {}
    for dt in DTYPES:
        for m in sizes():
            for n in sizes():
                x = meta(n, dtype=dt)
                out[f"r {dt} {m} {n}"] = torch_ops.algorithm("mv", meta(m, n, dtype=dt), x)
                out[f"c {dt} {m} {n}"] = torch_ops.algorithm("mv", meta(n, m, dtype=dt).t(), x)
    return out


def reduce_grid():
    out = {}
    for dt in DTYPES:
        for r in sizes():
            for n in sizes():
                if r * n > 1 << 34:
                    continue
                for op in ("sum", "amax"):
                    rows, cols = meta(n, r, dtype=dt), meta(r, n, dtype=dt)
                    out[f"rows {op} {dt} {r} {n}"] = torch_ops.algorithm(op, rows, -1)
                    out[f"cols {op} {dt} {r} {n}"] = torch_ops.algorithm(op, cols, 0)
        for b in (64, 127, 128, 129, 511, 512, 513, 1024):
            for d in range(40, 140):
                for op in ("sum", "amax"):
                    out[f"bnd {op} {dt} {b} {d}"] = torch_ops.algorithm(
                        op, meta(b, 1000, d, dtype=dt), 1)
    return out


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("mv", "reduce"):
        sys.exit(__doc__)
    out = mv_grid() if sys.argv[1] == "mv" else reduce_grid()
    with open(sys.argv[2], "w") as f:
        json.dump(out, f)
    print(f"{len(out)} queries -> {sys.argv[2]}")


if __name__ == "__main__":
    main()
