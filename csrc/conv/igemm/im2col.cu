// Explicit im2col for the tensor-core path's stems (conv/igemm/im2col.h): tiles of 64 patch rows
// staged in shared memory, gathered with coalesced reads and written out as one contiguous range.
// (A first version, one thread per 16-byte vector of a row, gathered 8 scattered elements per
// thread: ResNet-50's stem took 245 us on an H100, most of it in the gather's L2 sector traffic.)
#include "conv/igemm/im2col.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "core/checks.h"
#include "core/launch.cuh"
#include "device/fastdiv.cuh"

namespace gpukern {
namespace conv {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = int64_t{1} << 20;  // grid-stride beyond
constexpr int kTileRows = 64;                      // patch rows (output pixels) per tile
constexpr int kMaxSmemBytes = 48 * 1024;           // the tile's staging, static launch limit

struct Im2colParams {
  int N, C, H, W, KH, KW, OH, OW;
  int stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
  int64_t x_sn, x_sc, x_sh, x_sw;
  int K, Kp;       // taps x channels, and the padded row length (a multiple of 16 bytes)
  int64_t M;       // patch rows
  int64_t tiles;   // ceil(M / kTileRows)
  int pitch;       // staged row pitch in elements: Kp plus one 4-byte word (bank spread)
  int words_per_row;  // Kp in 4-byte words
  FastDiv div_row;    // by words_per_row
};

// Shared memory of one block: the staged tile, then the column table: per k, the (r, s) tap's
// row / column displacement and the input offset of its (c, r, s) element (64 bits as two words),
// one 16-byte entry read by one broadcast load. Padding columns (k >= K) get a displacement no
// window reaches, so they read as zeros without a separate test.
struct alignas(16) ColEntry {
  int dh, dw;
  int64_t off;
};
__host__ __device__ inline int64_t im2col_tile_bytes(int64_t kp, int64_t elem_size) {
  return (kTileRows * (kp + 4 / elem_size) * elem_size + 15) / 16 * 16;
}
inline int64_t im2col_smem_bytes(int64_t kp, int64_t elem_size) {
  return im2col_tile_bytes(kp, elem_size) + kp * static_cast<int64_t>(sizeof(ColEntry));
}
constexpr int kOutside = 1 << 29;  // im2col_fits keeps real rows / columns under 2^28
static_assert(kThreads % kTileRows == 0, "a thread keeps one tile row");

// One tile of kTileRows consecutive patch rows, whose output is one contiguous range of
// kTileRows * Kp elements. Phase 1 gathers the input with consecutive threads on consecutive rows
// (consecutive output pixels: the same input row, stride_w apart: coalesced) into shared memory;
// phase 2 copies the staged tile out in 4-byte words, consecutive threads on consecutive words
// (coalesced full-sector stores). The staged rows are a word longer than Kp so that phase 1's
// column writes spread over the banks. A thread keeps one tile row (threadIdx.x % kTileRows) for
// the whole tile, its window corner in registers, and steps over the columns: per element one
// broadcast load of the column's entry (a warp shares the column), two bound tests, the gather
// and the staging store. (Measured on an H200, ResNet-50's stem, bf16: 64-bit index division per
// element ran ~250 us; a row and a column table in shared memory, six table loads per element,
// 66 us.)
// E: the raw element word (uint16_t for 16-bit types, uint32_t for fp32): a pure gather.
template <typename E>
__global__ void __launch_bounds__(kThreads)
    im2col_rows_kernel(const E* __restrict__ x, E* __restrict__ out, Im2colParams a) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  E* tile = reinterpret_cast<E*>(smem_raw);
  ColEntry* col = reinterpret_cast<ColEntry*>(smem_raw + im2col_tile_bytes(a.Kp, sizeof(E)));
  const int taps = a.KH * a.KW;
  for (int k = threadIdx.x; k < a.Kp; k += kThreads) {
    ColEntry e{kOutside, kOutside, 0};
    if (k < a.K) {
      const int c = k / taps;
      const int rs = k - c * taps;
      const int r = rs / a.KW;
      const int s = rs - r * a.KW;
      e.dh = r * a.dil_h;
      e.dw = s * a.dil_w;
      e.off = c * a.x_sc + static_cast<int64_t>(r) * a.dil_h * a.x_sh +
              static_cast<int64_t>(s) * a.dil_w * a.x_sw;
    }
    col[k] = e;
  }
  __syncthreads();
  constexpr int kColStep = kThreads / kTileRows;
  const int i = threadIdx.x % kTileRows;
  const int k0 = threadIdx.x / kTileRows;
  E* const my_row = tile + i * a.pitch;
  for (int64_t t = blockIdx.x; t < a.tiles; t += gridDim.x) {
    const int64_t m0 = t * kTileRows;
    const int rows = static_cast<int>(a.M - m0 < kTileRows ? a.M - m0 : kTileRows);
    int rih = kOutside, riw = kOutside;
    int64_t roff = 0;
    if (i < rows) {
      const int64_t m = m0 + i;
      const int ow = static_cast<int>(m % a.OW);
      const int64_t q = m / a.OW;
      const int oh = static_cast<int>(q % a.OH);
      const int64_t n = q / a.OH;
      rih = oh * a.stride_h - a.pad_h;
      riw = ow * a.stride_w - a.pad_w;
      roff = n * a.x_sn + static_cast<int64_t>(rih) * a.x_sh + static_cast<int64_t>(riw) * a.x_sw;
    }
    // Phase 1: element (row i, column k), the tile's rows across a warp.
#pragma unroll 4
    for (int k = k0; k < a.Kp; k += kColStep) {
      const ColEntry c = col[k];
      const int ih = rih + c.dh;
      const int iw = riw + c.dw;
      E val = 0;
      if (static_cast<unsigned>(ih) < static_cast<unsigned>(a.H) &&
          static_cast<unsigned>(iw) < static_cast<unsigned>(a.W)) {
        val = x[roff + c.off];
      }
      my_row[k] = val;
    }
    __syncthreads();
    // Phase 2: the tile's rows are contiguous in the output (rows of Kp elements). Output word
    // w (row r = w / words_per_row) is staged word w + r: each staged row is one word longer.
    const int words = rows * a.words_per_row;
    uint32_t* dst = reinterpret_cast<uint32_t*>(out + m0 * a.Kp);
    const uint32_t* src = reinterpret_cast<const uint32_t*>(tile);
    for (int w = threadIdx.x; w < words; w += kThreads) dst[w] = src[w + a.div_row.div(w)];
    __syncthreads();
  }
}

// out[o, k] = w[o, c, r, s] for k = (c * KH + r) * KW + s < K, 0 for K <= k < Kp: one thread per
// output element (a stem filter: a few thousand elements).
struct FilterParams {
  int KH, KW, K, Kp;
  int64_t w_so, w_sc, w_sh, w_sw;
  int64_t total;  // O * Kp
};

template <typename E>
__global__ void __launch_bounds__(kThreads)
    filter_rows_kernel(const E* __restrict__ w, E* __restrict__ out, FilterParams a) {
  const int taps = a.KH * a.KW;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; i < a.total;
       i += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int64_t o = i / a.Kp;
    const int k = static_cast<int>(i - o * a.Kp);
    E val = 0;
    if (k < a.K) {
      const int c = k / taps;
      const int rs = k - c * taps;
      const int r = rs / a.KW;
      const int s = rs - r * a.KW;
      val = w[o * a.w_so + c * a.w_sc + r * a.w_sh + s * a.w_sw];
    }
    out[i] = val;
  }
}

