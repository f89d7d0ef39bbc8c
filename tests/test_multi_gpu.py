"""Two GPUs: every op with its inputs on one device while the current device is the other.

For each op (conv1d / conv2d with integer and 'same'/'valid' padding, conv1d_fused /
conv2d_fused with a bias, an activation and a residual, convolve in each mode, mv, and sum / mean /
amax / amin with and without dim), inputs on cuda:1 while cuda:0 is current, and the reverse:

- the result is on the inputs' device and equals, bit for bit, the result of the same call made
  with the inputs' device current (and torch's float64 result, loosely);
- the other device is left alone: the current device is unchanged by the call, nothing is
  allocated there (torch.cuda.memory_allocated and the peak across the call, after
  reset_peak_memory_stats, stay where they were) and a guard tensor filled with a random pattern
  there before the call still holds it after;
- the kernels ran on the inputs' device (the profiler's CUDA events of the calls, where CUPTI
  records any);
- every algorithm of every family, forced by name, on its first case of tests/algo_cases.py
  (drawn on the inputs' device): the TMA and implicit-GEMM conv2d paths encode device-specific
  descriptors, the FFT conv1d path takes cuFFT plans per device (its plan cache on the inputs'
  device is emptied first, so the plan is made during the cross-device call), mv and the
  reductions take ticket slots per (device, stream).

Inputs split across the two devices (x on one, the weight, bias, residual, filter or vector on
the other) raise RuntimeError naming the op and both devices (csrc/core/checks.h
check_same_device, "gpukern::<op>: expected <a> and <b> on the same device, got <dev a> and
<dev b>"), and leave both devices usable (no sticky CUDA error). Reductions have one tensor
argument: they have no split case.
"""
import re

import pytest
import torch

import torch_ops
from algo_cases import (FAMILY_ALGORITHMS, REF_TOL, assert_same_bits, conv_cases,
                        conv_output_shape, conv_ref, convolve_ref, forced, forced_choice,
                        missing_algorithms, mv_cases, reduce_call, reduce_cases, reduce_ref,
                        ref_tol)
from conftest import HAS_CUDA, assert_close_ref

TWO_GPUS = HAS_CUDA and torch.cuda.device_count() >= 2

pytestmark = [pytest.mark.cuda, pytest.mark.multi_gpu,
              pytest.mark.skipif(not TWO_GPUS, reason="needs two CUDA devices")]

# (the inputs' device, the current device during the call)
PAIRS = [pytest.param("cuda:1", "cuda:0", id="inputs1-current0"),
         pytest.param("cuda:0", "cuda:1", id="inputs0-current1")]


def _sync_all():
    for i in range(torch.cuda.device_count()):
        torch.cuda.synchronize(i)


def _call_elsewhere(fn, dev, cur, what):
    """fn() with `cur` current; checks that the result is on `dev`, that the call allocated
    nothing on `cur` (also transiently; freeing is allowed), wrote nothing into a guard tensor
    there and left `cur` current."""
    dev, cur = torch.device(dev), torch.device(cur)
    gen = torch.Generator(device=cur).manual_seed(99)
    guard = torch.randn(1 << 16, device=cur, generator=gen)
    pattern = guard.clone()
    _sync_all()
    before = torch.cuda.memory_allocated(cur)
    torch.cuda.reset_peak_memory_stats(cur)
    with torch.cuda.device(cur):
        out = fn()
        assert torch.cuda.current_device() == cur.index, f"{what}: the current device changed"
    _sync_all()
    assert out.device == dev, f"{what}: result on {out.device}, inputs on {dev}"
    # At most what was there: a call may free memory on `cur` (igemm's converted-filter cache
    # drops the entries of weights that died since its last call, wherever they lived: 9216
    # bytes here once, an earlier case's bf16 [32, 16, 3, 3] filter), never allocate any.
    assert torch.cuda.memory_allocated(cur) <= before, \
        f"{what}: {torch.cuda.memory_allocated(cur) - before} bytes left allocated on {cur}"
    assert torch.cuda.max_memory_allocated(cur) <= before, \
        f"{what}: {torch.cuda.max_memory_allocated(cur) - before} bytes allocated on {cur} " \
        f"during the call"
    assert torch.equal(guard, pattern), f"{what}: the guard tensor on {cur} was written"
    return out


def _call_on(fn, dev):
    """fn() with `dev` current: the reference for the cross-device call."""
    with torch.cuda.device(torch.device(dev)):
        out = fn()
    _sync_all()
    return out


