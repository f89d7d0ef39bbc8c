"""gpukern.mv parity with torch.mv (float64 references), strided/transposed/offset inputs, skinny
shapes that select each CUDA path, empty shapes and every error path."""
import contextlib

import pytest
import torch

import torch_ops
from conftest import (CPU_ONLY_DTYPES, DEVICE_PARAMS, FLOAT_DTYPES, assert_close_ref, rand,
                      skip_unsupported)

ALL_DTYPES = FLOAT_DTYPES + CPU_ONLY_DTYPES


def _ref(a, v):
    return torch.mv(a.detach().cpu().double(), v.detach().cpu().double())


def _check(a, v, dtype):
    out = torch_ops.mv(a, v)
    assert out.dtype == a.dtype and out.device == a.device and out.is_contiguous()
    assert_close_ref(out, _ref(a, v), dtype)


# Sizes around warp (32), 16-byte vector (4 / 8 elements) and the short-row threshold (16).
SHAPES = [(1, 1), (1, 7), (7, 1), (3, 5), (31, 33), (33, 31), (17, 16), (16, 17), (5, 128),
          (64, 257), (97, 1)]


@pytest.mark.parametrize("device", DEVICE_PARAMS)
@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_mv_contiguous(device, dtype, shape):
    skip_unsupported(device, dtype)
    g = torch.Generator().manual_seed(hash(shape) % 1000)
    a = rand(*shape, dtype=dtype, device=device, generator=g)
    v = rand(shape[1], dtype=dtype, device=device, generator=g)
    _check(a, v, dtype)


@pytest.mark.parametrize("device", DEVICE_PARAMS)
@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("layout", ["transposed", "sliced_rows", "sliced_cols", "offset",
                                    "offset_vec", "strided_vec", "both_strided", "expanded"])
def test_mv_strided(device, dtype, layout):
    skip_unsupported(device, dtype)
    g = torch.Generator().manual_seed(7)
    M, N = 37, 45
    if layout == "transposed":  # column-major, read in place
        a = rand(N, M, dtype=dtype, device=device, generator=g).t()
    elif layout == "sliced_rows":
        a = rand(2 * M, N, dtype=dtype, device=device, generator=g)[::2]
    elif layout == "sliced_cols":
        a = rand(M, N + 3, dtype=dtype, device=device, generator=g)[:, 1:N + 1]
    elif layout == "offset":  # storage offset of one element breaks 16-byte alignment
        a = rand(M * N + 1, dtype=dtype, device=device, generator=g)[1:].view(M, N)
    elif layout == "offset_vec":
        a = rand(M, N, dtype=dtype, device=device, generator=g)
    elif layout == "strided_vec":
        a = rand(M, N, dtype=dtype, device=device, generator=g)
    elif layout == "both_strided":
        a = rand(2 * M, 3 * N, dtype=dtype, device=device, generator=g)[::2, ::3]
    else:
        a = rand(1, N, dtype=dtype, device=device, generator=g).expand(M, N)
    if layout == "offset_vec":
        v = rand(N + 1, dtype=dtype, device=device, generator=g)[1:]
    elif layout == "strided_vec":
        v = rand(2 * N, dtype=dtype, device=device, generator=g)[::2]
    else:
        v = rand(N, dtype=dtype, device=device, generator=g)
    assert a.shape == (M, N)
    _check(a, v, dtype)


@pytest.mark.parametrize("device", DEVICE_PARAMS)
@pytest.mark.parametrize("shape", [(0, 5), (4, 0), (0, 0)])
def test_mv_empty(device, shape):
    a = torch.empty(shape, device=device)
    v = torch.empty(shape[1], device=device)
    out = torch_ops.mv(a, v)
    assert out.shape == (shape[0],)
    assert bool((out == 0).all())


def test_mv_errors():
    a = torch.randn(3, 4)
    v = torch.randn(4)
    with pytest.raises(RuntimeError, match=r"gpukern::mv: expected self to be a 2-D"):
        torch_ops.mv(torch.randn(3, 4, 1), v)
    with pytest.raises(RuntimeError, match=r"gpukern::mv: expected vec to be 1-D"):
        torch_ops.mv(a, v.view(4, 1))
    with pytest.raises(RuntimeError, match=r"gpukern::mv: size mismatch"):
        torch_ops.mv(a, torch.randn(5))
    with pytest.raises(RuntimeError, match=r"gpukern::mv: expected self and vec of the same dtype"):
        torch_ops.mv(a, v.double())
    with pytest.raises(RuntimeError, match=r"gpukern::mv: self has dtype"):
        torch_ops.mv(a.int(), v.int())


