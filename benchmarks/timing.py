"""Timers for benchmarks/run.py (the method: docs/performance.md).

- time_cuda(): CUDA events around each call, the L2 flushed before each one by reading a 256 MiB
  buffer (a read leaves the cache full of clean lines: a flush by writing would leave ~50 MB of
  dirty lines whose write-back then lands inside the next timed call, ~10 us on an H200, and
  bias every short case), warm-up first, median of the repetitions.
- time_cuda_graph(): for launch-bound cases, many calls captured in one CUDA graph; the replay
  time divided by the number of calls is the per-call kernel time without launch gaps. With
  flush=True the L2 is flushed (by reading, as above) before each replay, outside the timed span
  (benchmarks/layers.py: a layer's calls back to back, as a model runs them, from a cold cache).
- time_cuda_rotated(): back-to-back calls, each on its own copy of the inputs (the copies together
  several times the L2, so no call finds its inputs cached), CUDA events around the whole sequence;
  time / calls. The other method docs/performance.md allows ("inputs rotated"): the ~4.4 us an H200
  takes to time a single one-element kernel between two events after a flush (benchmarks/probe.py)
  is not added to every call. The sequence is replayed from a CUDA graph: launched from Python,
  calls whose kernels are shorter than the host's cost of a call (10-15 us per torch.sum or gpukern
  call on the H200 machine's CPU) timed the host instead (the same kernel read 9.9 us in one run and
  16.3 in the next). Used alongside time_cuda() for cases with small inputs; the Python-launched
  timing is kept in the results for comparison.
- time_cpu(): wall clock median, for machines without a GPU.
"""
import statistics
import time

import torch

_FLUSH = {}


def _flush_l2(device):
    buf = _FLUSH.get(device)
    if buf is None:
        buf = _FLUSH[device] = torch.ones(64 * 1024 * 1024, dtype=torch.float32, device=device)
        _FLUSH[(device, "sink")] = torch.empty((), dtype=torch.float32, device=device)
    torch.sum(buf, dim=0, out=_FLUSH[(device, "sink")])


def time_cuda(fn, reps=30, warmup=5, flush=True, max_seconds=3.0):
    """Median milliseconds of fn() over reps (fewer if one call is slow)."""
    device = torch.cuda.current_device()
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    t_end = time.perf_counter() + max_seconds
    for _ in range(reps):
        if flush:
            _flush_l2(device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
        if time.perf_counter() > t_end and len(times) >= 5:
            break
    return statistics.median(times)


def _graph_of(fns, rounds):
    """A CUDA graph of `rounds` passes over fns (captured on a side stream after a warm-up)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for fn in fns:
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(rounds):
            for fn in fns:
                fn()
    graph.replay()
    torch.cuda.synchronize()
    return graph


def _time_events(run, calls, reps, flush=False):
    device = torch.cuda.current_device()
    times = []
    for _ in range(reps):
        if flush:
            _flush_l2(device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / calls)
    return statistics.median(times)


def time_cuda_rotated(fns, rounds=8, reps=7, graph=True):
    """Median milliseconds per call of fns[0](), fns[1](), ... run back to back (each fn on its
    own inputs), `rounds` times over the list per repetition. graph=True replays the sequence
    from a CUDA graph (the GPU's time alone), else launches it from Python: a kernel shorter
    than the host's cost of one call (10-15 us for torch.sum or a gpukern op on the H200
    machine's CPU) then times the host, not the GPU. Returns (ms, "graph" or "stream"); a
    sequence that cannot be captured is launched from Python."""
    if graph:
        try:
            g = _graph_of(fns, rounds)
            return _time_events(g.replay, rounds * len(fns), reps), "graph"
        except RuntimeError:
            torch.cuda.synchronize()
    for fn in fns:
        fn()
    torch.cuda.synchronize()

    def launch():
        for _ in range(rounds):
            for fn in fns:
                fn()
    return _time_events(launch, rounds * len(fns), reps), "stream"


def time_cuda_graph(fn, calls=100, reps=10, flush=False):
    """Median milliseconds per call of fn() replayed from a CUDA graph of `calls` calls. Inputs
    stay in L2 between calls: use only for launch-bound (small) cases, or with flush=True (the L2
    flushed by reading before each replay) where the first call's cold start should count."""
    g = _graph_of([fn], calls)
    return _time_events(g.replay, calls, reps, flush)


def time_cpu(fn, reps=5, warmup=1, max_seconds=5.0):
    for _ in range(warmup):
        fn()
    times = []
    t_end = time.perf_counter() + max_seconds
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
        if time.perf_counter() > t_end:
            break
    return statistics.median(times)


def measure_ceilings(device="cuda"):
    """Copy bandwidth (bytes/s, read + write of a 1 GiB float32 clone) and the fp32 FMA rate
    (flop/s, 8192^3 matmul with TF32 off), measured now on this GPU."""
    x = torch.randn(256 * 1024 * 1024, device=device)
    ms = time_cuda(lambda: x.clone(), reps=20, flush=False)
    bw = 2 * x.numel() * 4 / (ms * 1e-3)
    del x
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    n = 8192
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    ms = time_cuda(lambda: a @ b, reps=10, flush=False)
    torch.backends.cuda.matmul.allow_tf32 = tf32
    flops = 2 * n ** 3 / (ms * 1e-3)
    return bw, flops


def time_census_us(fn):
    """Microseconds per call of fn() as the layer census times it (benchmarks/layers.py): 20 calls
    replayed from a CUDA graph, the L2 flushed before each replay, median of 30 replays."""
    return time_cuda_graph(fn, calls=20, reps=30, flush=True) * 1e3


def torch_best_us(fn):
    """time_census_us of a torch call with cudnn.benchmark off and on: the faster (cuDNN's
    heuristic choice or its algorithm search); the flag is left off."""
    best = None
    for bm in (False, True):
        torch.backends.cudnn.benchmark = bm
        fn()
        t = time_census_us(fn)
        best = t if best is None else min(best, t)
    torch.backends.cudnn.benchmark = False
    return best