def _op_calls(dev):
    """(label, fn, float64 reference) for every op and form, inputs drawn on `dev`; the
    automatic algorithm choice."""
    gen = torch.Generator(device=dev).manual_seed(0)
    return [c for dtype in (torch.float32, torch.bfloat16) for c in _op_calls_of(dev, dtype, gen)]


def _op_calls_of(dev, dtype, gen):
    """_op_calls for one dtype (a scope of its own: the lambdas read these tensors)."""
    def r(*s, dtype=dtype):
        return torch.randn(*s, device=dev, generator=gen).to(dtype)

    calls = []
    x1, w1d, w1, b1 = r(2, 8, 600, dtype=dtype), r(8, 1, 9, dtype=dtype), \
        r(16, 8, 3, dtype=dtype), r(16, dtype=dtype)
    x2 = r(2, 16, 21, 19, dtype=dtype).contiguous(memory_format=torch.channels_last)
    w2d, w2, b2 = r(16, 1, 3, 3, dtype=dtype), r(32, 16, 3, 3, dtype=dtype), \
        r(32, dtype=dtype)
    res1 = r(*conv_output_shape(1, x1, w1, padding=1), dtype=dtype)
    res2 = r(*conv_output_shape(2, x2, w2, padding="same"), dtype=dtype)
    sig, taps = r(3, 4000, dtype=dtype), r(257, dtype=dtype)
    a, v = r(300, 129, dtype=dtype), r(129, dtype=dtype)
    at, vt = r(129, 300, dtype=dtype).t(), r(129, dtype=dtype)
    red = r(33, 70, 65, dtype=dtype)
    calls += [
        (f"conv1d depthwise {dtype}", lambda: torch_ops.conv1d(x1, w1d, None, 1, 4, 1, 8),
         lambda: conv_ref(1, x1, w1d, padding=4, groups=8)),
        (f"conv1d dense {dtype}", lambda: torch_ops.conv1d(x1, w1, b1, 2, 1),
         lambda: conv_ref(1, x1, w1, b1, stride=2, padding=1)),
        (f"conv1d.padding same {dtype}", lambda: torch_ops.conv1d(x1, w1d, None, padding="same",
                                                             groups=8),
         lambda: conv_ref(1, x1, w1d, padding="same", groups=8)),
        (f"conv2d depthwise channels_last {dtype}",
         lambda: torch_ops.conv2d(x2, w2d, None, 1, 1, 1, 16),
         lambda: conv_ref(2, x2, w2d, padding=1, groups=16)),
        (f"conv2d dense {dtype}", lambda: torch_ops.conv2d(x2, w2, b2, 2, 1),
         lambda: conv_ref(2, x2, w2, b2, stride=2, padding=1)),
        (f"conv2d.padding valid {dtype}", lambda: torch_ops.conv2d(x2, w2, b2, padding="valid"),
         lambda: conv_ref(2, x2, w2, b2, padding="valid")),
        (f"conv1d_fused {dtype}",
         lambda: torch_ops.conv1d_fused(x1, w1, b1, padding=1, activation="gelu",
                                        residual=res1),
         lambda: conv_ref(1, x1, w1, b1, "gelu", res1, padding=1)),
        (f"conv2d_fused.padding {dtype}",
         lambda: torch_ops.conv2d_fused(x2, w2, b2, padding="same", activation="relu",
                                        residual=res2),
         lambda: conv_ref(2, x2, w2, b2, "relu", res2, padding="same")),
        (f"mv {dtype}", lambda: torch_ops.mv(a, v), lambda: torch.mv(a.double(), v.double())),
        (f"mv transposed {dtype}", lambda: torch_ops.mv(at, vt),
         lambda: torch.mv(at.double(), vt.double())),
    ]
    for mode in ("full", "same", "valid"):
        calls.append((f"convolve {mode} {dtype}",
                      lambda mode=mode: torch_ops.convolve(sig, taps, mode),
                      lambda mode=mode: convolve_ref(sig, taps, mode)))
    for op in ("sum", "mean", "amax", "amin"):
        for dim in (None, 1, (0, 2)):
            calls.append((f"{op} dim={dim} {dtype}",
                          lambda op=op, dim=dim: reduce_call(op, red, dim),
                          lambda op=op, dim=dim: reduce_ref(op, red, dim)))
    return calls


