"""gpukern sum / mean / amax / amin parity with torch: float64 references for float sums and means,
exact equality for integer sums and for amax/amin, dims handling, keepdim, dtype=, strided inputs,
NaN, empty tensors, every error path, CUDA kernel paths, determinism and a > 2^31-element sum.

Float sums are compared with |out - ref| <= TOL[dtype] * sum(|x|) over each output's reduced
elements (mean: divided by the count). The bound of n-term float32 accumulation is about
n_eff * 2^-24 * sum|x| (n_eff = the longest chain of sequential adds, a few hundred here), and the
final rounding to float16/bfloat16 is within TOL * |ref| <= TOL * sum|x|, so the table's values
cover both without widening anything."""
import contextlib

import pytest
import torch

import torch_ops
from conftest import CPU_ONLY_DTYPES, DEVICE_PARAMS, FLOAT_DTYPES, HAS_CUDA, TOL, rand, skip_unsupported

ALL_FLOAT = FLOAT_DTYPES + CPU_ONLY_DTYPES
INT_DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
              torch.uint16, torch.uint32, torch.uint64]


def _rand(shape, **kw):
    """conftest.rand for any shape, 0-d included."""
    return rand(*shape, **kw) if len(shape) else rand(1, **kw).reshape(())


def _dims_arg(dims):
    return None if dims is None else ([dims] if isinstance(dims, int) else list(dims))


def _assert_sum_close(out, x_cast, dims, keepdim, out_dtype, mean=False):
    """x_cast: the input after torch's cast-first rule (any device)."""
    x64 = x_cast.detach().cpu().double()
    d = _dims_arg(dims)
    if d is None or len(d) == 0:
        d = list(range(x64.dim()))
    if mean:
        ref = x64.mean(d, keepdim=keepdim) if x64.dim() else x64.clone()
        absref = x64.abs().mean(d, keepdim=keepdim) if x64.dim() else x64.abs()
    else:
        ref = x64.sum(d, keepdim=keepdim) if x64.dim() else x64.clone()
        absref = x64.abs().sum(d, keepdim=keepdim) if x64.dim() else x64.abs()
    assert out.dtype == out_dtype, f"dtype {out.dtype} != {out_dtype}"
    assert out.shape == ref.shape, f"shape {tuple(out.shape)} != {tuple(ref.shape)}"
    assert out.device == x_cast.device
    o = out.detach().cpu().double()
    assert bool((torch.isnan(o) == torch.isnan(ref)).all()), "NaN pattern differs"
    fin = ~torch.isnan(ref)
    err = (o[fin] - ref[fin]).abs()
    bound = TOL[out_dtype] * absref[fin]
    assert bool((err <= bound).all()), f"max error {float((err - bound).max()):.3e} over bound"


def _call(op, x, dims, keepdim, dtype=None):
    if op == "sum":
        return torch_ops.sum(x, dims, keepdim, dtype=dtype)
    if op == "mean":
        return torch_ops.mean(x, dims, keepdim, dtype=dtype)
    return getattr(torch_ops, op)(x, () if dims is None else dims, keepdim)


def _exact(out, expected):
    assert out.dtype == expected.dtype and out.shape == expected.shape
    torch.testing.assert_close(out.cpu(), expected.cpu(), rtol=0, atol=0, equal_nan=True)


def _check_float(op, x, dims, keepdim, dtype):
    out = _call(op, x, dims, keepdim)
    if op in ("sum", "mean"):
        _assert_sum_close(out, x, dims, keepdim, dtype, mean=op == "mean")
    else:
        fn = getattr(torch, op)
        d = () if dims is None else dims
        _exact(out, fn(x.cpu(), d, keepdim))


def _dim_options(ndim):
    opts = [None]
    if ndim == 0:
        return opts + [0, -1, [0]]
    opts += list(range(ndim)) + [-1]
    if ndim >= 2:
        opts += [[0, -1], list(range(ndim))]
    if ndim >= 3:
        opts += [[0, 2], [2, 0, 1], [-2]]
    return opts


SHAPES = [(), (1,), (7,), (33,), (31, 33), (1, 5), (3, 5, 7), (2, 3, 1, 5)]
CASES = [(s, d) for s in SHAPES for d in _dim_options(len(s))]


@pytest.mark.parametrize("device", DEVICE_PARAMS)
@pytest.mark.parametrize("dtype", ALL_FLOAT)
@pytest.mark.parametrize("op", ["sum", "mean", "amax", "amin"])
@pytest.mark.parametrize("shape,dims", CASES, ids=[f"{s}-{d}" for s, d in CASES])
def test_float_grid(device, dtype, op, shape, dims):
    skip_unsupported(device, dtype)
    g = torch.Generator().manual_seed(len(shape) * 100 + len(str(dims)))
    x = _rand(shape, dtype=dtype, device=device, generator=g)
    for keepdim in (False, True):
        _check_float(op, x, dims, keepdim, dtype)


@pytest.mark.parametrize("device", DEVICE_PARAMS)
@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("shape,dims", [((), None), ((37,), None), ((5, 33), 1), ((5, 33), 0),
                                        ((3, 4, 5), [0, 2]), ((3, 4, 5), None)])
def test_int_sum_exact(device, dtype, shape, dims):
    g = torch.Generator().manual_seed(11)
    if dtype == torch.bool:
        x = torch.rand(tuple(shape), generator=g) > 0.5
    else:
        info = torch.iinfo(dtype)
        lo, hi = max(info.min, -1000), min(info.max, 1000)
        x = torch.randint(lo, hi + 1, shape, generator=g, dtype=torch.int64).to(dtype)
    xd = x.to(device)
    for keepdim in (False, True):
        out = torch_ops.sum(xd, dims, keepdim)
        expected = torch.sum(x, _dims_arg(dims), keepdim) if dims is not None else torch.sum(x)
        if dims is None and keepdim:
            expected = torch.sum(x, list(range(x.dim())), keepdim=True)
        _exact(out, expected)


def test_int64_exact_large_values():
    x = torch.tensor([2**62, 2**62 - 1, -(2**61), 12345], dtype=torch.int64)
    _exact(torch_ops.sum(x), torch.sum(x))