@pytest.mark.cuda
@pytest.mark.parametrize("device", DEVICE_PARAMS[1:])
def test_mv_error_cuda(device):
    a = torch.randn(3, 4, device=device)
    v = torch.randn(4, device=device)
    with pytest.raises(RuntimeError, match=r"gpukern::mv: expected self and vec on the same device"):
        torch_ops.mv(a, v.cpu())
    with pytest.raises(RuntimeError, match=r"gpukern::mv: self has dtype Double"):
        torch_ops.mv(a.double(), v.double())


# Shapes chosen to select each CUDA path (see csrc/mv/dispatch.cu): warp per row (M >= 32 * SMs), block per
# row with N split (few rows), short rows (N <= 16), column-major with and without split, general
# strides, skinny 1xN / Nx1 / 3x1000000 / 1000x7777.
CUDA_CASES = [
    ("rows_warp", (8192, 1000), "contig"),
    ("rows_split", (3, 1_000_000), "contig"),
    ("rows_1xN", (1, 1_000_003), "contig"),
    ("rows_1000x7777", (1000, 7777), "contig"),
    ("rows_offset", (1000, 7777), "offset"),
    # 1 to 2 waves of rows: 2..8 rows a block with N split to fill one wave (700: 8 rows, 6
    # splits); misaligned rows: the aligned span with bounds-checked edge vectors, x element by
    # element.
    ("rows_700_fill", (700, 7777), "contig"),
    ("rows_600_fill_offset", (600, 4099), "offset"),
    ("rows_warp_odd", (5000, 1001), "contig"),  # warp per row, misaligned rows
    ("rows_split_offset", (3, 1_000_000), "offset"),  # N split, misaligned rows
    ("short_rows", (100_003, 7), "contig"),
    ("Nx1", (1_000_003, 1), "contig"),
    ("cols_T_8192", (8192, 4096), "transposed"),
    ("cols_T_split", (1000, 100_000), "transposed"),
    ("cols_T_odd", (1001, 7777), "transposed"),
    ("cols_T_few_rows", (3, 1_000_000), "transposed"),
    # 21 splits: not a multiple of the finish's split batch (8 / 4 / 32 per round).
    ("cols_T_21_splits", (4096, 1300), "transposed"),
    ("cols_T_21_splits_scalar", (1001, 1300), "transposed"),
    ("general", (999, 4001), "both_strided"),
    # 16-bit: rows_mma (M >= 2048, aligned rows of whole vectors), 15 rows in the last tile.
    ("mma_tail", (2063, 1032), "contig"),
    ("mma_many_tiles", (16_400, 264), "contig"),
    # mvT of the benchmark: 64 row blocks x 8 splits (f32), 32 x 16 (16-bit).
    ("cols_T_8192sq", (8192, 8192), "transposed"),
    # rows_short: short aligned rows, lane groups of 32 (256 f32 / 512 16-bit columns: one or
    # two vectors a lane), 2 (16 columns), and a tile of rows past M.
    ("rows_short_256", (4100, 256), "contig"),
    ("rows_short_16", (3001, 16), "contig"),
    ("rows_short_many", (100_001, 64), "contig"),
    # cols_short: column-major, few rows (N split over the GPU, last-block finish), short rows
    # with many rows (a block per 256 lanes of rows), and M % V != 0 read element by element.
    ("cols_short_few", (64, 300_001), "transposed"),
    ("cols_short_16", (16, 1_000_000), "transposed"),
    ("cols_short_odd", (17, 100_000), "transposed"),
    ("cols_short_tall", (1_000_003, 16), "transposed"),
    ("cols_short_256", (256, 4096), "transposed"),
    # fp32 rows_short on rows over 1 KB (M >= 4096: several k steps a lane group); column-major
    # 256 x 256 (rows); cols_short with 128-byte tiles (M = 256, N split), 4 rows (8-byte bf16
    # vectors / one 16-byte fp32 vector a lane) and tall N = 16 in narrower tiles.
    ("rows_short_long", (4099, 4100), "contig"),
    ("cols_T_256sq", (256, 256), "transposed"),
    ("cols_short_256_split", (256, 70_000), "transposed"),
    ("cols_short_4", (4, 1_000_000), "transposed"),
    ("cols_short_tall_5000", (5000, 16), "transposed"),
    # Launch shapes of the eleventh session: the rows kernel with few rows split into 64 KB+
    # pieces (unsplit at 16 KB rows), a warp a row from 1024 rows of up to 16 KB; cols_short for
    # column-major with more than 256 rows (80+ columns, at most 2^21 elements).
    ("rows_few_split", (5, 393_216), "contig"),
    ("rows_few_unsplit", (96, 4100), "contig"),
    ("rows_warp_per_row", (1030, 3000), "contig"),
    ("cols_short_many_rows", (1032, 1000), "transposed"),
]


