"""The layout conversions of csrc/conv/layout.h through their private ops: gpukern::_to_nhwc (NCHW
or any strides -> a new packed channels_last tensor, channels zero-padded to a multiple) and
gpukern::_nhwc_copy_to (packed channels_last, possibly padded -> a tensor of any strides). Both are
pure copies, so every comparison is exact (torch.equal), against torch's own pad + contiguous and
copy_. Shapes cover every kernel of each direction (to NHWC: the small-plane kernel for packed
planes of up to 64 pixels, the wide tiled transpose for planes of whole aligned 16-byte pixel
vectors (test_wide_tiles); both ways: the tiled transpose for planes of >= 32 pixels with whole
4-byte words per NHWC pixel, the strided kernel otherwise), partial tiles, every tile width
(channel words 4, 8, 16, 32 and several channel tiles), 16-byte and 4-byte NHWC accesses.
CUDA only: skipped without a GPU or in a CPU-only build."""
import itertools

import pytest
import torch
import torch.nn.functional as F

from conftest import HAS_CUDA, kernel_names

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device and the CUDA build")]

ops = torch.ops.gpukern
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def _data(*shape, dtype):
    """Deterministic, never-zero values, exact in dtype and distinct within a prime period (2039 in
    float16, 251 in bfloat16), so a lost or misplaced element cannot compare equal by chance."""
    n = 1
    for s in shape:
        n *= s
    i = torch.arange(n, dtype=torch.float64)
    period = {torch.float32: 1 << 24, torch.float16: 2039, torch.bfloat16: 251}[dtype]
    v = (i % period + 1) * torch.where(i % 3 == 0, -1.0, 1.0)
    return v.reshape(shape).to(dtype).cuda()