@pytest.mark.parametrize("device", DEVICE_PARAMS)
def test_unsigned_sum_large_values(device):
    """uint16/uint32/uint64 sum to int64 as torch.sum does (modulo 2^64 for uint64), with values
    whose sum leaves the input type's range."""
    cases = [(torch.uint16, [65535] * 5), (torch.uint32, [2**32 - 1, 2**31 + 5, 7] * 3),
             (torch.uint64, [2**64 - 1, 2**63 + 11, 3, 2**40])]
    for dtype, values in cases:
        x = torch.tensor(values, dtype=dtype)
        expected = torch.sum(x)
        assert expected.dtype == torch.int64
        _exact(torch_ops.sum(x.to(device)), expected)
        _exact(torch_ops.sum(x.to(device).reshape(-1, 1), [0]), torch.sum(x.reshape(-1, 1), 0))


def _strided(kind, dtype, device, g):
    if kind == "transposed":
        return rand(45, 37, dtype=dtype, device=device, generator=g).t()
    if kind == "sliced":
        return rand(74, 45, dtype=dtype, device=device, generator=g)[::2, 1:40]
    if kind == "offset":
        return rand(37 * 45 + 1, dtype=dtype, device=device, generator=g)[1:].view(37, 45)
    if kind == "permuted":
        return rand(5, 7, 9, dtype=dtype, device=device, generator=g).permute(2, 0, 1)
    if kind == "expanded":
        return rand(1, 45, dtype=dtype, device=device, generator=g).expand(37, 45)
    return rand(6, 8, 10, dtype=dtype, device=device, generator=g)[1:5, ::3, 2:9]


STRIDED = ["transposed", "sliced", "offset", "permuted", "expanded", "sliced3d"]


@pytest.mark.parametrize("device", DEVICE_PARAMS)
@pytest.mark.parametrize("dtype", ALL_FLOAT)
@pytest.mark.parametrize("kind", STRIDED)
@pytest.mark.parametrize("op", ["sum", "mean", "amax", "amin"])
def test_strided_inputs(device, dtype, kind, op):
    skip_unsupported(device, dtype)
    g = torch.Generator().manual_seed(5)
    x = _strided(kind, dtype, device, g)
    for dims in [None] + list(range(x.dim())) + [[0, -1]]:
        _check_float(op, x, dims, False, dtype)


@pytest.mark.parametrize("device", DEVICE_PARAMS)
def test_sum_dtype_argument(device):
    g = torch.Generator().manual_seed(9)
    xf = rand(13, 17, dtype=torch.float32, device=device, generator=g) * 4
    xh = rand(13, 17, dtype=torch.float16, device=device, generator=g)
    xb = rand(13, 17, dtype=torch.bfloat16, device=device, generator=g)
    xi = torch.randint(-50, 50, (13, 17), generator=g, dtype=torch.int32).to(device)
    for dims in (None, [1], [0]):
        # in-kernel widening
        _assert_sum_close(torch_ops.sum(xh, dims, dtype=torch.float32), xh.float(), dims, False,
                          torch.float32)
        _assert_sum_close(torch_ops.sum(xb, dims, dtype=torch.float32), xb.float(), dims, False,
                          torch.float32)
        _assert_sum_close(torch_ops.mean(xb, dims, dtype=torch.float32), xb.float(), dims, False,
                          torch.float32, mean=True)
        # cast first (narrowing, int -> float)
        _assert_sum_close(torch_ops.sum(xf, dims, dtype=torch.float16), xf.half(), dims, False,
                          torch.float16)
        _assert_sum_close(torch_ops.sum(xh, dims, dtype=torch.bfloat16), xh.bfloat16(), dims,
                          False, torch.bfloat16)
        _assert_sum_close(torch_ops.sum(xi, dims, dtype=torch.float32), xi.float(), dims, False,
                          torch.float32)
        _assert_sum_close(torch_ops.mean(xi, dims, dtype=torch.float32), xi.float(), dims, False,
                          torch.float32, mean=True)
        # float -> integer and integer narrowing: exact, like torch
        d = _dims_arg(dims) or list(range(2))
        for src, dt in ((xf, torch.int64), (xi, torch.int16), (xi, torch.int8), (xi, torch.bool),
                        (xi, torch.uint8)):
            _exact(torch_ops.sum(src, dims, dtype=dt), torch.sum(src.cpu(), d, dtype=dt))
    if device == "cpu":
        _assert_sum_close(torch_ops.sum(xf, dtype=torch.float64), xf.double(), None, False,
                          torch.float64)


