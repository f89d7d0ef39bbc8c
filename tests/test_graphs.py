"""CUDA-graph capture of every op with every algorithm of its family.

Each algorithm is forced by name (torch_ops.force_algorithm) on the cases of tests/algo_cases.py
(the compute-sanitizer selection's lists, plus convolve's), for every op of the family: conv1d and
conv2d (integer padding, and the .padding overloads with 'same'/'valid' and a bias), conv1d_fused /
conv2d_fused (bias, an activation, a residual of another layout), convolve in each mode, mv, and
sum / mean / amax / amin with and without dim. For each call that the forced algorithm runs (the
algorithm query says so, before capture), the test:

- captures the call in a torch.cuda.CUDAGraph on a new side stream (torch.cuda.graph(g, stream=s),
  capture_error_mode "global") with NO call of it before: the first call of that algorithm on that
  shape, and of every plan, workspace or ticket slot it takes, happens inside capture (the cuFFT
  plan cache is emptied before the first case of each algorithm). A call that synchronises, or
  allocates or launches outside the capturing stream in a way CUDA forbids during capture, raises
  there: that is the no-sync check;
- replays the graph twice on the default stream (not the capture stream), filling the output with
  NaN before each replay, and compares it bit for bit (and its strides) with an eager call of the
  same op on the same inputs after the capture. Every algorithm here is deterministic: the
  reductions and split mv add their partials in a fixed order (no float atomics), the conv
  kernels have no split accumulation, cuFFT runs the same plan; so nothing is compared with a
  tolerance but the float64 sanity check below;
- writes new values into every input in place (copy_), replays again and compares with an eager
  call on the new values (the graph reads the live inputs, not values baked in at capture, and the
  result did change);
- checks the eager results against torch in float64, loosely (they are not garbage).

Every algorithm of every family must have been captured at least once per op (igemm only where
the build has it and the device is sm_90; convolve never runs igemm, grouped_reg or cudnn).
Then graphs that mix ops and streams: a chain of ops in one graph, and ticket-using algorithms
replayed on several streams, interleaved with eager calls on the capture stream.

State shared by the whole process (the per-device occupancy and TMA-support caches, the ticket
slot table, the CUDA context, torch's allocator) may have been warmed by tests that ran before
this file; run `pytest tests/test_graphs.py` alone for captures that are cold in that sense too.
"""
import pytest
import torch

import torch_ops
from algo_cases import (CONV1D, CONV2D, MV, NATIVE_EPILOGUE, REDUCE, REF_TOL, assert_same_bits,
                        conv_cases, conv_output_shape, conv_ref, convolve_cases, convolve_ref,
                        epilogue_rounding_allowance, forced, forced_choice, missing_algorithms,
                        mv_cases, new_values, reduce_call, reduce_cases, reduce_ref, ref_tol,
                        same_bits)
from conftest import HAS_CUDA, assert_close_ref

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device"),
    # An empty-output call (zero batch) launches nothing, so its graph is empty: torch warns.
    pytest.mark.filterwarnings("ignore:The CUDA Graph is empty"),
]

ACT_CYCLE = ["relu", "silu", "gelu", "gelu_tanh", "hardswish", "sigmoid", "relu6", "hardsigmoid",
             "none"]
REDUCE_OPS = ["sum", "mean", "amax", "amin"]
MODES = ["full", "same", "valid"]


def _poison(t):
    if t.numel():
        t.fill_(float("nan") if t.is_floating_point() else -7)


def _capture(fn):
    """fn() captured in a new graph on a new side stream; returns (graph, fn's output)."""
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    with torch.cuda.graph(g, stream=s, capture_error_mode="global"):
        out = fn()
    return g, out


def _close(what, when, out, ref, extra=None, tol=None):
    """assert_close_ref with the call's label in the message (tol: REF_TOL's unless given)."""
    try:
        assert_close_ref(out, ref, tol=REF_TOL[out.dtype] if tol is None else tol, extra=extra)
    except AssertionError as e:
        raise AssertionError(f"{what}, {when}: {e}") from None