def _ref_to_nhwc(x, c_multiple):
    C = x.shape[1]
    cp = -(-C // c_multiple) * c_multiple
    return F.pad(x, (0, 0, 0, 0, 0, cp - C)).contiguous(memory_format=torch.channels_last)


def _check_to_nhwc(x, c_multiple):
    y = ops._to_nhwc(x, c_multiple)
    ref = _ref_to_nhwc(x, c_multiple)
    assert y.shape == ref.shape and y.dtype == x.dtype and y.device == x.device
    assert y.is_contiguous(memory_format=torch.channels_last)
    if y.numel():
        assert y.data_ptr() % 256 == 0
        assert y.data_ptr() != x.data_ptr()
    assert torch.equal(y, ref)
    # the padding channels are zeros, and really present in memory
    assert torch.equal(y[:, x.shape[1]:], torch.zeros_like(y[:, x.shape[1]:]))
    return y


SHAPES = list(itertools.product([1, 2, 3], [1, 3, 5, 17, 67], [1, 7, 31, 56], [1, 7, 31, 56]))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("c_multiple", [1, 4, 8])
def test_to_nhwc_nchw_contiguous(dtype, c_multiple):
    for i, (n, c, h, w) in enumerate(SHAPES):
        if (n * 7 + c + h + w + i) % 3:  # a deterministic third of the grid keeps this quick
            continue
        _check_to_nhwc(_data(n, c, h, w, dtype=dtype), c_multiple)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("c", [1, 2, 3, 4, 5, 8, 12, 16, 17, 24, 32, 33, 48, 64, 65, 67, 96, 128,
                               130, 256])
@pytest.mark.parametrize("c_multiple", [1, 4, 8])
def test_to_nhwc_channel_counts(dtype, c, c_multiple):
    """Every tile width (channel words 4..32, several channel tiles), odd and padded counts, 16-
    and 4-byte NHWC stores; 33x35 pixels: partial pixel tiles of every tile height."""
    _check_to_nhwc(_data(2, c, 33, 35, dtype=dtype), c_multiple)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("c_multiple", [1, 8])
def test_to_nhwc_views(dtype, c_multiple):
    base = _data(3, 40, 30, 36, dtype=dtype)
    views = {
        "channels_last": base.contiguous(memory_format=torch.channels_last),
        "channel slice (planes packed, sc and sn of the base)": base[:, 3:20],
        "odd channel offset": base[1:, 5:8],
        "storage offset, unaligned": base.reshape(-1)[1:1 + 2 * 13 * 30 * 36].view(2, 13, 30, 36),
        "strided W": base[:, :9, :, ::2],
        "strided H": base[:, :9, ::3, :],
        "cropped plane": base[:, :11, 2:29, 1:34],
        "H and W transposed": base[:, :16].transpose(2, 3),
        "N and C transposed": base[:, :3].transpose(0, 1),
        "channels_last slice": base.contiguous(memory_format=torch.channels_last)[:, 2:10],
        "expanded": base[:1, :5, :1, :].expand(2, 5, 30, 36),
    }
    for name, x in views.items():
        try:
            _check_to_nhwc(x, c_multiple)
        except AssertionError as e:
            raise AssertionError(f"{name}: {e}") from e


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("c_multiple", [1, 4, 8])
def test_to_nhwc_small_planes(dtype, c_multiple):
    """Planes under 32 pixels (filters [O, C, KH, KW] to OHWI): the per-chunk transpose, with
    channel counts across chunk boundaries, padded channels, and a channel slice (sc != HW);
    full 256-channel chunks of aligned packed planes as 16-byte vectors (512 and 520 channels:
    full chunks and a partial one), and with an image stride or a base that is not 16-byte
    aligned (257 channels of 3x3, a storage offset of one element), element by element."""
    for shape in [(64, 512, 3, 3), (5, 33, 1, 1), (3, 67, 5, 5), (2, 96, 1, 7), (4, 31, 2, 2),
                  (1, 1, 3, 3), (3, 520, 5, 5), (2, 300, 1, 1), (3, 257, 3, 3)]:
        _check_to_nhwc(_data(*shape, dtype=dtype), c_multiple)
    flat = _data(1, 1, 1, 4 * 512 * 9 + 1, dtype=dtype).reshape(-1)
    _check_to_nhwc(flat[1:].view(4, 512, 3, 3), c_multiple)
    base = _data(6, 80, 3, 3, dtype=dtype)
    _check_to_nhwc(base[:, 5:70], c_multiple)  # sc = 9, sn = 720
    _check_to_nhwc(base[::2, 1:40], c_multiple)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("small", ["1", "0"])
def test_small_plane_activations(dtype, small, monkeypatch):
    """Planes of 32 to 64 pixels (7x7 activations) to NHWC on the small-plane kernel (chunks of 16
    to 112 channels: full chunks as 16-byte vectors, a partial last chunk (131 channels) element
    by element) and, with GPUKERN_LAYOUT_SMALL=0, on the tiled one: channel counts across chunk
    boundaries, padding, a channel slice (sc != HW), an odd image stride, a base off 16 bytes;
    and back (the tiled kernel), into NCHW and into a channel slice."""
    monkeypatch.setenv("GPUKERN_LAYOUT_SMALL", small)
    for shape, m in [((16, 960, 7, 7), 1), ((2, 168, 7, 7), 8), ((3, 85, 7, 7), 8),
                     ((2, 64, 8, 8), 1), ((2, 40, 6, 6), 4), ((1, 2048, 7, 7), 1),
                     ((2, 9, 4, 9), 8), ((2, 131, 7, 7), 1)]:
        x = _data(*shape, dtype=dtype)
        y = _check_to_nhwc(x, m)
        back = torch.full_like(x, -7.0)
        ops._nhwc_copy_to(y, back)
        assert torch.equal(back, x), shape
    base = _data(3, 100, 7, 7, dtype=dtype)
    _check_to_nhwc(base[:, 3:91], 8)  # sc = 49, sn = 4900
    flat = _data(1, 1, 1, 2 * 88 * 49 + 1, dtype=dtype).reshape(-1)
    _check_to_nhwc(flat[1:].view(2, 88, 7, 7), 1)
    dst_base = torch.full((3, 100, 7, 7), -7.0, dtype=dtype, device="cuda")
    _check_copy_to(96, dst_base[:, 5:93], dtype)
    assert torch.all(dst_base[:, :5] == -7.0) and torch.all(dst_base[:, 93:] == -7.0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_to_nhwc_channels_last_multiple_is_a_new_tensor(dtype):
    x = _data(2, 16, 9, 9, dtype=dtype).contiguous(memory_format=torch.channels_last)
    y = _check_to_nhwc(x, 8)
    x.fill_(0)
    assert y.abs().sum() > 0


@pytest.mark.parametrize("dtype", DTYPES)
def test_to_nhwc_empty(dtype):
    for shape in [(0, 3, 5, 5), (2, 0, 5, 5), (2, 3, 0, 5), (2, 3, 5, 0)]:
        x = torch.empty(shape, dtype=dtype, device="cuda")
        y = ops._to_nhwc(x, 8)
        ref = _ref_to_nhwc(x, 8)
        assert y.shape == ref.shape and y.is_contiguous(memory_format=torch.channels_last)


def _check_copy_to(src_c, dst, dtype, src_layout="packed"):
    n, c, h, w = dst.shape
    full = _data(n, src_c, h, w, dtype=dtype)
    if src_layout == "packed":
        src = full.contiguous(memory_format=torch.channels_last)
    else:  # a strided source: the general path
        src = full
    ops._nhwc_copy_to(src, dst)
    assert torch.equal(dst, full[:, :c])


def _dsts(n, c, h, w, dtype):
    """Destinations of sizes [n, c, h, w] with the strides to test, each with its base tensor (to
    check that nothing outside the view is written)."""
    out = []
    b = torch.full((n, c, h, w), -7.0, dtype=dtype, device="cuda")
    out.append(("nchw", b, b))
    b = torch.full((n, c, h, w), -7.0, dtype=dtype, device="cuda")
    out.append(("channels_last", b.contiguous(memory_format=torch.channels_last), None))
    b = torch.full((n + 1, c + 3, h, w), -7.0, dtype=dtype, device="cuda")
    out.append(("channel slice of a bigger NCHW", b[1:, 2:2 + c], b))
    b = torch.full((n, c, h + 2, 2 * w), -7.0, dtype=dtype, device="cuda")
    out.append(("strided plane", b[:, :, 1:1 + h, ::2], b))
    b = torch.full((n, c, w, h), -7.0, dtype=dtype, device="cuda")
    out.append(("H and W transposed", b.transpose(2, 3), b))
    return out


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,src_c", [
    ((2, 3, 31, 56), 8), ((2, 3, 31, 56), 4), ((1, 3, 7, 7), 8), ((3, 17, 33, 35), 24),
    ((2, 64, 56, 56), 64), ((2, 67, 31, 7), 72), ((1, 130, 17, 19), 136), ((2, 5, 1, 1), 8),
    ((2, 1, 56, 56), 1), ((2, 1, 56, 56), 2), ((1, 3, 56, 7), 3), ((2, 12, 40, 40), 12),
    ((2, 256, 9, 9), 256), ((3, 33, 16, 16), 40)])