@pytest.mark.parametrize("dev,cur", PAIRS)
def test_every_op_on_the_other_device(dev, cur):
    calls = _op_calls(dev)
    assert len(calls) == 2 * (10 + 3 + 12)
    for label, fn, ref in calls:
        what = f"{label}, inputs on {dev}, {cur} current"
        out = _call_elsewhere(fn, dev, cur, what)
        expected = _call_on(fn, dev)
        assert_same_bits(out, expected, what)
        assert_close_ref(out, ref(), tol=REF_TOL[out.dtype])


def _forced_cases(family, dev):
    """(op, args, kwargs, reference) candidates for a family, inputs on dev: conv cases run the
    plain op and then the fused one (bias, silu, residual); mv and reduce cases as listed."""
    if family in ("conv1d", "conv2d"):
        nsp = 1 if family == "conv1d" else 2
        gen = torch.Generator(device=dev).manual_seed(1)
        out = []
        for x, w, kw in conv_cases(nsp, device=dev):
            b = torch.randn(w.shape[0], device=dev, generator=gen).to(x.dtype)
            r = torch.randn(conv_output_shape(nsp, x, w, **kw), device=dev,
                            generator=gen).to(x.dtype)
            out.append([(family, (x, w, None), kw,
                         lambda x=x, w=w, kw=kw: conv_ref(nsp, x, w, **kw)),
                        (family + "_fused", (x, w, b), dict(kw, activation="silu", residual=r),
                         lambda x=x, w=w, b=b, kw=kw, r=r:
                             conv_ref(nsp, x, w, b, "silu", r, **kw))])
        return out
    if family == "mv":
        return [[("mv", (a, v), {}, lambda a=a, v=v: torch.mv(a.double(), v.double()))]
                for a, v in mv_cases(device=dev)]
    return [[(op, (x, d), {}, lambda op=op, x=x, d=d: reduce_ref(op, x, d))
             for op in ("sum", "mean", "amax", "amin")]
            for x, d in reduce_cases(device=dev) if x.numel()]


def _call(op, args, kwargs):
    if op in ("sum", "mean", "amax", "amin"):
        return reduce_call(op, *args)
    return getattr(torch_ops, op)(*args, **kwargs)


@pytest.mark.parametrize("family", list(FAMILY_ALGORITHMS))
@pytest.mark.parametrize("dev,cur", PAIRS)
def test_every_algorithm_on_the_other_device(family, dev, cur):
    ran = {n: 0 for n in FAMILY_ALGORITHMS[family]}
    cases = _forced_cases(family, dev)
    for name in ran:
        for group in cases:
            op, args, kwargs, _ = group[0]
            if forced_choice(family, name, op, *args, **kwargs) != name:
                continue
            for op, args, kwargs, ref in group:
                what = (f"{op} forced {name}, {args[0].dtype} x {tuple(args[0].shape)}, inputs "
                        f"on {dev}, {cur} current")
                if name == "fft":
                    # the plan is made during the cross-device call
                    _sync_all()
                    torch.backends.cuda.cufft_plan_cache[torch.device(dev).index].clear()
                with forced(family, name):
                    out = _call_elsewhere(lambda: _call(op, args, kwargs), dev, cur, what)
                    expected = _call_on(lambda: _call(op, args, kwargs), dev)
                assert_same_bits(out, expected, what)
                assert_close_ref(out, ref(), tol=ref_tol(name, out.dtype))
            ran[name] += 1
            break  # one case per algorithm
    missing = missing_algorithms(ran, device=torch.device(dev))
    assert not missing, f"{family}: no case ran {missing} on {dev}"