def _check_graph(what, fn, inputs, ref_fn, gen, cold, allow_fn=None, tol=None):
    """The capture / replay / eager / new-values sequence of the module docstring for fn(), a call
    reading the tensors `inputs`; ref_fn() is its float64 reference on the inputs' current
    values. cold: empty the cuFFT plan cache first (the first case of an algorithm). allow_fn():
    the per-element allowance of a documented extra rounding on the current values, or None.
    tol: the reference tolerance, REF_TOL's for the output's dtype unless given."""
    allow = allow_fn or (lambda: None)
    if cold:
        torch.cuda.synchronize()
        torch.backends.cuda.cufft_plan_cache.clear()
    try:
        g, out = _capture(fn)
    except Exception as e:
        raise AssertionError(f"{what}: capture failed: {type(e).__name__}: {e}") from e
    try:
        replays = []
        for _ in range(2):
            _poison(out)
            g.replay()  # on the current stream: the default stream, not the capture stream
            torch.cuda.synchronize()
            replays.append(out.clone())
        eager = fn()
        torch.cuda.synchronize()
        assert_same_bits(replays[0], eager, f"{what}: first replay")
        assert_same_bits(replays[1], eager, f"{what}: second replay")
        _close(what, "first inputs", eager, ref_fn(), allow(), tol)

        for i, t in enumerate(inputs):
            new_values(t, gen, shift=i == 0)
        _poison(out)
        g.replay()
        torch.cuda.synchronize()
        eager_new = fn()
        torch.cuda.synchronize()
        assert_same_bits(out, eager_new, f"{what}: replay after the inputs changed in place")
        if eager_new.numel() and all(t.numel() for t in inputs):
            assert not same_bits(eager_new, eager), \
                f"{what}: new input values gave the same result (the check proves nothing)"
        _close(what, "new input values", eager_new, ref_fn(), allow(), tol)
    finally:
        del g
        torch.cuda.synchronize()


class _Runs:
    """Counts, per algorithm, the calls captured with it; first() says whether a call is the
    algorithm's first here (captured cold)."""

    def __init__(self, names):
        self.ran = {n: 0 for n in names}

    def first(self, name):
        return self.ran[name] == 0

    def add(self, name):
        self.ran[name] += 1

    def assert_all(self, what, exclude=()):
        ran = {n: k for n, k in self.ran.items() if n not in exclude}
        missing = missing_algorithms(ran)
        assert not missing, f"{what}: no case here was captured with {missing} ({self.ran})"


# ------------------------------------------------------------------ conv1d / conv2d and fused


def _conv_calls(nsp, cases, gen):
    """(label, variant, op name, args, kwargs, tensors read, reference) per case and variant:
    "plain", the op with integer padding and no bias (the sanitize selection's call);
    "padding", the .padding overload ('same' where the stride is 1, else 'valid') with a bias;
    "fused", the fused op with integer padding, a bias, an activation (cycling through all) and a
    residual (contiguous on even cases; channels_last, or a transposed [N, L, O] view, on odd
    ones); "fused.padding", the fused .padding overload, on odd cases."""
    calls = []
    base = f"conv{nsp}d"
    for i, (x, w, kw) in enumerate(cases):
        dtype, dev = x.dtype, x.device
        b = torch.randn(w.shape[0], device=dev, generator=gen).to(dtype)
        stride = kw.get("stride", 1)
        unit_stride = all(s == 1 for s in (stride if isinstance(stride, (tuple, list))
                                           else [stride]))
        kw_str = dict(kw, padding="same" if unit_stride else "valid")
        act = ACT_CYCLE[i % len(ACT_CYCLE)]

        def residual(kw_out, odd):
            shape = conv_output_shape(nsp, x, w, **kw_out)
            if not odd:
                return torch.randn(shape, device=dev, generator=gen).to(dtype)
            if nsp == 2:
                return torch.randn(shape, device=dev, generator=gen).to(dtype).contiguous(
                    memory_format=torch.channels_last)
            # [N, O, L] viewed from [N, L, O]: strides (L*O, 1, O)
            return torch.randn(shape[0], shape[2], shape[1], device=dev,
                               generator=gen).to(dtype).transpose(1, 2)

        r = residual(kw, i % 2 == 1)
        calls += [
            (f"{base} case {i}", "plain", base, (x, w, None), dict(kw), [x, w],
             lambda x=x, w=w, kw=kw: conv_ref(nsp, x, w, **kw)),
            (f"{base}.padding case {i} ({kw_str['padding']}, bias)", "padding", base, (x, w, b),
             kw_str, [x, w, b], lambda x=x, w=w, b=b, kw=kw_str: conv_ref(nsp, x, w, b, **kw)),
            (f"{base}_fused case {i} ({act}, residual of strides {r.stride()})", "fused",
             base + "_fused", (x, w, b), dict(kw, activation=act, residual=r), [x, w, b, r],
             lambda x=x, w=w, b=b, kw=kw, act=act, r=r: conv_ref(nsp, x, w, b, act, r, **kw)),
        ]
        if i % 2 == 1:
            r2 = residual(kw_str, False)
            calls.append(
                (f"{base}_fused.padding case {i} ({kw_str['padding']}, {act}, residual)",
                 "fused.padding", base + "_fused", (x, w, b),
                 dict(kw_str, activation=act, residual=r2), [x, w, b, r2],
                 lambda x=x, w=w, b=b, kw=kw_str, act=act, r=r2:
                     conv_ref(nsp, x, w, b, act, r, **kw)))
    return calls


