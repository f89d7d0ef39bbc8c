"""One conv2d layer, gpukern's op and torch's, called a few times: a target for `ncu` or
`nsys` (the kernels of one layer, nothing else).

    ncu --kernel-name regex:depthwise --launch-skip 2 --launch-count 1 \\
        python3 benchmarks/one_layer.py --shape 16,384,14,14 --kernel 7 --groups 384 \\
        --dtype bfloat16 --format channels_last --bias
    (--algorithm pointwise_nchw forces gpukern's algorithm; --activation relu: the fused op)
"""
import argparse
import contextlib

import torch
import torch.nn.functional as F

import torch_ops


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shape", required=True, help="N,C,H,W of the input")
    p.add_argument("--out-channels", type=int, default=None, help="default: C")
    p.add_argument("--kernel", type=int, default=3)
    p.add_argument("--stride", type=int, default=1)
    p.add_argument("--padding", type=int, default=None, help="default: kernel // 2")
    p.add_argument("--groups", type=int, default=1)
    p.add_argument("--bias", action="store_true")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    p.add_argument("--format", default="contiguous", choices=["contiguous", "channels_last"])
    p.add_argument("--calls", type=int, default=3, help="calls of each (default 3)")
    p.add_argument("--which", default="both", choices=["both", "gpukern", "torch"])
    p.add_argument("--algorithm", default=None,
                   help="force gpukern's conv2d algorithm (torch_ops.force_algorithm)")
    p.add_argument("--activation", default=None,
                   help="gpukern's fused op with this activation (default: the plain conv)")
    a = p.parse_args()
    n, c, h, w = (int(v) for v in a.shape.split(","))
    o = a.out_channels or c
    dtype = getattr(torch, a.dtype)
    fmt = torch.channels_last if a.format == "channels_last" else torch.contiguous_format
    x = torch.randn(n, c, h, w, device="cuda", dtype=dtype).contiguous(memory_format=fmt)
    wt = torch.randn(o, c // a.groups, a.kernel, a.kernel, device="cuda", dtype=dtype)
    wt = wt.contiguous(memory_format=fmt)
    b = torch.randn(o, device="cuda", dtype=dtype) if a.bias else None
    pad = a.kernel // 2 if a.padding is None else a.padding
    kw = dict(stride=a.stride, padding=pad, groups=a.groups)
    forced = (torch_ops.force_algorithm("conv2d", a.algorithm) if a.algorithm
              else contextlib.nullcontext())
    if a.activation is None:
        ours = lambda: torch_ops.conv2d(x, wt, b, **kw)  # noqa: E731
    else:
        ours = lambda: torch_ops.conv2d_fused(x, wt, b, **kw, activation=a.activation)  # noqa
    with torch.inference_mode(), forced:
        ref = F.conv2d(x, wt, b, **kw)
        got = ours() if a.activation is None else torch_ops.conv2d(x, wt, b, **kw)
        err = float((got.float() - ref.float()).norm() / ref.float().norm().clamp_min(1e-30))
        print(f"gpukern algorithm {torch_ops.algorithm('conv2d', x, wt, b, **kw)}, "
              f"relative error against torch {err:.1e}")
        for _ in range(a.calls):
            if a.which in ("both", "gpukern"):
                ours()
            if a.which in ("both", "torch"):
                F.conv2d(x, wt, b, **kw)
        torch.cuda.synchronize()


if __name__ == "__main__":
    main()