// im2col_cols: blocks of kThreads x kColsPerThread columns of one row (n, k) at a time, looping
// over a row's columns and over rows by gridDim.y (a block per row and 256-column chunk, one
// element a thread, was block-scheduling bound: 357 us for wav2vec2's [4, 1536, 6400] bf16
// columns on an H100). Consecutive
// threads take consecutive output positions: coalesced stores; loads stride_w elements apart.
struct ColsParams {
  int H, W, KH, KW, OW;
  int stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
  int64_t x_sn, x_sc, x_sh, x_sw;
  int K, Kp;            // real rows per image, and rows written (zeros past K)
  int64_t L, Lp, rows;  // rows = N * Kp
  FastDiv div_ow;
};

// One 16-byte vector of consecutive columns per thread and step (Lp is a multiple of it): one
// store instruction per vector, and the row's decode amortised over the vectors of the row. A
// 1-D problem (OH == 1) skips the division by OW.
template <typename E, bool k1d>
__global__ void __launch_bounds__(kThreads)
    im2col_cols_kernel(const E* __restrict__ x, E* __restrict__ out, ColsParams a) {
  constexpr int V = 16 / sizeof(E);
  const int taps = a.KH * a.KW;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kThreads * V;
  for (int64_t row = blockIdx.y; row < a.rows; row += gridDim.y) {
    const int64_t n = row / a.Kp;
    const int k = static_cast<int>(row - n * a.Kp);
    const bool real = k < a.K;
    const int c = real ? k / taps : 0;
    const int rs = k - c * taps;
    const int r = real ? rs / a.KW : 0;
    const int s = real ? rs - r * a.KW : 0;
    const E* xr = x + n * a.x_sn + c * a.x_sc;
    E* o = out + row * a.Lp;
    const int dh = r * a.dil_h - a.pad_h;
    const int dw = s * a.dil_w - a.pad_w;
    for (int64_t l0 = (static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x) * V; l0 < a.Lp;
         l0 += step) {
      uint4 pack;
      E* e = reinterpret_cast<E*>(&pack);
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const int64_t l = l0 + j;
        E v = 0;
        if (real && l < a.L) {
          const int li = static_cast<int>(l);
          const int oh = k1d ? 0 : a.div_ow.div(li);
          const int ow = k1d ? li : li - oh * a.OW;
          const int ih = oh * a.stride_h + dh;
          const int iw = ow * a.stride_w + dw;
          if (static_cast<unsigned>(ih) < static_cast<unsigned>(a.H) &&
              static_cast<unsigned>(iw) < static_cast<unsigned>(a.W)) {
            v = xr[static_cast<int64_t>(ih) * a.x_sh + static_cast<int64_t>(iw) * a.x_sw];
          }
        }
        e[j] = v;
      }
      *reinterpret_cast<uint4*>(o + l0) = pack;
    }
  }
}

}  // namespace
}  // namespace conv