def _kernel_devices(fn):
    """The device index of every CUDA event (kernels, memcpy, memset) the profiler records
    during fn(), with its name; None where it records none (no CUPTI)."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        _sync_all()
    events = [(e.device_index, e.name) for e in prof.events()
              if e.device_type == DeviceType.CUDA]
    return events or None


@pytest.mark.parametrize("dev,cur", PAIRS)
def test_kernels_run_on_the_inputs_device(dev, cur):
    """Every op's kernels (automatic choice, and each conv2d algorithm and conv1d's fft forced)
    run on the inputs' device, not the current one: a launch on the wrong device could still
    compute the right values through peer access."""
    calls = [fn for _, fn, _ in _op_calls(dev)]
    for family, names in (("conv2d", FAMILY_ALGORITHMS["conv2d"]), ("conv1d", ["fft"])):
        cases = _forced_cases(family, dev)
        for name in names:
            for group in cases:
                op, args, kwargs, _ = group[0]
                if forced_choice(family, name, op, *args, **kwargs) == name:
                    for op, args, kwargs, _ in group:
                        calls.append(lambda family=family, name=name, op=op, args=args,
                                     kwargs=kwargs: _forced_call(family, name, op, args, kwargs))
                    break

    def run_all():
        with torch.cuda.device(torch.device(cur)):
            for fn in calls:
                fn()

    torch.backends.cuda.cufft_plan_cache[torch.device(dev).index].clear()
    events = _kernel_devices(run_all)
    if events is None:
        pytest.skip("the profiler recorded no CUDA events here (CUPTI unavailable)")
    wrong = sorted({name for index, name in events if index != torch.device(dev).index})
    assert not wrong, f"kernels ran on device other than {dev} ({cur} current): {wrong[:10]}"


def _forced_call(family, name, op, args, kwargs):
    with forced(family, name):
        return _call(op, args, kwargs)


# ------------------------------------------------------------------ inputs split across devices


def _split_calls(d0, d1):
    """(op name, fn, the two devices' argument names) with the first tensor on d0 and one other
    tensor on d1."""
    def r(*s, device=d0):
        return torch.randn(*s, device=device)

    x1, w1, b1 = r(2, 4, 50), r(6, 2, 3), r(6)
    x2, w2, b2 = r(2, 4, 9, 10), r(6, 2, 3, 3), r(6)
    res1, res2 = r(2, 6, 50), r(2, 6, 9, 10)

    def on1(t):
        return t.to(d1)

    return [
        ("conv1d", "input", "weight", lambda: torch_ops.conv1d(x1, on1(w1), None, 1, 1, 1, 2)),
        ("conv1d", "input", "bias", lambda: torch_ops.conv1d(x1, w1, on1(b1), 1, 1, 1, 2)),
        ("conv1d", "input", "weight",
         lambda: torch_ops.conv1d(x1, on1(w1), None, padding="same", groups=2)),
        ("conv2d", "input", "weight", lambda: torch_ops.conv2d(x2, on1(w2), None, 1, 1, 1, 2)),
        ("conv2d", "input", "bias",
         lambda: torch_ops.conv2d(x2, w2, on1(b2), padding="same", groups=2)),
        ("conv1d_fused", "input", "weight",
         lambda: torch_ops.conv1d_fused(x1, on1(w1), b1, 1, 1, 1, 2, "relu", res1)),
        ("conv1d_fused", "input", "residual",
         lambda: torch_ops.conv1d_fused(x1, w1, b1, 1, 1, 1, 2, "relu", on1(res1))),
        ("conv2d_fused", "input", "bias",
         lambda: torch_ops.conv2d_fused(x2, w2, on1(b2), 1, 1, 1, 2, "silu", res2)),
        ("conv2d_fused", "input", "residual",
         lambda: torch_ops.conv2d_fused(x2, w2, b2, padding="same", groups=2,
                                        activation="silu", residual=on1(res2))),
        ("convolve", "x", "h", lambda: torch_ops.convolve(r(3, 100), on1(r(9)), "same")),
        ("mv", "self", "vec", lambda: torch_ops.mv(r(7, 11), on1(r(11)))),
        # the raw ops, aten's schema
        ("conv1d", "input", "weight",
         lambda: torch.ops.gpukern.conv1d(x1, on1(w1), None, [1], [1], [1], 2)),
        ("conv2d_fused", "input", "residual",
         lambda: torch.ops.gpukern.conv2d_fused(x2, w2, b2, [1], [1], [1], 2, "none",
                                                on1(res2))),
    ]


@pytest.mark.parametrize("d0,d1", [("cuda:0", "cuda:1"), ("cuda:1", "cuda:0"),
                                   ("cuda:0", "cpu")])
@pytest.mark.parametrize("cur", ["cuda:0", "cuda:1"])
def test_inputs_split_across_devices_raise(d0, d1, cur):
    calls = _split_calls(d0, d1)
    for op, a, b, fn in calls:
        msg = f"gpukern::{op}: expected {a} and {b} on the same device, got {d0} and {d1}"
        with torch.cuda.device(torch.device(cur)):
            with pytest.raises(RuntimeError, match=re.escape(msg)):
                fn()
        _sync_all()  # no error left behind on either device
    # both devices still compute
    for d in ("cuda:0", "cuda:1"):
        x = torch.arange(12.0, device=d)
        assert float(torch_ops.sum(x)) == 66.0