@pytest.mark.cuda
@pytest.mark.parametrize("device", DEVICE_PARAMS[1:])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("name,shape,layout", CUDA_CASES, ids=[c[0] for c in CUDA_CASES])
def test_mv_cuda_paths(device, dtype, name, shape, layout):
    g = torch.Generator().manual_seed(3)
    M, N = shape
    if layout == "contig":
        a = rand(M, N, dtype=dtype, device=device, generator=g)
    elif layout == "offset":
        a = rand(M * N + 3, dtype=dtype, device=device, generator=g)[3:].view(M, N)
    elif layout == "transposed":
        a = rand(N, M, dtype=dtype, device=device, generator=g).t()
    else:
        a = rand(M, 2 * N, dtype=dtype, device=device, generator=g)[:, ::2]
    v = rand(N, dtype=dtype, device=device, generator=g)
    _check(a, v, dtype)
    # Deterministic: split paths finish in a fixed order.
    assert torch.equal(torch_ops.mv(a, v), torch_ops.mv(a, v))


# ---------------------------------------------------------------- algorithm query and forcing

MV_ALGOS = ["rows_vec", "rows", "cols_vec", "cols", "rows_mma", "rows_short", "cols_short",
            "cols_periodic", "cublas"]


def _meta(*shape):
    return torch.empty(*shape, device="meta")