namespace {

// The convolution window and x's strides, shared by the rows and the columns kernels' parameters
// (RowsParams / ColsParams name these fields alike), and K = C * KH * KW.
template <typename Params>
void set_window(Params& a, const ConvProblem& p, const at::Tensor& x4) {
  a.H = static_cast<int>(p.H);
  a.W = static_cast<int>(p.W);
  a.KH = static_cast<int>(p.KH);
  a.KW = static_cast<int>(p.KW);
  a.OW = static_cast<int>(p.OW);
  a.stride_h = static_cast<int>(p.stride_h);
  a.stride_w = static_cast<int>(p.stride_w);
  a.pad_h = static_cast<int>(p.pad_h);
  a.pad_w = static_cast<int>(p.pad_w);
  a.dil_h = static_cast<int>(p.dil_h);
  a.dil_w = static_cast<int>(p.dil_w);
  a.x_sn = x4.stride(0);
  a.x_sc = x4.stride(1);
  a.x_sh = x4.stride(2);
  a.x_sw = x4.stride(3);
  a.K = static_cast<int>(p.C * p.KH * p.KW);
}

}  // namespace

at::Tensor im2col_rows(const ConvProblem& p, const at::Tensor& x4, int64_t k_multiple) {
  constexpr const char* op = "conv";
  const int64_t es = x4.element_size();
  GK_CHECK(es == 2 || es == 4, op, "im2col: unsupported element size ", es);
  const int64_t vec = 16 / es;
  GK_CHECK(k_multiple == vec, op, "im2col: k_multiple ", k_multiple, " is not 16 bytes (", vec,
           " elements)");
  GK_CHECK(im2col_fits(p, es), op, "im2col: the problem is outside the stem kernel's limits");
  conv::Im2colParams a{};
  a.N = static_cast<int>(p.N);
  a.C = static_cast<int>(p.C);
  a.OH = static_cast<int>(p.OH);
  set_window(a, p, x4);
  a.Kp = static_cast<int>((a.K + k_multiple - 1) / k_multiple * k_multiple);
  a.M = p.N * p.OH * p.OW;
  a.pitch = static_cast<int>(a.Kp + 4 / es);  // one more 4-byte word per staged row
  a.words_per_row = static_cast<int>(a.Kp * es / 4);
  a.div_row = FastDiv(static_cast<uint32_t>(a.words_per_row));
  at::Tensor out = at::empty({a.M, a.Kp}, x4.options().memory_format(at::MemoryFormat::Contiguous));
  if (out.numel() == 0) return out;
  const int64_t smem = conv::im2col_smem_bytes(a.Kp, es);
  GK_CHECK(smem <= conv::kMaxSmemBytes, op, "im2col: patch rows of ", a.Kp,
           " elements exceed the staging tile (the stem rule keeps C below 16 bytes of channels)");
  a.tiles = (a.M + conv::kTileRows - 1) / conv::kTileRows;
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream(x4.device().index()).stream();
  const dim3 grid = checked_grid(op, std::min(a.tiles, conv::kMaxBlocks));
  if (es == 2) {
    conv::im2col_rows_kernel<uint16_t><<<grid, conv::kThreads, smem, stream>>>(
        static_cast<const uint16_t*>(x4.const_data_ptr()), static_cast<uint16_t*>(out.data_ptr()),
        a);
  } else {
    conv::im2col_rows_kernel<uint32_t><<<grid, conv::kThreads, smem, stream>>>(
        static_cast<const uint32_t*>(x4.const_data_ptr()), static_cast<uint32_t*>(out.data_ptr()),
        a);
  }
  GK_CHECK_LAUNCH();
  return out;
}