@pytest.mark.parametrize("nsp", [1, 2])
def test_every_conv_algorithm_in_graph(nsp):
    family = f"conv{nsp}d"
    names = CONV1D if nsp == 1 else CONV2D
    gen = torch.Generator(device="cuda").manual_seed(1)
    calls = _conv_calls(nsp, conv_cases(nsp), gen)
    runs = {v: _Runs(names) for v in ("plain", "padding", "fused", "fused.padding")}
    for name in names:
        for label, variant, op, args, kwargs, inputs, ref in calls:
            choice = forced_choice(family, name, op, *args, **kwargs)
            if choice is None:
                continue
            assert choice in (name, "empty"), f"{label}: forced {name}, query says {choice}"
            fn = getattr(torch_ops, op)
            allow_fn = None
            if variant.startswith("fused") and name not in NATIVE_EPILOGUE[nsp]:
                allow_fn = (lambda args=args, kwargs=kwargs:
                            epilogue_rounding_allowance(nsp, *args, **kwargs))
            with forced(family, name):
                _check_graph(f"{label} [{name}, {args[0].dtype}, x {tuple(args[0].shape)}]",
                             lambda fn=fn, args=args, kwargs=kwargs: fn(*args, **kwargs),
                             inputs, ref, gen,
                             cold=choice == name and runs[variant].first(name),
                             allow_fn=allow_fn, tol=ref_tol(name, args[0].dtype))
            if choice == name:
                runs[variant].add(name)
    # The plain calls are the sanitize selection's, and the fused ones the same convolutions
    # (activation and residual do not change the choice): both must reach every algorithm. The
    # .padding variants change the padding, and so the shapes some algorithms accept.
    runs["plain"].assert_all(f"{family} (plain)")
    runs["fused"].assert_all(f"{family}_fused")
    assert sum(runs["padding"].ran.values()) and sum(runs["fused.padding"].ran.values()), \
        f"{family}: no .padding call captured: {runs['padding'].ran} {runs['fused.padding'].ran}"


# ------------------------------------------------------------------ convolve


def test_convolve_every_mode_and_algorithm_in_graph():
    gen = torch.Generator(device="cuda").manual_seed(2)
    runs = _Runs(CONV1D)
    per_mode = {m: 0 for m in MODES}
    cases = convolve_cases()
    for name in CONV1D:
        for mode in MODES:
            for i, (x, h) in enumerate(cases):
                choice = forced_choice("conv1d", name, "convolve", x, h, mode)
                if choice is None:
                    continue
                assert choice in (name, "empty"), f"convolve: forced {name}, query says {choice}"
                label = (f"convolve case {i} mode {mode} [{name}, {x.dtype}, x {tuple(x.shape)}, "
                         f"h {tuple(h.shape)}]")
                with torch_ops.force_algorithm("conv1d", name):
                    _check_graph(label,
                                 lambda x=x, h=h, mode=mode: torch_ops.convolve(x, h, mode),
                                 [x, h], lambda x=x, h=h, mode=mode: convolve_ref(x, h, mode),
                                 gen, cold=choice == name and runs.first(name))
                if choice == name:
                    runs.add(name)
                    per_mode[mode] += 1
    assert all(per_mode.values()), f"convolve: a mode was never captured: {per_mode}"
    # convolve is a single-channel (depthwise) conv1d: every conv1d algorithm but the dense
    # tensor-core one and grouped_reg (several channels a group) can run it.
    runs.assert_all("convolve", exclude={"igemm", "grouped_reg", "cudnn"})


# ------------------------------------------------------------------ mv


