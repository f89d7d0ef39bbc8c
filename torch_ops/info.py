"""``python -m torch_ops.info``: what this gpukern build is, and which algorithm a call would run.

Without arguments it prints the build: torch and CUDA versions, the GPU (if one is visible), the
CUDA architectures the kernels were compiled for, and which ops have CUDA kernels. Given an op
and shapes, it builds meta tensors (no GPU and no memory needed) and prints the output shape (or the
error the op raises for these arguments: the fake kernels run the real kernels' checks) and the
CUDA algorithm the op would choose (``torch_ops.algorithm``); an op whose choice is not queryable
in this build prints ``unknown``. Examples::

    python -m torch_ops.info conv1d --input 8,4096,4096 --weight 4096,1,4 --groups 4096 \\
        --padding same --dtype bfloat16
    python -m torch_ops.info conv2d --input 32,96,56,56 --weight 96,1,7,7 --groups 96 \\
        --padding 3 --channels-last
    python -m torch_ops.info convolve --input 8,4096 --filter 8,31 --mode same
    python -m torch_ops.info mv --input 8192,8192 --transposed
    python -m torch_ops.info sum --input 4096,4096 --dim 1
"""
import argparse
import sys
from typing import List, Optional

import torch

import torch_ops

OPS = ("conv1d", "conv1d.padding", "conv2d", "conv2d.padding", "conv1d_fused",
       "conv1d_fused.padding", "conv2d_fused", "conv2d_fused.padding", "convolve", "mv", "sum",
       "sum.dim_IntList", "mean", "mean.dim", "amax", "amin")
_REDUCE = ("sum", "mean", "amax", "amin")


def _has_kernel(name: str, key: str) -> bool:
    try:
        return torch._C._dispatch_has_kernel_for_dispatch_key("gpukern::" + name, key)
    except RuntimeError:  # op not registered in this build
        return False


def build_info() -> str:
    from . import _C
    lines = [f"gpukern 0.1.0 at {torch_ops.__file__.rsplit('/', 1)[0]}",
             f"torch {torch.__version__}, CUDA {torch.version.cuda or '(none: CPU build)'}"]
    if torch.cuda.is_available():
        cap = torch.cuda.get_device_capability()
        lines.append(f"GPU: {torch.cuda.get_device_name()} (sm_{cap[0]}{cap[1]})")
    else:
        lines.append("GPU: none visible")
    archs = getattr(_C, "CUDA_ARCHS", "")
    lines.append("CUDA kernels: " + (f"yes, compiled for {archs or '(unknown)'}"
                                     if torch_ops.has_cuda_kernels() else "no (CPU-only build)"))
    lines.append(f"{'op':<21} CPU  CUDA  Autograd (inference-only guard)")
    for name in OPS:
        marks = ["yes" if _has_kernel(name, k) else "-" for k in ("CPU", "CUDA", "Autograd")]
        lines.append(f"{name:<21} {marks[0]:<4} {marks[1]:<5} {marks[2]}")
    return "\n".join(lines)


def _shape(text: str) -> List[int]:
    return [int(v) for v in text.replace("x", ",").split(",") if v.strip()]


def _ints(text: Optional[str]):
    if text is None:
        return None
    vals = _shape(text)
    return vals[0] if len(vals) == 1 else vals


def _padding(text: str):
    return text if text in ("same", "valid") else _ints(text)