at::Tensor filter_rows(const at::Tensor& w4, int64_t k_multiple) {
  constexpr const char* op = "conv";
  const int64_t es = w4.element_size();
  GK_CHECK(es == 2 || es == 4, op, "filter_rows: unsupported element size ", es);
  GK_CHECK(k_multiple == 16 / es, op, "filter_rows: k_multiple ", k_multiple,
           " is not 16 bytes (", 16 / es, " elements)");
  const int64_t O = w4.size(0);
  const int64_t K = w4.size(1) * w4.size(2) * w4.size(3);
  const int64_t Kp = (K + k_multiple - 1) / k_multiple * k_multiple;
  if (Kp == K && w4.is_contiguous() &&
      reinterpret_cast<uintptr_t>(w4.const_data_ptr()) % 16 == 0) {
    return w4.view({O, K});
  }
  GK_CHECK(K < (int64_t{1} << 28), op, "filter_rows: ", K, " filter taps x channels");
  at::Tensor out = at::empty({O, Kp}, w4.options().memory_format(at::MemoryFormat::Contiguous));
  if (out.numel() == 0) return out;
  conv::FilterParams a{};
  a.KH = static_cast<int>(w4.size(2));
  a.KW = static_cast<int>(w4.size(3));
  a.K = static_cast<int>(K);
  a.Kp = static_cast<int>(Kp);
  a.w_so = w4.stride(0);
  a.w_sc = w4.stride(1);
  a.w_sh = w4.stride(2);
  a.w_sw = w4.stride(3);
  a.total = O * Kp;
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream(w4.device().index()).stream();
  const dim3 grid = checked_grid(
      op, std::min((a.total + conv::kThreads - 1) / conv::kThreads, conv::kMaxBlocks));
  if (es == 2) {
    conv::filter_rows_kernel<uint16_t><<<grid, conv::kThreads, 0, stream>>>(
        static_cast<const uint16_t*>(w4.const_data_ptr()), static_cast<uint16_t*>(out.data_ptr()),
        a);
  } else {
    conv::filter_rows_kernel<uint32_t><<<grid, conv::kThreads, 0, stream>>>(
        static_cast<const uint32_t*>(w4.const_data_ptr()), static_cast<uint32_t*>(out.data_ptr()),
        a);
  }
  GK_CHECK_LAUNCH();
  return out;
}

at::Tensor im2col_cols(const ConvProblem& p, const at::Tensor& x4) {
  constexpr const char* op = "conv";
  const int64_t es = x4.element_size();
  GK_CHECK(es == p.elem_size && im2col_cols_fits(p), op,
           "im2col_cols: the problem is outside the kernel's limits");
  conv::ColsParams a{};
  set_window(a, p, x4);
  a.Kp = static_cast<int>(im2col_cols_k(p));
  a.L = p.OH * p.OW;
  a.Lp = im2col_cols_ld(p);
  a.rows = p.N * a.Kp;
  a.div_ow = FastDiv(static_cast<uint32_t>(std::max<int64_t>(p.OW, 1)));
  at::Tensor out = at::empty({p.N, a.Kp, a.Lp}, x4.options().memory_format(
                                                  at::MemoryFormat::Contiguous));
  if (out.numel() == 0) return out;
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream(x4.device().index()).stream();
  // Rows across grid.y, about 16 blocks per SM in all; a row's vectors across one block (grid.x
  // only past 4 vectors a thread), so that each thread amortises the row's decode.
  const int64_t vec = 16 / es;
  const int64_t chunk = int64_t{conv::kThreads} * vec * 4;
  const int64_t gx = std::min<int64_t>((a.Lp + chunk - 1) / chunk, 1024);
  const int64_t want = device_props().multiProcessorCount * int64_t{16};
  const int64_t gy = std::max<int64_t>(1, std::min<int64_t>({a.rows, 65535, (want + gx - 1) / gx}));
  const dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(gy));
  const bool one_d = p.OH == 1;
  auto launch = [&](auto tag, auto d1) {
    using E = decltype(tag);
    conv::im2col_cols_kernel<E, decltype(d1)::value><<<grid, conv::kThreads, 0, stream>>>(
        static_cast<const E*>(x4.const_data_ptr()), static_cast<E*>(out.data_ptr()), a);
  };
  if (es == 2) {
    one_d ? launch(uint16_t{}, std::true_type{}) : launch(uint16_t{}, std::false_type{});
  } else {
    one_d ? launch(uint32_t{}, std::true_type{}) : launch(uint32_t{}, std::false_type{});
  }
  GK_CHECK_LAUNCH();
  return out;
}

}  // namespace gpukern