def test_every_mv_algorithm_in_graph():
    gen = torch.Generator(device="cuda").manual_seed(3)
    runs = _Runs(MV)
    cases = mv_cases()
    for name in MV:
        for i, (a, v) in enumerate(cases):
            choice = forced_choice("mv", name, "mv", a, v)
            if choice is None:
                continue
            assert choice in (name, "empty"), f"mv: forced {name}, query says {choice}"
            label = f"mv case {i} [{name}, {a.dtype}, A {tuple(a.shape)} strides {a.stride()}]"
            with torch_ops.force_algorithm("mv", name):
                _check_graph(label, lambda a=a, v=v: torch_ops.mv(a, v), [a, v],
                             lambda a=a, v=v: torch.mv(a.double(), v.double()), gen,
                             cold=choice == name and runs.first(name))
            if choice == name:
                runs.add(name)
    runs.assert_all("mv")


# ------------------------------------------------------------------ reductions


def _reduce_calls(op, cases):
    """(label, x, dim, keepdim, dtype) per case: keepdim on every other case with a dim; sum of
    a bfloat16 input also with dtype=float32 (the widening path); amax/amin skip empty inputs
    (torch raises there too)."""
    calls = []
    for i, (x, dim) in enumerate(cases):
        if op in ("amax", "amin") and x.numel() == 0:
            continue
        keepdim = dim is not None and i % 2 == 1
        calls.append((f"{op} case {i} dim={dim} keepdim={keepdim}", x, dim, keepdim, None))
        if op == "sum" and x.dtype == torch.bfloat16:
            calls.append((f"sum case {i} dim={dim} dtype=float32", x, dim, False, torch.float32))
    return calls


@pytest.mark.parametrize("op", REDUCE_OPS)
def test_every_reduce_algorithm_in_graph(op):
    gen = torch.Generator(device="cuda").manual_seed(4)
    runs = {"all": _Runs(REDUCE), "dim": _Runs(REDUCE)}
    calls = _reduce_calls(op, reduce_cases())
    dims = [d for _, _, d, _, _ in calls]
    assert None in dims and any(d is not None for d in dims)
    for name in REDUCE:
        for label, x, dim, keepdim, dtype in calls:
            choice = forced_choice("reduce", name, op, x, dim)
            if choice is None:
                continue
            assert choice in (name, "empty"), f"{label}: forced {name}, query says {choice}"
            kind = "all" if dim is None else "dim"
            with torch_ops.force_algorithm("reduce", name):
                _check_graph(
                    f"{label} [{name}, {x.dtype}, x {tuple(x.shape)} strides {x.stride()}]",
                    lambda x=x, dim=dim, keepdim=keepdim, dtype=dtype:
                        reduce_call(op, x, dim, keepdim, dtype),
                    [x],
                    lambda x=x, dim=dim, keepdim=keepdim:
                        reduce_ref(op, x, dim, keepdim),
                    gen, cold=choice == name and runs[kind].first(name))
            if choice == name:
                runs[kind].add(name)
    merged = _Runs(REDUCE)
    for r in runs.values():
        for n, k in r.ran.items():
            merged.ran[n] += k
    merged.assert_all(op)
    assert sum(runs["all"].ran.values()) and sum(runs["dim"].ran.values()), \
        f"{op}: captured without dim {runs['all'].ran}, with dim {runs['dim'].ran}"


# ------------------------------------------------------------------ graphs of several ops, streams