def test_nhwc_copy_to(dtype, shape, src_c):
    for name, dst, base in _dsts(*shape, dtype):
        for layout in ["packed", "strided"]:
            try:
                _check_copy_to(src_c, dst, dtype, layout)
            except AssertionError as e:
                raise AssertionError(f"{name}, {layout} src: {e}") from e
            if base is not None:
                # elements of the base outside the view keep their value
                inside = torch.zeros(base.numel(), dtype=torch.bool, device="cuda")
                torch.as_strided(inside, dst.shape, dst.stride(),
                                 dst.storage_offset() - base.storage_offset()).fill_(True)
                assert torch.all(base.reshape(-1)[~inside] == -7.0), name


@pytest.mark.parametrize("dtype", DTYPES)
def test_round_trip_padded(dtype):
    for shape, m in [((2, 3, 56, 56), 8), ((3, 67, 31, 7), 8), ((1, 5, 7, 31), 4),
                     ((2, 17, 33, 35), 1)]:
        x = _data(*shape, dtype=dtype)
        y = ops._to_nhwc(x, m)
        back = torch.empty_like(x)
        ops._nhwc_copy_to(y, back)
        assert torch.equal(back, x)
        back_cl = torch.empty_like(x, memory_format=torch.channels_last)
        ops._nhwc_copy_to(y, back_cl)
        assert torch.equal(back_cl, x)


def test_nhwc_copy_to_empty():
    src = torch.empty(0, 8, 5, 5, device="cuda").contiguous(memory_format=torch.channels_last)
    ops._nhwc_copy_to(src, torch.empty(0, 3, 5, 5, device="cuda"))
    src = torch.empty(2, 8, 0, 5, device="cuda")
    ops._nhwc_copy_to(src, torch.empty(2, 3, 0, 5, device="cuda"))
    ops._nhwc_copy_to(torch.empty(2, 8, 5, 5, device="cuda"), torch.empty(2, 0, 5, 5,
                                                                          device="cuda"))


@pytest.mark.parametrize("dtype", DTYPES)
def test_large(dtype):
    """16x64x112x112: the shape the tensor-core path converts; every element checked."""
    x = torch.randn(16, 64, 112, 112, device="cuda").to(dtype)
    y = ops._to_nhwc(x, 8)
    assert torch.equal(y, x.contiguous(memory_format=torch.channels_last))
    back = torch.empty_like(x)
    ops._nhwc_copy_to(y, back)
    assert torch.equal(back, x)
    # padded stem-like input: 3 -> 8 channels
    x3 = torch.randn(16, 3, 224, 224, device="cuda").to(dtype)
    y3 = ops._to_nhwc(x3, 8)
    assert torch.equal(y3, _ref_to_nhwc(x3, 8))
    back3 = torch.empty_like(x3)
    ops._nhwc_copy_to(y3, back3)
    assert torch.equal(back3, x3)


