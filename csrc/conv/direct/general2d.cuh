#pragma once
// general2d: the general tiled conv2d kernel, any groups / stride / dilation / padding /
// strides (dense and grouped channels, depthwise multipliers, what no specialised kernel takes).
//
// Contract (conv2d_general_kernel<T, kStaged>; details above the kernel):
//   grid   x = output tile (kTileH x kTileW outputs), y = (n, o) planes, grid-stride over N * O
//          so gridDim.y stays <= 65535.
//   block  kThreadsY x kThreadsX threads; a thread owns kItemsY x kItemsX outputs, kThreads
//          apart, in registers for the whole reduction.
//   shared (kStaged) one chunk of filter rows' taps s_w[R][KW] and the input region they read
//          for the whole tile, s_x[region_rows][region_cols], as float, zeros outside the image.
//   barriers (kStaged) one before restaging (every thread done reading the previous chunk), one
//          after it (the chunk is staged). !kStaged reads global memory directly, no barrier.
#include <cstdint>
#include <type_traits>

#include "conv/direct/common2d.cuh"
#include "device/limits.cuh"
#include "device/vec.cuh"

namespace gpukern {
namespace conv {

struct GeneralTraits {
  static constexpr int kThreadsX = 16;
  static constexpr int kThreadsY = 16;
  static constexpr int kNThreads = kThreadsX * kThreadsY;
  static constexpr int kItemsX = 2;  // outputs per thread along a row, kThreadsX apart
  static constexpr int kItemsY = 2;  // outputs per thread along a column, kThreadsY apart
  static constexpr int kTileW = kThreadsX * kItemsX;
  static constexpr int kTileH = kThreadsY * kItemsY;
  // Shared-memory budget per block, in floats: one chunk of filter rows and the input region
  // those rows read. Together under the 48 KB that needs no opt-in.
  static constexpr int kMaxTaps = 2048;
  static constexpr int kMaxRegion = 8192;
  static_assert(kNThreads % 32 == 0 && kNThreads <= 1024, "block of whole warps");
  static_assert(kThreadsX == 16 || kThreadsX == 32, "a warp spans whole rows of threads");
  static_assert((kMaxTaps + kMaxRegion) * sizeof(float) <= kDefaultSmemLimit,
                "fits without opt-in");
};

// Grid: x = output tile (tile_y * tiles_w + tile_x, kTileH x kTileW outputs), y = (n, o) planes,
// grid-stride over N*O so gridDim.y stays <= 65535. Block: kThreadsY x kThreadsX threads; thread
// (ty, tx) owns outputs (ty + i*kThreadsY, tx + j*kThreadsX) of the tile, in registers for the
// whole reduction (a warp touches consecutive columns, so shared reads and global writes of a
// row are contiguous).
// kStaged (the host checked that the region of one filter row fits): for each input channel of
// the group and each chunk of rows_per_chunk filter rows, the block stages
//   s_w: the chunk's taps [R][KW] as float,
//   s_x: the input region those taps read for the whole tile, region_rows x region_cols floats,
//        zeros outside the image (= the padding),
// so every input element is fetched from global memory once per chunk instead of once per tap.
// !kStaged (huge stride or dilation): direct reads from global/L2 (ECE408's third strategy
// without a core tile), filter taps read uniformly by the block (broadcast through L1).
template <typename T, bool kStaged>
__global__ void __launch_bounds__(GeneralTraits::kNThreads)
    conv2d_general_kernel(const ConvProblem p, int rows_per_chunk, int region_cols,
                          int64_t tiles_w) {
  using Tr = GeneralTraits;
  extern __shared__ float smem[];
  const T* x = ptr<T>(p.x);
  const T* w = ptr<T>(p.w);
  const T* b = ptr<T>(p.b);
  T* y = static_cast<T*>(p.y);
  const int tid = threadIdx.x;
  const int tx = tid % Tr::kThreadsX;
  const int ty = tid / Tr::kThreadsX;
  const int64_t oh0 = (blockIdx.x / tiles_w) * Tr::kTileH;
  const int64_t ow0 = (blockIdx.x % tiles_w) * Tr::kTileW;
  const int64_t ih0 = oh0 * p.stride_h - p.pad_h;
  const int64_t iw0 = ow0 * p.stride_w - p.pad_w;
  const int64_t planes = p.N * p.O;

  for (int64_t plane = blockIdx.y; plane < planes; plane += gridDim.y) {
    const int64_t n = plane / p.O;
    const int64_t o = plane % p.O;
    const int64_t g = o / p.o_per_group;
    const float bias = b ? to_float(b[o * p.b_s]) : 0.f;
    float acc[Tr::kItemsY][Tr::kItemsX];
#pragma unroll
    for (int i = 0; i < Tr::kItemsY; ++i)
#pragma unroll
      for (int j = 0; j < Tr::kItemsX; ++j) acc[i][j] = bias;

    for (int64_t cl = 0; cl < p.c_per_group; ++cl) {
      const T* xc = x + n * p.x_sn + (g * p.c_per_group + cl) * p.x_sc;
      const T* wc = w + o * p.w_so + cl * p.w_sc;
      if constexpr (kStaged) {
        // Staged implies small stride and dilation (the region fits in shared memory).
        const int sh = static_cast<int>(p.stride_h), sw = static_cast<int>(p.stride_w);
        const int dh = static_cast<int>(p.dil_h), dw = static_cast<int>(p.dil_w);
        const int KW = static_cast<int>(p.KW);
        float* s_w = smem;
        float* s_x = smem + rows_per_chunk * KW;
        for (int64_t kh0 = 0; kh0 < p.KH; kh0 += rows_per_chunk) {
          const int R = static_cast<int>(min(static_cast<int64_t>(rows_per_chunk), p.KH - kh0));
          const int region_rows = (Tr::kTileH - 1) * sh + (R - 1) * dh + 1;
          const int64_t rh0 = ih0 + kh0 * p.dil_h;
          __syncthreads();  // every thread is done reading the previous chunk's s_w / s_x
          for (int i = tid; i < R * KW; i += Tr::kNThreads) {
            const int r = i / KW, k = i - r * KW;
            s_w[i] = to_float(wc[(kh0 + r) * p.w_sh + k * p.w_sw]);
          }
          for (int i = tid; i < region_rows * region_cols; i += Tr::kNThreads) {
            const int r = i / region_cols, c = i - r * region_cols;
            const int64_t ih = rh0 + r, iw = iw0 + c;
            s_x[i] = (inside(ih, p.H) && inside(iw, p.W)) ? to_float(xc[ih * p.x_sh + iw * p.x_sw])
                                                          : 0.f;
          }
          __syncthreads();  // the chunk is staged
          for (int r = 0; r < R; ++r) {
            for (int k = 0; k < KW; ++k) {
              const float wv = s_w[r * KW + k];
              const float* sx = s_x + r * dh * region_cols + k * dw;
#pragma unroll
              for (int i = 0; i < Tr::kItemsY; ++i)
#pragma unroll
                for (int j = 0; j < Tr::kItemsX; ++j)
                  acc[i][j] += wv * sx[(ty + i * Tr::kThreadsY) * sh * region_cols +
                                       (tx + j * Tr::kThreadsX) * sw];
            }
          }
        }
      } else {
        for (int64_t kh = 0; kh < p.KH; ++kh) {
          for (int64_t kw = 0; kw < p.KW; ++kw) {
            const float wv = to_float(wc[kh * p.w_sh + kw * p.w_sw]);
#pragma unroll
            for (int i = 0; i < Tr::kItemsY; ++i) {
              const int64_t ih = ih0 + (ty + i * Tr::kThreadsY) * p.stride_h + kh * p.dil_h;
              if (!inside(ih, p.H)) continue;
#pragma unroll
              for (int j = 0; j < Tr::kItemsX; ++j) {
                const int64_t iw = iw0 + (tx + j * Tr::kThreadsX) * p.stride_w + kw * p.dil_w;
                if (inside(iw, p.W)) acc[i][j] += wv * to_float(xc[ih * p.x_sh + iw * p.x_sw]);
              }
            }
          }
        }
      }
    }

    T* yp = y + n * p.y_sn + o * p.y_so;
#pragma unroll
    for (int i = 0; i < Tr::kItemsY; ++i) {
      const int64_t oh = oh0 + ty + i * Tr::kThreadsY;
#pragma unroll
      for (int j = 0; j < Tr::kItemsX; ++j) {
        const int64_t ow = ow0 + tx + j * Tr::kThreadsX;
        if (oh < p.OH && ow < p.OW) yp[oh * p.y_sh + ow * p.y_sw] = from_float<T>(acc[i][j]);
      }
    }
  }
}

}  // namespace conv
}  // namespace gpukern