def test_chain_of_ops_in_one_graph():
    """conv2d_fused -> mean over H, W -> mv -> convolve -> amax / sum, automatic algorithms, in one
    graph captured cold on a side stream; every intermediate equals the eager chain's bit for
    bit, on two replays on the default stream and after the input changes in place."""
    gen = torch.Generator(device="cuda").manual_seed(5)
    dev = "cuda"
    for dtype in (torch.float32, torch.bfloat16):
        def r(*s):
            return torch.randn(*s, device=dev, generator=gen).to(dtype)
        x = r(2, 32, 27, 29).contiguous(memory_format=torch.channels_last)
        w, b, res = r(32, 1, 3, 3), r(32), r(2, 32, 27, 29)
        m, h = r(300, 32), r(41)

        def chain():
            y = torch_ops.conv2d_fused(x, w, b, padding=1, groups=32, activation="silu",
                                       residual=res)
            s = torch_ops.mean(y, (2, 3))
            v = torch_ops.mv(m, s[1])
            c = torch_ops.convolve(v, h, "same")
            return y, s, v, c, torch_ops.amax(c), torch_ops.sum(y, 1)

        torch.cuda.synchronize()
        torch.backends.cuda.cufft_plan_cache.clear()
        g, outs = _capture(chain)
        for _ in range(2):
            for o in outs:
                _poison(o)
            g.replay()
        torch.cuda.synchronize()
        eager = chain()
        for k, (o, e) in enumerate(zip(outs, eager)):
            assert_same_bits(o, e, f"chain {dtype} output {k}")
        new_values(x, gen)
        g.replay()
        torch.cuda.synchronize()
        eager_new = chain()
        for k, (o, e) in enumerate(zip(outs, eager_new)):
            assert_same_bits(o, e, f"chain {dtype} output {k} after x changed")
        assert not same_bits(eager_new[0], eager[0])
        y_ref = conv_ref(2, x, w, b, "silu", res, padding=1, groups=32)
        assert_close_ref(eager_new[0], y_ref, tol=REF_TOL[dtype])
        del g


# Algorithms that finish in the last block to arrive (device counters, one slot per (device,
# stream)), forced on shapes every one of them can run.
_TICKET_CALLS = [
    ("reduce", "flat", lambda t: torch_ops.sum(t["big"])),
    ("reduce", "seg", lambda t: torch_ops.sum(t["cube"], 1)),
    ("reduce", "seg_runs", lambda t: torch_ops.mean(t["cube"], (0, 2))),
    ("mv", "rows", lambda t: torch_ops.mv(t["wide"], t["vw"])),
    ("mv", "cols", lambda t: torch_ops.mv(t["tall"], t["vt"])),
    ("mv", "cols_short", lambda t: torch_ops.mv(t["few"], t["vf"])),
]


def test_replay_on_other_streams_between_eager_calls():
    """One graph of the ticket-using algorithms (full and segmented reductions, split mv) captured
    on side stream s1, then, one after the other: two replays on the default stream back to back
    (no sync between), eager calls on s1 itself (the slot the graph's kernels use), a replay on a
    third stream, a second graph captured on s1 replayed alternately with the first. Every result
    equals the eager result: each launch leaves its counters at zero."""
    gen = torch.Generator(device="cuda").manual_seed(6)
    t = {"big": torch.randn(300001, device="cuda", generator=gen),
         "cube": torch.randn(40, 300, 33, device="cuda", generator=gen),
         "wide": torch.randn(3, 50000, device="cuda", generator=gen),
         "vw": torch.randn(50000, device="cuda", generator=gen),
         "tall": torch.randn(20000, 64, device="cuda", generator=gen).t().contiguous().t(),
         "vt": torch.randn(64, device="cuda", generator=gen),
         "few": torch.randn(50000, 48, device="cuda", generator=gen).t(),
         "vf": torch.randn(50000, device="cuda", generator=gen)}

    def run_all():
        outs = []
        for family, name, f in _TICKET_CALLS:
            with torch_ops.force_algorithm(family, name):
                outs.append(f(t))
        return outs

    def check(outs, expected, what):
        for (family, name, _), o, e in zip(_TICKET_CALLS, outs, expected):
            assert_same_bits(o, e, f"{what}: {family} {name}")

    s1, s3 = torch.cuda.Stream(), torch.cuda.Stream()
    default = torch.cuda.current_stream()
    g1 = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g1, stream=s1):
        outs1 = run_all()
    expected = run_all()
    torch.cuda.synchronize()

    g1.replay()
    g1.replay()
    torch.cuda.synchronize()
    check(outs1, expected, "two replays on the default stream")

    s1.wait_stream(default)
    with torch.cuda.stream(s1):
        on_s1 = run_all()
    default.wait_stream(s1)
    torch.cuda.synchronize()
    check(on_s1, expected, "eager on the capture stream")

    for o in outs1:
        _poison(o)
    s3.wait_stream(default)
    with torch.cuda.stream(s3):
        g1.replay()
    default.wait_stream(s3)
    torch.cuda.synchronize()
    check(outs1, expected, "replay on a third stream")

    g2 = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g2, stream=s1):
        outs2 = run_all()
    for _ in range(3):
        g1.replay()
        g2.replay()
    torch.cuda.synchronize()
    check(outs1, expected, "first graph, alternating with a second one")
    check(outs2, expected, "second graph, alternating with the first one")
    del g1, g2