def test_current_stream_and_device():
    """Launched on the current stream: a side stream's result is complete after its sync."""
    s = torch.cuda.Stream()
    x = _data(4, 64, 56, 56, dtype=torch.bfloat16)
    with torch.cuda.stream(s):
        s.wait_stream(torch.cuda.current_stream())
        y = ops._to_nhwc(x, 8)
        back = torch.empty_like(x)
        ops._nhwc_copy_to(y, back)
    s.synchronize()
    assert torch.equal(back, x)
    if torch.cuda.device_count() > 1:
        x1 = _data(2, 5, 9, 40, dtype=torch.float32).to("cuda:1")
        y1 = ops._to_nhwc(x1, 4)
        assert y1.device == x1.device
        assert torch.equal(y1, _ref_to_nhwc(x1, 4))


def test_errors():
    x = torch.randn(2, 3, 8, 8, device="cuda")
    with pytest.raises(RuntimeError, match="gpukern::to_nhwc: expected c_multiple >= 1"):
        ops._to_nhwc(x, 0)
    with pytest.raises(RuntimeError, match="gpukern::to_nhwc: .*4 dimensions"):
        ops._to_nhwc(x[0], 8)
    with pytest.raises(RuntimeError, match="gpukern::to_nhwc: input has dtype"):
        ops._to_nhwc(x.double(), 8)
    src = ops._to_nhwc(x, 8)
    with pytest.raises(RuntimeError, match="gpukern::nhwc_copy_to: expected src of sizes"):
        ops._nhwc_copy_to(src[:, :2], torch.empty(2, 3, 8, 8, device="cuda"))
    with pytest.raises(RuntimeError, match="gpukern::nhwc_copy_to: expected src of sizes"):
        ops._nhwc_copy_to(src, torch.empty(2, 3, 8, 9, device="cuda"))
    with pytest.raises(RuntimeError, match="gpukern::nhwc_copy_to: expected src and dst of the "
                                           "same dtype"):
        ops._nhwc_copy_to(src, torch.empty(2, 3, 8, 8, device="cuda", dtype=torch.half))
    with pytest.raises(RuntimeError, match="gpukern::nhwc_copy_to: dst has internal overlap"):
        ops._nhwc_copy_to(src, torch.empty(2, 3, 8, 1, device="cuda").expand(2, 3, 8, 8))
    with pytest.raises(RuntimeError, match="gpukern::nhwc_copy_to: expected dst on a CUDA"):
        ops._nhwc_copy_to(src, torch.empty(2, 3, 8, 8))


@pytest.mark.parametrize("dtype", DTYPES)
def test_padded_channel_stride_odd_planes(dtype):
    """Planes of an odd pixel count behind an even channel stride (each channel plane padded by
    one element): the 16-bit tiled kernels move such NCHW sides as 4-byte pixel pairs, the last
    pixel of each plane alone; both directions, exact, nothing outside the view written."""
    for n, c, h, w in [(2, 24, 5, 7), (3, 64, 7, 9), (1, 130, 11, 13)]:
        hw = h * w
        base = _data(n, c, hw + 1, dtype=dtype)
        x = torch.as_strided(base, (n, c, h, w), (c * (hw + 1), hw + 1, w, 1))
        assert x.stride(1) % 2 == 0 and hw % 2 == 1
        _check_to_nhwc(x, 1)
        _check_to_nhwc(x, 8)
        out_base = torch.full((n, c, hw + 1), -7.0, dtype=dtype, device="cuda")
        dst = torch.as_strided(out_base, (n, c, h, w), (c * (hw + 1), hw + 1, w, 1))
        src = _data(n, c, h, w, dtype=dtype)
        ops._nhwc_copy_to(src.contiguous(memory_format=torch.channels_last), dst)
        assert torch.equal(dst, src)
        assert torch.all(out_base[:, :, hw] == -7.0)


def _kernels(call):
    """The names of the CUDA kernels call() launches, joined."""
    return kernel_names(call)[1]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("wide", [None, "0"])
