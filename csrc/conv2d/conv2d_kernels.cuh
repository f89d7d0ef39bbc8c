#pragma once
// conv2d CUDA kernels (torch-free). Cross-correlation as torch.nn.functional.conv2d:
//   y[n, o, oh, ow] = b[o] + sum_{c in group(o), kh, kw}
//                     w[o, c, kh, kw] * x[n, c, oh*sh - ph + kh*dh, ow*sw - pw + kw*dw]
// with x = 0 outside the image (the padding). Every kernel reads and writes through the element
// strides of Conv2dParams, accumulates in float32 and converts half/bfloat16 to float on load.
// The host (conv2d_cuda.cu) picks one of them in choose_algo().
#include <cstdint>
#include <type_traits>

#include "device/async_mma.cuh"
#include "device/pdl.cuh"
#include "device/tickets.cuh"
#include "device/tma.cuh"
#include "device/vec.cuh"
#include "conv2d/conv2d.h"

namespace gpukern {
namespace conv2d {

template <typename T>
__device__ __forceinline__ const T* ptr(const void* p) {
  return static_cast<const T*>(p);
}

__device__ __forceinline__ bool inside(int64_t i, int64_t n) { return i >= 0 && i < n; }

// ---------------------------------------------------------------------------------------------
// 1. General tiled kernel: any groups / stride / dilation / padding / strides.
// ---------------------------------------------------------------------------------------------
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
  static_assert((kMaxTaps + kMaxRegion) * sizeof(float) <= 48 * 1024, "fits without opt-in");
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
    conv2d_general_kernel(const Conv2dParams p, int rows_per_chunk, int region_cols,
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

// ---------------------------------------------------------------------------------------------
// 2. Depthwise / single-channel NCHW, stride 1: groups == C == O (C == 1 is a single-channel
//    image), any padding and dilation. Bandwidth-bound for small filters, so each input element
//    is read from global memory about once and every tap reuses it from shared memory/registers.
// ---------------------------------------------------------------------------------------------
struct DepthwiseTraits {
  static constexpr int kThreadsX = 32;  // one warp per row of threads: contiguous shared reads
  static constexpr int kItemsX = 2;     // columns per thread, kThreadsX apart
  static constexpr int kTileW = kThreadsX * kItemsX;
  static constexpr int kTileH = 64;
  static constexpr int kChunk = 8;  // runtime filter (kK == -1): filter rows in registers at once
  // Consecutive output rows per thread (the sliding window) for filter kK. 16 for 7x7 and the
  // runtime filters: every staged value a thread loads from shared memory then feeds up to
  // min(16, taps) FMAs of its column, so the shared-load pipe (one warp load per clock per SM,
  // against four warp FMAs) stops being the limit. 8 for the bandwidth-bound 3x3 / 5x5: fewer
  // registers (no spills at 256 threads), more warps in flight for the loads.
  static constexpr int items_y(int kK) { return (kK == 3 || kK == 5) ? 8 : 16; }
  static constexpr int threads_y(int kK) { return kTileH / items_y(kK); }
  static constexpr int threads(int kK) { return kThreadsX * threads_y(kK); }
  // Largest shared footprint (floats) the host may ask for; beyond it the general kernel runs.
  static constexpr int kMaxSmemFloats = 24 * 1024;
  static_assert(kThreadsX == 32, "a warp is one row of threads");
  static_assert(kTileH % 16 == 0, "whole rows of threads for every items_y");
  static_assert(kTileW % 8 == 0, "tile columns start on a 16-byte vector of any dtype");
};

// Shared footprint of the depthwise kernel's tile (floats): rows x pitch, pitch a multiple of the
// vector width so every staged row starts 16-byte aligned. Host and device agree through this.
struct DepthwiseTile {
  int rows, pitch;
};

// One chunk of kR filter rows (kR <= kChunk) of the kK == -1 path: for every filter column, the
// kR taps go to registers and each of the kItemsY + kR - 1 staged rows under the thread's
// columns is loaded once and fed to the outputs whose window holds it (t = r - i is
// compile-time after unrolling, so the taps stay in registers).
// col: s_x at the chunk's first input row for output row 0 of the thread, column off + tx.
// wt: s_w + the chunk's first filter row; tap (kh, kw) of the chunk at wt[kw * KH + kh].
template <int kY, int kR>
__device__ __forceinline__ void depthwise_rows_chunk(
    float (&acc)[DepthwiseTraits::kItemsX][kY], const float* col,
    const float* wt, int KH, int KW, int dw, int pitch) {
  using Tr = DepthwiseTraits;
  for (int kw = 0; kw < KW; ++kw) {
    float wk[kR];
#pragma unroll
    for (int t = 0; t < kR; ++t) wk[t] = wt[kw * KH + t];
    const float* src = col + kw * dw;
#pragma unroll
    for (int r = 0; r < kY + kR - 1; ++r) {
#pragma unroll
      for (int j = 0; j < Tr::kItemsX; ++j) {
        const float v = src[r * pitch + j * Tr::kThreadsX];
#pragma unroll
        for (int i = 0; i < kY; ++i) {
          const int t = r - i;
          if (t >= 0 && t < kR) acc[j][i] += v * wk[t];
        }
      }
    }
  }
}

// Grid: x = output tile (tile_y * tiles_w + tile_x), y = (n, c) planes, grid-stride over N*C.
// Block: threads_y(kK) x 32 threads; thread (ty, tx) owns columns tx + j*32 (j < 2) and rows
// ty*Y .. ty*Y+Y-1 (Y = items_y(kK)) of the 64 x 64 output tile.
// Shared memory: s_x = the tile plus its halo, rows [oh0 - ph, oh0 - ph + 64 + (KH-1)*dh), columns
// from the 16-byte-aligned column c_base <= ow0 - pw on, as float, zeros outside the image;
// s_w (runtime filter only) = the plane's KH*KW taps. One barrier: staged before compute (the
// block leaves the plane loop's next staging behind a second barrier).
// Loads: 16-byte vectors where the host allowed it (rows contiguous and aligned) and the vector
// lies inside the row, scalar with zero fill at the image edges.
// kK > 0: KH == KW == kK with dilation 1, the filter in registers; each thread slides down its
// column, loading every staged row once per filter column and feeding it to the up-to-kK outputs
// that use it (loads per FMA: (kItemsY + kK - 1) / (kItemsY * kK)).
// kK == -1: any filter, row dilation 1 (column dilation any): the filter rows in chunks of
// kChunk taps in registers (s_w holds the taps transposed, [kw][kh]); for each filter column the
// thread slides down its columns as in kK > 0 (loads per FMA: (kItemsY + kChunk - 1) /
// (kItemsY * kChunk) plus one broadcast tap load per kChunk * kItemsX * kItemsY FMAs).
// kK == 0: any filter and dilation, taps from shared memory (one shared load per FMA).
template <typename T, int kK>
__global__ void __launch_bounds__(DepthwiseTraits::threads(kK))
    conv2d_depthwise_nchw_kernel(const Conv2dParams p, DepthwiseTile tile, int64_t tiles_w,
                                 bool vec_ok) {
  using Tr = DepthwiseTraits;
  constexpr int kItemsY = Tr::items_y(kK);
  constexpr int kNThreads = Tr::threads(kK);
  constexpr int V = kVec16<T>;
  extern __shared__ float4 smem4[];  // float4: 16-byte aligned rows for the vector stores
  float* s_x = reinterpret_cast<float*>(smem4);
  float* s_w = s_x + tile.rows * tile.pitch;
  const T* x = ptr<T>(p.x);
  const T* w = ptr<T>(p.w);
  const T* b = ptr<T>(p.b);
  T* y = static_cast<T*>(p.y);
  const int tid = threadIdx.x;
  const int tx = tid % Tr::kThreadsX;
  const int ty = tid / Tr::kThreadsX;
  const int64_t oh0 = (blockIdx.x / tiles_w) * Tr::kTileH;
  const int64_t ow0 = (blockIdx.x % tiles_w) * Tr::kTileW;
  const int64_t ih0 = oh0 - p.pad_h;
  const int64_t iw0 = ow0 - p.pad_w;
  // Floor to a multiple of V (iw0 may be negative); ow0 is one, so off = pad_w's remainder.
  const int64_t c_base = (iw0 >= 0 ? iw0 / V : -((-iw0 + V - 1) / V)) * V;
  const int off = static_cast<int>(iw0 - c_base);
  const int vecs_per_row = tile.pitch / V;
  const int64_t planes = p.N * p.C;

  for (int64_t plane = blockIdx.y; plane < planes; plane += gridDim.y) {
    const int64_t n = plane / p.C;
    const int64_t c = plane % p.C;
    const T* xc = x + n * p.x_sn + c * p.x_sc;
    const T* wc = w + c * p.w_so;
    __syncthreads();  // the previous plane's compute is done with s_x / s_w
    for (int i = tid; i < tile.rows * vecs_per_row; i += kNThreads) {
      const int r = i / vecs_per_row, v = i - r * vecs_per_row;
      const int64_t ih = ih0 + r;
      const int64_t gc = c_base + static_cast<int64_t>(v) * V;
      float vals[V];
      if (!inside(ih, p.H)) {
#pragma unroll
        for (int e = 0; e < V; ++e) vals[e] = 0.f;
      } else if (vec_ok && gc >= 0 && gc + V <= p.W) {
        const Vec<T, V> in = load_vec<T, V>(xc + ih * p.x_sh + gc);
#pragma unroll
        for (int e = 0; e < V; ++e) vals[e] = to_float(in.v[e]);
      } else {
#pragma unroll
        for (int e = 0; e < V; ++e)
          vals[e] = inside(gc + e, p.W) ? to_float(xc[ih * p.x_sh + (gc + e) * p.x_sw]) : 0.f;
      }
      float4* dst = reinterpret_cast<float4*>(s_x + r * tile.pitch + v * V);
#pragma unroll
      for (int q = 0; q < V / 4; ++q)
        dst[q] = make_float4(vals[4 * q], vals[4 * q + 1], vals[4 * q + 2], vals[4 * q + 3]);
    }
    if constexpr (kK == 0) {
      for (int i = tid; i < p.KH * p.KW; i += kNThreads) {
        const int kh = i / static_cast<int>(p.KW), kw = i - kh * static_cast<int>(p.KW);
        s_w[i] = to_float(wc[kh * p.w_sh + kw * p.w_sw]);
      }
    } else if constexpr (kK < 0) {
      // Transposed, [kw][kh]: a chunk's taps of one filter column are consecutive.
      for (int i = tid; i < p.KH * p.KW; i += kNThreads) {
        const int kw = i / static_cast<int>(p.KH), kh = i - kw * static_cast<int>(p.KH);
        s_w[i] = to_float(wc[kh * p.w_sh + kw * p.w_sw]);
      }
    }
    __syncthreads();  // tile (and taps) staged

    const float bias = b ? to_float(b[c * p.b_s]) : 0.f;
    float acc[Tr::kItemsX][kItemsY];
#pragma unroll
    for (int j = 0; j < Tr::kItemsX; ++j)
#pragma unroll
      for (int i = 0; i < kItemsY; ++i) acc[j][i] = bias;
    const int y0 = ty * kItemsY;

    if constexpr (kK > 0) {
      float wr[kK][kK];
#pragma unroll
      for (int kh = 0; kh < kK; ++kh)
#pragma unroll
        for (int kw = 0; kw < kK; ++kw) wr[kh][kw] = to_float(wc[kh * p.w_sh + kw * p.w_sw]);
#pragma unroll
      for (int j = 0; j < Tr::kItemsX; ++j) {
        const float* col = s_x + y0 * tile.pitch + off + tx + j * Tr::kThreadsX;
#pragma unroll
        for (int kw = 0; kw < kK; ++kw) {
#pragma unroll
          for (int r = 0; r < kItemsY + kK - 1; ++r) {
            const float v = col[r * tile.pitch + kw];
#pragma unroll
            for (int i = 0; i < kItemsY; ++i) {
              const int kh = r - i;
              if (kh >= 0 && kh < kK) acc[j][i] += v * wr[kh][kw];
            }
          }
        }
      }
    } else if constexpr (kK < 0) {
      const int KH = static_cast<int>(p.KH), KW = static_cast<int>(p.KW);
      const int dw = static_cast<int>(p.dil_w);
      const float* col = s_x + y0 * tile.pitch + off + tx;
      int kh0 = 0;
      for (; kh0 + Tr::kChunk <= KH; kh0 += Tr::kChunk)
        depthwise_rows_chunk<kItemsY, Tr::kChunk>(acc, col + kh0 * tile.pitch, s_w + kh0, KH, KW, dw,
                                         tile.pitch);
      const float* ct = col + kh0 * tile.pitch;
      const float* wt = s_w + kh0;
      static_assert(Tr::kChunk == 8, "one case per remainder below");
      switch (KH - kh0) {
        case 1: depthwise_rows_chunk<kItemsY, 1>(acc, ct, wt, KH, KW, dw, tile.pitch); break;
        case 2: depthwise_rows_chunk<kItemsY, 2>(acc, ct, wt, KH, KW, dw, tile.pitch); break;
        case 3: depthwise_rows_chunk<kItemsY, 3>(acc, ct, wt, KH, KW, dw, tile.pitch); break;
        case 4: depthwise_rows_chunk<kItemsY, 4>(acc, ct, wt, KH, KW, dw, tile.pitch); break;
        case 5: depthwise_rows_chunk<kItemsY, 5>(acc, ct, wt, KH, KW, dw, tile.pitch); break;
        case 6: depthwise_rows_chunk<kItemsY, 6>(acc, ct, wt, KH, KW, dw, tile.pitch); break;
        case 7: depthwise_rows_chunk<kItemsY, 7>(acc, ct, wt, KH, KW, dw, tile.pitch); break;
        default: break;  // KH a multiple of kChunk
      }
    } else {
      const int KH = static_cast<int>(p.KH), KW = static_cast<int>(p.KW);
      const int dh = static_cast<int>(p.dil_h), dw = static_cast<int>(p.dil_w);
      for (int kh = 0; kh < KH; ++kh) {
        for (int kw = 0; kw < KW; ++kw) {
          const float wv = s_w[kh * KW + kw];
          const float* src = s_x + (y0 + kh * dh) * tile.pitch + off + kw * dw + tx;
#pragma unroll
          for (int j = 0; j < Tr::kItemsX; ++j)
#pragma unroll
            for (int i = 0; i < kItemsY; ++i)
              acc[j][i] += wv * src[i * tile.pitch + j * Tr::kThreadsX];
        }
      }
    }

    T* yp = y + n * p.y_sn + c * p.y_so;
#pragma unroll
    for (int i = 0; i < kItemsY; ++i) {
      const int64_t oh = oh0 + y0 + i;
#pragma unroll
      for (int j = 0; j < Tr::kItemsX; ++j) {
        const int64_t ow = ow0 + tx + j * Tr::kThreadsX;
        if (oh < p.OH && ow < p.OW) yp[oh * p.y_sh + ow * p.y_sw] = from_float<T>(acc[j][i]);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// 3. Depthwise channels_last (NHWC): groups == C == O, any stride / dilation / padding, filters
//    of up to NhwcTraits::kMaxTaps taps. Each thread owns one 16-byte vector of V channels
//    (4 fp32 / 8 half or bf16) at items_w consecutive output columns of one output row, so every
//    input access of a warp is TC consecutive 16-byte vectors of one pixel (coalesced along C, no
//    layout conversion) and a warp instruction moves 512 bytes. The previous version (one channel
//    per thread, scalar loads, int64 index math and a global tap load per FMA) was issue-bound
//    at 54% SM busy with 6% of DRAM bandwidth (ncu, dw2_3_f32_nhwc).
// ---------------------------------------------------------------------------------------------
struct NhwcTraits {
  static constexpr int kMaxThreads = 256;
  // Consecutive output columns per thread: 4 for fp32 (16 sums), 2 for 16-bit types (their
  // vectors hold 8 channels: 16 sums; 4 columns took 128-134 registers and spilled).
  static constexpr int items_w(int elem_size) { return elem_size == 4 ? 4 : 2; }
  // Taps staged per block in shared memory as [tap][channel]: K*K * TC * 16 bytes <= 48 KB
  // (no opt-in) with TC = 32 lanes of channel vectors.
  static constexpr int kMaxTaps = 96;
  static constexpr int kMaxSmemBytes = kMaxTaps * 32 * 16;
  static_assert(kMaxSmemBytes <= 48 * 1024, "fits without opt-in");
};

// Work decomposition (host: conv2d_cuda.cu, plan_nhwc()). A block is tc x tw threads: tc lanes
// (a power of two <= 32) over channel vectors, tw groups of items_w output columns; it covers
// channel vectors [cb * tc, cb * tc + tc), column groups [wb * tw, wb * tw + tw) and output rows
// (n * OH + oh) [rc * rows, rc * rows + rows). blockIdx.x = (rc * w_blocks + wb) * c_blocks + cb:
// neighbouring blocks take neighbouring memory.
struct NhwcShape {
  int tc, tw;
  int64_t c_vecs;    // channel vectors: ceil(C / V)
  int64_t c_blocks, w_groups, w_blocks, row_chunks, rows;
  int64_t img_chunks;  // roll kernel: row strips per image (row_chunks: the other kernel)
  bool x_vec, y_vec;   // vector loads / stores (channels contiguous, aligned, C % V == 0)
};

// NW words as floats: 1 per word for fp32, 2 for half / bfloat16 (low half first; bfloat16
// widens by shifts, 2 instructions per pair). Words in registers, never an addressed local array
// (which ptxas put on the stack).
template <typename T, int NW>
__device__ __forceinline__ void words_to_floats(const unsigned (&w)[NW],
                                                float (&out)[NW * 4 / sizeof(T)]) {
#pragma unroll
  for (int q = 0; q < NW; ++q) {
    if constexpr (std::is_same_v<T, float>) {
      out[q] = __uint_as_float(w[q]);
    } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      out[2 * q] = __uint_as_float(w[q] << 16);
      out[2 * q + 1] = __uint_as_float(w[q] & 0xffff0000u);
    } else {
      const float2 f = __half22float2(
          __halves2half2(__ushort_as_half(static_cast<unsigned short>(w[q] & 0xffffu)),
                         __ushort_as_half(static_cast<unsigned short>(w[q] >> 16))));
      out[2 * q] = f.x;
      out[2 * q + 1] = f.y;
    }
  }
}

// One 16-byte vector (4 words) as V floats.
template <typename T>
__device__ __forceinline__ void words_to_float(const uint4& u, float (&out)[kVec16<T>]) {
  const unsigned w[4] = {u.x, u.y, u.z, u.w};
  words_to_floats<T, 4>(w, out);
}

// V channels of one pixel (p = its first channel): zeros when !in (padding), one vector load
// when allowed, else `valid` scalars through the channel stride (zeros past C).
template <typename T, int V>
__device__ __forceinline__ void nhwc_load(float (&v)[V], const T* p, bool in, bool vec,
                                          int valid, int64_t x_sc) {
  if (!in) {
#pragma unroll
    for (int e = 0; e < V; ++e) v[e] = 0.f;
  } else if (vec) {
    words_to_float<T>(*reinterpret_cast<const uint4*>(p), v);
  } else {
#pragma unroll
    for (int e = 0; e < V; ++e) v[e] = e < valid ? to_float(p[e * x_sc]) : 0.f;
  }
}

// The V taps (kh, kw) of the thread's channels, from the block's shared [tap][channel] copy.
template <typename T, int V>
__device__ __forceinline__ void nhwc_taps(float (&wv)[V], const T* s_tap) {
  words_to_float<T>(*reinterpret_cast<const uint4*>(s_tap), wv);
}

// Stores a thread's sums acc[j][e] (channels c0 + e of output columns ow0 + j, those < OW) of
// one output row yr (at channel c0): a V-element vector per column when allowed, else the
// `valid` channels one by one through the channel stride.
template <typename T, int V, int IW>
__device__ __forceinline__ void nhwc_store(T* yr, const float (&acc)[IW][V], int ow0, int OW,
                                           int64_t y_sw, int64_t y_so, int valid, bool vec) {
#pragma unroll
  for (int j = 0; j < IW; ++j) {
    const int ow = ow0 + j;
    if (ow >= OW) break;
    if (vec) {
      Vec<T, V> out;
#pragma unroll
      for (int e = 0; e < V; ++e) out.v[e] = from_float<T>(acc[j][e]);
      store_vec<T, V>(yr + ow * y_sw, out);
    } else {
#pragma unroll
      for (int e = 0; e < V; ++e)
        if (e < valid) yr[ow * y_sw + e * y_so] = from_float<T>(acc[j][e]);
    }
  }
}

// Any filter, stride and dilation: one load per tap and output (square 3/5/7 filters with
// stride 1 and dilation 1 take conv2d_depthwise_nhwc_roll_kernel below).
template <typename T>
__global__ void __launch_bounds__(NhwcTraits::kMaxThreads)
    conv2d_depthwise_nhwc_kernel(const Conv2dParams p, NhwcShape s) {
  using Tr = NhwcTraits;
  constexpr int V = kVec16<T>;
  constexpr int IW = Tr::items_w(sizeof(T));
  extern __shared__ float4 smem4[];  // float4: 16-byte aligned tap vectors
  T* s_w = reinterpret_cast<T*>(smem4);
  const int tcv = s.tc * V;  // channels per block
  const int KH = static_cast<int>(p.KH), KW = static_cast<int>(p.KW), KK = KH * KW;
  const int64_t cb = blockIdx.x % s.c_blocks;
  const int64_t wb = (blockIdx.x / s.c_blocks) % s.w_blocks;
  const int64_t rc = blockIdx.x / s.c_blocks / s.w_blocks;
  const int nthreads = s.tc * s.tw;
  {
    const T* w = ptr<T>(p.w);
    // Tap-fastest reads (contiguous for a contiguous weight), [tap][channel] writes.
    for (int i = threadIdx.x; i < KK * tcv; i += nthreads) {
      const int ch = i / KK, tap = i - ch * KK;
      const int kh = tap / KW, kw = tap - kh * KW;
      const int64_t cg = cb * tcv + ch;
      s_w[tap * tcv + ch] = cg < p.C ? w[cg * p.w_so + kh * p.w_sh + kw * p.w_sw]
                                     : from_float<T>(0.f);
    }
  }
  __syncthreads();  // the only barrier: taps staged
  const int tc = threadIdx.x % s.tc;
  const int tw = threadIdx.x / s.tc;
  const int64_t cv = cb * s.tc + tc;
  const int64_t wg = wb * s.tw + tw;
  if (cv >= s.c_vecs || wg >= s.w_groups) return;
  const int64_t c0 = cv * V;
  const int valid = static_cast<int>(min(static_cast<int64_t>(V), p.C - c0));
  const int ow0 = static_cast<int>(wg * IW);
  const T* s_tap = s_w + tc * V;
  const int OW = static_cast<int>(p.OW);
  const int64_t x_sh = p.x_sh, x_sw = p.x_sw, x_sc = p.x_sc;
  const bool x_vec = s.x_vec;

  float bias[V];
#pragma unroll
  for (int e = 0; e < V; ++e)
    bias[e] = (p.b != nullptr && e < valid) ? to_float(ptr<T>(p.b)[(c0 + e) * p.b_s]) : 0.f;

  const int64_t total_rows = p.N * p.OH;
  const int64_t row_end = min(total_rows, (rc + 1) * s.rows);
#pragma unroll 1
  for (int64_t row = rc * s.rows; row < row_end; ++row) {
    const int64_t n = row / p.OH;
    const int oh = static_cast<int>(row - n * p.OH);
    const T* xn = ptr<T>(p.x) + n * p.x_sn + c0 * x_sc;
    float acc[IW][V];
#pragma unroll
    for (int j = 0; j < IW; ++j)
#pragma unroll
      for (int e = 0; e < V; ++e) acc[j][e] = bias[e];

    const int64_t ih0 = oh * p.stride_h - p.pad_h;
    const int64_t iw0 = static_cast<int64_t>(ow0) * p.stride_w - p.pad_w;
    for (int kh = 0; kh < KH; ++kh) {
      const int64_t ih = ih0 + kh * p.dil_h;
      if (!inside(ih, p.H)) continue;
      const T* xr = xn + ih * x_sh;
      for (int kw = 0; kw < KW; ++kw) {
        float wv[V];
        nhwc_taps<T, V>(wv, s_tap + (kh * KW + kw) * tcv);
#pragma unroll
        for (int j = 0; j < IW; ++j) {
          const int64_t iw = iw0 + j * p.stride_w + kw * p.dil_w;
          const bool in = inside(iw, p.W);
          float v[V];
          nhwc_load<T, V>(v, in ? xr + iw * x_sw : xr, in, x_vec, valid, x_sc);
#pragma unroll
          for (int e = 0; e < V; ++e) acc[j][e] += wv[e] * v[e];
        }
      }
    }

    T* yr = static_cast<T*>(p.y) + n * p.y_sn + c0 * p.y_so + oh * p.y_sh;
    nhwc_store<T, V, IW>(yr, acc, ow0, OW, p.y_sw, p.y_so, valid, s.y_vec);
  }
}

// Square kK x kK filter (kK = 3/5/7), stride 1, dilation 1: a thread owns 4 channels
// (NhwcRoll::kV: one 16-byte fp32 or 8-byte half / bfloat16 vector) at kItems consecutive output
// columns and walks down a strip of s.rows output rows of one image. Each input row under the
// strip is loaded once (kItems + kK - 1 pixels, raw words, prefetched one row ahead) and fed to
// the kK output rows whose window holds it; those rows' partial sums rotate through kK register
// slots (output row r lives in slot r % kK, compile-time after unrolling the row loop by kK), and
// a row is stored as soon as its last input row has passed. Loads per output vector:
// (kItems + kK - 1) / kItems * (rows + kK - 1) / rows, against kK * (kItems + kK - 1) / kItems
// for a thread that recomputes each output row on its own (the previous version, 0.47x cuDNN on
// dw2_3_bf16_nhwc). Taps: staged once per block as float [tap][channel], read as one 16-byte
// shared load per tap and filter row.
// Grid: blockIdx.x = ((n * s.img_chunks + chunk) * s.w_blocks + wb) * s.c_blocks + cb.
struct NhwcRoll {
  static constexpr int kV = 4;         // channels per thread
  static constexpr int kMaxRows = 64;  // output rows per strip
  // Columns per thread, and whether the next input row is prefetched into registers (its loads
  // in flight during this row's FMAs): as much as 128 registers hold without spills (2 blocks of
  // 256 threads per SM): kK sum slots of items * kV floats, items + kK - 1 input pixels as
  // floats, and as raw words when prefetched. Measured on the H200, dw2_3_bf16_nhwc: 4 columns
  // and one row ahead 49.8 us; two rows ahead (buffers rotated by register copies, which wait
  // for loads in flight) 53.6 us, and with the loop unrolled instead it spilled; 2 columns and
  // two rows ahead 64.5 us.
  static constexpr int items(int k) { return k == 3 ? 4 : (k == 5 ? 2 : 1); }
  template <typename T>
  static constexpr bool prefetch(int k) {
    return k == 3 || (k == 5 && sizeof(T) == 2);
  }
};

template <typename T>
using NhwcRaw = std::conditional_t<sizeof(T) == 4, uint4, uint2>;  // NhwcRoll::kV elements

template <typename T>
__device__ __forceinline__ unsigned elem_bits(const T& v) {
  if constexpr (sizeof(T) == 4) {
    return __float_as_uint(v);
  } else {
    return static_cast<unsigned>(*reinterpret_cast<const unsigned short*>(&v));
  }
}

// kV channels of one pixel (p = its first channel) as raw words: zeros when !in (padding), one
// vector load when allowed, else `valid` scalars through the channel stride (zeros past C).
template <typename T>
__device__ __forceinline__ NhwcRaw<T> nhwc_raw_load(const T* p, bool in, bool vec, int valid,
                                                    int64_t x_sc) {
  if (!in) return NhwcRaw<T>{};
  if (vec) return *reinterpret_cast<const NhwcRaw<T>*>(p);
  unsigned b[NhwcRoll::kV];
#pragma unroll
  for (int e = 0; e < NhwcRoll::kV; ++e) b[e] = e < valid ? elem_bits(p[e * x_sc]) : 0u;
  if constexpr (sizeof(T) == 4) {
    return make_uint4(b[0], b[1], b[2], b[3]);
  } else {
    return make_uint2(b[0] | (b[1] << 16), b[2] | (b[3] << 16));
  }
}

template <typename T>
__device__ __forceinline__ void raw_to_float(const NhwcRaw<T>& r, float (&out)[NhwcRoll::kV]) {
  if constexpr (sizeof(T) == 4) {
    const unsigned w[4] = {r.x, r.y, r.z, r.w};
    words_to_floats<T, 4>(w, out);
  } else {
    const unsigned w[2] = {r.x, r.y};
    words_to_floats<T, 2>(w, out);
  }
}

template <typename T, int kK>
__global__ void __launch_bounds__(NhwcTraits::kMaxThreads, 2)
    conv2d_depthwise_nhwc_roll_kernel(const Conv2dParams p, NhwcShape s) {
  constexpr int V = NhwcRoll::kV;
  constexpr int IW = NhwcRoll::items(kK);
  constexpr int NI = IW + kK - 1;  // input pixels under a thread's outputs
  extern __shared__ float4 smem4[];
  float* s_w = reinterpret_cast<float*>(smem4);  // [tap][channel]
  const int tcv = s.tc * V;                      // channels per block
  unsigned bid = blockIdx.x;
  const int cb = static_cast<int>(bid % s.c_blocks);
  bid /= static_cast<unsigned>(s.c_blocks);
  const int wb = static_cast<int>(bid % s.w_blocks);
  bid /= static_cast<unsigned>(s.w_blocks);
  const int chunk = static_cast<int>(bid % s.img_chunks);
  const int64_t n = bid / s.img_chunks;
  {
    const T* w = ptr<T>(p.w);
    // Tap-fastest reads (contiguous for a contiguous weight), [tap][channel] writes.
    for (int i = threadIdx.x; i < kK * kK * tcv; i += s.tc * s.tw) {
      const int ch = i / (kK * kK), tap = i - ch * (kK * kK);
      const int kh = tap / kK, kw = tap - kh * kK;
      const int64_t cg = static_cast<int64_t>(cb) * tcv + ch;
      s_w[tap * tcv + ch] = cg < p.C ? to_float(w[cg * p.w_so + kh * p.w_sh + kw * p.w_sw]) : 0.f;
    }
  }
  __syncthreads();  // the only barrier: taps staged
  const int tc = threadIdx.x % s.tc;
  const int tw = threadIdx.x / s.tc;
  const int64_t cv = static_cast<int64_t>(cb) * s.tc + tc;
  const int64_t wg = static_cast<int64_t>(wb) * s.tw + tw;
  if (cv >= s.c_vecs || wg >= s.w_groups) return;
  const int64_t c0 = cv * V;
  const int valid = static_cast<int>(min(static_cast<int64_t>(V), p.C - c0));
  const int ow0 = static_cast<int>(wg * IW);
  const int iw0 = ow0 - static_cast<int>(p.pad_w);
  const float* s_tap = s_w + tc * V;
  const int H = static_cast<int>(p.H), W = static_cast<int>(p.W), OW = static_cast<int>(p.OW);
  const int64_t x_sh = p.x_sh, x_sw = p.x_sw, x_sc = p.x_sc;
  const bool x_vec = s.x_vec;
  const int oh0 = chunk * static_cast<int>(s.rows);
  const int rows = min(static_cast<int>(s.rows), static_cast<int>(p.OH) - oh0);
  const int ih0 = oh0 - static_cast<int>(p.pad_h);  // input row of step t = ih0 + t
  const int steps = rows + kK - 1;
  const T* xn = ptr<T>(p.x) + n * p.x_sn + c0 * x_sc;
  T* yn = static_cast<T*>(p.y) + n * p.y_sn + c0 * p.y_so;

  float bias[V];
#pragma unroll
  for (int e = 0; e < V; ++e)
    bias[e] = (p.b != nullptr && e < valid) ? to_float(ptr<T>(p.b)[(c0 + e) * p.b_s]) : 0.f;

  auto load_row = [&](NhwcRaw<T> (&raw)[NI], int t) {
    const int ih = ih0 + t;
    const bool row_in = t < steps && ih >= 0 && ih < H;
    const T* xr = xn + static_cast<int64_t>(row_in ? ih : 0) * x_sh;
#pragma unroll
    for (int i = 0; i < NI; ++i) {
      const int iw = iw0 + i;
      const bool in = row_in && iw >= 0 && iw < W;
      raw[i] = nhwc_raw_load<T>(in ? xr + iw * x_sw : xr, in, x_vec, valid, x_sc);
    }
  };

  float acc[kK][IW][V];
#pragma unroll
  for (int q = 0; q < kK; ++q)
#pragma unroll
    for (int j = 0; j < IW; ++j)
#pragma unroll
      for (int e = 0; e < V; ++e) acc[q][j][e] = bias[e];

  constexpr bool kPrefetch = NhwcRoll::prefetch<T>(kK);
  NhwcRaw<T> raw[NI];  // input row t (prefetched: loaded during row t - 1)
  if (kPrefetch) load_row(raw, 0);
#pragma unroll 1
  for (int t = 0; t < steps; ++t) {
    if (!kPrefetch) load_row(raw, t);
    float v[NI][V];
#pragma unroll
    for (int i = 0; i < NI; ++i) raw_to_float<T>(raw[i], v[i]);
    if (kPrefetch) load_row(raw, t + 1);  // in flight during this row's FMAs
    const int ih = ih0 + t;
    if (ih >= 0 && ih < H) {
#pragma unroll
      for (int kh = 0; kh < kK; ++kh) {
        // Input row t meets output row t - kh (of the strip) at filter row kh; that row's sums
        // are in slot kK - 1 - kh (slot 0: the oldest row in flight).
        if (t - kh < 0 || t - kh >= rows) continue;
#pragma unroll
        for (int kw = 0; kw < kK; ++kw) {
          const float4 wq = *reinterpret_cast<const float4*>(s_tap + (kh * kK + kw) * tcv);
          const float wv[V] = {wq.x, wq.y, wq.z, wq.w};
#pragma unroll
          for (int j = 0; j < IW; ++j)
#pragma unroll
            for (int e = 0; e < V; ++e) acc[kK - 1 - kh][j][e] += wv[e] * v[j + kw][e];
        }
      }
    }
    const int r = t - (kK - 1);  // slot 0's last input row has passed: store it
    if (r >= 0) {
      nhwc_store<T, V, IW>(yn + static_cast<int64_t>(oh0 + r) * p.y_sh, acc[0], ow0, OW,
                           p.y_sw, p.y_so, valid, s.y_vec);
    }
    // Rotate: every row moves one slot older, the newest slot starts from the bias.
#pragma unroll
    for (int q = 0; q < kK; ++q)
#pragma unroll
      for (int j = 0; j < IW; ++j)
#pragma unroll
        for (int e = 0; e < V; ++e) acc[q][j][e] = q + 1 < kK ? acc[q + 1][j][e] : bias[e];
  }
}

// ---------------------------------------------------------------------------------------------
// 4. Depthwise / single-channel NCHW rows kernel: groups == C == O (C == 1 is a single-channel
//    image), stride 1, dilation 1, square kK x kK filter (kK = 3/5/7) with column padding pw and
//    kK-1-pw both <= kHalo. Built for bandwidth: no block barriers and no one-tile-per-block
//    latency; each warp streams down a strip of rows with kStages input rows in flight.
// ---------------------------------------------------------------------------------------------
struct RowsTraits {
  static constexpr int kWarps = 4;  // independent warps per block (a block only groups them)
  static constexpr int kNThreads = 32 * kWarps;
  static constexpr int kItems = 4;   // consecutive output columns per lane (one 16 B fp32 vector)
  static constexpr int kHalo = 4;    // staged input columns on each side of a segment
  static constexpr int kStages = 4;  // input rows in flight per warp (cp.async ring)
  // Shared elements of T per ring slot (one input row of every segment of a warp).
  static constexpr int seg_pitch(int seg_lanes) { return seg_lanes * kItems + 2 * kHalo; }
  static constexpr int slot(int seg_lanes) { return (32 / seg_lanes) * seg_pitch(seg_lanes); }
  // Blocks per SM asked of ptxas: the register cap that holds kK*kK taps + kK*kItems partial
  // sums without spills (6 / 5 blocks for 3x3 / 5x5, i.e. <= 80 / 96 registers, spilled 44 / 88
  // bytes: kept at 4 / 3).
  static constexpr int min_blocks(int kK) { return kK <= 3 ? 4 : (kK <= 5 ? 3 : 2); }
  static_assert(kHalo == kItems, "halo vectors are staged like the lane's own vector");
  static_assert(kItems * 4 <= 16, "one fp32 vector per lane");
};

// Work decomposition of the rows kernel (host: conv2d_cuda.cu, plan_rows()). A warp's unit is
// (plane group, row chunk, column strip): seg_lanes lanes (a power of two) cover one plane's
// strip of seg_lanes * kItems output columns, 32 / seg_lanes planes side by side in one warp when
// a row is narrow (seg_lanes < 32 only when one strip covers the whole row).
struct RowsShape {
  int seg_lanes;
  int64_t strips, chunks, rows, units;  // rows: output rows per chunk; units = warps of work
  bool x_vec, y_vec;  // 4-element vector staging / stores allowed (unit stride, aligned rows)
};

// Stores the I outputs v of one row at columns o0 .. o0 + I - 1 of yr (those in [0, OW)): one
// vector store when allowed (unit stride, aligned; vec_ok) and all I are inside, else scalars.
template <typename T, int I>
__device__ __forceinline__ void store_cols(T* yr, const float (&v)[I], int o0, int OW,
                                           int64_t y_sw, bool vec_ok) {
  if (vec_ok && o0 >= 0 && o0 + I <= OW) {
    Vec<T, I> out;
#pragma unroll
    for (int j = 0; j < I; ++j) out.v[j] = from_float<T>(v[j]);
    store_vec<T, I>(yr + o0, out);
  } else {
#pragma unroll
    for (int j = 0; j < I; ++j)
      if (o0 + j >= 0 && o0 + j < OW) yr[(o0 + j) * y_sw] = from_float<T>(v[j]);
  }
}

// Stages input columns [col, col + kItems) of one row (xr = the row's first element; zeros when
// !row_in or outside [0, W)) at dst: one asynchronous vector copy when allowed and the vector lies
// inside the row (or the whole row is padding: zero fill), else scalar loads through the column
// stride. Scalars by value: a reference to the kernel's params would force a local copy of them.
template <typename T>
__device__ __forceinline__ void rows_stage_vec(T* dst, const T* xr, int col, int W, int64_t x_sw,
                                               bool row_in, bool vec_ok) {
  constexpr int I = RowsTraits::kItems;
  if (vec_ok && (!row_in || (col >= 0 && col + I <= W))) {
    cp_async_zfill<I * sizeof(T)>(dst, row_in ? xr + col : xr, row_in);
  } else {
#pragma unroll
    for (int e = 0; e < I; ++e)
      dst[e] = (row_in && col + e >= 0 && col + e < W) ? xr[(col + e) * x_sw]
                                                       : from_float<T>(0.f);
  }
}

// One ring slot's row for a lane: its own vector at column o0, plus the halo vectors on the
// segment's edge lanes (edge = -1: none, else their first column); one commit group per row,
// also when empty (wait_group counts rows).
template <typename T>
__device__ __forceinline__ void rows_stage_row(T* dst, T* dst_edge, const T* xr, int o0, int edge,
                                               int W, int64_t x_sw, bool row_in, bool vec_ok) {
  rows_stage_vec<T>(dst, xr, o0, W, x_sw, row_in, vec_ok);
  if (edge != -1) rows_stage_vec<T>(dst_edge, xr, edge, W, x_sw, row_in, vec_ok);
  cp_async_commit();
}

// Grid: x = groups of kWarps warp units (unit = (plane group * chunks + chunk) * strips + strip,
// so neighbouring warps take neighbouring strips of the same rows). Warp: seg_lanes lanes per
// plane; lane g of a segment owns output columns o0 = strip * seg_lanes * kItems + g * kItems
// .. o0 + kItems - 1 of the chunk's rows.
// Shared memory: per warp a ring of kStages slots; a slot holds, per segment, input columns
// [c_seg - kHalo, c_seg + seg_lanes*kItems + kHalo) of one input row (lane g stages its own
// vector, lanes 0 and seg_lanes-1 also the halo vectors). Only __syncwarp: the ring is private
// to the warp (cp.async.wait_group makes a lane's copies land, the __syncwarp after it shares
// them; the __syncwarp after the reads keeps the refill from overwriting a row still read).
// Rows: input row t (ih = r0 - pad_h + t) is read once into registers (kItems + kK - 1 values
// from shared memory, at the lane's columns - pw) and scattered into the kK partial output rows
// that use it (acc[(t - kh) % kK]; the slot is compile-time after unrolling the step loop by
// kK; taps of rows outside the chunk are skipped, warp-uniformly); output row m = t - kK + 1 is
// complete after step t, stored, and its slot reset to the bias. Row t + kStages is requested
// right after row t is read, so kStages rows per warp are in flight while the FMAs run.
template <typename T, int kK>
__global__ void __launch_bounds__(RowsTraits::kNThreads, RowsTraits::min_blocks(kK))
    conv2d_depthwise_rows_kernel(const Conv2dParams p, RowsShape s) {
  using Tr = RowsTraits;
  constexpr int I = Tr::kItems;
  constexpr int D = Tr::kStages;
  extern __shared__ float4 smem4[];  // float4: 16-byte aligned slots for the vector copies
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int S = s.seg_lanes;
  const int seg = lane / S;
  const int g = lane % S;
  const int pitch = Tr::seg_pitch(S);
  const int slot = Tr::slot(S);
  const int64_t unit = static_cast<int64_t>(blockIdx.x) * Tr::kWarps + warp;
  if (unit >= s.units) return;  // the whole warp: no block barriers in this kernel
  const int64_t strip = unit % s.strips;
  const int64_t chunk = (unit / s.strips) % s.chunks;
  const int64_t plane = (unit / s.strips / s.chunks) * (32 / S) + seg;
  const bool active = plane < p.N * p.C;
  const int64_t n = active ? plane / p.C : 0;
  const int64_t c = active ? plane % p.C : 0;
  const T* xc = ptr<T>(p.x) + n * p.x_sn + c * p.x_sc;
  const T* wc = ptr<T>(p.w) + c * p.w_so;
  // Columns fit int (one image row); row offsets stay int64.
  const int c_seg = static_cast<int>(strip) * S * I;
  const int o0 = c_seg + g * I;
  const int64_t r0 = chunk * s.rows;
  const int nrows = static_cast<int>(min(s.rows, p.OH - r0));
  const int nsteps = nrows + kK - 1;
  const int pw = static_cast<int>(p.pad_w);
  const int W = static_cast<int>(p.W), H = static_cast<int>(p.H), OW = static_cast<int>(p.OW);
  const int64_t x_sh = p.x_sh, x_sw = p.x_sw;
  const bool x_vec = s.x_vec;
  T* ring = reinterpret_cast<T*>(smem4) + warp * D * slot + seg * pitch;
  T* own = ring + Tr::kHalo + g * I;  // the lane's vector in slot 0
  // Edge lanes also stage a halo vector: lane 0 the one left of the strip, lane S-1 the one right
  // of it (S == 1: one lane, both; the right one then follows in a second call below).
  const int edge = g == 0 ? c_seg - Tr::kHalo : (g == S - 1 ? c_seg + S * I : -1);
  T* edge_dst = g == 0 ? ring : ring + Tr::kHalo + S * I;
  const bool both_edges = S == 1;
  // Staging cursor: the next input row to request (its index in the image and first element).
  int ih_next = static_cast<int>(r0 - p.pad_h);
  const T* x_next = xc + (r0 - p.pad_h) * x_sh;
  int t_next = 0;
  auto stage_next = [&](int rs) {
    const bool in = active && t_next < nsteps && ih_next >= 0 && ih_next < H;
    const T* xr = in ? x_next : xc;
    T* base = ring + rs * slot;
    if (both_edges) rows_stage_vec<T>(base + Tr::kHalo + I, xr, c_seg + I, W, x_sw, in, x_vec);
    rows_stage_row<T>(own + rs * slot, edge_dst + rs * slot, xr, o0, edge, W, x_sw, in, x_vec);
    ++t_next;
    ++ih_next;
    x_next += x_sh;
  };

  float wr[kK][kK];
#pragma unroll
  for (int kh = 0; kh < kK; ++kh)
#pragma unroll
    for (int kw = 0; kw < kK; ++kw) wr[kh][kw] = to_float(wc[kh * p.w_sh + kw * p.w_sw]);
  const float bias = (p.b != nullptr && active) ? to_float(ptr<T>(p.b)[c * p.b_s]) : 0.f;
  float acc[kK][I];
#pragma unroll
  for (int k = 0; k < kK; ++k)
#pragma unroll
    for (int j = 0; j < I; ++j) acc[k][j] = bias;

  for (int t = 0; t < D; ++t) stage_next(t);
  const int64_t y_sh = p.y_sh, y_sw = p.y_sw;
  const bool y_vec = s.y_vec;
  T* yrow = static_cast<T*>(p.y) + n * p.y_sn + c * p.y_so + r0 * y_sh;  // output row r0
  int rs = 0;  // ring slot of row t
#pragma unroll 1
  for (int t0 = 0; t0 < nsteps; t0 += kK) {
#pragma unroll
    for (int u = 0; u < kK; ++u) {
      const int t = t0 + u;
      if (t >= nsteps) break;
      cp_async_wait<D - 1>();
      __syncwarp();
      const T* src = ring + rs * slot + Tr::kHalo + g * I - pw;
      float win[I + kK - 1];
#pragma unroll
      for (int i = 0; i < I + kK - 1; ++i) win[i] = to_float(src[i]);
      __syncwarp();
      stage_next(rs);
      rs = rs + 1 == D ? 0 : rs + 1;
#pragma unroll
      for (int kh = 0; kh < kK; ++kh) {
        if (t - kh < 0 || t - kh >= nrows) continue;  // warp-uniform: rows outside the chunk
        const int sl = ((u - kh) % kK + kK) % kK;
#pragma unroll
        for (int kw = 0; kw < kK; ++kw)
#pragma unroll
          for (int j = 0; j < I; ++j) acc[sl][j] += wr[kh][kw] * win[j + kw];
      }
      const int m = t - (kK - 1);
      const int done = (u + 1) % kK;
      if (m >= 0) {
        if (active) {
          store_cols<T, I>(yrow + m * y_sh, acc[done], o0, OW, y_sw, y_vec);
        }
#pragma unroll
        for (int j = 0; j < I; ++j) acc[done][j] = bias;
      }
    }
  }
  cp_async_wait<0>();  // no copy may still target shared memory when the warp exits
}

// ---------------------------------------------------------------------------------------------
// 6. Depthwise / single-channel NCHW with large filters: groups == C == O, stride 1, dilation 1,
//    any KH x KW (built for 9x9 .. 31x31, where the FMAs dominate: 225 per output for 15x15).
//    A block stages a 64 x 64 output tile's input (plus halo) as float, and the plane's taps. A
//    thread owns 4 consecutive columns x 8 rows. The filter is walked in chunks of up to 4 rows x
//    4 columns of taps held in registers; for each chunk the thread slides down its rows, loading
//    every staged row's window (4 + 4 - 1 columns: two or three aligned 16-byte shared loads)
//    once and feeding it to all outputs and taps of the chunk that use it: 512 FMAs per 22-33
//    window loads and 4 broadcast tap loads for a full chunk. The previous path for these filters
//    (depthwise_nchw's runtime filter, section 2) issues 46 scalar window loads and 8 tap loads
//    per 256 FMAs.
//    Staging (kTma): fp32 with a 16-byte aligned x and rows, planes and images 16 bytes apart
//    (the host's choice) takes one TMA box per tile, zeros outside the image, starting kO
//    columns left of the tile's first window column so that it starts on a 16-byte boundary
//    (kO = -pad_w mod 4, compile-time: the window loads skip it). Element by element through
//    cp.async (ncu on c2_15: that loop was 16% of the instructions and 48% of the stall samples)
//    for the other layouts and 16-bit, staged column 0 being the window's first (kO == 0).
// ---------------------------------------------------------------------------------------------
struct LargeTraits {
  static constexpr int kTX = 16;       // threads across a tile row
  static constexpr int kThreads = 128;  // kTX x 8 thread rows
  static constexpr int kC = 4;          // consecutive output columns per thread
  static constexpr int kY = 8;          // consecutive output rows per thread
  static constexpr int kTileW = kTX * kC;
  static constexpr int kTileH = (kThreads / kTX) * kY;
  // Filter rows per tap chunk: 4 x 4 taps x 8 rows x 4 columns = a 512-FMA loop body (8 rows:
  // 1024 FMAs, 16 KB of code per body, ncu showed instruction-fetch stalls).
  static constexpr int kChunkH = 4;
  static constexpr int kChunkW = 4;  // filter columns per tap chunk
  // Staged floats: rows = kTileH + KH - 1; pitch covers every window (the last thread's last
  // chunk reads 2 vectors from column kTileW - kC + round_down(KW - 1, 4)); taps [KH][tap_pitch].
  static constexpr int64_t pitch(int64_t KW) { return (kTileW + KW - 1 + 3) / 4 * 4 + 4; }
  static constexpr int64_t tap_pitch(int64_t KW) { return (KW + 3) / 4 * 4; }
  // The TMA box's row (its pitch in shared memory), from kO columns left of the first window
  // column: the last thread's chunk at filter column kw0 (kCW columns) reads 4-element vectors
  // up to staged column 60 + kw0 + 4 * ceil((kO + kC + kCW - 1) / 4) - 1 <= 65 + KW + kO.
  static constexpr int64_t tma_pitch(int64_t KW, int64_t o) {
    return (kTileW + KW + o + 2 + 3) / 4 * 4;
  }
  static constexpr int kSlotAlign = 128;  // the box's shared destination (TMA alignment)
  static constexpr int kBarBytes = 16;    // the box's barrier, after the taps
  static_assert(kThreads % kTX == 0, "whole thread rows");
};

// One tap chunk: kR filter rows x kCW filter columns. src: s_x at the thread's first output row
// + the chunk's first filter row, column 4 * lx + the chunk's first filter column (a multiple of
// 4: aligned); the window starts kO columns further. taps: s_w at the chunk's first tap.
template <int kR, int kCW, int kO>
__device__ __forceinline__ void large_chunk(float (&acc)[LargeTraits::kY][LargeTraits::kC],
                                            const float* src, const float* taps, int pitch,
                                            int tap_pitch) {
  constexpr int kY = LargeTraits::kY, kC = LargeTraits::kC;
  constexpr int kVecs = (kO + kC + kCW - 1 + 3) / 4;
  float wk[kR][kCW];
#pragma unroll
  for (int t = 0; t < kR; ++t) {
    if constexpr (kCW == 4) {  // tap rows are 16-byte aligned (tap_pitch % 4 == 0)
      const float4 q = *reinterpret_cast<const float4*>(taps + t * tap_pitch);
      wk[t][0] = q.x, wk[t][1] = q.y, wk[t][2] = q.z, wk[t][3] = q.w;
    } else {
#pragma unroll
      for (int q = 0; q < kCW; ++q) wk[t][q] = taps[t * tap_pitch + q];
    }
  }
#pragma unroll
  for (int r = 0; r < kY + kR - 1; ++r) {
    float win[4 * kVecs];
#pragma unroll
    for (int v = 0; v < kVecs; ++v) {
      const float4 q = *reinterpret_cast<const float4*>(src + r * pitch + 4 * v);
      win[4 * v] = q.x, win[4 * v + 1] = q.y, win[4 * v + 2] = q.z, win[4 * v + 3] = q.w;
    }
#pragma unroll
    for (int i = 0; i < kY; ++i) {
      const int t = r - i;  // the filter row of the chunk that meets output row i here
      if (t < 0 || t >= kR) continue;
#pragma unroll
      for (int q = 0; q < kCW; ++q)
#pragma unroll
        for (int j = 0; j < kC; ++j) acc[i][j] = fmaf(wk[t][q], win[kO + j + q], acc[i][j]);
    }
  }
}

// All filter columns for one chunk of kR filter rows: full 4-column chunks, then the rest.
template <int kR, int kO>
__device__ __forceinline__ void large_rows(float (&acc)[LargeTraits::kY][LargeTraits::kC],
                                           const float* src, const float* taps, int KW,
                                           int pitch, int tap_pitch) {
  int kw0 = 0;
#pragma unroll 1
  for (; kw0 + 4 <= KW; kw0 += 4)
    large_chunk<kR, 4, kO>(acc, src + kw0, taps + kw0, pitch, tap_pitch);
  switch (KW - kw0) {
    case 1: large_chunk<kR, 1, kO>(acc, src + kw0, taps + kw0, pitch, tap_pitch); break;
    case 2: large_chunk<kR, 2, kO>(acc, src + kw0, taps + kw0, pitch, tap_pitch); break;
    case 3: large_chunk<kR, 3, kO>(acc, src + kw0, taps + kw0, pitch, tap_pitch); break;
    default: break;
  }
}

// Grid: x = output tile (tile row * tiles_w + tile column), y = (n, c) planes, grid-stride over
// N * C. Shared: s_x = (kTileH + KH - 1) x pitch floats, zeros outside the image (pitch(KW), or
// with kTma the box's row tma_pitch(KW, kO) from a kSlotAlign boundary); s_w = KH x
// tap_pitch(KW) taps (zeros past KW); with kTma the box's barrier after them. map: the TMA's 4-D
// view of x (W, H, C, N; kTma only).
template <typename T, int kO, bool kTma>
__global__ void __launch_bounds__(LargeTraits::kThreads)
    conv2d_depthwise_large_kernel(const __grid_constant__ CUtensorMap map, const Conv2dParams p,
                                  int64_t tiles_w, bool y_vec) {
  using Tr = LargeTraits;
  static_assert(!kTma || std::is_same_v<T, float>, "the TMA stages fp32 as it is");
  static_assert(kTma || kO == 0, "element staging starts at the window");
  extern __shared__ __align__(Tr::kSlotAlign) unsigned char large_smem[];
  const int KH = static_cast<int>(p.KH), KW = static_cast<int>(p.KW);
  const int rows = Tr::kTileH + KH - 1;
  const int pitch = static_cast<int>(kTma ? Tr::tma_pitch(KW, kO) : Tr::pitch(KW));
  const int tap_pitch = static_cast<int>(Tr::tap_pitch(KW));
  unsigned char* base = large_smem;
  if constexpr (kTma) {  // the TMA writes 128-byte aligned boxes: the host adds the slack
    constexpr uint32_t kMask = Tr::kSlotAlign - 1;
    const uint32_t raw = tma::smem_addr(large_smem);
    base += ((raw + kMask) & ~kMask) - raw;
  }
  float* s_x = reinterpret_cast<float*>(base);
  float* s_w = s_x + rows * pitch;
  uint32_t bar = 0;  // kTma: the box's barrier
  if constexpr (kTma) bar = tma::smem_addr(s_w + KH * tap_pitch);
  const int tid = threadIdx.x;
  const int lx = tid % Tr::kTX;
  const int y0 = (tid / Tr::kTX) * Tr::kY;
  const int H = static_cast<int>(p.H), W = static_cast<int>(p.W);
  const int oh0 = static_cast<int>(blockIdx.x / tiles_w) * Tr::kTileH;
  const int ow0 = static_cast<int>(blockIdx.x % tiles_w) * Tr::kTileW;
  const int ih0 = oh0 - static_cast<int>(p.pad_h);
  const int iw0 = ow0 - static_cast<int>(p.pad_w);
  const int64_t planes = p.N * p.C;
  if constexpr (kTma) {
    if (tid == 0) {
      tma::mbar_init(bar, 1);
      tma::fence_mbar_init();
    }
  }
  uint32_t phase = 0;  // kTma: parity of the barrier's current use
  for (int64_t plane = blockIdx.y; plane < planes; plane += gridDim.y) {
    const int64_t n = plane / p.C;
    const int64_t c = plane % p.C;
    const T* wc = ptr<T>(p.w) + c * p.w_so;
    const float bias = p.b != nullptr ? to_float(ptr<T>(p.b)[c * p.b_s]) : 0.f;
    __syncthreads();  // the previous plane's compute is done with s_x / s_w (and the barrier set)
    if constexpr (kTma) {
      if (tid == 0) {  // one box: columns iw0 - kO (a multiple of 4) on, rows ih0 on
        tma::fence_proxy_async();  // the block's reads of the box come first
        tma::arrive_expect_tx(bar, static_cast<uint32_t>(rows * pitch * sizeof(float)));
        tma::load_4d(tma::smem_addr(s_x), &map, iw0 - kO, ih0, static_cast<int>(c),
                     static_cast<int>(n), bar);
      }
    } else {
      // Staged row by row: a warp reads consecutive columns of one row (coalesced). fp32
      // through asynchronous 4-byte copies (zero-filled outside the image), so a thread's ~50
      // loads are in flight together (register loads one after the other left the warps
      // waiting on global memory: ncu on c2_15, long-scoreboard stalls 2.7 per issue); 16-bit
      // converts on the way. Rows and columns in 32-bit (the host keeps them below 2^30).
      const T* xc = ptr<T>(p.x) + n * p.x_sn + c * p.x_sc;
      for (int r = tid / 32; r < rows; r += Tr::kThreads / 32) {
        const int ih = ih0 + r;
        const bool row_in = static_cast<unsigned>(ih) < static_cast<unsigned>(H);
        const T* xr = xc + static_cast<int64_t>(row_in ? ih : 0) * p.x_sh;
        float* dst = s_x + r * pitch;
        for (int col = tid % 32; col < pitch; col += 32) {
          const int iw = iw0 + col;
          const bool in = row_in && static_cast<unsigned>(iw) < static_cast<unsigned>(W);
          const T* src = xr + static_cast<int64_t>(in ? iw : 0) * p.x_sw;
          if constexpr (std::is_same_v<T, float>) {
            cp_async_zfill<4>(dst + col, src, in);
          } else {
            dst[col] = in ? to_float(*src) : 0.f;
          }
        }
      }
    }
    // The taps, zeros past KW: fp32 through asynchronous copies too (register loads stalled
    // every thread on global memory before its shared store: ncu on dw2_13, 7% of the stall
    // samples; forced on the H200, 13x13 114 -> 112 us).
    for (int i = tid; i < KH * tap_pitch; i += Tr::kThreads) {
      const int kh = i / tap_pitch, kw = i - kh * tap_pitch;
      const bool in = kw < KW;
      const T* src = in ? wc + kh * p.w_sh + kw * p.w_sw : wc;
      if constexpr (std::is_same_v<T, float>) {
        cp_async_zfill<4>(s_w + i, src, in);
      } else {
        s_w[i] = in ? to_float(*src) : 0.f;
      }
    }
    if constexpr (std::is_same_v<T, float>) cp_async_commit();
    if constexpr (kTma) {
      tma::wait_parity(bar, phase);
      phase ^= 1u;
    }
    if constexpr (std::is_same_v<T, float>) cp_async_wait<0>();
    __syncthreads();  // tile and taps staged

    float acc[Tr::kY][Tr::kC];
#pragma unroll
    for (int i = 0; i < Tr::kY; ++i)
#pragma unroll
      for (int j = 0; j < Tr::kC; ++j) acc[i][j] = bias;
    const float* src = s_x + y0 * pitch + lx * Tr::kC;
    int kh0 = 0;
#pragma unroll 1
    for (; kh0 + Tr::kChunkH <= KH; kh0 += Tr::kChunkH)
      large_rows<Tr::kChunkH, kO>(acc, src + kh0 * pitch, s_w + kh0 * tap_pitch, KW, pitch,
                                  tap_pitch);
    const float* sr = src + kh0 * pitch;
    const float* wt = s_w + kh0 * tap_pitch;
    static_assert(Tr::kChunkH == 4, "one case per remainder below");
    switch (KH - kh0) {
      case 1: large_rows<1, kO>(acc, sr, wt, KW, pitch, tap_pitch); break;
      case 2: large_rows<2, kO>(acc, sr, wt, KW, pitch, tap_pitch); break;
      case 3: large_rows<3, kO>(acc, sr, wt, KW, pitch, tap_pitch); break;
      default: break;  // KH a multiple of kChunkH
    }

    T* yp = static_cast<T*>(p.y) + n * p.y_sn + c * p.y_so;
    const int o0 = ow0 + lx * Tr::kC;
#pragma unroll
    for (int i = 0; i < Tr::kY; ++i) {
      const int oh = oh0 + y0 + i;
      if (oh >= p.OH) break;
      store_cols<T, Tr::kC>(yp + static_cast<int64_t>(oh) * p.y_sh, acc[i], o0,
                            static_cast<int>(p.OW), p.y_sw, y_vec);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// 5. Depthwise / single-channel NCHW through the TMA (sm_90+): groups == C == O, stride 1,
//    dilation 1, square kK x kK filter (3/5/7), any padding, unit column stride. Each block runs
//    persistently over output tiles (7x7 with few tiles a block: one block a tile, one slot);
//    the TMA copies a tile's input box (the tile plus its halo, zeros outside the image) into
//    a ring of shared slots, several tiles ahead, so a few large requests keep the memory
//    system busy with no registers spent on loads in flight. Threads
//    own 4 columns x kRows rows of the tile and slide down them: every staged row is read once
//    per thread and fed to the up-to-kK outputs of each column that use it, and each output row
//    is stored as soon as it is complete. Warps do not wait for each other between tiles: each
//    counts its release of a slot, and the block's last warp to release it requests the slot's
//    next box. The taps and bias of the next plane are fetched while the current tile computes.
//    Measured on the H200 against the version that stored every row after the multiply-adds
//    behind a block barrier per tile (same benchmark, separate runs): c2_7 168.7 -> 153.8 us,
//    dw2_7 43.7 -> 37.0 (rotated 42.1 -> 39.0); c2_3 / c2_5 unchanged (~151 us, memory-bound).
//    ncu had shown 41% of c2_7's warp stalls in the store tail and its block barrier.
// ---------------------------------------------------------------------------------------------
struct TmaTraits {
  static constexpr int kCols = 4;   // output columns per thread (one 4-element shared load)
  static constexpr int kRows = 8;   // output rows per thread
  static constexpr int kMaxStages = 4;
  static constexpr int kSlotAlign = 128;  // the TMA's shared destinations are 128-byte aligned
  static constexpr int kBarBytes = 128;   // the barriers, the slots' counters and tiles
  static constexpr int kCountersOffset = 64;  // kMaxStages barriers (8 B), then the counters
  static constexpr int kTilesOffset = 96;     // then the tile each slot holds (int)
  static constexpr int kClaimsOffset = 112;   // then the tile claimed for each slot's next use
  // A launch's run of tiles is long from kLongRunTiles tiles a persistent block on average.
  // Long runs of the instances that can claim tiles from a counter (TmaShape::dynamic) do so
  // (shorter runs lose more to the claims' lookahead than the balance gains); short 7x7 runs
  // launch one block a tile (tile_a_block).
  static constexpr int kLongRunTiles = 16;
  static constexpr bool claims(int kK) { return kK <= 5; }
  // A thread's kRows rows run as row_groups(kK) groups, one after another (tma_tile_rows): one
  // group per 7x7 thread tile was 1,568 multiply-adds of straight-line code (25 KB), and 21% of
  // dw2_7's warp samples waited on instruction fetch (ncu). Two groups halve the code for 43%
  // more shared loads (each group reads its own kK - 1 halo rows). H200, same session, flushed:
  // dw2_7 37.4 / 37.7 -> 35.2 / 34.6 us (ncu, locked clocks: 67.0k -> 62.8k cycles), c2_7
  // 153.0 / 152.1 -> 151.1 / 151.2; dw2_7 rotated 38.9 -> 39.2 (h200_round22_variants.txt).
  static constexpr int row_groups(int kK) { return kK >= 7 ? 2 : 1; }
  // Short 7x7 runs (kLongRunTiles) launch one block a tile with one slot instead (the
  // hardware refills each SM as its blocks finish; a block waits for its own box while the
  // SM's other blocks compute). Against persistent blocks, dw2_7 (8x384x64x64,
  // 5.8 tiles a block), same sessions: H100 rotated 48.3 / 48.5 -> 42.6 / 42.5 us, flushed
  // 42.8 / 42.0 -> 41.6 / 42.4; H200 rotated 39.9 / 39.6 -> 35.9 / 36.0, flushed 35.3 / 35.7
  // -> 39.2 / 38.4 (back-to-back calls gain, a lone call after an L2 flush loses on the H200).
  // c2_7 (31 tiles a block) lost, 153.8 -> 198.2 us, so it stays persistent
  // (h200_round22_variants.txt).
  static constexpr bool tile_a_block(int kK) { return kK == 7; }
  // Blocks per SM asked of ptxas (registers: 32 sums, 16 in two row groups, kK*kK taps, the
  // window, addresses).
  static constexpr int min_blocks(int kK, int threads) {
    return threads >= 256 ? (kK <= 3 ? 3 : 2) : (kK <= 3 ? 6 : 4);
  }
};

// The geometry of one instance: kTX threads across a tile row (4 columns each), kThreads / kTX
// thread rows of kRows output rows. The TMA only starts a box on a 16-byte boundary (kAlign
// elements) of a row, so a box starts up to kAlign - 1 columns left of the tile's window; kO of
// them (compile-time) are skipped when reading, the rest shift the output tiles (TmaShape::lead).
// The input box is kBW x kBH elements (the tile + kK - 1 halo + alignment, columns a multiple of
// 16 bytes as the TMA requires); a slot holds one box. A thread's window (kC + kK - 1 columns
// from box column 4 * lx + kO) is read as 4-element vectors kV0 .. kV1.
template <typename T, int kK, int kTX, int kThreads>
struct TmaGeometry {
  static constexpr int kFilter = kK;
  static constexpr int kTW = kTX * TmaTraits::kCols;
  static constexpr int kTH = (kThreads / kTX) * TmaTraits::kRows;
  static constexpr int kAlign = 16 / static_cast<int>(sizeof(T));
  static constexpr int kBW = (kTW + kAlign - 1 + kK - 1 + kAlign - 1) / kAlign * kAlign;
  static constexpr int kBH = kTH + kK - 1;
  static constexpr int kBoxBytes = kBW * kBH * static_cast<int>(sizeof(T));
  static constexpr int kSlotBytes =
      (kBoxBytes + TmaTraits::kSlotAlign - 1) / TmaTraits::kSlotAlign * TmaTraits::kSlotAlign;
  // Each warp's taps and bias (floats, 16-byte rows), between the barriers and the slots.
  static constexpr int kTapsPitch = (kK * kK + 1 + 3) / 4 * 4;
  static constexpr int kTapsBytes =
      ((kThreads / 32) * kTapsPitch * 4 + TmaTraits::kSlotAlign - 1) / TmaTraits::kSlotAlign *
      TmaTraits::kSlotAlign;
  // The kO skipped columns for 'same' padding (kK / 2) with a 16-byte aligned x.
  static constexpr int kSameO = kAlign - kK / 2;
  static constexpr int v0(int o) { return o / 4; }
  static constexpr int v1(int o) { return (o + TmaTraits::kCols + kK - 2) / 4; }
  static_assert(kThreads % kTX == 0 && kThreads % 32 == 0, "whole thread rows and warps");
  static_assert(kK / 2 < kAlign, "one alignment step covers the padding");
  static_assert(TmaTraits::kCols * (kTX + v1(kAlign - 1)) <= kBW, "window loads stay in the box");
  static_assert(kBW <= 256 && kBH <= 256, "TMA box dimensions");
};

// n / d by a multiply-high and a shift, for 0 <= n < 2^31 and 1 <= d < 2^31 (the tile decoding
// runs per tile in every thread: a 32-bit division costs ~20 instructions, a 64-bit one a call).
struct FastDiv {
  uint32_t d, m, s;
  FastDiv() = default;
  explicit FastDiv(uint32_t divisor) : d(divisor), s(0) {
    while ((uint64_t{1} << s) < d) ++s;
    m = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << s) - d)) / d + 1);
  }
  __device__ __forceinline__ int div(int n) const {
    const uint32_t u = static_cast<uint32_t>(n);
    return static_cast<int>((__umulhi(u, m) + u) >> s);
  }
};

// Work decomposition (host: plan_tma()). Tiles are numbered plane-major, then tile row, then
// tile column; block b takes tiles b, b + gridDim.x, ..., or with `dynamic` the first S of
// those (one per ring slot) and then tiles claimed from a counter in g_tma_sched in the order
// its slots are refilled, so that blocks on faster SMs take more tiles. With a fixed share each,
// c2_3's SMs sat idle 9% of the kernel's time on average (ncu) while the slowest finished;
// claims made it 153.4 -> 148.9 us (H200, same run). Not for short runs of tiles a block: dw2_7
// (12 tiles a block of ~1.3 us each) went 38.5 -> 41.4 us with them (TmaTraits::kLongRunTiles).
// Tile tw covers output columns tw * kTW - lead ..; its box starts at map column
// tw * kTW + box_col0, a multiple of 16 bytes (TmaGeometry).
struct TmaShape {
  int tiles;           // N * C * tiles_h * tiles_w (< 2^30)
  bool dynamic;        // tiles after each slot's first use are claimed from a counter
  int sched;           // dynamic: this stream's pair in g_tma_sched (tiles claimed, blocks done)
  FastDiv per_plane, tiles_w, channels;  // tiles_h * tiles_w, tiles_w, C
  int lead;            // output columns left of tile 0 (0 .. 16 / sizeof(T) - 1)
  int box_col0;        // map column of tile 0's box: shift - pad_w - lead - kO
  int shift;           // the map starts `shift` elements before x (16-byte aligned base)
  int stages;          // ring slots, 2..kMaxStages
  int box_rows;        // rows of a box: kBH, or OH + kK - 1 when one tile covers the plane's rows
  int slot_bytes;      // bytes between slots (a box, 128-byte aligned); the last slot is kSlotBytes
  bool y_vec;          // 4-element vector stores allowed (unit stride, aligned rows, lead % 4 == 0)
};

// Tile counters of depthwise_tma, a pair per (device, stream) slot of tickets.cuh: zero when the
// module loads, and the last block of each launch puts both back to zero.
__device__ unsigned int g_tma_sched[kTicketSlots * 2];

template <typename T>
__device__ __forceinline__ void load4_float(float* v, const T* src) {
  if constexpr (std::is_same_v<T, float>) {
    const float4 q = *reinterpret_cast<const float4*>(src);
    v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
  } else {
    const Vec<T, 4> q = load_vec<T, 4>(src);
#pragma unroll
    for (int e = 0; e < 4; ++e) v[e] = to_float(q.v[e]);
  }
}

// Four outputs, converted to T, in one aligned vector store (p: 4 * sizeof(T)-byte aligned,
// global). Written out because the compiler split the plain Vec store of tma_tile_rows into
// four scalar ones (PTX st.global.f32) once the tile loop changed around it.
template <typename T>
__device__ __forceinline__ void store4_global(T* p, const float (&a)[4]) {
  if constexpr (std::is_same_v<T, float>) {
    asm volatile("st.global.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(p), "f"(a[0]), "f"(a[1]),
                 "f"(a[2]), "f"(a[3]));
  } else {
    asm volatile("st.global.v2.b32 [%0], {%1, %2};\n" ::"l"(p), "r"(reg_pack2<T>(a[0], a[1])),
                 "r"(reg_pack2<T>(a[2], a[3])));
  }
}

// One thread's kRows x kC outputs of a staged box (src = its first window row, column 0 of the
// 4-aligned window block), in row_groups(kK) groups of kR rows one after another: each group
// slides down its kR + kK - 1 input rows, reading each once and feeding it to every output row
// of the group that uses it; an output row is stored as soon as it is complete (the stores
// spread between the multiply-adds). kFast: all rows, one vector store each at yr; else the
// first `rows` rows through store_cols (columns o0.., OW, stride y_sw).
template <typename T, typename G, int kO, bool kFast>
__device__ __forceinline__ void tma_tile_rows(const T* src,
                                              const float (&wr)[G::kFilter][G::kFilter],
                                              float bias, T* yr, int64_t y_sh, int rows, int o0,
                                              int OW, int64_t y_sw) {
  constexpr int kK = G::kFilter, kBW = G::kBW;
  constexpr int kGroups = TmaTraits::row_groups(kK);
  constexpr int kR = TmaTraits::kRows / kGroups;
  constexpr int kC = TmaTraits::kCols;
  constexpr int kV0 = G::v0(kO), kV1 = G::v1(kO);
  static_assert(TmaTraits::kRows % kGroups == 0, "whole row groups");
#pragma unroll 1
  for (int g = 0; g < kGroups; ++g, src += kR * kBW, yr += kR * y_sh, rows -= kR) {
    if (!kFast && rows <= 0) break;
    float acc[kR][kC];
#pragma unroll
    for (int i = 0; i < kR; ++i)
#pragma unroll
      for (int j = 0; j < kC; ++j) acc[i][j] = bias;
#pragma unroll
    for (int r = 0; r < kR + kK - 1; ++r) {
      float buf[4 * (kV1 - kV0 + 1)];
#pragma unroll
      for (int v = kV0; v <= kV1; ++v) load4_float<T>(buf + 4 * (v - kV0), src + r * kBW + 4 * v);
      const float* win = buf + kO - 4 * kV0;  // window column 0 (compile-time offset)
#pragma unroll
      for (int i = 0; i < kR; ++i) {
        const int kh = r - i;
        if (kh < 0 || kh >= kK) continue;
#pragma unroll
        for (int kw = 0; kw < kK; ++kw)
#pragma unroll
          for (int j = 0; j < kC; ++j) acc[i][j] = fmaf(wr[kh][kw], win[j + kw], acc[i][j]);
      }
      const int done = r - (kK - 1);  // output row complete after this input row
      if (done < 0) continue;
      if constexpr (kFast) {
        static_assert(kC == 4, "one 4-element store a row");
        store4_global<T>(yr + done * y_sh, acc[done]);
      } else if (done < rows) {
        store_cols<T, kC>(yr + done * y_sh, acc[done], o0, OW, y_sw, false);
      }
    }
  }
}

template <typename T, int kK, int kTX, int kThreads, int kO>
__global__ void __launch_bounds__(kThreads, TmaTraits::min_blocks(kK, kThreads))
    conv2d_depthwise_tma_kernel(const __grid_constant__ CUtensorMap map, const Conv2dParams p,
                                const TmaShape s) {
  using G = TmaGeometry<T, kK, kTX, kThreads>;
  constexpr int kR = TmaTraits::kRows;
  constexpr int kC = TmaTraits::kCols;
  constexpr int kWarps = kThreads / 32;
  static_assert(8 * TmaTraits::kMaxStages <= TmaTraits::kCountersOffset &&
                    TmaTraits::kCountersOffset + 4 * TmaTraits::kMaxStages <=
                        TmaTraits::kTilesOffset &&
                    TmaTraits::kTilesOffset + 4 * TmaTraits::kMaxStages <=
                        TmaTraits::kClaimsOffset &&
                    TmaTraits::kClaimsOffset + 4 * TmaTraits::kMaxStages <= TmaTraits::kBarBytes,
                "barriers, counters, slot tiles and claims fit before the taps");
  extern __shared__ __align__(TmaTraits::kSlotAlign) unsigned char smem_raw[];
  pdl_wait_then_release();  // launched with launch_pdl: no global memory touched before it
  // The TMA writes aligned slots: align the base by hand (the host adds kSlotAlign of slack).
  constexpr uint32_t kAlignMask = TmaTraits::kSlotAlign - 1;
  const uint32_t raw = tma::smem_addr(smem_raw);
  unsigned char* smem = smem_raw + (((raw + kAlignMask) & ~kAlignMask) - raw);
  const uint32_t bars = tma::smem_addr(smem);
  const uint32_t counters = bars + TmaTraits::kCountersOffset;
  const uint32_t slots = bars + TmaTraits::kBarBytes + G::kTapsBytes;
  const int tid = threadIdx.x;
  const int lane = tid % 32;
  const int S = s.stages;
  const int ph = static_cast<int>(p.pad_h);
  // Tile t -> plane (n, c), tile row th, tile column tw.
  auto plane_of = [&](int t) { return s.per_plane.div(t); };
  auto decode = [&](int t, int& n, int& c, int& th, int& tw) {
    const int plane = plane_of(t);
    const int rem = t - plane * static_cast<int>(s.per_plane.d);
    th = s.tiles_w.div(rem);
    tw = rem - th * static_cast<int>(s.tiles_w.d);
    n = s.channels.div(plane);
    c = plane - n * static_cast<int>(s.channels.d);
  };
  auto channel_of = [&](int plane) {
    return plane - s.channels.div(plane) * static_cast<int>(s.channels.d);
  };

  // One thread requests tile t into a slot; t >= tiles: no tile (the waiting warps leave).
  // Its tile number is written before the barrier arrival, which releases it to them.
  volatile int* const slot_tile = reinterpret_cast<volatile int*>(smem + TmaTraits::kTilesOffset);
  auto request = [&](int slot, int t) {
    slot_tile[slot] = t;
    if (t >= s.tiles) {
      tma::arrive(bars + 8 * slot);
      return;
    }
    int n, c, th, tw;
    decode(t, n, c, th, tw);
    tma::fence_proxy_async();  // the block's reads (and zero fills) of the slot come first
    tma::arrive_expect_tx(bars + 8 * slot, G::kBW * s.box_rows * sizeof(T));
    tma::load_4d(slots + slot * s.slot_bytes, &map, tw * G::kTW + s.box_col0, th * G::kTH - ph,
                 c, n, bars + 8 * slot);
  };
  // Dynamic claims. The first use of each slot is fixed: slot i of block b holds tile b + i * grid.
  // Later tiles come from the counter (tile S * grid + its value). A refill uses the tile
  // claimed one use earlier (claimed[slot]) and claims the next, so that the atomic's round trip
  // (~1 us under load) delays neither the refill nor its warp. The claiming lane writes the
  // value into claimed[] at the end of its next tile, before it releases that tile's slot: the
  // slot's refill, after every warp's release of it, sees it (count_arrival is acq_rel).
  // Refills run in ring order, so claims grow along the ring.
  // Only the 3x3 / 5x5 instances claim (TmaTraits::claims()): c2_7 (31 tiles a block, bound by
  // its multiply-adds) gained nothing (156.7 vs 156.5 us, same run), and an earlier layout of
  // this loop with the claiming code compiled in made the 7x7 instances 3-10% slower.
  const bool dynamic = TmaTraits::claims(kK) && s.dynamic;
  unsigned int* const sched = g_tma_sched + s.sched;  // [0]: tiles claimed, [1]: blocks done
  int* const claimed = reinterpret_cast<int*>(smem + TmaTraits::kClaimsOffset);
  const int claim_base = S * static_cast<int>(gridDim.x);
  unsigned int pend = 0;  // lane 0: a claim in flight for slot pend_slot (-2: all slots)
  int pend_slot = -1;
  auto settle_claim = [&]() {  // lane 0, between tiles
    if (pend_slot == -2) {
      for (int i = 0; i < S; ++i) claimed[i] = claim_base + static_cast<int>(pend) + i;
    } else if (pend_slot >= 0) {
      claimed[pend_slot] = claim_base + static_cast<int>(pend);
    }
    pend_slot = -1;
  };
  if (tid == 0) {
    for (int i = 0; i < S; ++i) {
      tma::mbar_init(bars + 8 * i, 1);
      reinterpret_cast<uint32_t*>(smem + TmaTraits::kCountersOffset)[i] = 0;
    }
    tma::fence_mbar_init();
  }
  __syncthreads();
  // The first slot alone at the start: every block's first box arrives sooner than if all
  // slots' boxes of every block shared the memory system; the others follow its arrival.
  if (tid == 0) {
    request(0, blockIdx.x);
    if (dynamic) {
      pend = atomicAdd(sched, static_cast<unsigned int>(S));  // the slots' second uses
      pend_slot = -2;
    }
  }

  // The warp's taps and bias pass through its own shared row (kTapsPitch floats): lane l fetches
  // values l and l + 32 of the plane's kK * kK taps followed by the bias. The next tile's taps
  // (when it changes plane) are fetched while the current one computes where the next tile is
  // known by then (fixed shares: always; claims: once its box has arrived), else when it starts.
  constexpr int kTaps = kK * kK;
  static_assert(kTaps + 1 <= 64, "two values per lane");
  float* taps = reinterpret_cast<float*>(smem + TmaTraits::kBarBytes) + (tid / 32) * G::kTapsPitch;
  auto tap_offset = [&](int i) -> int64_t {
    return i < kTaps ? (i / kK) * p.w_sh + (i % kK) * p.w_sw : 0;
  };
  auto fetch_taps = [&](int c, float& v0, float& v1) {
    const int64_t toff0 = tap_offset(lane), toff1 = tap_offset(lane + 32);
    const T* wc = ptr<T>(p.w) + c * p.w_so;
    auto value = [&](int i, int64_t off) {
      if (i < kTaps) return to_float(wc[off]);
      if (i == kTaps && p.b != nullptr) return to_float(ptr<T>(p.b)[c * p.b_s]);
      return 0.f;
    };
    v0 = value(lane, toff0);
    v1 = value(lane + 32, toff1);
  };
  float tv0 = 0.f, tv1 = 0.f;  // the taps of plane tap_plane, in flight
  int tap_plane = plane_of(blockIdx.x);  // grid <= tiles: every block has a first tile
  fetch_taps(channel_of(tap_plane), tv0, tv1);

  const int lx = tid % kTX;
  const int r0 = (tid / kTX) * kR;  // the thread's first row in the tile
  int loaded_plane = -1;
  float wr[kK][kK];
  float bias = 0.f;
  // Tile t's taps and bias into registers (from tv0 / tv1 when they were fetched ahead).
  auto load_plane = [&](int t) {
    const int plane = plane_of(t);
    if (plane == loaded_plane) return;  // warp-uniform
    if (plane != tap_plane) {           // not fetched ahead: fetch now
      tap_plane = plane;
      fetch_taps(channel_of(plane), tv0, tv1);
    }
    __syncwarp();
    if (lane <= kTaps) taps[lane] = tv0;  // the row holds kTaps + 1 values (and padding)
    if (lane + 32 <= kTaps) taps[lane + 32] = tv1;
    __syncwarp();
#pragma unroll
    for (int i = 0; i < (kTaps + 1 + 3) / 4; ++i) {
      const float4 q = *reinterpret_cast<const float4*>(taps + 4 * i);
      const float v[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int k = 4 * i + e;
        if (k < kTaps) wr[k / kK][k % kK] = v[e];
        if (k == kTaps) bias = v[e];
      }
    }
    loaded_plane = plane;
  };
  int slot = 0;
  uint32_t phase = 0;  // parity of the slot's current use
  int t = blockIdx.x;  // the slot's tile where known before its box arrives (dynamic: -1 if not)
  // A new plane's taps travel while the tile before it computes.
  auto prefetch_taps = [&](int tn) {
    if (tn < 0 || tn >= s.tiles) return;
    const int next_plane = plane_of(tn);
    if (next_plane != tap_plane) {
      tap_plane = next_plane;
      fetch_taps(channel_of(next_plane), tv0, tv1);
    }
  };
#pragma unroll 1
  for (bool first = true;; first = false) {  // the same sequence of tiles in every warp
    // Static: the block's tiles are blockIdx.x + k * gridDim.x. Dynamic: the next slot's tile
    // is known once its box has arrived (then before this one's wait), else after the wait.
    if (!dynamic && t >= s.tiles) break;
    int n, c, th, tw, tn = -1;
    if (t >= 0 && t < s.tiles) {  // before the wait, so the work overlaps it
      decode(t, n, c, th, tw);
      load_plane(t);
      if (!dynamic) {
        tn = t + static_cast<int>(gridDim.x);
        prefetch_taps(tn);
      }
    }
    tma::wait_parity(bars + 8 * slot, phase);
    if (dynamic) {
      const int ts = slot_tile[slot];
      if (ts >= s.tiles) break;  // claims grow along the ring: later slots are empty too
      if (ts != t) {
        t = ts;
        decode(t, n, c, th, tw);
        load_plane(t);
      }
      const int next_slot = slot + 1 == S ? 0 : slot + 1;
      if (tma::test_parity(bars + 8 * next_slot, next_slot == 0 ? phase ^ 1u : phase)) {
        tn = slot_tile[next_slot];
        prefetch_taps(tn);
      }
    }
    if (first && tid == 0) {
      for (int i = 1; i < S; ++i) request(i, blockIdx.x + i * gridDim.x);
    }
    // Threads past the box's last row read the next slot (or the last slot's full-size tail):
    // stale values, only for outputs below the image, which are not stored.
    T* box = reinterpret_cast<T*>(smem + TmaTraits::kBarBytes + G::kTapsBytes +
                                  slot * s.slot_bytes);
    // A misaligned x: the map starts `shift` elements early, so box columns left of the image
    // that the map still covers hold real memory. Zero them (left-most tiles only).
    const int left = s.shift - (tw * G::kTW + s.box_col0);  // box columns left of the image
    if (s.shift != 0 && left > 0) {                         // block-uniform
      const int cols = min(left, G::kBW);
      for (int i = tid; i < s.box_rows * cols; i += kThreads)
        box[(i / cols) * G::kBW + i % cols] = from_float<T>(0.f);
      __syncthreads();
    }

    const int oh0 = th * G::kTH + r0;
    const int ow0 = tw * G::kTW - s.lead + lx * kC;  // may be negative in tile 0
    if (oh0 < p.OH && ow0 < p.OW && ow0 + kC > 0) {
      const int rows = min(kR, static_cast<int>(p.OH) - oh0);  // rows to store
      T* yr = static_cast<T*>(p.y) + n * p.y_sn + c * p.y_so + oh0 * p.y_sh;
      const T* src = box + r0 * G::kBW + lx * kC;
      // All kR rows and vector stores (most threads): stores without branches, a compact hot
      // loop; else every store checked.
      if (rows == kR && s.y_vec && ow0 >= 0 && ow0 + kC <= p.OW) {
        tma_tile_rows<T, G, kO, true>(src, wr, bias, yr + ow0, p.y_sh, kR, 0, 0, 0);
      } else {
        tma_tile_rows<T, G, kO, false>(src, wr, bias, yr, p.y_sh, rows, ow0,
                                       static_cast<int>(p.OW), p.y_sw);
      }
    }
    // The warp is done with the slot; the block's last warp to say so refills it.
    __syncwarp();
    if (lane == 0) {
      settle_claim();
      if (tma::count_arrival(counters + 4 * slot) % kWarps == kWarps - 1) {
        if (dynamic) {
          request(slot, claimed[slot]);
          pend = atomicAdd(sched, 1u);
          pend_slot = slot;
        } else {
          request(slot, t + S * static_cast<int>(gridDim.x));
        }
      }
    }
    if (++slot == S) slot = 0, phase ^= 1u;
    t = tn;
  }
  // The block's claims are over (settling the last one waits for its atomic); the last block to
  // finish puts the counters back to zero for the next launch on this stream.
  if (!dynamic) return;
  if (lane == 0) settle_claim();
  __syncthreads();
  if (tid == 0 && ticket_arrive_acq_rel(sched + 1) == gridDim.x - 1) {
    atomicExch(sched, 0u);
    atomicExch(sched + 1, 0u);
  }
}


// ---------------------------------------------------------------------------------------------
// 7. Depthwise / single-channel NCHW, small planes whole in shared memory (sm_90+): groups == C
//    == O, stride 1, dilation 1, square kK x kK filter with 'same' padding, W a multiple of 4 up
//    to 128 and a plane of at most kMaxPlaneBytes (MobileNet's 56x56, 28x28). One warp per
//    plane: one bulk copy brings the whole plane into the warp's shared slot (no halo re-read,
//    no tile edges: the TMA kernel's 64x64 tiles left 23% of its threads idle on 56x56 planes),
//    then the lanes slide down it, 4 columns each, every staged row read once per lane and the
//    next row's load issued before the current row's multiply-adds. 16-bit planes whose rows
//    are an odd number of 16-byte units take the tensor cores instead (plane_mma3).
//    Not persistent: warps streaming planes through two slots each (half as many warps in the
//    same shared memory) measured slower on the H200, 32x256x56x56 fp32 60.8 against 55.6 us,
//    bf16 43.5 against 37.4: the warps' multiply-adds need the occupancy to hide their latency.
// ---------------------------------------------------------------------------------------------
struct PlaneTraits {
  // One warp a block: a block leaves as soon as its plane is done (no waiting for the slowest
  // warp of four). 32x256x56x56, H200, same session, 4 / 2 / 1 warps a block: fp32 55.7 /
  // 54.4 / 54.0 us, bf16 28.8 / 28.9 / 28.7.
  static constexpr int kWarps = 1;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kCols = 4;                    // output columns per lane
  static constexpr int kMaxW = 32 * kCols;           // one row across at most a warp
  static constexpr int kMaxPlaneBytes = 16384;       // a 64 x 64 fp32 plane
  static constexpr int kBarBytes = 128;              // the warps' barriers, first
  static constexpr int kZeroBytes = 2 * kMaxW;       // then a zero row (the mma path's padding)
  static constexpr int kSlotsOffset = kBarBytes + kZeroBytes;  // then the warps' slots
  static constexpr int kSlotAlign = 128;
  // Warps an SM asked of ptxas: 80 registers, which hold 25 (shared memory: 29 warps of
  // 16-bit 56x56 planes, 16 of fp32). 16-bit at 32 warps (64 registers, 2 waves of 8192 planes
  // instead of 2.6) and 28 (72) measured slower, 20 (96) the same: 32x256x56x56 bf16 31.3,
  // 30.8, 29.6, 30.0 us (4-warp blocks, H200, same session), the mma chains' interleaving
  // needing the registers.
  static constexpr int kMinBlocks = 24 / kWarps;
  static constexpr int kBandRows = 16;               // mma path: output rows of an m16 tile,
                                                     // computed together
};

// Work decomposition (host: plan_plane()). Warp w of block b takes plane b * kWarps + w. Its
// lanes form `bands` bands of lanes_w lanes (W / 4); band i covers output rows [i * band_rows,
// (i + 1) * band_rows), lane g of a band output columns 4g .. 4g + 3.
struct PlaneShape {
  int planes;          // N * C
  FastDiv channels;    // C
  int lanes_w;         // W / 4
  int bands;           // 32 / lanes_w
  int band_rows;       // ceil(H / bands)
  int plane_bytes;     // H * W * sizeof(T)
  int slot_bytes;      // bytes between warps' slots (a multiple of kSlotAlign): the plane, for
                       // the mma path after a spare row (its output staging, one row up)
  bool bulk;           // rows contiguous (x_sw == 1, x_sh == W) and plane_bytes % 16 == 0: one
                       // bulk copy per plane whose start is 16-byte aligned, else the warp
                       // stages the plane element by element
  bool y_vec;          // 4-element vector stores allowed
  bool mma;            // 16-bit, W * 2 an odd number of 16-byte units: the tensor-core path
                       // (plane_mma3; its ldmatrix rows and staged 4-byte writes then hit
                       // distinct banks)
  bool y_rows16;       // unit column stride, rows 16-byte aligned apart: the mma path stores
                       // whole staged rows by bulk copies (when the plane's start is aligned)
};

// The tensor-core path of the plane kernel (16-bit, 3x3 'same', W * 2 an odd multiple of 16
// bytes: W = 8, 24, 40, 56, ...): the per-output multiply-adds and conversions left bf16 planes
// issue-bound (38 us on 32x256x56x56, 65% of the copy roof, while fp32 planes reach 89%). Each
// m16n8 mma tile is 16 output rows x 8 columns,
//   y[m0 + m][c0 + n] = bias + sum_{i < 3} sum_{k < 16} A_i[m][k] B_i[k][n],
//   A_i[m][k] = x[m0 + m + i - 1][c0 - 2 + k],   B_i[k][n] = w[i][k - n - 1] (0 outside 0..2),
// with c0 = 8 q - 6 for tile column q = 0 .. W / 8: A_i's two 8-column halves are the aligned
// column blocks q - 1 and q of the staged rows, so the output pairs start on even columns.
// Tiles go in pairs (q, q + 1): one ldmatrix.x4 of blocks q and q + 1 is tile q + 1's A_i, and
// its first half with block q - 1 kept from the pair before is tile q's, so every block is read
// once per row offset i (two x4 loads a tile had the shared-memory pipe 84% busy on
// 32x256x56x56 bf16, ncu). Rows outside the image read the zero row, block -1 is zeros in
// registers, block W / 8 (outside) reads the zero row. bf16/fp16 products are exact in the
// float accumulators.
// Outputs: a tile's fragments cover 8 rows x 16 bytes per store instruction, 3x the sectors of
// whole rows (written straight from the fragments, the stores throttled the warps: 78 us on
// 32x256x56x56 bf16). So the outputs are staged in shared memory and written by bulk copies
// from lane 0 (y_rows16 and an aligned plane), else element by element through the strides.
// The staging is the plane itself, one row up: output row r goes to staged row r - 1 (row -1 is
// the slot's spare row before the plane). Band m0 reads input rows m0 - 1 .. m0 + 16 and writes
// rows m0 - 1 .. m0 + 14, so within a band a tile pair's outputs wait in registers until the
// next pair has read its columns (the pairs overlap by two columns); the next band reads rows
// m0 + 15 .. on. The staged plane goes out at the end, one copy where the output
// rows are contiguous. (Staging each band in 16 rows of its own, copied out before the next
// band's outputs, took 1792 more bytes a warp and a wait per band: 31.5 us against 29.6 on
// 32x256x56x56 bf16, H200, same session.)
// (Planes whose rows are an even number of 16-byte units, 32 or 64 wide, would need padded
// rows: copied row by row, measured slower than the multiply-add path, 64x256x32x32 bf16 38.0
// against 26.3 us.) Not kept either: persistent warps streaming planes through two slots (the
// next plane's copy in flight during the mma), one resident wave of 3 blocks an SM: 48.9 us on
// 32x256x56x56 bf16 against 35.1.
// A non-finite input reaches outputs outside its window through a zero of B (0 * inf is NaN).
// The loads of row offset 1 hold every element of the plane once: x * 0 + acc over them in
// packed 16-bit arithmetic stays 0 unless an x is inf/NaN. A plane holding one returns false
// once its outputs are written (the bulk copies complete): the caller reads the plane again and
// rewrites every output by the multiply-add path.
// buf: the staged plane (16-byte aligned, W * 2 an odd multiple of 16 bytes) after one spare
// row; zero_row: the shared address of W * 2 zero bytes.
template <typename T>
__device__ __forceinline__ bool plane_mma3(T* buf, uint32_t zero_row, int H, int W,
                                           const float (&wr)[3][3], float bias, T* yp,
                                           int64_t y_sh, int64_t y_sw, bool bulk_out, int lane) {
  constexpr int kBand = PlaneTraits::kBandRows;
  static_assert(kBand == 16, "one m16 mma tile of rows");
  using T2 = std::conditional_t<std::is_same_v<T, __half>, __half2, __nv_bfloat162>;
  const T2 zero2 = reinterpret_cast<const T2&>(static_cast<const unsigned&>(0u));
  T2 nf = zero2;  // the non-finite test's sum
  const uint32_t base = tma::smem_addr(buf);

  const int g = lane >> 2, t = lane & 3;
  // B_i fragments: b[i][h] = B_i[2t + 8h .. 2t + 8h + 1][g] = (w[i][j], w[i][j + 1]) for
  // j = 2t + 8h - g - 1, zero outside 0..2. The filter row packed as four 16-bit halves
  // {w0, w1, w2, 0} gives each value by a byte permutation (half 3 for the zeros).
  unsigned sel[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int j = 2 * t + 8 * h - g - 1;
    const unsigned h0 = j >= 0 && j <= 2 ? j : 3, h1 = j + 1 >= 0 && j + 1 <= 2 ? j + 1 : 3;
    sel[h] = (2 * h0) | (2 * h0 + 1) << 4 | (2 * h1) << 8 | (2 * h1 + 1) << 12;
  }
  unsigned b[3][2];
#pragma unroll
  for (int i = 0; i < 3; ++i) {
    const unsigned lo = reg_pack2<T>(wr[i][0], wr[i][1]), hi = reg_pack2<T>(wr[i][2], 0.f);
#pragma unroll
    for (int h = 0; h < 2; ++h) b[i][h] = __byte_perm(lo, hi, sel[h]);
  }
  const float bias4[4] = {bias, bias, bias, bias};
  // ldmatrix rows of lane l: A row (l % 8) + 8 ((l / 8) % 2), column block q + l / 16.
  const int ar = (lane & 7) + 8 * ((lane >> 3) & 1);
  const int kb = lane >> 4;
  const int row_bytes = W * static_cast<int>(sizeof(T));
  const int blocks = W / 8;
  auto run = [&](auto bulk) {
    constexpr bool kBulk = decltype(bulk)::value;
#pragma unroll 1
    for (int m0 = 0; m0 < H; m0 += kBand) {
      uint32_t rows[3];  // the lane's A_i row at column block kb
#pragma unroll
      for (int i = 0; i < 3; ++i) {
        const int r = m0 + ar + i - 1;
        rows[i] = (r >= 0 && r < H ? base + r * row_bytes : zero_row) + 16 * kb;
      }
      // The lane's output rows m0 + g and m0 + g + 8 (staged: one row up, shared addresses).
      const bool oka = m0 + g < H, okb = m0 + g + 8 < H;
      const uint32_t sa = base + (m0 + g - 1) * row_bytes, sb = sa + 8 * row_bytes;
      T* const ya = kBulk ? nullptr : yp + (oka ? m0 + g : 0) * y_sh;  // direct stores only
      T* const yb = kBulk ? nullptr : yp + (okb ? m0 + g + 8 : 0) * y_sh;
      unsigned prev[3][2] = {};  // block q - 1 of each A_i (block -1: zeros)
      unsigned pend[2][2];       // staged path: the previous pair's packed outputs (tile, row)
      int pend_oc = 0;           // and its first tile's column
      auto flush = [&]() {  // predicated stores, no branches (columns outside: edge tiles)
#pragma unroll
        for (int u = 0; u < 2; ++u) {
          const int oc = pend_oc + 8 * u;
          const bool in = static_cast<unsigned>(oc) < static_cast<unsigned>(W);
          tma::st_shared_b32_if(sa + 2 * oc, pend[u][0], in && oka);
          tma::st_shared_b32_if(sb + 2 * oc, pend[u][1], in && okb);
        }
      };
      // Tiles q and q + 1 (their mma chains interleaved: one tile at a time left each chain's
      // latency exposed). kEdge: the pair holds tile W / 8, whose block W / 8 lies outside the
      // row (W / 8 + 1 tiles: always an even number). kFirst: no outputs pending before it.
      auto pair = [&](int q, auto edge, auto first) {
        constexpr bool kEdge = decltype(edge)::value;
        constexpr bool kFirst = decltype(first)::value;
        unsigned x[3][4];
        const bool in = !kEdge || q + kb < blocks;
#pragma unroll
        for (int i = 0; i < 3; ++i) ldmatrix_x4(x[i], in ? rows[i] + 16 * q : zero_row);
        if constexpr (kBulk && !kFirst) {
          // This pair's loads have read the columns the previous pair's outputs overwrite.
          __syncwarp();
          flush();
        }
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          nf = __hfma2(reinterpret_cast<const T2&>(x[1][e]), zero2, nf);
        }
        float d[2][4];
#pragma unroll
        for (int i = 0; i < 3; ++i) {
          if (i == 0) {
            mma_16816<T>(d[0], prev[i][0], prev[i][1], x[i][0], x[i][1], b[i][0], b[i][1],
                         bias4);
            mma_16816<T>(d[1], x[i][0], x[i][1], x[i][2], x[i][3], b[i][0], b[i][1], bias4);
          } else {
            mma_16816<T>(d[0], prev[i][0], prev[i][1], x[i][0], x[i][1], b[i][0], b[i][1]);
            mma_16816<T>(d[1], x[i][0], x[i][1], x[i][2], x[i][3], b[i][0], b[i][1]);
          }
          prev[i][0] = x[i][2];
          prev[i][1] = x[i][3];
        }
        const int oc0 = 8 * q - 6 + 2 * t;  // even: both columns in [0, W) or neither
        if constexpr (kBulk) {
#pragma unroll
          for (int u = 0; u < 2; ++u) {
            pend[u][0] = reg_pack2<T>(d[u][0], d[u][1]);
            pend[u][1] = reg_pack2<T>(d[u][2], d[u][3]);
          }
          pend_oc = oc0;
        } else {
#pragma unroll
          for (int u = 0; u < 2; ++u) {
            const int oc = oc0 + 8 * u;
            if (oc < 0 || oc >= W) continue;  // tiles 0 and W / 8 only
            if (oka) {
              ya[oc * y_sw] = from_float<T>(d[u][0]);
              ya[(oc + 1) * y_sw] = from_float<T>(d[u][1]);
            }
            if (okb) {
              yb[oc * y_sw] = from_float<T>(d[u][2]);
              yb[(oc + 1) * y_sw] = from_float<T>(d[u][3]);
            }
          }
        }
      };
      if (blocks == 1) {
        pair(0, std::true_type{}, std::true_type{});
      } else {
        pair(0, std::false_type{}, std::true_type{});
#pragma unroll 1
        for (int q = 2; q < blocks - 1; q += 2) pair(q, std::false_type{}, std::false_type{});
        pair(blocks - 1, std::true_type{}, std::false_type{});
      }
      if constexpr (kBulk) flush();
    }
    if constexpr (kBulk) {
      tma::fence_proxy_async();  // the staging writes before the bulk copies read them
      __syncwarp();
      // Lane 0 issues the copies (a bulk copy takes its operands from uniform registers:
      // copies issued by 16 lanes at once ran as a 16-step loop, 20% of this kernel's stall
      // samples), once the whole plane is staged: one copy where the output rows are
      // contiguous (y_sh == W), else one a row.
      if (lane == 0) {
        const uint32_t src = base - row_bytes;
        if (y_sh == W) {
          tma::store_bulk(yp, src, H * row_bytes);
        } else {
          for (int r = 0; r < H; ++r) {
            tma::store_bulk(yp + r * y_sh, src + r * row_bytes, row_bytes);
          }
        }
        tma::bulk_commit();
      }
    }
  };
  if (bulk_out) {
    run(std::true_type{});
  } else {
    run(std::false_type{});
  }
  const bool finite = !__any_sync(0xffffffffu, (reinterpret_cast<const unsigned&>(nf) &
                                                0x7fff7fffu) != 0u);
  if (bulk_out && lane == 0) {
    if (finite) {
      tma::bulk_wait_read<0>();  // the slot stays allocated until the copies have read it
    } else {
      tma::bulk_wait<0>();  // the outputs are rewritten after the copies' writes
      tma::fence_proxy_async_all();
    }
  }
  __syncwarp();
  return finite;
}

template <typename T, int kK>
__global__ void __launch_bounds__(PlaneTraits::kThreads, PlaneTraits::kMinBlocks)
    conv2d_depthwise_plane_kernel(const Conv2dParams p, const PlaneShape s) {
  constexpr int kC = PlaneTraits::kCols;
  constexpr int kP = kK / 2;  // 'same' padding on every side
  extern __shared__ __align__(PlaneTraits::kSlotAlign) unsigned char smem_raw[];
  pdl_wait_then_release();  // launched with launch_pdl: no global memory touched before it
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int plane = blockIdx.x * PlaneTraits::kWarps + warp;
  if (plane >= s.planes) return;  // warp-uniform; no block barrier below
  const int n = s.channels.div(plane);
  const int c = plane - n * static_cast<int>(s.channels.d);
  const int H = static_cast<int>(p.H), W = static_cast<int>(p.W);
  const T* xp = ptr<T>(p.x) + n * p.x_sn + c * p.x_sc;
  // The mma path's slot holds a spare row before the plane (its staged outputs, plane_mma3).
  T* buf = reinterpret_cast<T*>(smem_raw + PlaneTraits::kSlotsOffset + warp * s.slot_bytes) +
           (s.mma ? static_cast<int>(p.W) : 0);
  const uint32_t bar = tma::smem_addr(smem_raw) + 8 * warp;
  // The zero row (the mma path's rows outside the image): every warp writes all of it, so it is
  // complete for a warp after its own __syncwarp below whatever the other warps do.
  const uint32_t zero_row = tma::smem_addr(smem_raw) + PlaneTraits::kBarBytes;
  if constexpr (sizeof(T) == 2) {
    for (int i = lane; i < PlaneTraits::kZeroBytes / 4; i += 32) {
      reinterpret_cast<uint32_t*>(smem_raw + PlaneTraits::kBarBytes)[i] = 0u;
    }
  }
  // The plane element by element through x's strides (no bulk copy, or read again).
  auto stage_by_hand = [&]() {
    for (int r = 0; r < H; ++r)
      for (int col = lane; col < W; col += 32) buf[r * W + col] = xp[r * p.x_sh + col * p.x_sw];
  };
  const bool bulk = s.bulk && reinterpret_cast<uintptr_t>(xp) % 16 == 0;  // warp-uniform
  if (bulk) {
    if (lane == 0) {
      tma::mbar_init(bar, 1);
      tma::fence_mbar_init();
      tma::arrive_expect_tx(bar, s.plane_bytes);
      tma::load_bulk(tma::smem_addr(buf), xp, s.plane_bytes, bar);
    }
    __syncwarp();  // the barrier is initialised before any lane waits on it
  } else {
    stage_by_hand();
  }
  // The taps and bias while the copy flies.
  float wr[kK][kK];
  float bias;
  auto load_taps = [&]() {
    const T* wc = ptr<T>(p.w) + c * p.w_so;
#pragma unroll
    for (int kh = 0; kh < kK; ++kh)
#pragma unroll
      for (int kw = 0; kw < kK; ++kw) wr[kh][kw] = to_float(wc[kh * p.w_sh + kw * p.w_sw]);
    bias = p.b != nullptr ? to_float(ptr<T>(p.b)[c * p.b_s]) : 0.f;
  };
  load_taps();
  if (bulk) {
    tma::wait_parity(bar, 0);
  } else {
    __syncwarp();
  }

  T* yp = static_cast<T*>(p.y) + n * p.y_sn + c * p.y_so;
  if constexpr (sizeof(T) == 2 && kK == 3) {
    const bool bulk_out = s.y_rows16 && reinterpret_cast<uintptr_t>(yp) % 16 == 0;
    if (s.mma) {
      if (plane_mma3<T>(buf, zero_row, H, W, wr, bias, yp, p.y_sh, p.y_sw, bulk_out, lane)) {
        return;
      }
      // A non-finite input: the outputs are done again by the multiply-add path below, from
      // the plane and taps read again (the mma path staged its outputs over the plane; the
      // taps, read again, need no registers during it).
      stage_by_hand();
      load_taps();
      __syncwarp();
    }
  }

  const int G = s.lanes_w;
  const int g = lane % G;
  const int band = lane / G;
  const bool active = band < s.bands;
  const int R = s.band_rows;
  const int row0 = band * R;  // the band's first output row
  const T* colp = buf + kC * g;
  // Input row t of the band is image row row0 - kP + t; rows outside the image (and every row of
  // the idle lanes) are read from a clamped row and zeroed, so the loads carry no branch and the
  // next row's is issued ahead.
  auto row_load = [&](int t) {
    const int ir = row0 - kP + t;
    return load_vec<T, kC>(colp + min(max(ir, 0), H - 1) * W);
  };
  auto row_in = [&](int t) {
    const int ir = row0 - kP + t;
    return active && ir >= 0 && ir < H;
  };
  // Row t feeds its outputs t - kh (kh < kK); their sums rotate through kK register sets, set
  // (t - kh) mod kK, compile-time in the unrolled j.
  float acc[kK][kC];
#pragma unroll
  for (int i = 0; i < kK; ++i)
#pragma unroll
    for (int e = 0; e < kC; ++e) acc[i][e] = 0.f;
  const int steps = R + kK - 1;
  Vec<T, kC> raw = row_load(0);
#pragma unroll 1
  for (int u = 0; u < steps; u += kK) {
#pragma unroll
    for (int j = 0; j < kK; ++j) {
      const int t = u + j;
      if (t >= steps) break;  // warp-uniform
      const Vec<T, kC> cur = raw;
      raw = row_load(t + 1);
      const bool in = row_in(t);
      float v[kC];
#pragma unroll
      for (int e = 0; e < kC; ++e) v[e] = in ? to_float(cur.v[e]) : 0.f;
      // The row window: kP columns from the lane on the left, the lane's 4, kP from the right
      // (zeros past the image's edges, which are a band's ends).
      float win[kC + 2 * kP];
#pragma unroll
      for (int e = 0; e < kC; ++e) win[kP + e] = v[e];
#pragma unroll
      for (int q = 0; q < kP; ++q) {
        const float l = __shfl_up_sync(0xffffffffu, v[kC - kP + q], 1);
        const float r = __shfl_down_sync(0xffffffffu, v[q], 1);
        win[q] = g > 0 ? l : 0.f;
        win[kP + kC + q] = g < G - 1 ? r : 0.f;
      }
#pragma unroll
      for (int kh = 0; kh < kK; ++kh) {
        const int a = (j - kh + kK) % kK;  // compile-time after unrolling
#pragma unroll
        for (int kw = 0; kw < kK; ++kw)
#pragma unroll
          for (int e = 0; e < kC; ++e)
            acc[a][e] = fmaf(wr[kh][kw], win[e + kw], kh == 0 && kw == 0 ? bias : acc[a][e]);
      }
      // Output t - (kK - 1) has seen its last row.
      const int o = t - (kK - 1);
      if (active && o >= 0 && o < R && row0 + o < H) {
        store_cols<T, kC>(yp + (row0 + o) * p.y_sh, acc[(j + 1) % kK], kC * g, W, p.y_sw,
                          s.y_vec);
      }
    }
  }
}

}  // namespace conv2d
}  // namespace gpukern