def test_mv_algorithm_query():
    a, v = _meta(8192, 8192), _meta(8192)
    if not torch_ops.has_cuda_kernels():
        assert torch_ops.algorithm("mv", a, v) == "cpu (built without CUDA kernels)"
        return
    assert torch_ops.algorithm("mv", a, v) == "rows_short"  # fp32 rows up to 32 KB, M >= 4096
    big = _meta(16384, 16384)  # past 2^26 elements: fp32 column-major leaves cublas to cols_vec
    assert torch_ops.algorithm("mv", big.t(), _meta(16384)) == "cols_vec"
    # Short aligned rows (at most 1 KB): rows_short, except 16-bit rows of 512 bytes to 1 KB with
    # 4096 <= M, M * N <= 2^25 (rows_mma). fp32 rows up to 32 KB with M >= 4096 (up to 6 KB with
    # M >= 1024): rows_short too.
    assert torch_ops.algorithm("mv", _meta(4096, 256), _meta(256)) == "rows_short"
    assert torch_ops.algorithm("mv", _meta(1 << 20, 16), _meta(16)) == "rows_short"
    assert torch_ops.algorithm("mv", _meta(4096, 257)[:, :256], _meta(256)) == "rows_vec"  # s0 % 4
    assert torch_ops.algorithm("mv", _meta(4096, 512), _meta(512)) == "rows_short"  # 2 KB rows
    assert torch_ops.algorithm("mv", _meta(4096, 384), _meta(384)) == "rows_short"
    assert torch_ops.algorithm("mv", _meta(4096, 8192), _meta(8192)) == "rows_short"  # 32 KB
    assert torch_ops.algorithm("mv", _meta(4096, 8196), _meta(8196)) == "rows_vec"  # over 32 KB
    assert torch_ops.algorithm("mv", _meta(1024, 512), _meta(512)) == "rows_short"  # M >= 1024
    assert torch_ops.algorithm("mv", _meta(1023, 512), _meta(512)) == "rows_vec"  # M < 1024
    # 1024 <= M < 4096: rows_short only up to 6 KB rows (1024 x 4096 fp32 lost on it), and 6 KB
    # rows only from 1536 rows (1024 x 1536 ran faster on rows_vec).
    assert torch_ops.algorithm("mv", _meta(1536, 1536), _meta(1536)) == "rows_short"
    assert torch_ops.algorithm("mv", _meta(1024, 1536), _meta(1536)) == "rows_vec"
    assert torch_ops.algorithm("mv", _meta(1024, 1540), _meta(1540)) == "rows_vec"
    assert torch_ops.algorithm("mv", _meta(4095, 4096), _meta(4096)) == "rows_vec"
    assert torch_ops.algorithm("mv", _meta(256, 4096), _meta(4096)) == "rows_vec"
    assert torch_ops.algorithm("mv", _meta(4096, 256), _meta(512)[::2]) == "rows_vec"  # x strided
    b = torch.empty(65536, 512, device="meta", dtype=torch.bfloat16)
    bv = torch.empty(512, device="meta", dtype=torch.bfloat16)
    assert torch_ops.algorithm("mv", b[:, :256], bv[:256]) == "rows_mma"
    assert torch_ops.algorithm("mv", b, bv) == "rows_mma"  # M * N == 2^25
    assert torch_ops.algorithm("mv", b[:4096, :256], bv[:256]) == "rows_mma"
    assert torch_ops.algorithm("mv", b[:4095, :256], bv[:256]) == "rows_short"  # M < 4096
    assert torch_ops.algorithm("mv", b[:, :255], bv[:255]) == "rows_short"  # N % 8 != 0
    bl = torch.empty(98000, 512, device="meta", dtype=torch.bfloat16)
    assert torch_ops.algorithm("mv", bl, bv) == "rows_short"  # M * N > 2^25
    # (from 98304 rows of 96-1536 columns, 16-bit row-major runs cublas: test_mv_cublas_regions)
    assert torch_ops.algorithm("mv", b[:4096, :], bv) == "rows_mma"  # 1 KB rows
    assert torch_ops.algorithm("mv", b[:, :128], bv[:128]) == "rows_short"  # under 512 bytes
    # Column-major 128 < M <= 256 with 16 < N <= 256: rows.
    assert torch_ops.algorithm("mv", _meta(256, 256).t(), _meta(256)) == "rows"
    assert torch_ops.algorithm("mv", b[:256, :256].t(), bv[:256]) == "rows"
    assert torch_ops.algorithm("mv", _meta(256, 129).t(), _meta(256)) == "rows"
    assert torch_ops.algorithm("mv", _meta(256, 128).t(), _meta(256)) == "cols_short"  # M 128
    assert torch_ops.algorithm("mv", _meta(257, 256).t(), _meta(257)) == "cols_short"  # N 257
    assert torch_ops.algorithm("mv", _meta(16, 256).t(), _meta(16)) == "cols_short"  # N 16
    # Column-major 16-bit with M * N <= 2^15, M <= 256 and N >= 64: rows (fp32 keeps cols_short;
    # tall and narrow ones, e.g. 4096 x 4, do not take rows).
    sb = torch.empty(4096, 64, device="meta", dtype=torch.bfloat16)
    sv = torch.empty(4096, device="meta", dtype=torch.bfloat16)
    assert torch_ops.algorithm("mv", sb[:1024, :6].t(), sv[:1024]) == "rows"
    assert torch_ops.algorithm("mv", sb[:512, :64].t(), sv[:512]) == "rows"  # 2^15
    # ... and up to 2^17 elements from 16 rows (N <= 6144).
    assert torch_ops.algorithm("mv", sb[:513, :64].t(), sv[:513]) == "rows"
    assert torch_ops.algorithm("mv", sb[:2048, :64].t(), sv[:2048]) == "rows"  # 2^17
    assert torch_ops.algorithm("mv", sb[:2049, :64].t(), sv[:2049]) == "cols_short"
    s8 = torch.empty(8192, 8, device="meta", dtype=torch.bfloat16)
    s8v = torch.empty(8192, device="meta", dtype=torch.bfloat16)
    assert torch_ops.algorithm("mv", s8.t(), s8v) == "cols_short"  # M 8 < 16
    assert torch_ops.algorithm("mv", sb[:63, :16].t(), sv[:63]) != "rows"  # N 63, M * N > 576
    # Tiny column-major 16-bit problems (M >= 2, M * N <= 576): rows.
    assert torch_ops.algorithm("mv", sb[:24, :24].t(), sv[:24]) == "rows"
    assert torch_ops.algorithm("mv", sb[:4, :4].t(), sv[:4]) == "rows"
    assert torch_ops.algorithm("mv", sb[:25, :24].t(), sv[:25]) != "rows"  # 600 elements
    assert torch_ops.algorithm("mv", _meta(24, 24).t(), _meta(24)) != "rows"  # fp32
    tall = torch.empty(4, 4096, device="meta", dtype=torch.bfloat16).t()  # 4096 x 4
    assert torch_ops.algorithm("mv", tall, sv[:4]) != "rows"
    tall = torch.empty(64, 257, device="meta", dtype=torch.bfloat16).t()  # 257 x 64: M 257
    assert torch_ops.algorithm("mv", tall, sv[:64]) != "rows"
    assert torch_ops.algorithm("mv", _meta(1024, 6).t(), _meta(1024)) == "cols_short"
    # Column-major with few rows (M <= 256) or short rows (N <= 16) otherwise: cols_short, also
    # when the storage rows are not 16-byte multiples (element by element).
    assert torch_ops.algorithm("mv", _meta(1 << 20, 64).t(), _meta(1 << 20)) == "cols_short"
    assert torch_ops.algorithm("mv", _meta(1000, 17).t(), _meta(1000)) == "cols_short"
    assert torch_ops.algorithm("mv", _meta(1000, 256).t(), _meta(1000)) == "cols_short"
    # More rows, storage rows of whole aligned vectors: cols_short from 80 columns up to 2^21
    # elements (not 16-bit rows of 256-1536 columns), else cols_vec. Rows that are not whole
    # vectors: cols.
    assert torch_ops.algorithm("mv", _meta(1000, 257).t(), _meta(1000)) == "cols"
    assert torch_ops.algorithm("mv", _meta(1000, 260).t(), _meta(1000)) == "cols_short"
    hb = torch.empty(1000, 264, device="meta", dtype=torch.bfloat16)
    hv = torch.empty(1000, device="meta", dtype=torch.bfloat16)
    assert torch_ops.algorithm("mv", hb.t(), hv[:1000]) == "cols_vec"  # bf16, N 1000
    hb = torch.empty(1000, 257, device="meta", dtype=torch.bfloat16)
    assert torch_ops.algorithm("mv", hb.t(), hv[:1000]) == "cols"  # rows not whole vectors
    assert torch_ops.algorithm("mv", _meta(65536, 4096).t(), _meta(65536)) == "cols_vec"  # > 2^27
    assert torch_ops.algorithm("mv", _meta(16, 1 << 20).t(), _meta(16)) == "cols_short"
    assert torch_ops.algorithm("mv", _meta(1_000_003, 1), _meta(1)) == "cols_short"  # s0 == 1
    h = torch.empty(8192, 16384, device="meta", dtype=torch.float16)
    hv = torch.empty(16384, device="meta", dtype=torch.float16)
    assert torch_ops.algorithm("mv", h[:2048, :2048], hv[:2048]) == "rows_mma"
    assert torch_ops.algorithm("mv", h[:2048, :1024], hv[:1024]) == "rows_mma"  # 2 KB rows
    assert torch_ops.algorithm("mv", h[:2048, :2048].bfloat16(), hv[:2048].bfloat16()) == "rows_mma"
    assert torch_ops.algorithm("mv", h, hv) == "rows_vec"  # large: rows_vec streams better
    assert torch_ops.algorithm("mv", h[:2048, :2044], hv[:2044]) == "rows_vec"  # N % 8 != 0
    assert torch_ops.algorithm("mv", h[:1000, :2048], hv[:2048]) == "rows_vec"  # too few rows
    assert torch_ops.algorithm("mv", h[:512, :1024], hv[:1024]) == "rows_mma"
    assert torch_ops.algorithm("mv", h[:4096, :16384], hv[:16384]) == "rows_vec"  # long rows
    assert torch_ops.algorithm("mv", _meta(100_003, 7), _meta(7)) == "cols"
    assert torch_ops.algorithm("mv", _meta(1, 1_000_003), _meta(1_000_003)) == "rows_vec"
    off = _meta(64 * 256 + 1)[1:].view(64, 256)  # storage offset breaks 16-byte alignment
    assert torch_ops.algorithm("mv", off, _meta(256)) == "rows_vec"  # row heads peeled
    assert torch_ops.algorithm("mv", _meta(1000, 7777), _meta(7777)) == "rows_vec"
    strided = _meta(999, 8002)[:, ::2]
    assert torch_ops.algorithm("mv", strided, _meta(4001)) == "rows"
    assert torch_ops.algorithm("mv", _meta(4001, 999).t()[:, ::1], _meta(4001)) == "cols"
    assert torch_ops.algorithm("mv", _meta(0, 5), _meta(5)) == "empty"
    with torch_ops.force_algorithm("mv", "cols"):
        assert torch_ops.algorithm("mv", a, v) == "cols"
    with torch_ops.force_algorithm("mv", "rows"):
        assert torch_ops.algorithm("mv", a.t(), v) == "rows"
    with torch_ops.force_algorithm("mv", "cols_vec"):
        with pytest.raises(RuntimeError, match=r"gpukern::mv: forced algorithm 'cols_vec' cannot"):
            torch_ops.algorithm("mv", a, v)
    with torch_ops.force_algorithm("mv", "rows_vec"):
        with pytest.raises(RuntimeError, match=r"gpukern::mv: forced algorithm 'rows_vec' cannot"):
            torch_ops.algorithm("mv", strided, _meta(4001))
    with torch_ops.force_algorithm("mv", "nope"):
        with pytest.raises(RuntimeError,
                           match=r"forced algorithm 'nope' is not one of: rows_vec, rows, "
                                 r"cols_vec, cols, rows_mma, rows_short, cols_short, "
                                 r"cols_periodic, cublas"):
            torch_ops.algorithm("mv", a, v)
    assert torch_ops.algorithms.forced_algorithm("mv") is None


