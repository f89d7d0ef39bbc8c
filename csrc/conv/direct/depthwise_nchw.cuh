#pragma once
// depthwise_nchw: depthwise / single-channel NCHW conv2d with stride 1: groups == C == O (C == 1
// is a single-channel image), any padding and dilation, a 64 x 64 tile + halo within
// DepthwiseTraits::kMaxSmemFloats. Bandwidth-bound for small filters, so each input element is
// read from global memory about once and every tap reuses it from shared memory / registers.
//
// Contract (conv2d_depthwise_nchw_kernel<T, kK>; details above the kernel):
//   grid   x = output tile (64 x 64), y = (n, c) planes, grid-stride over N * C.
//   block  threads_y(kK) x 32 threads; a thread owns 2 columns (32 apart) x items_y(kK) rows.
//   shared s_x = the tile plus its halo as float (DepthwiseTile rows x pitch, rows 16-byte
//          aligned), zeros outside the image; s_w = the plane's taps (runtime filters only).
//   barriers one after staging (tile and taps staged), one before the next plane's staging
//          (the previous plane's compute is done with s_x / s_w).
#include <cstdint>
#include <type_traits>

#include "conv/direct/common2d.cuh"
#include "device/vec.cuh"

namespace gpukern {
namespace conv {

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
    conv2d_depthwise_nchw_kernel(const ConvProblem p, DepthwiseTile tile, int64_t tiles_w,
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

}  // namespace conv
}  // namespace gpukern