def query(args: argparse.Namespace) -> str:
    dtype = getattr(torch, args.dtype)

    def meta(shape, channels_last=False):
        t = torch.empty(_shape(shape), dtype=dtype, device="meta")
        return t.to(memory_format=torch.channels_last) if channels_last else t

    op = args.op
    if op in ("conv1d", "conv2d"):
        if not args.weight:
            raise SystemExit(f"{op} needs --weight")
        x = meta(args.input, args.channels_last)
        w = meta(args.weight, args.channels_last)
        kwargs = dict(stride=_ints(args.stride) or 1, padding=_padding(args.padding),
                      dilation=_ints(args.dilation) or 1, groups=args.groups)
        call = (x, w)
        described = (f"{op}(input {list(x.shape)}, weight {list(w.shape)}, stride="
                     f"{kwargs['stride']}, padding={kwargs['padding']!r}, dilation="
                     f"{kwargs['dilation']}, groups={args.groups}, {args.dtype}"
                     f"{', channels_last' if args.channels_last else ''})")
        out_fn = lambda: getattr(torch_ops, op)(x, w, None, **kwargs)  # noqa: E731
        algo_fn = lambda: torch_ops.algorithm(op, *call, **kwargs)  # noqa: E731
    elif op == "convolve":
        if not args.filter:
            raise SystemExit("convolve needs --filter (the shape of h)")
        x, h = meta(args.input), meta(args.filter)
        described = (f"convolve(x {list(x.shape)}, h {list(h.shape)}, mode={args.mode!r}, "
                     f"{args.dtype})")
        out_fn = lambda: torch_ops.convolve(x, h, args.mode)  # noqa: E731
        algo_fn = lambda: torch_ops.algorithm("convolve", x, h, mode=args.mode)  # noqa: E731
    elif op == "mv":
        shape = _shape(args.input)
        m = meta(args.input) if not args.transposed else meta(
            ",".join(map(str, shape[::-1]))).t()
        v = meta(args.vec or str(shape[1]))
        described = (f"mv(self {list(m.shape)} {'column-major' if args.transposed else 'row-major'}"
                     f", vec {list(v.shape)}, {args.dtype})")
        out_fn = lambda: torch_ops.mv(m, v)  # noqa: E731
        algo_fn = lambda: torch_ops.algorithm("mv", m, v)  # noqa: E731
    else:
        x = meta(args.input)
        dim = _ints(args.dim)
        described = f"{op}(input {list(x.shape)}, dim={dim}, keepdim={args.keepdim}, {args.dtype})"
        if op in ("amax", "amin"):
            out_fn = lambda: getattr(torch_ops, op)(x, () if dim is None else dim,  # noqa: E731
                                                    args.keepdim)
        else:
            out_fn = lambda: getattr(torch_ops, op)(x, dim, args.keepdim)  # noqa: E731
        algo_fn = lambda: torch_ops.algorithm(op, x, dim)  # noqa: E731

    lines = [described]
    try:
        out = out_fn()
        lines.append(f"  output: {list(out.shape)} {str(out.dtype).replace('torch.', '')}")
    except Exception as e:  # noqa: BLE001  (an invalid call: say why)
        lines.append(f"  output: error: {str(e).splitlines()[0]}")
    try:
        lines.append(f"  CUDA algorithm: {algo_fn()}")
    except Exception as e:  # noqa: BLE001  (query op not registered/implemented yet)
        msg = str(e)
        if "no fake impl" in msg or "Could not run" in msg or isinstance(e, NotImplementedError):
            msg = "this build has no algorithm query for the op's family yet"
        else:
            msg = (msg.splitlines() or [type(e).__name__])[0][:200]
        lines.append(f"  CUDA algorithm: unknown ({msg})")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m torch_ops.info", description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("op", nargs="?", choices=("conv1d", "conv2d", "convolve", "mv") + _REDUCE,
                   help="op to query (omit for the build information)")
    p.add_argument("--input", help="input shape, e.g. 8,64,4096 (mv: the matrix M,N; convolve: x)")
    p.add_argument("--weight", help="conv weight shape, e.g. 64,1,31")
    p.add_argument("--filter", help="convolve: the filter h's shape, e.g. 8,31")
    p.add_argument("--mode", default="full", choices=("full", "same", "valid"),
                   help="convolve mode (default full)")
    p.add_argument("--vec", help="mv vector shape (default: N)")
    p.add_argument("--stride", help="conv stride (int or comma list)")
    p.add_argument("--padding", default="0", help="conv padding: int, comma list, same, valid")
    p.add_argument("--dilation", help="conv dilation (int or comma list)")
    p.add_argument("--groups", type=int, default=1)
    p.add_argument("--channels-last", action="store_true", help="conv2d: channels_last tensors")
    p.add_argument("--transposed", action="store_true",
                   help="mv: a column-major matrix (the transpose of a contiguous one)")
    p.add_argument("--dim", help="reduction dims, e.g. 1 or 0,2 (default: all)")
    p.add_argument("--keepdim", action="store_true")
    p.add_argument("--dtype", default="float32",
                   choices=("float32", "float16", "bfloat16", "float64", "int64", "int32",
                            "int16", "int8", "uint8", "bool", "uint16", "complex64"))
    args = p.parse_args(argv)
    if args.op is None:
        print(build_info())
        return 0
    if not args.input:
        p.error(f"{args.op} needs --input")
    print(query(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