# Each algorithm forced on edge shapes it can run: rows of one element, one row, short and long
# rows, column-major with row counts around the cols block (128 / 256 rows) and split counts that
# do not divide the columns.
# "padded": leading dim rounded up to 8, so cols_vec applies and its last vector of rows is partial.
FORCED_SHAPES = [((1, 1), "contig"), ((1, 1000), "contig"), ((1000, 1), "contig"),
                 ((7, 5), "contig"), ((129, 1000), "transposed"), ((257, 33), "padded"),
                 ((100, 7777), "padded"), ((3000, 16), "contig"), ((5, 70_001), "contig"),
                 ((128, 4104), "transposed"), ((259, 2000), "padded"), ((1, 3), "padded"),
                 # rows_mma (16-bit): a partial 16-row tile, a partial 128-column step, 8 columns.
                 ((37, 4104), "contig"), ((17, 8), "contig"), ((16, 128), "contig"),
                 # rows_short: lane groups of 1 (4 f32 columns), a partial tile of rows;
                 # cols_short: one row, rows that are not a whole vector, a split of N.
                 ((1000, 4), "contig"), ((133, 96), "contig"), ((1, 5000), "transposed"),
                 ((3, 10_000), "padded"), ((61, 9000), "padded"), ((300, 20), "transposed"),
                 # rows_mma with 2 and 4 warps a tile (256 / 384 columns), a partial last group
                 # of tiles; cols_short with 8-byte vectors (bf16 4 / 12 rows, fp32 2 rows), a
                 # row block past M, narrower tiles for N <= 16 and for wide tiles (300 rows).
                 ((100, 256), "contig"), ((70, 384), "contig"), ((4, 5000), "transposed"),
                 ((12, 70_001), "transposed"), ((2, 3000), "transposed"),
                 ((5000, 16), "transposed"), ((300, 256), "transposed")]


