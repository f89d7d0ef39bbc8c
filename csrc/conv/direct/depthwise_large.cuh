#pragma once
// depthwise_large: depthwise / single-channel NCHW conv2d with large filters: groups == C == O,
// stride 1, dilation 1, any KH x KW (built for 9x9 .. 31x31, where the FMAs dominate: 225 per
// output for 15x15). A block stages a 64 x 64 output tile's input (plus halo) as float, and the
// plane's taps. A thread owns 4 consecutive columns x 8 rows. The filter is walked in chunks of
// up to 4 rows x 4 columns of taps held in registers; for each chunk the thread slides down its
// rows, loading every staged row's window (4 + 4 - 1 columns: two or three aligned 16-byte
// shared loads) once and feeding it to all outputs and taps of the chunk that use it: 512 FMAs
// per 22-33 window loads and 4 broadcast tap loads for a full chunk (depthwise_nchw's runtime
// filter issues 46 scalar window loads and 8 tap loads per 256 FMAs).
// Staging (kTma): fp32 with a 16-byte aligned x and rows, planes and images 16 bytes apart (the
// host's choice) takes one TMA box per tile, zeros outside the image, starting kO columns left
// of the tile's first window column so that it starts on a 16-byte boundary (kO = -pad_w mod 4,
// compile-time: the window loads skip it). Element by element through cp.async for the other
// layouts and 16-bit, staged column 0 being the window's first (kO == 0).
//
// Contract (conv2d_depthwise_large_kernel<T, kO, kTma>; details above the kernel):
//   grid   x = output tile (64 x 64), y = (n, c) planes, grid-stride over N * C.
//   block  kThreads = 16 x 8 threads; a thread owns kC = 4 columns x kY = 8 rows.
//   shared s_x = (kTileH + KH - 1) x pitch floats, s_w = KH x tap_pitch(KW) taps, then (kTma)
//          the box's mbarrier (kBoxBarrierBytes).
//   barriers one after staging (tile and taps staged; kTma: after the box's mbarrier phase), one
//          before the next plane's staging (the previous plane's compute is done with s_x / s_w).
#include <cstdint>
#include <type_traits>

#include "conv/direct/common2d.cuh"
#include "device/async_mma.cuh"
#include "device/tma.cuh"
#include "device/vec.cuh"

namespace gpukern {
namespace conv {

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
  static constexpr int kBoxBarrierBytes = 16;  // the box's barrier, after the taps
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
    conv2d_depthwise_large_kernel(const __grid_constant__ CUtensorMap map, const ConvProblem p,
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
      // Staged row by row: a warp reads consecutive columns of one row (coalesced). fp32 through
      // asynchronous 4-byte copies (zero-filled outside the image), so a thread's ~50 loads are in
      // flight together (register loads one after the other left the warps waiting on global
      // memory); 16-bit converts on the way. Rows and columns in 32-bit (the host keeps them below
      // 2^30).
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
    // every thread on global memory before its shared store).
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

}  // namespace conv
}  // namespace gpukern