def test_wide_tiles(dtype, wide, monkeypatch):
    """to_nhwc of planes whose pixels split into whole 16-byte vectors (HW, the channel and image
    strides multiples of 16 / element bytes; base aligned) into NHWC rows of whole 16-byte vectors
    and more than 16 words: the wide kernel (the profiler sees it), with GPUKERN_LAYOUT_WIDE=0 the
    tiled one. Partial pixel tiles (80 and 200 pixels: 64 + 16, 3 x 64 + 8), channel counts with
    partial and several channel tiles, odd 16-bit counts (a word's second channel absent),
    padding, a channel slice at a vector-aligned offset; the round trip back (the tiled kernel)
    into a sliced destination, nothing outside it written. 16-bit planes of 4 mod 8 pixels (14x14)
    and bases 8 bytes off take 8-byte vectors. Not wide: a base off 8 bytes, planes of 2 mod 4
    pixels."""
    if wide is None:
        monkeypatch.delenv("GPUKERN_LAYOUT_WIDE", raising=False)
    else:
        monkeypatch.setenv("GPUKERN_LAYOUT_WIDE", wide)
    es = torch.tensor([], dtype=dtype).element_size()
    epw = 4 // es
    for shape, m in [((2, 40, 8, 10), 1), ((3, 67, 10, 20), 8), ((2, 33, 8, 12), 1),
                     ((1, 130, 8, 24), 4), ((2, 256, 16, 16), 1), ((2, 65, 10, 8), 1),
                     ((2, 184, 14, 14), 1)]:
        x = _data(*shape, dtype=dtype)
        names = _kernels(lambda: _check_to_nhwc(x, m))
        cp = -(-shape[1] // m) * m
        # whole 16-byte vectors on the NHWC side's rows, rows of more than 16 words
        want = wide is None and cp * es % 16 == 0 and cp > 16 * epw
        assert ("nchw_to_nhwc_wide" in names) == want, (shape, names)
        y = ops._to_nhwc(x, m)
        out_base = torch.full((shape[0] + 1, shape[1] + 8) + shape[2:], -7.0, dtype=dtype,
                              device="cuda")
        dst = out_base[1:, 8:]
        ops._nhwc_copy_to(y, dst)
        assert torch.equal(dst, x), shape
        assert torch.all(out_base[:1] == -7.0) and torch.all(out_base[:, :8] == -7.0)
    base = _data(2, 100, 8, 10, dtype=dtype)
    names = _kernels(lambda: _check_to_nhwc(base[:, 8:88], 1))  # sc = 80, offset 640 elements
    assert ("wide" in names) == (wide is None)
    flat = _data(1, 1, 1, 2 * 64 * 80 + 4, dtype=dtype).reshape(-1)
    names = _kernels(lambda: _check_to_nhwc(flat[1:-3].view(2, 64, 8, 10), 1))
    assert "wide" not in names
    names = _kernels(lambda: _check_to_nhwc(flat[4:].view(2, 64, 8, 10), 1))  # 8 or 16 bytes off
    assert ("nchw_to_nhwc_wide" in names) == (wide is None), names
    names = _kernels(lambda: _check_to_nhwc(_data(2, 64, 6, 14, dtype=dtype), 1))  # 84 pixels
    assert ("nchw_to_nhwc_wide" in names) == (wide is None), names
    names = _kernels(lambda: _check_to_nhwc(_data(2, 64, 6, 15, dtype=dtype), 1))  # 90 pixels
    assert "wide" not in names


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("c_multiple", [1, 8])
def test_sampled_planes(dtype, c_multiple):
    """Views whose planes are not packed but small (at most 64 pixels) with strides in NCHW order
    (a strided 1x1 layer's x[:, :, ::2, ::2], a cropped plane): the small-plane kernel gathers
    each channel's pixels (the profiler sees it, not the strided kernel), padding channels
    included; exact against aten."""
    base = _data(3, 70, 14, 14, dtype=dtype)
    views = {
        "every other pixel of 14x14": base[:, :, ::2, ::2],
        "of 13x13 (last row and column sampled)": base[:, :, :13:2, :13:2],
        "stride 3 and 2": base[:, :, ::3, ::2],
        "a channel slice, sampled": base[1:, 3:67, 1::2, ::2],
        "a cropped 7x8 window": base[:, :40, 2:9, 3:11],
        "one column": base[:, :, ::2, 5:6],
    }
    for name, x in views.items():
        _check_to_nhwc(x, c_multiple)
        names = _kernels(lambda: ops._to_nhwc(x, c_multiple))
        assert "small_planes_to_nhwc" in names and "strided_copy" not in names, (name, names)
    # NHWC-ordered or wider planes keep the strided kernel
    cl = base.contiguous(memory_format=torch.channels_last)[:, :, ::2, ::2]
    wide = _data(2, 8, 20, 20, dtype=dtype)[:, :, ::2, ::1]  # 10x20: 200 pixels
    for x in (cl, wide):
        _check_to_nhwc(x, c_multiple)
        names = _kernels(lambda: ops._to_nhwc(x, c_multiple))
        assert "strided_copy" in names and "small_planes" not in names, names