@pytest.mark.cuda
@pytest.mark.parametrize("device", DEVICE_PARAMS[1:])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("algo", MV_ALGOS)
@pytest.mark.parametrize("shape,layout", FORCED_SHAPES, ids=[f"{s[0]}x{s[1]}-{l}"
                                                            for s, l in FORCED_SHAPES])
def test_mv_forced_paths(device, dtype, algo, shape, layout):
    g = torch.Generator().manual_seed(11)
    M, N = shape
    if layout == "contig":
        a = rand(M, N, dtype=dtype, device=device, generator=g)
    elif layout == "padded":
        a = rand(N, (M + 7) // 8 * 8, dtype=dtype, device=device, generator=g)[:, :M].t()
    else:
        a = rand(N, M, dtype=dtype, device=device, generator=g).t()
    v = rand(N, dtype=dtype, device=device, generator=g)
    with torch_ops.force_algorithm("mv", algo):
        try:
            name = torch_ops.algorithm("mv", a, v)
        except RuntimeError as e:
            assert "cannot run this shape" in str(e)
            with pytest.raises(RuntimeError, match="cannot run this shape"):
                torch_ops.mv(a, v)
            return
        assert name == algo
        _check(a, v, dtype)
        assert torch.equal(torch_ops.mv(a, v), torch_ops.mv(a, v))


# rows_short and cols_short on odd sizes: rows around the vector (4 / 8) and lane-group sizes, one
# column, 1000 columns, and 2^20 + 3 (cols_short splits N; a tail of whole vectors and elements).
# Layouts: row-major and column-major, each also at a storage offset of one element (misaligned:
# rows_short cannot run it, cols_short reads element by element). Each algorithm forced, and the
# automatic choice; results deterministic.
SHORT_M = [1, 2, 3, 12, 16, 17, 63, 64]
SHORT_N = [1, 1000, (1 << 20) + 3]


def _short_matrix(M, N, layout, dtype, g):
    offset = 1 if layout.endswith("_offset") else 0
    if layout.startswith("rows"):
        flat = rand(M * N + offset, dtype=dtype, generator=g).to("cuda")
        return flat[offset:].view(M, N)
    flat = rand(M * N + offset, dtype=dtype, generator=g).to("cuda")
    return flat[offset:].view(N, M).t()


@pytest.mark.cuda
@pytest.mark.parametrize("device", DEVICE_PARAMS[1:])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("layout", ["rows", "rows_offset", "cols", "cols_offset"])
@pytest.mark.parametrize("N", SHORT_N)
@pytest.mark.parametrize("M", SHORT_M)
def test_mv_short_paths(device, dtype, layout, N, M):
    g = torch.Generator().manual_seed(M * 7 + N % 1000)
    a = _short_matrix(M, N, layout, dtype, g)
    v = rand(N, dtype=dtype, device=device, generator=g)
    assert a.shape == (M, N)
    assert (a.storage_offset() == 1) == layout.endswith("_offset")
    ref = _ref(a, v)
    for algo in ("rows_short", "cols_short", None):
        if algo is None:
            out = torch_ops.mv(a, v)
        else:
            with torch_ops.force_algorithm("mv", algo):
                try:
                    assert torch_ops.algorithm("mv", a, v) == algo
                except RuntimeError as e:
                    assert "cannot run this shape" in str(e)
                    with pytest.raises(RuntimeError, match="cannot run this shape"):
                        torch_ops.mv(a, v)
                    continue
                out = torch_ops.mv(a, v)
                assert torch.equal(out, torch_ops.mv(a, v))
        assert out.dtype == a.dtype and out.is_contiguous()
        assert_close_ref(out, ref, dtype)
    assert torch.equal(torch_ops.mv(a, v), torch_ops.mv(a, v))


# cols_periodic: A = At.t() with At [N, M] contiguous, 2 <= M <= 32, read as one flat stream of
# 16-byte vectors. Periods that divide the vector, share a factor with it and do not; N from one
# column to a multi-block grid with a partial last vector; x contiguous and strided; forced and
# automatic; results deterministic.
PERIODIC_M = [2, 3, 4, 5, 6, 7, 8, 12, 17, 24, 31, 32]
PERIODIC_N = [1, 7, 1000, 200_003]


@pytest.mark.cuda
@pytest.mark.parametrize("device", DEVICE_PARAMS[1:])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("N", PERIODIC_N)
@pytest.mark.parametrize("M", PERIODIC_M)
@pytest.mark.parametrize("forced", [True, False], ids=["forced", "auto"])
def test_mv_periodic(device, dtype, N, M, forced):
    g = torch.Generator().manual_seed(M * 1000 + N % 991)
    a = rand(N, M, dtype=dtype, device=device, generator=g).t()
    v = rand(N, dtype=dtype, device=device, generator=g)
    vs = rand(2 * N, dtype=dtype, device=device, generator=g)[::2]
    # (One column: N's stride is normalised to 0 and the array is no longer [N, M]: not forced.)
    ctx = (torch_ops.force_algorithm("mv", "cols_periodic") if forced and N > 1
           else contextlib.nullcontext())
    with ctx:
        if forced and N > 1:
            assert torch_ops.algorithm("mv", a, v) == "cols_periodic"
        _check(a, v, dtype)
        _check(a, vs, dtype)
        assert torch.equal(torch_ops.mv(a, v), torch_ops.mv(a, v))


@pytest.mark.cuda
@pytest.mark.parametrize("device", DEVICE_PARAMS[1:])
def test_mv_periodic_cannot_run(device):
    flat = torch.randn(6 * 100 + 1, device=device)
    v = torch.randn(100, device=device)
    with torch_ops.force_algorithm("mv", "cols_periodic"):
        for a in (flat[1:].view(100, 6).t(),  # misaligned
                  torch.randn(100, 33, device=device).t(),  # M > 32
                  torch.randn(100, 12, device=device)[:, :6].t()):  # storage rows of 12, M = 6
            with pytest.raises(RuntimeError, match="cannot run this shape"):
                torch_ops.mv(a, v)


def _bf(*shape):
    return torch.empty(*shape, device="meta", dtype=torch.bfloat16)


def test_mv_cublas_regions():
    """Problems in the size sweep's blocks where cuBLAS (torch.mv's path) was faster than every
    kernel here run cuBLAS; their neighbours outside the blocks do not."""
    if not torch_ops.has_cuda_kernels():
        pytest.skip("needs the CUDA kernels")
    q = lambda a: torch_ops.algorithm("mv", a, _bf(a.shape[1]))  # noqa: E731
    qf = lambda a: torch_ops.algorithm("mv", a, _meta(a.shape[1]))  # noqa: E731
    # 16-bit column-major (A.t of a contiguous [N, M]): M >= 1536, 256-24576 columns
    assert q(_bf(384, 16384).t()) == "cublas"
    assert q(_bf(1536, 4096).t()) == "cublas"
    assert q(_bf(24576, 1536).t()) == "cublas"
    assert q(_bf(8192, 1535).t()) != "cublas"  # 1535 rows, 8192 columns
    assert q(_bf(1024, 1535).t()) != "cublas"  # 1535 rows, 1024 columns
    # ... 1024-1535 rows from 16384 columns
    assert q(_bf(16384, 1024).t()) == "cublas"
    assert q(_bf(16383, 1024).t()) != "cublas"
    assert q(_bf(16384, 1023).t()) != "cublas"
    # ... and M >= 384 at 256-384 columns
    assert q(_bf(256, 384).t()) == "cublas"
    assert q(_bf(384, 384).t()) == "cublas"
    assert q(_bf(384, 383).t()) != "cublas"
    # 2-6 rows, 4096-65536 columns
    assert q(_bf(6144, 4).t()) == "cublas"
    assert q(_bf(65536, 6).t()) == "cublas"
    assert q(_bf(65537, 6).t()) != "cublas"
    assert q(_bf(6144, 7).t()) != "cublas"
    # 96-384 rows from 262144 columns; 256-384 rows from 98304
    assert q(_bf(262144, 96).t()) == "cublas"
    assert q(_bf(131072, 96).t()) != "cublas"
    assert q(_bf(98304, 256).t()) == "cublas"
    assert q(_bf(65536, 384).t()) == "cublas"  # 257-384 rows from 65536
    assert q(_bf(65536, 256).t()) != "cublas"
    # 16385-65535 rows of 65-128 columns
    assert q(_bf(96, 24576).t()) == "cublas"
    assert q(_bf(96, 65536).t()) != "cublas"
    assert q(_bf(64, 24576).t()) != "cublas"
    # row-major from 98304 rows of 96-1536 columns, from 2^20 rows of 64-95
    assert q(_bf(98304, 384)) == "cublas"
    assert q(_bf(98303, 384)) != "cublas"
    assert q(_bf(98304, 1537)) != "cublas"
    assert q(_bf(1 << 20, 64)) == "cublas"
    assert q(_bf(393216, 64)) != "cublas"
    # column-major from 2^22 rows of 17-32 columns
    assert q(_bf(24, 1 << 22).t()) == "cublas"
    assert q(_bf(16, 1 << 22).t()) != "cublas"
    assert q(_bf(24, 1 << 20).t()) != "cublas"
    # row-major 64-95 rows from 262144 columns, 192-256 rows from 98304, one row of 49152-98303
    assert q(_bf(64, 262144)) == "cublas"
    assert q(_bf(64, 131072)) != "cublas"
    assert q(_bf(256, 98304)) == "cublas"
    assert q(_bf(128, 98304)) != "cublas"
    assert q(_bf(1, 65536)) == "cublas"
    assert q(_bf(1, 98304)) != "cublas"
    # fp32 column-major: from 4096 rows, 256+ columns, 2^21-2^26 elements; 1536-4095 and
    # 256-384 rows of 1025-2047 columns; 2-6 rows of 16384-65536 columns
    assert qf(_meta(256, 24576).t()) == "cublas"
    assert qf(_meta(1024, 4096).t()) == "cublas"
    assert qf(_meta(384, 4096).t()) != "cublas"  # 2^21 elements
    assert qf(_meta(16384, 4096).t()) == "cublas"
    assert qf(_meta(16385, 6144).t()) != "cublas"  # past 2^26 from 6144 rows
    assert qf(_meta(1536, 1536).t()) == "cublas"
    assert qf(_meta(1536, 1024).t()) != "cublas"
    assert qf(_meta(1536, 256).t()) == "cublas"
    assert qf(_meta(1536, 255).t()) != "cublas"
    assert qf(_meta(16384, 4).t()) == "cublas"
    assert qf(_meta(16383, 4).t()) != "cublas"
    # ... 4096-6143 rows on to 2^27 elements; 2-4 rows of 65537-131071 columns
    assert qf(_meta(24576, 4096).t()) == "cublas"
    assert qf(_meta(32768, 4096).t()) == "cublas"
    assert qf(_meta(32769, 4096).t()) != "cublas"  # past 2^27
    assert qf(_meta(24576, 6144).t()) != "cublas"
    assert qf(_meta(98304, 4).t()) == "cublas"
    assert qf(_meta(98304, 6).t()) != "cublas"
    assert qf(_meta(131072, 4).t()) != "cublas"
    # fp32 row-major: 64-256 rows from 65536 columns (64-95 rows from 98304); 257-1023 rows of
    # 1024-1536; 20480-49151 rows of 257-1023
    assert qf(_meta(96, 65536)) == "cublas"
    assert qf(_meta(64, 65536)) != "cublas"
    assert qf(_meta(64, 98304)) == "cublas"
    assert qf(_meta(257, 65536)) != "cublas"
    assert qf(_meta(384, 1024)) == "cublas"
    assert qf(_meta(1024, 1024)) != "cublas"
    assert qf(_meta(24576, 384)) == "cublas"
    assert qf(_meta(16384, 384)) != "cublas"


def test_mv_rules_of_the_seventeenth_sweep():
    """The points where another kernel here beat the earlier choice get that kernel."""
    if not torch_ops.has_cuda_kernels():
        pytest.skip("needs the CUDA kernels")
    q = lambda a: torch_ops.algorithm("mv", a, _bf(a.shape[1]))  # noqa: E731
    qf = lambda a: torch_ops.algorithm("mv", a, _meta(a.shape[1]))  # noqa: E731
    assert q(_bf(24576, 1536)) == "rows_mma"  # past 2^25, 16384+ rows of <= 1536 columns
    assert q(_bf(6144, 16).t()) == "cols_periodic"
    assert q(_bf(4096, 16).t()) == "rows"
    assert q(_bf(4, 1024).t()) == "cols"
    assert q(_bf(4, 8192).t()) == "cols"
    assert q(_bf(4, 8193).t()) != "cols"
    assert q(_bf(96, 1024).t()) == "rows"
    assert q(_bf(1536, 96).t()) == "rows"  # 96 x 1536: the rows rule's 147456 elements
    assert q(_bf(1536, 256).t()) == "cols_vec"
    assert qf(_meta(1024, 1536)) == "rows_vec"
    assert qf(_meta(1536, 1536)) == "rows_short"
    assert qf(_meta(384, 384)) == "rows_short"
    assert qf(_meta(96, 6).t()) == "rows"
    assert qf(_meta(6144, 6).t()) == "rows"
    assert qf(_meta(6144, 4).t()) != "rows"
    assert qf(_meta(1536, 96).t()) == "rows"
    assert qf(_meta(1536, 256).t()) == "cublas"
    assert qf(_meta(16, 98304).t()) == "cols"
    assert qf(_meta(16, 65536).t()) != "cols"