@pytest.mark.parametrize("device", DEVICE_PARAMS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_nan_propagation(device, dtype):
    g = torch.Generator().manual_seed(2)
    x = rand(9, 70, dtype=dtype, device=device, generator=g)
    x[3, 5] = float("nan")
    x[7, 69] = float("nan")
    for op in ("amax", "amin", "sum", "mean"):
        for dims in (None, [0], [1]):
            _check_float(op, x, dims, False, dtype)
    xi = rand(9, 70, dtype=dtype, device=device, generator=g)
    xi[2, 3] = float("inf")
    xi[4, 4] = float("-inf")
    for op in ("amax", "amin"):
        _check_float(op, xi, [1], True, dtype)


@pytest.mark.parametrize("device", DEVICE_PARAMS)
def test_empty(device):
    x = torch.empty(3, 0, 4, device=device)
    _exact(torch_ops.sum(x), torch.zeros((), device=device))
    _exact(torch_ops.sum(x, [1]), torch.zeros(3, 4, device=device))
    _exact(torch_ops.sum(x, [1], True), torch.zeros(3, 1, 4, device=device))
    _exact(torch_ops.sum(x, [0]), torch.zeros(0, 4, device=device))
    assert bool(torch.isnan(torch_ops.mean(x)).item())
    assert bool(torch.isnan(torch_ops.mean(x, [1])).all())
    _exact(torch_ops.amax(x, [0]), torch.empty(0, 4, device=device))
    _exact(torch_ops.amin(x, [0, 2], True), torch.empty(1, 0, 1, device=device))
    xi = torch.empty(0, dtype=torch.int32, device=device)
    _exact(torch_ops.sum(xi), torch.zeros((), dtype=torch.int64))
    _exact(torch_ops.sum(torch.empty(0, dtype=torch.float16, device=device)),
           torch.zeros((), dtype=torch.float16))


@pytest.mark.parametrize("device", DEVICE_PARAMS)
def test_errors(device):
    x = torch.randn(3, 4, device=device)
    for op in ("sum", "mean", "amax", "amin"):
        with pytest.raises(RuntimeError, match=rf"gpukern::{op}: dim 1 appears multiple times"):
            _call(op, x, [1, -1], False)
    xi = torch.ones(3, 4, dtype=torch.int32, device=device)
    with pytest.raises(RuntimeError, match=r"gpukern::mean: expected a floating point input"):
        torch_ops.mean(xi)
    with pytest.raises(RuntimeError):  # what torch raises for the mean of an integer tensor
        torch.mean(xi)
    with pytest.raises(RuntimeError, match=r"gpukern::mean: dtype must be a floating point"):
        torch_ops.mean(x, dtype=torch.int64)
    with pytest.raises(RuntimeError, match=r"gpukern::amax: expected a floating point input"):
        torch_ops.amax(xi)
    with pytest.raises(RuntimeError, match=r"gpukern::amin: expected a floating point input"):
        torch_ops.amin(xi, [0])
    e = torch.empty(3, 0, device=device)
    with pytest.raises(IndexError, match=r"gpukern::amax: expected reduction dim 1 to have "
                                         r"non-zero size"):  # torch's IndexError
        torch_ops.amax(e, [1])
    with pytest.raises(RuntimeError, match=r"gpukern::amin: expected reduction dim to have "
                                           r"non-zero size"):
        torch_ops.amin(e)
    with pytest.raises(RuntimeError, match=r"gpukern::sum: complex"):
        torch_ops.sum(torch.ones(3, dtype=torch.complex64, device=device))


@pytest.mark.parametrize("device", DEVICE_PARAMS)
@pytest.mark.parametrize("op", ["sum", "mean", "amax", "amin"])
def test_dim_out_of_range_is_index_error(device, op):
    """A dim out of range raises IndexError, as torch does (issue 30 defect 3), naming the op."""
    x = torch.randn(3, 4, device=device)
    for t, d, lo, hi in ((x, 2, -2, 1), (x, -3, -2, 1), (torch.tensor(1.0, device=device), 1, -1, 0)):
        with pytest.raises(IndexError):
            getattr(torch, op)(t, d)
        msg = rf"gpukern::{op}: dimension {d} out of range \(expected to be in range of \[{lo}, {hi}\]\)"
        with pytest.raises(IndexError, match=msg):
            _call(op, t, [d], False)
        with pytest.raises(IndexError, match=msg):
            getattr(torch.ops.gpukern, op)(t, [d])
    with pytest.raises(IndexError, match=r"gpukern::_algorithm_reduce: dimension 2 out of range"):
        torch.ops.gpukern._algorithm_reduce(x, [2], op)


@pytest.mark.cuda
@pytest.mark.parametrize("device", DEVICE_PARAMS[1:])
def test_errors_cuda_float64(device):
    x = torch.randn(5, device=device)
    for op in ("sum", "mean", "amax", "amin"):
        with pytest.raises(RuntimeError, match=rf"gpukern::{op}: .*Double.*float64 runs on CPU"):
            _call(op, x.double(), None, False)
    with pytest.raises(RuntimeError, match=r"gpukern::sum: result dtype Double"):
        torch_ops.sum(x, dtype=torch.float64)


# Shapes that select each CUDA path (csrc/reduce/dispatch.cu): full single block / many blocks / one
# partial round per thread (1M), rows (lane groups of 16, 32 and 1; misaligned row heads and
# partial last rounds: 301, 1000; row_vec: whole-vector rows, ragged lanes, sliced, one vector),
# few long rows (blocks per row), columns (16-byte vectors of
# outputs, with a partial last tile; scalar; with and without split), few strided outputs,
# non-mergeable reduced dims with many and with few outputs.
CUDA_CASES = [
    ("full_small", (1000,), None),
    ("full_large", (2**24 + 3,), None),
    ("full_offset", "offset", None),
    ("full_strided", "sliced", None),
    ("full_1M", (1_000_000,), None),
    ("rows_256", (65536, 256), [-1]),
    ("rows_301", (5000, 301), [1]),
    ("rows_1000", (3000, 1000), [1]),
    ("rows_short", (100_003, 7), [1]),
    ("rows_vec_ragged", (9001, 200), [1]),
    ("rows_vec_sliced", "rows_sliced", [1]),
    ("rows_vec_one_vec", (4099, 8), [1]),
    ("rows_few_long", (4, 2_000_001), [1]),
    ("cols", (4096, 4096), [0]),
    ("cols_vec_tail", (1000, 4104), [0]),
    ("cols_many_out", (33, 70_001), [0]),
    ("cols_transposed", "transposed", [1]),
    ("cols_few_out", (1_000_003, 8), [0]),
    ("generic_many", (8, 5000, 9), [0, 2]),
    # seg_runs: NCHW over (0, 2, 3), runs of H*W (784: four groups per block; 3136: one), and a
    # full reduction of a sliced matrix (runs of 994 with 16-byte misaligned starts).
    ("runs_nchw_28", (8, 64, 28, 28), [0, 2, 3]),
    ("runs_nchw_56", (4, 48, 56, 56), [0, 2, 3]),
    ("runs_many_out", (2, 3000, 33, 40), [0, 2, 3]),
    ("generic_few", (300, 5, 700), [0, 2]),
    # Launch shapes of the eleventh session: seg_contig one block a row (24+ rows of at most 48 KB)
    # and two blocks a row (96+ rows of 48-512 KB, at most 40 MB); the col kernels unsplit with
    # few reduced rows (R <= 96), the lanes kernel sized for them (R <= 4: 32 tiles; R <= 16: 128;
    # 48+ rows from 32768 units: 256), and a tail tile.
    ("rows_one_block", (64, 16_389), [1]),
    ("rows_two_blocks", (97, 24_581), [1]),
    ("cols_few_4", (4, 65_544), [0]),
    ("cols_few_16", (16, 70_003), [0]),
    ("cols_few_64", (64, 270_008), [0]),
    ("cols_few_96", (96, 24_584), [0]),
]


def _cuda_input(spec, dtype, g):
    if spec == "offset":
        return rand(3_000_001, dtype=dtype, device="cuda", generator=g)[1:]
    if spec == "sliced":
        return rand(3000, 1000, dtype=dtype, device="cuda", generator=g)[:, 3:997]
    if spec == "transposed":
        return rand(5000, 3001, dtype=dtype, device="cuda", generator=g).t()
    if spec == "rows_sliced":  # row stride 1000, rows start 8 elements in: still 16-byte aligned
        return rand(3000, 1000, dtype=dtype, device="cuda", generator=g)[:, 8:264]
    return rand(*spec, dtype=dtype, device="cuda", generator=g)


@pytest.mark.cuda
@pytest.mark.skipif(not HAS_CUDA, reason="needs CUDA")
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("op", ["sum", "mean", "amax", "amin"])
@pytest.mark.parametrize("name,spec,dims", CUDA_CASES, ids=[c[0] for c in CUDA_CASES])
def test_cuda_paths(dtype, op, name, spec, dims):
    g = torch.Generator().manual_seed(4)
    x = _cuda_input(spec, dtype, g)
    _check_float(op, x, dims, False, dtype)
    if op == "sum":
        _assert_sum_close(torch_ops.sum(x, dims, dtype=torch.float32) if dtype != torch.float32
                          else torch_ops.sum(x, dims), x.float(), dims, False, torch.float32)


@pytest.mark.cuda
@pytest.mark.skipif(not HAS_CUDA, reason="needs CUDA")
@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("name,spec,dims", CUDA_CASES, ids=[c[0] for c in CUDA_CASES])
def test_cuda_int_paths(dtype, name, spec, dims):
    g = torch.Generator().manual_seed(6)
    x = _cuda_input(spec, torch.float32, g)
    x = (x > 0) if dtype == torch.bool else (x * 40).to(dtype)
    d = _dims_arg(dims) or list(range(x.dim()))
    _exact(torch_ops.sum(x, dims), torch.sum(x.cpu(), d))


@pytest.mark.cuda
@pytest.mark.skipif(not HAS_CUDA, reason="needs CUDA")
def test_cuda_deterministic():
    g = torch.Generator().manual_seed(8)
    for dtype in (torch.float32, torch.bfloat16):
        x = rand(100_000_007, dtype=dtype, device="cuda", generator=g)
        a = torch_ops.sum(x)
        for _ in range(3):
            assert torch.equal(torch_ops.sum(x), a)
        c = rand(8192, 2048, dtype=dtype, device="cuda", generator=g)
        b = torch_ops.sum(c, 0)
        assert torch.equal(torch_ops.sum(c, 0), b)
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            r = torch_ops.sum(x)
        s.synchronize()
        assert torch.equal(r, a)


# Vector counts (16 bytes each) around every boundary of the small kernel's configuration tables
# (csrc/reduce/kernels/reduce_small.cuh: one warp x 4 or 8 vectors, 128 x 8 and x 16, 256 x 8, 512 x 8 in one and
# two rounds), up to the largest run it takes (8192 vectors).
SMALL_VECS = [1, 127, 128, 129, 255, 256, 257, 1023, 1024, 1025, 2047, 2048, 2049, 4095, 4096,
              4097, 8191, 8192]


@pytest.mark.cuda
@pytest.mark.skipif(not HAS_CUDA, reason="needs CUDA")
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_cuda_small_configs(dtype):
    """The small kernel in every configuration: aligned runs of whole vectors, misaligned runs
    with a head and a tail element, float sum/mean/amax/amin against float64 / exact references,
    a NaN in the last element (the tail) or the first vector, and integer sums."""
    g = torch.Generator().manual_seed(21)
    v = 16 // torch.empty((), dtype=dtype).element_size()
    for nv in SMALL_VECS:
        base = rand(nv * v + 2, dtype=dtype, device="cuda", generator=g)
        for x in (base[: nv * v], base[1 : nv * v + 1], base[1:]):
            small = -(-x.numel() // v) <= SMALL_VECS[-1]  # base[1:] of 8192 vectors: 8193
            assert (torch_ops.algorithm("sum", x) == "small") == small
            for op in ("sum", "mean", "amax", "amin"):
                _check_float(op, x, None, False, dtype)
        for pos in (-1, v):
            xn = base.clone()
            xn[pos] = float("nan")
            for op in ("sum", "amax", "amin"):
                assert torch.isnan(_call(op, xn, None, False)), (nv, pos, op)
    for nv in (1, 255, 256, 257, 2048):
        xi = torch.randint(-1000, 1000, (nv * 4 - 1,), generator=g, dtype=torch.int32)
        assert torch_ops.algorithm("sum", xi.cuda()) == "small"
        _exact(torch_ops.sum(xi.cuda()), torch.sum(xi))


@pytest.mark.cuda
@pytest.mark.skipif(not HAS_CUDA, reason="needs CUDA")
def test_cuda_graph_chain():
    """small and seg launch with programmatic dependent launch: back-to-back in a captured graph,
    each call must still see the previous kernel's output (x is rewritten between sums)."""
    g = torch.Generator().manual_seed(14)
    for n in (1024, 20_000, 40_000, 1 << 20):  # small: 32 and 512 threads; flat: 10, 256 blocks
        x = rand(n, device="cuda", generator=g)
        outs = []
        torch_ops.sum(x)  # warm-up (occupancy queries) outside the capture
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for k in range(4):
                outs.append(torch_ops.sum(x))
                x.mul_(2.0)  # a torch kernel between our launches
                outs.append(torch_ops.sum(x))
        x0 = rand(n, device="cuda", generator=g)
        x.copy_(x0)
        graph.replay()
        torch.cuda.synchronize()
        base = torch_ops.sum(x0)  # eager; scaling by 2^k is exact, so the sums are too
        for k in range(4):
            for j in range(2):
                assert torch.equal(outs[2 * k + j], base * 2.0 ** (k + j))
        graph.reset()


@pytest.mark.cuda
@pytest.mark.skipif(not HAS_CUDA, reason="needs CUDA")
def test_cuda_flat_streams():
    """flat's polled finish: block 0 consumes and clears the other blocks' flagged partials, one
    set of slots per stream. Fresh inputs on two streams at once, call after call: a slot left
    flagged, or shared between the streams, would hand a stale or foreign partial to a sum."""
    g = torch.Generator().manual_seed(16)
    n = 600_001  # 147 blocks of the polled finish
    xs = [rand(n, device="cuda", generator=g) for _ in range(12)]
    assert torch_ops.algorithm("sum", xs[0]) == "flat"
    want = [torch_ops.sum(x) for x in xs]  # one stream, one call at a time
    for w, x in zip(want, xs):
        assert abs(w.item() - x.double().sum().item()) < 1e-3 * n ** 0.5
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    torch.cuda.synchronize()
    got = []
    for k in range(4):
        for i, s in enumerate(streams):
            with torch.cuda.stream(s):
                got.append(torch_ops.sum(xs[(2 * k + i) % len(xs)]))
                got.append(torch_ops.amax(xs[(2 * k + i + 1) % len(xs)]))
    torch.cuda.synchronize()
    for k in range(4):
        for i in range(2):
            j = 2 * k + i
            assert torch.equal(got[2 * j], want[j % len(xs)])
            assert torch.equal(got[2 * j + 1], xs[(j + 1) % len(xs)].max())


@pytest.mark.cuda
@pytest.mark.skipif(not HAS_CUDA, reason="needs CUDA")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cuda_graph_chain_rows(dtype):
    """row_vec also launches with programmatic dependent launch: row sums back-to-back with a
    torch kernel rewriting the input between them, captured in a graph."""
    g = torch.Generator().manual_seed(15)
    x = rand(4099, 256, dtype=dtype, device="cuda", generator=g)
    assert torch_ops.algorithm("sum", x, [1]) == "row_vec"
    torch_ops.sum(x, [1])  # warm-up (occupancy query) outside the capture
    outs = []
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(3):
            outs.append(torch_ops.sum(x, [1]))
            outs.append(torch_ops.amax(x, [1]))
            x.mul_(2.0)  # exact scaling: each sum / max doubles exactly
    x0 = rand(4099, 256, dtype=dtype, device="cuda", generator=g)
    x.copy_(x0)
    graph.replay()
    torch.cuda.synchronize()
    base_sum, base_max = torch_ops.sum(x0, [1]), torch_ops.amax(x0, [1])
    for k in range(3):
        assert torch.equal(outs[2 * k], base_sum * 2.0 ** k)
        assert torch.equal(outs[2 * k + 1], base_max * 2.0 ** k)
    graph.reset()


@pytest.mark.large_index
@pytest.mark.cuda
@pytest.mark.skipif(not HAS_CUDA, reason="needs CUDA")
def test_cuda_large_index():
    """> 2^31 elements (int8, 2.2 GB): the full sum and a sum over a 1.1e9-long dim."""
    n = 2**31 + 2**27 + 5
    gen = torch.Generator(device="cuda").manual_seed(1)
    x = torch.randint(-3, 4, (n,), generator=gen, device="cuda", dtype=torch.int8)
    expected = sum(int(torch.sum(c, dtype=torch.int64)) for c in x.split(2**28))
    assert int(torch_ops.sum(x)) == expected
    m = x[: n - 1].view(2, (n - 1) // 2)
    got = torch_ops.sum(m, [1])
    exp = torch.stack([torch.sum(r, dtype=torch.int64) for r in m])
    _exact(got, exp)
    del x, m
    torch.cuda.empty_cache()


# ---------------------------------------------------------------- algorithm query and forcing

REDUCE_ALGOS = ["small", "seg_contig", "seg", "row", "col_vec", "col", "row_vec", "seg_runs",
                "flat", "copy", "periodic", "aten"]


def _meta(*shape, dtype=torch.float32):
    return torch.empty(*shape, device="meta", dtype=dtype)


def test_reduce_algorithm_query():
    x = _meta(65536, 256)
    if not torch_ops.has_cuda_kernels():
        assert torch_ops.algorithm("sum", x, -1) == "cpu (built without CUDA kernels)"
        return
    q = torch_ops.algorithm
    assert q("sum", _meta(1024)) == "small"
    assert q("sum", _meta(2048, dtype=torch.bfloat16)) == "small"
    assert q("sum", _meta(1025)) == "small"
    assert q("sum", _meta(32768)) == "small"  # two rounds of the 512-thread block
    assert q("sum", _meta(32769)) == "flat"
    assert q("sum", _meta(4096, dtype=torch.bfloat16)) == "small"
    assert q("sum", _meta(65536, dtype=torch.bfloat16)) == "small"  # two rounds of 512 threads
    assert q("sum", _meta(65537, dtype=torch.bfloat16)) == "flat"
    assert q("amax", _meta(65537, dtype=torch.float16)) == "flat"
    assert q("sum", _meta(8193, dtype=torch.int32)) == "flat"  # integers: 256 threads at most
    assert q("sum", _meta(100_000_000)) == "flat"
    assert q("sum", _meta(2000)[::2]) == "seg"
    assert q("sum", x, -1) == "row_vec"
    assert q("amax", _meta(65536, 256, dtype=torch.bfloat16), -1) == "row_vec"
    assert q("sum", _meta(65536, 256, dtype=torch.int32), -1) == "row"  # row_vec: floats only
    assert q("sum", _meta(65536, 258), -1) == "row"  # R % 4: rows not whole vectors
    assert q("sum", _meta(65536, 1024), -1) == "row"  # > 4 vectors per lane of a warp
    assert q("sum", _meta(65536, 1024, dtype=torch.bfloat16), -1) == "row_vec"
    assert q("sum", _meta(2047, 256), -1) == "row"  # too few rows
    assert q("mean", _meta(4, 2_000_001), 1) == "seg_contig"
    assert q("sum", _meta(8192, 8192), 0) == "col_vec"
    assert q("sum", _meta(8192, 8192, dtype=torch.int32), 0) == "col"
    assert q("amin", _meta(1_000_003, 8), 0) == "col_vec"  # narrow rows: 2 lanes x 128 rows
    assert q("sum", _meta(1_000_003, 6), 0) == "col"  # 6 floats: not whole vectors
    assert q("sum", _meta(16, 16384), -1) == "seg_contig"  # few long rows: blocks split them
    assert q("sum", _meta(4096, 65536, dtype=torch.bfloat16), -1) == "seg_contig"  # > 32 KB rows
    assert q("sum", _meta(4096, 4096, dtype=torch.bfloat16), -1) == "aten"  # test_reduce_aten_regions
    assert q("sum", _meta(4096, 4096), -1) == "row"  # fp32: no aten rule
    assert q("sum", _meta(1024, 4), 0) == "seg"  # few outputs, small: blocks split each one
    assert q("sum", _meta(256, 96, dtype=torch.bfloat16), 0) == "seg"  # <= 128 outputs, 2^16 elements
    assert q("sum", _meta(512, 128), 0) == "seg"
    assert q("sum", _meta(512, 129), 0) != "seg"  # 129 outputs
    assert q("sum", _meta(1024, 96), 0) != "seg"  # 98304 elements
    assert q("sum", _meta(1 << 20, 256, dtype=torch.bfloat16), 0) == "col_vec"
    # Few rows of many 16-bit outputs: col_vec (its lanes kernel sized for few rows), past the
    # aten block (up to 24 rows, 16384-393216 outputs) and for amax / amin.
    assert q("sum", _meta(16, (1 << 20) - 8, dtype=torch.bfloat16), 0) == "col_vec"
    assert q("sum", _meta(16, 1 << 20, dtype=torch.bfloat16), 0) == "col_vec"
    assert q("sum", _meta(25, 1 << 18, dtype=torch.bfloat16), 0) == "col_vec"
    assert q("amax", _meta(16, 1 << 18, dtype=torch.bfloat16), 0) == "col_vec"
    assert q("amin", _meta(13, 1 << 17, dtype=torch.bfloat16), 0) == "col_vec"
    assert q("sum", _meta(16, 1 << 18), 0) == "col_vec"
    # 16-bit column sums of <= 96 rows and <= 24576 outputs: col (a thread per output).
    assert q("sum", _meta(64, 4096, dtype=torch.bfloat16), 0) == "col"
    assert q("mean", _meta(96, 24576, dtype=torch.float16), 0) == "col"
    assert q("sum", _meta(97, 4096, dtype=torch.bfloat16), 0) == "col_vec"  # 97 rows
    assert q("sum", _meta(64, 24584, dtype=torch.bfloat16), 0) == "col_vec"  # 24584 outputs
    assert q("sum", _meta(64, 4096), 0) == "col_vec"  # fp32 keeps col_vec
    assert q("sum", _meta(1500, 512), -1) == "row"  # one round of a warp per row
    assert q("sum", _meta(4096, 1), -1) == "copy"  # one element per output
    assert q("mean", _meta(1, 4096, dtype=torch.bfloat16), 0) == "copy"
    assert q("sum", _meta(3, 1, 5, dtype=torch.int32), 1) == "copy"
    assert q("sum", _meta(8, 5000, 9), [0, 2]) == "col"  # runs of 9: too short for seg_runs
    assert q("sum", _meta(32, 256, 56, 56), [0, 2, 3]) == "seg_runs"
    assert q("sum", _meta(32, 256, 56, 56, dtype=torch.bfloat16), [0, 2, 3]) == "seg_runs"
    assert q("sum", _meta(32, 256, 7, 7), [0, 2, 3]) == "col"
    assert q("sum", _meta(3000, 1000)[:, 3:997]) == "seg_runs"
    assert q("sum", _meta(3000, 1000)[:, 3:67]) == "seg"
    assert q("sum", _meta(0, 5), 1) == "empty"
    with torch_ops.force_algorithm("reduce", "col"):
        assert q("sum", x, -1) == "col"
    with torch_ops.force_algorithm("reduce", "small"):
        with pytest.raises(RuntimeError, match=r"gpukern::reduce: forced algorithm 'small' cannot"):
            q("sum", x, -1)
    with torch_ops.force_algorithm("reduce", "col_vec"):
        with pytest.raises(RuntimeError, match=r"forced algorithm 'col_vec' cannot"):
            q("sum", _meta(8192, 8193), 0)
    with torch_ops.force_algorithm("reduce", "nope"):
        with pytest.raises(RuntimeError, match=r"is not one of: small, seg_contig, seg, row, "
                                               r"col_vec, col, row_vec, seg_runs, flat, copy, "
                                               r"periodic, aten"):
            q("sum", x)
    with pytest.raises(RuntimeError, match=r"unknown kind 'prod'"):
        torch.ops.gpukern._algorithm_reduce(x, None, "prod")
    assert torch_ops.algorithms.forced_algorithm("reduce") is None


def test_reduce_aten_regions():
    """Layouts in the size sweep's blocks where torch's reduction was faster than every kernel
    here run torch's (aten); their neighbours outside the blocks do not."""
    if not torch_ops.has_cuda_kernels():
        pytest.skip("needs the CUDA kernels")
    q = torch_ops.algorithm
    bf = torch.bfloat16
    # 16-bit sums and means. Rows of 1536-4095 elements from 4096 rows; of 4096 elements,
    # 4096-6143 rows
    assert q("sum", _meta(4096, 1536, dtype=bf), -1) == "aten"
    assert q("mean", _meta(65536, 4095, dtype=torch.float16), -1) == "aten"
    assert q("sum", _meta(6143, 4096, dtype=bf), -1) == "aten"
    assert q("sum", _meta(6144, 4096, dtype=bf), -1) != "aten"
    assert q("sum", _meta(4095, 1536, dtype=bf), -1) != "aten"
    assert q("sum", _meta(4096, 1535, dtype=bf), -1) != "aten"
    assert q("sum", _meta(4096, 4097, dtype=bf), -1) != "aten"
    # rows of 65536-98304 elements, 256-1536 rows
    assert q("sum", _meta(256, 65536, dtype=bf), -1) == "aten"
    assert q("sum", _meta(1536, 98304, dtype=bf), -1) == "aten"
    assert q("sum", _meta(256, 98305, dtype=bf), -1) != "aten"
    assert q("sum", _meta(255, 65536, dtype=bf), -1) != "aten"
    assert q("sum", _meta(1537, 65536, dtype=bf), -1) != "aten"
    # columns: 2-4 rows of 256-393216 outputs; 5-6 rows of 65536-2^20; 5-16 rows of
    # 65536-393216; 17-24 rows of 262144-393216
    assert q("sum", _meta(4, 256, dtype=bf), 0) == "aten"
    assert q("sum", _meta(2, 393216, dtype=bf), 0) == "aten"
    assert q("sum", _meta(4, 1 << 20, dtype=bf), 0) == "aten"
    assert q("sum", _meta(4, (1 << 20) + 1, dtype=bf), 0) != "aten"
    assert q("sum", _meta(4, 255, dtype=bf), 0) != "aten"
    assert q("sum", _meta(5, 6144, dtype=bf), 0) != "aten"
    assert q("sum", _meta(16, 98304, dtype=bf), 0) == "aten"
    assert q("sum", _meta(16, 65535, dtype=bf), 0) != "aten"
    assert q("sum", _meta(7, 1 << 20, dtype=bf), 0) != "aten"
    assert q("sum", _meta(24, 98304, dtype=bf), 0) != "aten"
    assert q("mean", _meta(24, 393216, dtype=bf), 0) == "aten"
    assert q("sum", _meta(24, 393217, dtype=bf), 0) != "aten"
    assert q("sum", _meta(25, 393216, dtype=bf), 0) != "aten"
    assert q("sum", _meta(1, 65536, dtype=bf), 0) == "copy"  # one row: the copy stays first
    # 1024-1536 rows into 98304-262143 outputs; 8192+ rows and outputs from 2^27 elements
    assert q("sum", _meta(1536, 98304, dtype=bf), 0) == "aten"
    assert q("mean", _meta(1024, 196608, dtype=bf), 0) == "aten"
    assert q("sum", _meta(1024, 262144, dtype=bf), 0) != "aten"
    assert q("sum", _meta(1537, 98304, dtype=bf), 0) != "aten"
    assert q("sum", _meta(16384, 16384, dtype=bf), 0) == "aten"
    assert q("sum", _meta(8192, 8192, dtype=bf), 0) != "aten"
    assert q("amax", _meta(16384, 16384, dtype=bf), 0) != "aten"
    # [B, N, D] summed over N: D of 49-96 from 128 batches, 112-127 from 512
    assert q("sum", _meta(256, 1000, 64, dtype=bf), 1) == "aten"
    assert q("sum", _meta(127, 1000, 64, dtype=bf), 1) != "aten"
    assert q("sum", _meta(256, 1000, 100, dtype=bf), 1) != "aten"
    assert q("sum", _meta(1024, 1024, 127, dtype=bf), 1) == "aten"
    assert q("sum", _meta(16, 1024, 127, dtype=bf), 1) != "aten"
    assert q("sum", _meta(256, 1000, 64), 1) != "aten"  # fp32
    assert q("amax", _meta(256, 1000, 64, dtype=bf), 1) != "aten"
    # not amax / amin there, not fp32, not a strided layout
    assert q("amax", _meta(4096, 4096, dtype=bf), -1) != "aten"
    assert q("amin", _meta(16, 98304, dtype=bf), 0) != "aten"
    assert q("sum", _meta(16, 98304), 0) != "aten"
    assert q("sum", _meta(16, 196608, dtype=bf)[:, ::2], 0) != "aten"
    assert q("sum", _meta(4, 16, 4096, dtype=bf), [0, 2]) != "aten"  # two reduced dims
    # Every op and dtype: columns of 256-384 rows from 65536 outputs, fp32 256-383 rows from
    # 24576; 1025-4095 rows into 2-6 outputs
    for op in ("sum", "mean", "amax", "amin"):
        for dt in (bf, torch.float32):
            assert q(op, _meta(256, 65536, dtype=dt), 0) == "aten"
            assert q(op, _meta(384, 1 << 20, dtype=dt), 0) == "aten"
            assert q(op, _meta(385, 65536, dtype=dt), 0) != "aten"
            assert q(op, _meta(1536, 4, dtype=dt), 0) == "aten"
            assert q(op, _meta(4095, 6, dtype=dt), 0) == "aten"
            assert q(op, _meta(1024, 4, dtype=dt), 0) != "aten"
            assert q(op, _meta(1536, 7, dtype=dt), 0) != "aten"
        assert q(op, _meta(256, 24576), 0) == "aten"
        assert q(op, _meta(384, 24576), 0) != "aten"
        assert q(op, _meta(256, 16384), 0) != "aten"
        # fp32 rows of 16385-32768 elements, 257-767 rows; of 1536-4095, 4097-16383 rows
        assert q(op, _meta(384, 24576), -1) == "aten"
        assert q(op, _meta(256, 24576), -1) != "aten"
        assert q(op, _meta(768, 24576), -1) != "aten"
        assert q(op, _meta(6144, 1536), -1) == "aten"
        assert q(op, _meta(4096, 1536), -1) != "aten"
        assert q(op, _meta(16384, 1536), -1) != "aten"
        assert q(op, _meta(6144, 4096), -1) != "aten"
        assert q(op, _meta(384, 65536), -1) == "aten"
        assert q(op, _meta(384, 98304), -1) != "aten"
    # fp32 sums and means over rows of 4096-8191 elements past 2^26
    assert q("sum", _meta(65536, 4096), -1) == "aten"
    assert q("mean", _meta(32768, 6144), -1) == "aten"
    assert q("sum", _meta(24576, 4096), -1) == "aten"
    assert q("sum", _meta(16384, 4096), -1) != "aten"
    assert q("amax", _meta(65536, 4096), -1) != "aten"
    assert q("sum", _meta(1536, 4, dtype=torch.int32), 0) != "aten"  # integers: never automatic
    # forced: any layout, any op, any dtype (integer sums into int64 as torch.sum)
    with torch_ops.force_algorithm("reduce", "aten"):
        assert q("amax", _meta(3, 5, 7), 1) == "aten"
        assert q("sum", _meta(3, 5, dtype=torch.int32), 1) == "aten"


def test_reduce_rules_of_the_seventeenth_sweep():
    """The points where another kernel here beat the earlier choice get that kernel."""
    if not torch_ops.has_cuda_kernels():
        pytest.skip("needs the CUDA kernels")
    q = torch_ops.algorithm
    bf = torch.bfloat16
    assert q("sum", _meta(6, 6, dtype=bf), -1) == "seg"  # tiny 16-bit rows
    assert q("sum", _meta(96, 7, dtype=bf), -1) == "seg"
    assert q("sum", _meta(97, 6, dtype=bf), -1) != "seg"
    assert q("sum", _meta(6, 6), -1) != "seg"  # fp32 keeps its path
    assert q("sum", _meta(16, 16384, dtype=bf), -1) == "seg_runs"
    assert q("sum", _meta(256, 24576, dtype=bf), -1) == "seg_runs"
    assert q("sum", _meta(384, 24576, dtype=bf), -1) == "seg_contig"
    assert q("sum", _meta(4, 256), 0) == "seg"  # fp32 few rows, up to 256 outputs
    assert q("sum", _meta(96, 1536), 0) == "col"  # fp32 65-96 rows of <= 6144 outputs
    assert q("sum", _meta(64, 1536), 0) == "col_vec"
    assert q("sum", _meta(96, 8192), 0) == "col_vec"


# Each algorithm forced on edge layouts: full reductions (1 element, 1K, misaligned, strided),
# rows (short, 1 output, prime length), columns (vector-divisible or not), middle dims, tuples of
# dims (NCHW over (0, 2, 3)).
FORCED_CASES = [
    ("one", (1,), None), ("full_1K", (1024,), None), ("full_odd", (100_003,), None),
    ("full_offset", "offset", None), ("full_strided", "strided", None),
    ("rows_1x7", (1, 7), [1]), ("rows_prime", (37, 1009), [1]), ("rows_256", (4099, 256), [1]),
    ("cols_vec_ok", (1001, 64), [0]), ("cols_odd", (1001, 33), [0]),
    ("cols_narrow", (30001, 8), [0]), ("cols_narrow_odd", (30001, 6), [0]),
    ("cols_few_rows", (3, 20000), [0]), ("size1_dim", (300, 1), [1]), ("size1_rows", (1, 999), [0]),
    ("middle", (5, 301, 8), [1]), ("nchw_023", (3, 16, 7, 9), [0, 2, 3]),
]


def _forced_input(spec, dtype, g):
    if spec == "offset":
        return rand(30_001, dtype=dtype, device="cuda", generator=g)[1:]
    if spec == "strided":
        return rand(30_000, dtype=dtype, device="cuda", generator=g)[::3]
    return rand(*spec, dtype=dtype, device="cuda", generator=g)


@pytest.mark.cuda
@pytest.mark.skipif(not HAS_CUDA, reason="needs CUDA")
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("algo", REDUCE_ALGOS)
@pytest.mark.parametrize("name,spec,dims", FORCED_CASES, ids=[c[0] for c in FORCED_CASES])
def test_cuda_forced_paths(dtype, algo, name, spec, dims):
    g = torch.Generator().manual_seed(12)
    x = _forced_input(spec, dtype, g)
    xn = x.clone()
    xn.view(-1)[x.numel() // 2] = float("nan")
    xi = (x * 40).to(torch.int32)
    with torch_ops.force_algorithm("reduce", algo):
        try:
            name_run = torch_ops.algorithm("sum", x, dims)
        except RuntimeError as e:
            assert "cannot run this layout" in str(e)
            with pytest.raises(RuntimeError, match="cannot run this layout"):
                torch_ops.sum(x, dims)
            return
        assert name_run == algo
        for op in ("sum", "mean", "amax", "amin"):
            _check_float(op, x, dims, False, dtype)
        assert torch.equal(torch_ops.sum(x, dims), torch_ops.sum(x, dims))
        d = _dims_arg(dims) or list(range(x.dim()))
        assert torch.isnan(torch_ops.amax(xn, d)).any()
        for op in ("amax", "amin"):  # the NaN lands in exactly the right outputs (max.NaN/min.NaN)
            _check_float(op, xn, dims, False, dtype)
        assert torch.isnan(torch_ops.sum(xn, dims)).any()
        if algo not in ("col_vec", "row_vec", "periodic"):  # integer sums: these are float-only
            _exact(torch_ops.sum(xi, dims), torch.sum(xi.cpu(), d))


# periodic: a contiguous [N, M] array over dim 0 into 2 <= M <= 32 outputs, read as one flat
# stream of 16-byte vectors with each lane's elements in fixed rows. Periods that divide the
# vector (2, 4, 8), that share a factor with it (6, 12, 24) and that do not (3, 5, 7, 17, 31);
# N from one row to a multi-block grid with a partial last vector; forced and automatic.
PERIODIC_M = [2, 3, 4, 5, 6, 7, 8, 12, 17, 24, 31, 32]
PERIODIC_N = [1, 5, 1000, 300_001]


@pytest.mark.cuda
@pytest.mark.skipif(not HAS_CUDA, reason="needs CUDA")
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("N", PERIODIC_N)
@pytest.mark.parametrize("M", PERIODIC_M)
@pytest.mark.parametrize("forced", [True, False], ids=["forced", "auto"])
def test_periodic_cols(dtype, N, M, forced):
    g = torch.Generator().manual_seed(M * 1000 + N % 997)
    x = rand(N, M, dtype=dtype, device="cuda", generator=g)
    xn = x.clone()
    xn[N // 2, M // 3] = float("nan")
    ctx = (torch_ops.force_algorithm("reduce", "periodic") if forced and N > 1
           else contextlib.nullcontext())
    with ctx:
        if forced and N > 1:  # (one row: the size-1 dim is dropped, a copy)
            assert torch_ops.algorithm("sum", x, 0) == "periodic"
        for op in ("sum", "mean", "amax", "amin"):
            _check_float(op, x, [0], False, dtype)
            _check_float(op, xn, [0], False, dtype)  # the NaN in exactly its output
        _check_float("sum", x, [0], True, dtype)
        if dtype != torch.float32:  # 16-bit input summed into float32 outputs
            _assert_sum_close(torch_ops.sum(x, 0, dtype=torch.float32), x, [0], False,
                              torch.float32)
        assert torch.equal(torch_ops.sum(x, 0), torch_ops.sum(x, 0))  # fixed combine order


def test_periodic_cannot_run_misaligned_or_integer():
    if not torch_ops.has_cuda_kernels() or not HAS_CUDA:
        pytest.skip("needs the CUDA kernels")
    flat = torch.zeros(6 * 100 + 1, device="cuda")
    with torch_ops.force_algorithm("reduce", "periodic"):
        with pytest.raises(RuntimeError, match="cannot run this layout"):
            torch_ops.sum(flat[1:].view(100, 6), 0)  # 4 bytes past a 16-byte boundary
        with pytest.raises(RuntimeError, match="cannot run this layout"):
            torch_ops.sum(torch.ones(100, 6, device="cuda", dtype=torch.int32), 0)
        with pytest.raises(RuntimeError, match="cannot run this layout"):
            torch_ops.sum(torch.ones(100, 33, device="cuda"), 0)  # M > 32
    # The automatic choice takes another kernel there, with the right answer.
    x = flat[1:].view(100, 6).normal_()
    torch.testing.assert_close(torch_ops.sum(x, 0), x.sum(0))
