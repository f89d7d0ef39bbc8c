"""gpukern's main job: every benchmark case against its best torch baseline, one table.

    python benchmarks/run.py [--cases c1_ dw2 mv ...] [--out results]

On a GPU: measures the two ceilings (copy bandwidth, fp32 FMA rate) in the same run, checks each
output against a float64 reference before timing it, times ours and every baseline (cuDNN with
cudnn.benchmark off and on, strict fp32; torch.fft where listed; cuBLAS; ATen) with CUDA events
and the L2 flushed (launch-bound cases inside a CUDA graph), and prints time, best baseline,
speedup, fraction of the roofline and the target. Cases reading at most 160 MiB are also timed
with rotated inputs (back-to-back calls over copies that together exceed the L2: rot_us, b.rot_us,
rot_sp, r.roof; replayed from a CUDA graph, so that neither the fixed cost of timing one call
between two events nor the host's cost per call is counted), and their status is judged on
that timing. Without a GPU it says so and times the CPU path on scaled-down shapes against
torch's CPU ops.

Results go to <out>/<name>.json, <name>.md and <name>.png, named by the GPU (h100, h200, ...; cpu
without one): the JSON has every number, the markdown the printed table, the PNG
(benchmarks/plot.py) the speedup and the fraction of the roofline per case; without matplotlib the
PNG is skipped with a message. `--out benchmarks/results` refreshes the files the repository keeps.
The method, the cases and their targets are in docs/performance.md.

The cases time gpukern's own kernels: the convolutions' first-call race against cuDNN
(csrc/conv/vendor.h), which would run cuDNN's kernel where it is faster, is off in this process
(GPUKERN_CONV_RACE=0 unless the environment sets it), so that no row reports cuDNN's time and
roofline under gpukern's name. benchmarks/layers.py (the layer census) times what a user's call
runs, the race included.
"""
import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch_ops  # noqa: E402
from cases import select  # noqa: E402
from plot import plot, try_plot  # noqa: E402
from timing import (measure_ceilings, time_cpu, time_cuda, time_cuda_graph,  # noqa: E402
                    time_cuda_rotated)

CPU_SCALE = 1 / 256
# Cases reading at most this many bytes are also timed with rotated inputs (timing.py); their
# copies fill at least ROTATE_SPAN bytes, several times the L2 of an H100/H200 (50-60 MB).
ROTATE_MAX_BYTES = 160 * 1024 * 1024
ROTATE_SPAN = 480 * 1024 * 1024


def norm_rel_err(out, ref):
    o, r = out.detach().double().cpu(), ref.detach().double().cpu()
    if o.shape != r.shape:
        return float("inf")
    if torch.isnan(o).any() and not torch.isnan(r).any():
        return float("inf")
    denom = r.norm().item()
    return (o - r).norm().item() / (denom if denom > 0 else 1.0)


def set_flags(flags):
    torch.backends.cudnn.benchmark = flags.get("cudnn_benchmark", False)


