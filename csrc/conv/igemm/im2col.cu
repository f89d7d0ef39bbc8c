// Explicit im2col for the tensor-core path's stems (conv/igemm/im2col.h): tiles of 64 patch rows
// staged in shared memory, gathered with coalesced reads and written out as one contiguous range.
// (A first version, one thread per 16-byte vector of a row, gathered 8 scattered elements per
// thread: ResNet-50's stem took 245 us on an H100, most of it in the gather's L2 sector traffic.)
#include "conv/igemm/im2col.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>

#include <algorithm>
#include <cstdint>

#include "core/checks.h"
#include "core/launch.cuh"

namespace gpukern {
namespace conv {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = int64_t{1} << 20;  // grid-stride beyond
constexpr int kTileRows = 64;                      // patch rows (output pixels) per tile
constexpr int kMaxSmemBytes = 48 * 1024;           // the tile's staging, static launch limit

struct Im2colParams {
  int64_t N, C, H, W, KH, KW, OH, OW;
  int64_t stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
  int64_t x_sn, x_sc, x_sh, x_sw;
  int64_t K, Kp;   // taps x channels, and the padded row length (a multiple of 16 bytes)
  int64_t M;       // patch rows
  int64_t tiles;   // ceil(M / kTileRows)
  int pitch;       // staged row pitch in elements: Kp plus one 4-byte word (bank spread)
};

// One tile of kTileRows consecutive patch rows, whose output is one contiguous range of
// kTileRows * Kp elements. Phase 1 gathers the input with consecutive threads on consecutive rows
// (consecutive output pixels: the same input row, stride_w apart: coalesced) into shared memory;
// phase 2 copies the staged tile out in 4-byte words, consecutive threads on consecutive words
// (coalesced full-sector stores). The staged rows are a word longer than Kp so that phase 1's
// column writes spread over the banks.
// E: the raw element word (uint16_t for 16-bit types, uint32_t for fp32): a pure gather.
template <typename E>
__global__ void __launch_bounds__(kThreads)
    im2col_rows_kernel(const E* __restrict__ x, E* __restrict__ out, Im2colParams a) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  E* tile = reinterpret_cast<E*>(smem_raw);
  constexpr int kPerWord = 4 / sizeof(E);
  const int64_t taps = a.KH * a.KW;
  for (int64_t t = blockIdx.x; t < a.tiles; t += gridDim.x) {
    const int64_t m0 = t * kTileRows;
    const int rows = static_cast<int>(a.M - m0 < kTileRows ? a.M - m0 : kTileRows);
    // Phase 1: element (row i, column k) for i fastest.
    const int64_t total = static_cast<int64_t>(kTileRows) * a.Kp;
    for (int64_t e = threadIdx.x; e < total; e += kThreads) {
      const int i = static_cast<int>(e % kTileRows);
      const int64_t k = e / kTileRows;
      E val = 0;
      if (i < rows && k < a.K) {
        const int64_t m = m0 + i;
        const int64_t ow = m % a.OW;
        const int64_t q = m / a.OW;
        const int64_t oh = q % a.OH;
        const int64_t n = q / a.OH;
        const int64_t c = k / taps;
        const int64_t rs = k - c * taps;
        const int64_t r = rs / a.KW;
        const int64_t sx = rs - r * a.KW;
        const int64_t ih = oh * a.stride_h - a.pad_h + r * a.dil_h;
        const int64_t iw = ow * a.stride_w - a.pad_w + sx * a.dil_w;
        if (ih >= 0 && ih < a.H && iw >= 0 && iw < a.W) {
          val = x[n * a.x_sn + c * a.x_sc + ih * a.x_sh + iw * a.x_sw];
        }
      }
      tile[i * a.pitch + k] = val;
    }
    __syncthreads();
    // Phase 2: the tile's rows are contiguous in the output (rows of Kp elements).
    const int64_t words_per_row = a.Kp / kPerWord;
    const int64_t words = static_cast<int64_t>(rows) * words_per_row;
    uint32_t* dst = reinterpret_cast<uint32_t*>(out + m0 * a.Kp);
    for (int64_t w = threadIdx.x; w < words; w += kThreads) {
      const int64_t i = w / words_per_row;
      const int64_t kw = w - i * words_per_row;
      dst[w] = *reinterpret_cast<const uint32_t*>(tile + i * a.pitch + kw * kPerWord);
    }
    __syncthreads();
  }
}

}  // namespace
}  // namespace conv

at::Tensor im2col_rows(const ConvProblem& p, const at::Tensor& x4, int64_t k_multiple) {
  constexpr const char* op = "conv";
  const int64_t es = x4.element_size();
  GK_CHECK(es == 2 || es == 4, op, "im2col: unsupported element size ", es);
  const int64_t vec = 16 / es;
  GK_CHECK(k_multiple > 0 && k_multiple % vec == 0, op, "im2col: k_multiple ", k_multiple,
           " is not a multiple of ", vec);
  conv::Im2colParams a{};
  a.N = p.N;
  a.C = p.C;
  a.H = p.H;
  a.W = p.W;
  a.KH = p.KH;
  a.KW = p.KW;
  a.OH = p.OH;
  a.OW = p.OW;
  a.stride_h = p.stride_h;
  a.stride_w = p.stride_w;
  a.pad_h = p.pad_h;
  a.pad_w = p.pad_w;
  a.dil_h = p.dil_h;
  a.dil_w = p.dil_w;
  a.x_sn = x4.stride(0);
  a.x_sc = x4.stride(1);
  a.x_sh = x4.stride(2);
  a.x_sw = x4.stride(3);
  a.K = p.C * p.KH * p.KW;
  a.Kp = (a.K + k_multiple - 1) / k_multiple * k_multiple;
  a.M = p.N * p.OH * p.OW;
  a.pitch = static_cast<int>(a.Kp + 4 / es);  // one more 4-byte word per staged row
  at::Tensor out = at::empty({a.M, a.Kp}, x4.options().memory_format(at::MemoryFormat::Contiguous));
  if (out.numel() == 0) return out;
  const int64_t smem = static_cast<int64_t>(conv::kTileRows) * a.pitch * es;
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

}  // namespace gpukern