def run_case(case, device, ceilings):
    scale = 1 if device == "cuda" else CPU_SCALE
    built = case.make(device, scale)
    row = {"id": case.id, "desc": case.desc, "bytes": built.bytes, "flops": built.flops}
    try:
        out = built.ours()
    except RuntimeError as e:  # an op without a kernel for this shape/device is reported, not hidden
        row.update(status="ERROR", error=str(e).splitlines()[0][:120])
        return row
    err = norm_rel_err(out, built.reference())
    row["err"] = err
    if not err <= case.tol:
        row.update(status="WRONG", error=f"norm-relative error {err:.2e} > {case.tol:.0e}")
        return row
    del out

    def timer(fn):
        if device == "cpu":
            return time_cpu(fn)
        return time_cuda_graph(fn) if case.graph else time_cuda(fn)

    row["ours_ms"] = timer(built.ours)
    base = {}
    for name, (fn, flags) in built.baselines.items():
        if device == "cpu" and name.startswith("cudnn."):
            continue
        if device == "cpu" and name in ("cudnn", "cuBLAS"):
            name = "aten-cpu"  # what F.conv*/torch.mv run on the CPU
        set_flags(flags)
        try:
            base[name] = timer(fn)
        except RuntimeError as e:
            base[name] = None
            row.setdefault("baseline_errors", {})[name] = str(e).splitlines()[0][:120]
        set_flags({})
    row["baselines_ms"] = base
    valid = {k: v for k, v in base.items() if v is not None}
    best = min(valid, key=valid.get) if valid else None
    row["best"] = best
    row["best_ms"] = valid.get(best)
    row["speedup"] = row["best_ms"] / row["ours_ms"] if best else None
    if device == "cuda" and not case.graph and built.bytes <= ROTATE_MAX_BYTES and best:
        # Rotated inputs: ours and the best baseline, each over its own copies (same seeds).
        copies = [built] + [case.make(device, scale)
                            for _ in range(max(1, -(-ROTATE_SPAN // built.bytes) - 1))]
        # Replayed from a CUDA graph (timing.py says why); the Python-launched sequence too,
        # kept in the JSON as *_rot_stream_ms.
        ours_fns = [c.ours for c in copies]
        row["ours_rot_ms"], row["ours_rot_how"] = time_cuda_rotated(ours_fns)
        row["ours_rot_stream_ms"], _ = time_cuda_rotated(ours_fns, graph=False)
        fn_flags = [c.baselines[best] for c in copies]
        set_flags(fn_flags[0][1])
        best_fns = [f for f, _ in fn_flags]
        row["best_rot_ms"], row["best_rot_how"] = time_cuda_rotated(best_fns)
        row["best_rot_stream_ms"], _ = time_cuda_rotated(best_fns, graph=False)
        set_flags({})
        del ours_fns, best_fns
        row["speedup_rot"] = row["best_rot_ms"] / row["ours_rot_ms"]
        del copies, fn_flags
    if ceilings:
        bw, fma = ceilings
        floor_ms = max(built.bytes / bw, built.flops / fma) * 1e3
        row["floor_ms"] = floor_ms
        row["roof"] = floor_ms / row["ours_ms"]
        row["base_roof"] = floor_ms / row["best_ms"] if best else None
        if "ours_rot_ms" in row:
            row["roof_rot"] = floor_ms / row["ours_rot_ms"]
    kind, value = case.target
    if device == "cuda":
        # The target is judged on the flushed single call, or on the rotated timing where the
        # case has one (short cases: see timing.py); both are printed.
        rot = "ours_rot_ms" in row
        got = {"roof": row.get("roof_rot" if rot else "roof"),
               "speedup": row.get("speedup_rot" if rot else "speedup"),
               "us": row["ours_rot_ms" if rot else "ours_ms"] * 1e3}[kind]
        met = got is not None and (got <= value if kind == "us" else got >= value)
        row["target"] = (f">= {value:.0%} roof" if kind == "roof" else
                         f">= {value}x best" if kind == "speedup" else f"<= {value} us")
        row["status"] = "met" if met else "MISS"
    else:
        row["status"] = "cpu"
    return row


def result_name(info):
    """The results' file stem: the GPU's short name ("NVIDIA H100 80GB HBM3" -> "h100",
    "NVIDIA H200" -> "h200"), or "cpu" for a run without a GPU."""
    gpu = info.get("gpu")
    if not gpu:
        return "cpu"
    words = gpu.lower().replace("-", " ").split()
    words = [w for w in words if w not in ("nvidia", "geforce", "tesla", "quadro")] or ["gpu"]
    # "rtx 4090" -> rtx_4090; "h100 80gb hbm3" -> h100
    stem = "_".join(words[:2]) if words[0].isalpha() and len(words) > 1 else words[0]
    return "".join(c if c.isalnum() or c == "_" else "_" for c in stem)


def write_results(out_dir, name, info, rows):
    """Writes <out_dir>/<name>.json, .md and .png (the PNG only where matplotlib is installed);
    returns the paths written."""
    os.makedirs(out_dir, exist_ok=True)
    stem = os.path.join(out_dir, name)
    result = {"info": info, "rows": rows}
    with open(stem + ".json", "w") as f:
        json.dump(result, f, indent=1)
    with open(stem + ".md", "w") as f:
        f.write(f"{json.dumps(info)}\n\n```\n{HEADER}\n")
        f.write("\n".join(fmt_row(r) for r in rows) + "\n```\n")
    written = [stem + ".json", stem + ".md"]
    try_plot(plot, result, stem + ".png", written)
    return written


def fmt_row(r):
    def us(ms):
        return f"{ms * 1e3:10.1f}" if ms is not None else f"{'-':>10}"
    if "ours_ms" not in r:
        return f"{r['id']:<20} {r['status']:>6}  {r.get('error', '')}"
    roof = f"{r['roof']:6.0%}" if r.get("roof") is not None else f"{'-':>6}"
    broof = f"{r['base_roof']:6.0%}" if r.get("base_roof") is not None else f"{'-':>6}"
    sp = f"{r['speedup']:7.2f}x" if r.get("speedup") is not None else f"{'-':>8}"
    if r.get("ours_rot_ms") is not None:
        rot = (f"{r['ours_rot_ms'] * 1e3:8.1f} {r['best_rot_ms'] * 1e3:8.1f} "
               f"{r['speedup_rot']:6.2f}x {r['roof_rot']:6.0%}" if r.get("roof_rot") is not None
               else f"{r['ours_rot_ms'] * 1e3:8.1f} {r['best_rot_ms'] * 1e3:8.1f} "
                    f"{r['speedup_rot']:6.2f}x {'-':>6}")
    else:
        rot = f"{'-':>8} {'-':>8} {'-':>7} {'-':>6}"
    return (f"{r['id']:<20} {us(r['ours_ms'])} {us(r.get('best_ms'))} {str(r.get('best')):<10} "
            f"{sp} {roof} {broof} | {rot}  {r.get('target', ''):<16} {r['status']}"
            + (" (rot launched from Python: no graph capture)"
               if "stream" in (r.get("ours_rot_how"), r.get("best_rot_how")) else ""))


HEADER = (f"{'case':<20} {'ours_us':>10} {'best_us':>10} {'best':<10} {'speedup':>8} "
          f"{'roof':>6} {'b.roof':>6} | {'rot_us':>8} {'b.rot_us':>8} {'rot_sp':>7} "
          f"{'r.roof':>6}  {'target':<16} status")


def main(argv=None):
    # Before the first convolution (the extension reads it once). Here, not at import, so that
    # the scripts that import this module's helpers (layers.py, sweep.py) keep the race.
    os.environ.setdefault("GPUKERN_CONV_RACE", "0")
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--cases", nargs="*", help="case ids / substrings / families to run")
    p.add_argument("--out", default="results",
                   help="folder for <name>.json, <name>.md and <name>.png (default: results)")
    p.add_argument("--name", default=None,
                   help="file stem of the results (default: the GPU's short name, e.g. h100; cpu)")
    p.add_argument("--device", choices=["cuda", "cpu"], default=None)
    args = p.parse_args(argv)

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch_ops.has_cuda_kernels():
        print("gpukern was built without CUDA kernels; rebuild on a machine with nvcc")
        return 2
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.deterministic = False

    info = {"torch": torch.__version__, "device": device, "time": time.strftime("%F %T")}
    ceilings = None
    if device == "cuda":
        info["gpu"] = torch.cuda.get_device_name()
        info["cudnn"] = torch.backends.cudnn.version()
        bw, fma = measure_ceilings()
        ceilings = (bw, fma)
        info.update(copy_bw_TBps=bw / 1e12, fp32_TFLOPs=fma / 1e12)
        print(f"GPU {info['gpu']}, torch {torch.__version__}, cuDNN {info['cudnn']}: copy "
              f"{bw / 1e12:.2f} TB/s, fp32 FMA {fma / 1e12:.1f} TFLOP/s (measured now)")
    else:
        print(f"No CUDA GPU visible: timing gpukern's CPU kernels against torch's CPU ops on "
              f"shapes scaled by {CPU_SCALE:g} (no roofline; targets apply on the GPU only).")

    rows = []
    print(HEADER, flush=True)
    for case in select(args.cases):
        try:
            row = run_case(case, device, ceilings)
        except torch.OutOfMemoryError as e:
            row = {"id": case.id, "desc": case.desc, "status": "OOM", "error": str(e)[:100]}
        rows.append(row)
        print(fmt_row(row), flush=True)
        if device == "cuda":
            torch.cuda.empty_cache()

    written = write_results(args.out, args.name or result_name(info), info, rows)
    bad = [r["id"] for r in rows if r["status"] in ("WRONG", "ERROR")]
    if bad:
        print(f"wrong or failing outputs: {', '.join(bad)}")
    print(f"results written to {', '.join(written)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
