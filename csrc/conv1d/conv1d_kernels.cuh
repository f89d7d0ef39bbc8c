#pragma once
// conv1d CUDA kernels (torch-free). Three direct kernels, chosen by conv1d_cuda.cu (the FFT
// path's kernels are in conv1d_fft_kernels.cuh):
//
//  conv1d_general_kernel  any stride / padding / dilation / groups / strides. A block computes a
//                         tile of outputs for kOT output channels of one group; inputs and filters
//                         are staged in shared memory channel by channel, taps in chunks.
//  conv1d_rowwise_kernel  stride 1 and one input row per output row (C == O == groups: single-
//                         channel signals, depthwise). Sliding register windows over a shared-
//                         memory tile, 16-byte loads, filter streamed in chunks of taps.
//  conv1d_rowwise_short_kernel  the same rows at dilation 1 with K <= 32: a streaming kernel
//                         (16-byte loads and stores, next tile's loads in flight during the
//                         current tile's multiply-adds, one barrier per tile).
//  conv1d_rowwise_stream_kernel the same rows at dilation 1, any K (rowwise16: FMA-bound filters):
//                         conv1d_rowwise_kernel's 16x16 register blocks in a persistent loop fed
//                         by a 3-stage cp.async ring (one barrier per step, 16-byte stores from
//                         registers). conv1d_rowwise_kernel itself runs rowwise8 and
//                         rowwise8_dilated.
//
// All accumulate in float32. They stage data in shared memory as float, whatever scalar_t is,
// except the streaming kernel's input stages, which hold the raw 16-byte copies.
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "common/vec.cuh"
#include "conv1d/conv1d.h"

namespace gpukern {

// ------------------------------------------------------------------------------------------------
// General kernel
// ------------------------------------------------------------------------------------------------

template <int kThreads_, int kItems_, int kOT_>
struct Conv1dGeneralTraits {
  static constexpr int kThreads = kThreads_;  // threads per block
  static constexpr int kItems = kItems_;      // outputs per thread along L (per output channel)
  static constexpr int kOT = kOT_;            // output channels per block, all in one group
  static constexpr int kTile = kThreads * kItems;  // outputs per tile along L (at most)
  static constexpr int kSmemX = 8192;         // floats of staged input (all staged channels)
  static constexpr int kSmemW = 2048;         // floats of staged filter taps
  static constexpr int kMaxStagedChannels = 64;
  static_assert(kThreads % 32 == 0 && kThreads <= 1024, "whole warps");
  static_assert(kItems >= 1 && kOT >= 1, "at least one output per thread");
  // The plan keeps the tile's stride part of the span within half of kSmemX, so at least half
  // is left for the taps' halo.
  static_assert(kSmemX >= 2 * kTile, "a stride-1 tile fits twice");
  static_assert(kSmemW >= kOT, "at least one tap of every staged output channel");
  static constexpr int smem_bytes() { return (kSmemX + kSmemW) * static_cast<int>(sizeof(float)); }
};

// Run-time tiling of the general kernel, computed by the launcher (conv1d_cuda.cu) such that
// staged * span <= kSmemX and staged * kOT * chunk <= kSmemW.
struct Conv1dGeneralPlan {
  int tile;        // outputs per tile along L (<= kTile)
  int chunk;       // taps staged per pass (== K when the whole filter fits)
  int staged;      // input channels staged per pass (> 1 only when chunk == K)
  int span;        // (tile - 1) * stride + (chunk - 1) * dilation + 1: input floats per channel
  int64_t tiles;   // tiles along L_out
  int64_t oblocks; // ceil(O/groups / kOT): output-channel blocks per group
};

// Grid: 1-D, block-strided over work items (n, g, tile, oblock), oblock fastest so that blocks
// sharing one input tile run together (L2 reuse). No grid-dim limit applies.
// Block: kThreads threads; thread t owns outputs j = t + i*kThreads (i < kItems) of the tile for
// each of the kOT output channels: kItems*kOT accumulators in registers. Outputs are assigned
// with a stride of kThreads so that stores coalesce and shared reads (j*stride + k*dilation) are
// conflict-free at stride 1.
// Shared memory: sx[staged][span] input tiles with their halo (zeros outside [0, L), i.e. the
// padding), then sw[staged][kOT][chunk] filter taps (zeros for output channels past the group).
// Per pass (a set of staged channels x a chunk of taps): barrier (the previous pass's reads are
// done), coalesced staging, barrier (staged data visible), multiply-adds from shared memory.
template <typename T, typename Traits>
__global__ void __launch_bounds__(Traits::kThreads)
    conv1d_general_kernel(const Conv1dParams p, const Conv1dGeneralPlan plan) {
  constexpr int kThreads = Traits::kThreads;
  constexpr int kItems = Traits::kItems;
  constexpr int kOT = Traits::kOT;
  extern __shared__ float4 conv1d_general_smem[];
  float* sx = reinterpret_cast<float*>(conv1d_general_smem);
  float* sw = sx + plan.staged * plan.span;

  const T* __restrict__ x = static_cast<const T*>(p.x);
  const T* __restrict__ w = static_cast<const T*>(p.w);
  const T* __restrict__ b = static_cast<const T*>(p.b);
  T* __restrict__ y = static_cast<T*>(p.y);
  const int tid = threadIdx.x;
  const int64_t cpg = p.C / p.groups;
  const int64_t opg = p.O / p.groups;
  const int dil = static_cast<int>(p.dilation);  // (chunk-1)*dilation < kSmemX when chunk > 1
  const int64_t total = p.N * p.groups * plan.tiles * plan.oblocks;

  // Shared offset of each item's output (the tile's last output for items past the tile, whose
  // results are dropped), so that every read stays inside the staged span.
  int xo[kItems];
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    const int j = tid + i * kThreads;
    xo[i] = (j < plan.tile ? j : plan.tile - 1) * static_cast<int>(p.stride);
  }

  for (int64_t item = blockIdx.x; item < total; item += gridDim.x) {
    int64_t r = item;
    const int64_t ob = r % plan.oblocks;
    r /= plan.oblocks;
    const int64_t tile = r % plan.tiles;
    r /= plan.tiles;
    const int64_t g = r % p.groups;
    const int64_t n = r / p.groups;
    const int64_t l0 = tile * plan.tile;
    const int64_t o0 = ob * kOT;  // first output channel of the block, within the group

    float acc[kOT][kItems];
#pragma unroll
    for (int oi = 0; oi < kOT; ++oi)
#pragma unroll
      for (int i = 0; i < kItems; ++i) acc[oi][i] = 0.f;

    for (int64_t c0 = 0; c0 < cpg; c0 += plan.staged) {
      const int ccur = static_cast<int>(cpg - c0 < plan.staged ? cpg - c0 : plan.staged);
      for (int64_t k0 = 0; k0 < p.K; k0 += plan.chunk) {
        const int kcur = static_cast<int>(p.K - k0 < plan.chunk ? p.K - k0 : plan.chunk);
        __syncthreads();  // every thread is done reading the previous pass
        const int64_t g0 = l0 * p.stride - p.pad_lo + k0 * p.dilation;
        for (int cl = 0; cl < ccur; ++cl) {
          const T* xrow = x + n * p.x_sn + (g * cpg + c0 + cl) * p.x_sc;
          float* dst = sx + cl * plan.span;
          for (int j = tid; j < plan.span; j += kThreads) {
            const int64_t gi = g0 + j;
            dst[j] = (gi >= 0 && gi < p.L) ? to_float(xrow[gi * p.x_sl]) : 0.f;
          }
        }
        const int wcount = ccur * kOT * kcur;
        for (int e = tid; e < wcount; e += kThreads) {
          const int kk = e % kcur;
          const int oi = (e / kcur) % kOT;
          const int cl = e / (kcur * kOT);
          const int64_t o = o0 + oi;
          float v = 0.f;
          if (o < opg) {
            v = to_float(w[(g * opg + o) * p.w_so + (c0 + cl) * p.w_sc + (k0 + kk) * p.w_sk]);
          }
          sw[(cl * kOT + oi) * plan.chunk + kk] = v;
        }
        __syncthreads();  // staged tiles and taps visible to every thread
        for (int cl = 0; cl < ccur; ++cl) {
          const float* xb = sx + cl * plan.span;
          const float* wb = sw + cl * kOT * plan.chunk;
          for (int kk = 0; kk < kcur; ++kk) {
            float wv[kOT];
#pragma unroll
            for (int oi = 0; oi < kOT; ++oi) wv[oi] = wb[oi * plan.chunk + kk];
            const float* xk = xb + kk * dil;
#pragma unroll
            for (int i = 0; i < kItems; ++i) {
              const float xv = xk[xo[i]];
#pragma unroll
              for (int oi = 0; oi < kOT; ++oi) acc[oi][i] = fmaf(wv[oi], xv, acc[oi][i]);
            }
          }
        }
      }
    }

#pragma unroll
    for (int oi = 0; oi < kOT; ++oi) {
      const int64_t o = o0 + oi;
      if (o >= opg) continue;
      const int64_t oc = g * opg + o;
      const float bias = b != nullptr ? to_float(b[oc * p.b_s]) : 0.f;
      T* yrow = y + n * p.y_sn + oc * p.y_so;
#pragma unroll
      for (int i = 0; i < kItems; ++i) {
        const int j = tid + i * kThreads;
        const int64_t l = l0 + j;
        if (j < plan.tile && l < p.L_out) yrow[l * p.y_sl] = from_float<T>(acc[oi][i] + bias);
      }
    }
  }
}

// ------------------------------------------------------------------------------------------------
// Row-wise kernel (stride 1, one input row and one filter row per output row)
// ------------------------------------------------------------------------------------------------

template <int kThreads_, int kR_, bool kDil1_>
struct Conv1dRowwiseTraits {
  static constexpr int kThreads = kThreads_;  // threads per block
  static constexpr int kR = kR_;              // outputs per thread, and taps per register block
  static constexpr bool kDil1 = kDil1_;       // dilation == 1: float4 shared reads
  static constexpr int kMaxTile = kThreads * kR;  // outputs per tile (exact when dilation == 1)
  static constexpr int kMaxChunk = 2048;      // taps staged per pass
  static constexpr int kMaxHalo = 4096;       // bound on chunk * dilation when dilation > 1
  static constexpr int kMaxDilation = kThreads;  // one d-phase group of threads at least
  static_assert(kThreads % 32 == 0 && kThreads <= 1024, "whole warps");
  static_assert(kR % 4 == 0 && (kR == 8 || kR == 16),
                "float4 window loads; the shared swizzle below is derived for kR = 8 and 16");
  static_assert(kMaxChunk % kR == 0 && kMaxHalo / kMaxDilation >= kR,
                "a chunk holds whole register blocks, at least one even at the largest dilation");
  // Largest staged input (floats): tile + chunk*dilation, rounded up to whole 32-float rows.
  static constexpr int kMaxSpan =
      kMaxTile + (kMaxChunk > kMaxHalo ? kMaxChunk : kMaxHalo) + 32;
  static constexpr int max_smem_bytes() {
    return (kMaxSpan + kMaxChunk) * static_cast<int>(sizeof(float));
  }
  static_assert(max_smem_bytes() <= 48 * 1024, "stays within the default shared-memory limit");
};

// Swizzled shared index of the staged input. With dilation 1, thread t reads float4s at logical
// offsets t*kR + m*kR + 4q; a quarter warp (the unit of a 128-bit shared access) then spans 2
// (kR = 8) or 4 (kR = 16) rows of 32 floats at the same columns. XOR-ing bits 2..3 of the column
// with the row number (mod kR/4) moves each row to its own banks: conflict-free for every m.
// Float4 alignment and contiguity are kept (only whole float4s move, within their row), so
// allocations round up to whole rows.
template <int kR>
__device__ __forceinline__ int rowwise_swizzle(int a) {
  return a ^ (((a >> 5) & (kR / 4 - 1)) << 2);
}

// Stage logical sx[0, n) <- x[g0 + j] as float, zero outside [0, L) (the padding), swizzled.
// Consecutive threads load consecutive elements (every warp load covers whole sectors, and the
// shared stores hit 32 distinct banks), and each thread issues kStageBatch loads before it writes
// any of them to shared memory, so that a block keeps a whole tile's bytes in flight. (Before:
// one 16-byte vector per thread in flight, whose four shared stores conflicted 4 ways; the
// short-filter cases stayed far from the bandwidth.)
template <int kThreads, int kR, int kStageBatch, bool kUnit, typename T>
__device__ __forceinline__ void rowwise_stage_rounds(float* sx, const T* __restrict__ row,
                                                     int64_t sl, int64_t g0, int lo, int hi,
                                                     int n) {
  for (int j0 = threadIdx.x; j0 < n; j0 += kStageBatch * kThreads) {
    float val[kStageBatch];
#pragma unroll
    for (int bi = 0; bi < kStageBatch; ++bi) {
      const int j = j0 + bi * kThreads;
      const int64_t gi = g0 + j;
      val[bi] = (j >= lo && j < hi) ? to_float(row[kUnit ? gi : gi * sl]) : 0.f;
    }
#pragma unroll
    for (int bi = 0; bi < kStageBatch; ++bi) {
      const int j = j0 + bi * kThreads;
      if (j < n) sx[rowwise_swizzle<kR>(j)] = val[bi];
    }
  }
}

template <typename T, int kThreads, int kR>
__device__ __forceinline__ void rowwise_stage_input(float* sx, const T* __restrict__ row,
                                                    int64_t L, int64_t sl, int64_t g0, int n) {
  // kR + 1 loads per thread: one round stages a whole tile (kThreads * kR) plus up to kThreads
  // taps' halo, the common short-filter case, with kR + 1 more registers outside the compute.
  constexpr int kStageBatch = kR + 1;
  // [lo, hi): the staged positions inside the row, clamped to [0, n].
  const int64_t lo64 = g0 < 0 ? -g0 : 0;
  const int64_t hi64 = L - g0;
  const int lo = static_cast<int>(lo64 < n ? lo64 : n);
  const int hi = static_cast<int>(hi64 < lo ? lo : (hi64 < n ? hi64 : n));
  if (sl == 1) {
    rowwise_stage_rounds<kThreads, kR, kStageBatch, true>(sx, row, sl, g0, lo, hi, n);
  } else {
    rowwise_stage_rounds<kThreads, kR, kStageBatch, false>(sx, row, sl, g0, lo, hi, n);
  }
}

// Store y[l0 + j] <- logical so[j] (swizzled) for j < n, the tile's outputs collected in shared
// memory by their owning threads. Consecutive threads write consecutive outputs, so every store
// instruction covers whole 32-byte sectors: 16-byte vectors when the tile starts 16-byte aligned,
// scalar coalesced stores otherwise. (Stores straight from the owning threads, kR outputs apart,
// cost one L2 request per element on rows that are not 16-byte aligned, e.g. an odd L_out: that
// made the batched and depthwise cases several times slower than their bandwidth.)
template <typename T, int kThreads, int kR>
__device__ __forceinline__ void rowwise_store_output(const float* so, T* __restrict__ row,
                                                     int64_t sl, int64_t l0, int n) {
  constexpr int V = kVec16<T>;
  const int tid = threadIdx.x;
  if (sl == 1 && is_aligned16(row + l0)) {
    const int whole = n / V;
    for (int v = tid; v < whole; v += kThreads) {
      Vec<T, V> out;
#pragma unroll
      for (int q = 0; q < V; q += 4) {
        const float4 f = *reinterpret_cast<const float4*>(so + rowwise_swizzle<kR>(v * V + q));
        out.v[q] = from_float<T>(f.x), out.v[q + 1] = from_float<T>(f.y);
        out.v[q + 2] = from_float<T>(f.z), out.v[q + 3] = from_float<T>(f.w);
      }
      store_vec<T, V>(row + l0 + static_cast<int64_t>(v) * V, out);
    }
    for (int j = whole * V + tid; j < n; j += kThreads) {
      row[l0 + j] = from_float<T>(so[rowwise_swizzle<kR>(j)]);
    }
  } else {
    for (int j = tid; j < n; j += kThreads) {
      row[(l0 + j) * sl] = from_float<T>(so[rowwise_swizzle<kR>(j)]);
    }
  }
}

// Grid: 1-D, block-strided over work items (row, tile), row = n*C + c, tile fastest.
// Block: kThreads threads in units of `dilation` threads. Unit u, phase ph (thread t = u*d + ph)
// owns the kR outputs l0 + u*d*kR + ph + i*d (i < kR): with dilation 1, kR consecutive outputs.
// Tap k of output i reads staged input (u*d*kR + ph) + (i + k)*d, so a thread's inputs form one
// sequence and kR taps of kR outputs need only 2*kR consecutive elements of it: the register
// window xw[2*kR], half of it refilled per block of kR taps (the seed's register blocking:
// kR*kR multiply-adds per kR shared loads of input, float4 loads with dilation 1).
// Tile: units*d*kR outputs, units = kThreads / d (threads past the last whole unit idle in the
// multiply-adds but help staging).
// Shared memory: sw[chunk] taps (zero past K), then sx: the tile's input plus halo for the chunk,
// tile + chunk*d floats (covers the last window refill), swizzled by rowwise_swizzle.
// Per chunk of taps: barrier (previous chunk's reads done), staging, barrier (visible), compute.
// Per tile, after the last chunk: the outputs are collected in sx and stored coalesced.
template <typename T, typename Traits>
__global__ void __launch_bounds__(Traits::kThreads)
    conv1d_rowwise_kernel(const Conv1dParams p, const int chunk, const int64_t tiles) {
  constexpr int kThreads = Traits::kThreads;
  constexpr int kR = Traits::kR;
  constexpr bool kDil1 = Traits::kDil1;
  extern __shared__ float4 conv1d_rowwise_smem[];
  float* sw = reinterpret_cast<float*>(conv1d_rowwise_smem);
  float* sx = sw + chunk;  // chunk is a multiple of kR, so sx stays 16-byte aligned

  const T* __restrict__ x = static_cast<const T*>(p.x);
  const T* __restrict__ w = static_cast<const T*>(p.w);
  const T* __restrict__ b = static_cast<const T*>(p.b);
  T* __restrict__ y = static_cast<T*>(p.y);
  const int tid = threadIdx.x;
  const int d = kDil1 ? 1 : static_cast<int>(p.dilation);
  const int units = kThreads / d;
  const int tile_len = units * d * kR;
  const int unit = tid / d;
  const int ph = tid - unit * d;
  const bool active = unit < units;
  const int base = unit * d * kR + ph;  // staged offset of the thread's first output
  const int n_stage = tile_len + chunk * d;
  const int64_t total = p.N * p.C * tiles;

  for (int64_t item = blockIdx.x; item < total; item += gridDim.x) {
    const int64_t tile = item % tiles;
    const int64_t row = item / tiles;
    const int64_t n = row / p.C;
    const int64_t c = row % p.C;
    const int64_t l0 = tile * tile_len;
    const T* xrow = x + n * p.x_sn + c * p.x_sc;
    const T* wrow = w + c * p.w_so;

    float acc[kR];
#pragma unroll
    for (int i = 0; i < kR; ++i) acc[i] = 0.f;

    for (int64_t k0 = 0; k0 < p.K; k0 += chunk) {
      const int kcur = static_cast<int>(p.K - k0 < chunk ? p.K - k0 : chunk);
      const int kcur_r = (kcur + kR - 1) / kR * kR;
      __syncthreads();  // every thread is done reading the previous chunk / tile
      for (int k = tid; k < kcur_r; k += kThreads) {
        sw[k] = k < kcur ? to_float(wrow[(k0 + k) * p.w_sk]) : 0.f;
      }
      const int n_cur = tile_len + kcur_r * d;
      rowwise_stage_input<T, kThreads, kR>(sx, xrow, p.L, p.x_sl, l0 - p.pad_lo + k0 * d,
                                           n_cur <= n_stage ? n_cur : n_stage);
      __syncthreads();  // staged taps and input visible to every thread
      if (active) {
        float xw[2 * kR];
        if constexpr (kDil1) {
#pragma unroll
          for (int q = 0; q < kR; q += 4) {
            const float4 v = *reinterpret_cast<const float4*>(sx + rowwise_swizzle<kR>(base + q));
            xw[q] = v.x, xw[q + 1] = v.y, xw[q + 2] = v.z, xw[q + 3] = v.w;
          }
        } else {
#pragma unroll
          for (int q = 0; q < kR; ++q) xw[q] = sx[rowwise_swizzle<kR>(base + q * d)];
        }
        // Unrolled twice: the window's half-shift (xw[i] = xw[i + kR]) becomes a register
        // renaming instead of kR moves per kR*kR multiply-adds (12% of the issue slots at kR=8).
#pragma unroll 2
        for (int kb = 0; kb < kcur_r; kb += kR) {
          if constexpr (kDil1) {
#pragma unroll
            for (int q = 0; q < kR; q += 4) {
              const float4 v =
                  *reinterpret_cast<const float4*>(sx + rowwise_swizzle<kR>(base + kb + kR + q));
              xw[kR + q] = v.x, xw[kR + q + 1] = v.y, xw[kR + q + 2] = v.z, xw[kR + q + 3] = v.w;
            }
          } else {
#pragma unroll
            for (int q = 0; q < kR; ++q) {
              xw[kR + q] = sx[rowwise_swizzle<kR>(base + (kb + kR + q) * d)];
            }
          }
          float wr[kR];
#pragma unroll
          for (int q = 0; q < kR; q += 4) {
            const float4 v = *reinterpret_cast<const float4*>(sw + kb + q);  // broadcast
            wr[q] = v.x, wr[q + 1] = v.y, wr[q + 2] = v.z, wr[q + 3] = v.w;
          }
#pragma unroll
          for (int k = 0; k < kR; ++k)
#pragma unroll
            for (int i = 0; i < kR; ++i) acc[i] = fmaf(wr[k], xw[i + k], acc[i]);
#pragma unroll
          for (int i = 0; i < kR; ++i) xw[i] = xw[i + kR];
        }
      }
    }

    // The tile's outputs go to global memory through shared memory (rowwise_store_output); sx
    // holds at least tile_len floats. Barriers: every thread is done reading the staged input
    // before it is overwritten, and the outputs are visible before the store. The next item's
    // first barrier keeps its staging from overwriting outputs still being stored.
    const float bias = b != nullptr ? to_float(b[c * p.b_s]) : 0.f;
    __syncthreads();
    if (active) {
      if constexpr (kDil1) {
#pragma unroll
        for (int q = 0; q < kR; q += 4) {
          *reinterpret_cast<float4*>(sx + rowwise_swizzle<kR>(base + q)) =
              make_float4(acc[q] + bias, acc[q + 1] + bias, acc[q + 2] + bias, acc[q + 3] + bias);
        }
      } else {
#pragma unroll
        for (int i = 0; i < kR; ++i) sx[rowwise_swizzle<kR>(base + i * d)] = acc[i] + bias;
      }
    }
    __syncthreads();
    const int64_t left = p.L_out - l0;
    rowwise_store_output<T, kThreads, kR>(sx, y + n * p.y_sn + c * p.y_so, p.y_sl, l0,
                                          static_cast<int>(left < tile_len ? left : tile_len));
  }
}

// ------------------------------------------------------------------------------------------------
// Short-filter row-wise kernel (stride 1, dilation 1, K <= kMaxK, one input row per output row)
// ------------------------------------------------------------------------------------------------

// Short filters are bandwidth-bound: the kernel must keep enough bytes in flight and spend few
// instructions per element. Each thread owns kE consecutive outputs = 32 bytes of input and of
// output (two 16-byte vectors each way: kE = 8 for fp32, 16 for fp16/bf16, so bf16 costs the
// same instructions per byte as fp32); a block streams tiles of kTile outputs in a loop and
// issues the next tile's 16-byte loads (into registers) before computing the current one.
template <typename T>
struct Conv1dShortTraits {
  static constexpr int kThreads = 128;
  static constexpr int kV = kVec16<T>;                   // elements of T per 16-byte vector
  static constexpr int kE = 2 * kV;                      // outputs per thread
  static constexpr int kMain = kE / kV;                  // tile vectors loaded per thread
  static constexpr int kTile = kThreads * kE;            // outputs per tile
  static constexpr int kMaxK = 32;                       // longest filter
  // Resident blocks per SM asked of the register allocator: 16-bit types took 80 registers
  // (6 blocks, 37.5% occupancy, 31% achieved with DRAM at 17%); 7 blocks caps them at 72 without
  // spills (8 spilled), fp32 at 10 blocks takes 46 (was 55, 9 blocks).
  static constexpr int kMinBlocks = kV == 4 ? 10 : 7;
  // The residual window shift (< 4, see Conv1dShortItem) in registers, one compiled multiply-add
  // variant each (fp32), or as leading zero taps (16-bit types: the variants needed 80 registers,
  // at 72 they spilled the prefetched vectors, and 6 blocks would cut the bytes in flight).
  static constexpr bool kShiftVariants = kV == 4;
  // Staged floats a thread's window may read past its kE outputs (also the room for the staged
  // taps): the window shift (a multiple of 4, < kV) plus either the taps in whole 4-tap blocks
  // and 2 floats of the next float4 (variants), or the taps after up to 3 leading zeros.
  static constexpr int kMaxTaps = (kMaxK + kV - 1 + 3) / 4 * 4;
  // A row's last tile also takes up to kExtra outputs past kTile (warp 0 computes them in a
  // second pass), so that rows a little longer than whole tiles (depthwise L_out = L + 3 = 4099)
  // do not end in a nearly empty tile: that tile cost a whole iteration of the block's pipeline
  // with almost no bytes in flight (1 iteration in 5 for fp32, 1 in 3 for 16-bit types).
  static constexpr int kExtra = 32 * kE;
  // Vectors past the tile (extra outputs plus the taps' halo), one a thread at most.
  static constexpr int kMaxHalo = (kExtra + kMaxTaps + kV - 1) / kV;
  static constexpr int kStaged = (kTile + kMaxHalo * kV + 31) / 32 * 32;  // whole swizzle rows
  static constexpr int kBuf = kStaged + kMaxTaps;        // floats per buffer: input, then taps
  static_assert(kE == 8 || kE == 16, "rowwise_swizzle is derived for 8 and 16 floats a thread");
  static_assert(kMaxHalo <= kThreads && kMaxTaps <= kThreads, "one halo vector / tap a thread");
  static_assert(kExtra % kE == 0 && kExtra / kE <= 32, "the extra outputs are one warp's units");
  static_assert((kV - 1) / 4 * 4 + (kMaxK + 3) / 4 * 4 + 4 <= kMaxTaps &&
                    (kV - 1) / 4 * 4 + (kMaxK + 3 + 3) / 4 * 4 <= kMaxTaps,
                "the largest window shift plus the largest tap span fit the staged halo");
  static_assert(kBuf % 4 == 0 && kStaged % 32 == 0, "float4-aligned buffers and taps");
  static constexpr int smem_bytes() { return 2 * kBuf * static_cast<int>(sizeof(float)); }
};

// One tile of one row. Thread t's outputs are l0 + t*kE + i (i < kE); l0 = tile*kTile - my,
// my = the row's output misalignment in elements, so every thread's outputs start 16-byte
// aligned (vector stores). Staged float s holds x[a0 + s], a0 = l0 - pad_lo - (shift + off)
// with shift + off in [0, kV) chosen so that x + a0 is 16-byte aligned (vector loads); shift is
// its multiple-of-4 part, off < 4 the rest. Output s's window starts at staged s + shift + off;
// the thread reads float4s from staged base + shift (float4-aligned). The residual shift off is
// xoff + toff: fp32 (kShiftVariants) compiles the multiply-adds for each xoff = off
// (short_fma<kOff>: tap k reads register xw[i + k + off]) with taps w[k], k < kp = K rounded up to
// 4; 16-bit types shift the taps instead, toff = off leading zeros (tap k' = w[k' - off]),
// kp = K + off rounded up. (Taps shifted by off made K = 4 take 8 taps 3 times in 4: 7 multiply-
// adds an output on average instead of 4. Shifting by the whole misalignment, up to 7 for 16-bit
// types, had made it 9.)
template <typename T>
struct Conv1dShortItem {
  const T* xrow;
  T* yrow;
  int64_t l0;  // output of staged position 0; > -kV, and the tile is empty when >= L_out
  int64_t a0;  // input position of staged position 0
  int64_t c;   // channel: filter row and bias
  int shift;   // staged offset of output 0's window: a multiple of 4, < kV
  int off;     // residual window shift, < 4
  int xoff;    // the part of off applied in registers (fp32: off, else 0)
  int toff;    // the part of off applied as leading zero taps (off - xoff)
  int kp;      // K + toff rounded up to whole 4-tap blocks
  int ext;     // outputs past kTile (a row's last tile only), <= kExtra
};

// Vectors staged past the tile's kTile: the extra outputs' inputs and the taps' halo. Every
// staged float that an output multiplies (by a zero tap too: the staged data must be finite) is
// loaded: output s < kTile + ext reads staged s + shift + xoff + k, k < kp.
template <typename T, typename Traits>
__device__ __forceinline__ int short_halo(const Conv1dShortItem<T>& it) {
  return (it.shift + it.xoff + it.kp + it.ext + Traits::kV - 1) / Traits::kV;
}

// Item = (n * C + c) * tiles + tile (tile fastest: neighbouring blocks share halos in L2),
// decoded by the kernel's ShortCursor.
template <typename T, typename Traits>
__device__ __forceinline__ Conv1dShortItem<T> short_item(const Conv1dParams& p, uint32_t n,
                                                         uint32_t c, uint32_t tile,
                                                         uint32_t tiles) {
  constexpr int kV = Traits::kV;
  Conv1dShortItem<T> it;
  it.c = c;
  it.xrow = static_cast<const T*>(p.x) + static_cast<int64_t>(n) * p.x_sn + it.c * p.x_sc;
  it.yrow = static_cast<T*>(p.y) + static_cast<int64_t>(n) * p.y_sn + it.c * p.y_so;
  const int my =
      p.y_sl == 1 ? static_cast<int>((reinterpret_cast<uintptr_t>(it.yrow) / sizeof(T)) % kV) : 0;
  it.l0 = static_cast<int64_t>(tile) * Traits::kTile - my;
  int off = 0;
  if (p.x_sl == 1) {
    const int mx = static_cast<int>((reinterpret_cast<uintptr_t>(it.xrow) / sizeof(T)) % kV);
    const int64_t g = mx + it.l0 - p.pad_lo;
    off = static_cast<int>(((g % kV) + kV) % kV);
  }
  it.a0 = it.l0 - p.pad_lo - off;
  it.off = off & 3;
  it.shift = off - it.off;
  it.xoff = Traits::kShiftVariants ? it.off : 0;
  it.toff = it.off - it.xoff;
  it.kp = static_cast<int>((p.K + it.toff + 3) / 4 * 4);
  // The launcher sizes `tiles` so that the last tile's outputs past kTile are at most kExtra;
  // the clamp only keeps the shared reads in bounds.
  const int64_t ext = tile + 1 == tiles ? p.L_out - it.l0 - Traits::kTile : 0;
  it.ext = static_cast<int>(ext <= 0 ? 0 : (ext < Traits::kExtra ? ext : Traits::kExtra));
  return it;
}

// x[gi, gi + kV) of a row: one 16-byte load inside the row (gi is aligned by construction when
// the row is unit-stride), element by element with zeros (the padding) at the row's ends.
template <typename T, int kV>
__device__ __forceinline__ Vec<T, kV> short_load(const Conv1dParams& p, const T* xrow,
                                                 int64_t gi) {
  Vec<T, kV> v;
  if (p.x_sl == 1 && gi >= 0 && gi + kV <= p.L) {
    v = load_vec<T, kV>(xrow + gi);
  } else if (gi >= p.L || gi + kV <= 0) {
    // Wholly outside the row (the empty end of a row's last tile): zeros without the
    // element-by-element checks.
#pragma unroll
    for (int e = 0; e < kV; ++e) v.v[e] = from_float<T>(0.f);
  } else {
#pragma unroll
    for (int e = 0; e < kV; ++e) {
      const int64_t g = gi + e;
      v.v[e] = (g >= 0 && g < p.L) ? xrow[g * p.x_sl] : from_float<T>(0.f);
    }
  }
  return v;
}

// A tile's data in flight: the raw input vectors, one shifted tap and the bias.
template <typename T, typename Traits>
struct Conv1dShortRegs {
  Vec<T, Traits::kV> main[Traits::kMain];
  Vec<T, Traits::kV> halo;
  float tap;
  float bias;
};

template <typename T, typename Traits>
__device__ __forceinline__ void short_prefetch(const Conv1dParams& p, const Conv1dShortItem<T>& it,
                                               Conv1dShortRegs<T, Traits>& r) {
  constexpr int kV = Traits::kV;
  const int tid = threadIdx.x;
  const int nh = short_halo<T, Traits>(it);  // vectors past the tile
  if (p.x_sl == 1 && it.a0 >= 0 && it.a0 + Traits::kTile + nh * kV <= p.L) {
    // Interior tile (block-uniform): plain vector loads, no per-vector bounds checks.
    const T* src = it.xrow + it.a0;
#pragma unroll
    for (int m = 0; m < Traits::kMain; ++m) {
      r.main[m] = load_vec<T, kV>(src + (tid + m * Traits::kThreads) * kV);
    }
    if (tid < nh) r.halo = load_vec<T, kV>(src + Traits::kTile + tid * kV);
  } else {
#pragma unroll
    for (int m = 0; m < Traits::kMain; ++m) {
      const int j = tid + m * Traits::kThreads;  // consecutive threads, consecutive vectors
      r.main[m] = short_load<T, kV>(p, it.xrow, it.a0 + static_cast<int64_t>(j) * kV);
    }
    if (tid < nh) {
      r.halo =
          short_load<T, kV>(p, it.xrow, it.a0 + static_cast<int64_t>(Traits::kTile + tid * kV));
    }
  }
  const T* w = static_cast<const T*>(p.w);
  const int k = tid - it.toff;
  r.tap = (k >= 0 && k < p.K) ? to_float(w[it.c * p.w_so + k * p.w_sk]) : 0.f;
  const T* b = static_cast<const T*>(p.b);
  r.bias = b != nullptr ? to_float(b[it.c * p.b_s]) : 0.f;
}

template <typename T, typename Traits>
__device__ __forceinline__ void short_stage_vec(float* sx, int j, const Vec<T, Traits::kV>& v) {
#pragma unroll
  for (int q = 0; q < Traits::kV; q += 4) {
    *reinterpret_cast<float4*>(sx + rowwise_swizzle<Traits::kE>(j * Traits::kV + q)) =
        make_float4(to_float(v.v[q]), to_float(v.v[q + 1]), to_float(v.v[q + 2]),
                    to_float(v.v[q + 3]));
  }
}

// Multiply-adds of one thread's kE outputs: acc[i] += sum_{k < kp} sw[k] * staged[wbase + kOff +
// i + k], wbase float4-aligned, kp a multiple of 4 (<= kMaxTaps). Fully unrolled: the window shift
// below is a register renaming. Shared reads: one float4 of input and one of taps (broadcast) per
// 4 taps (and one scalar or float2 at kOff >= 2), from staged wbase up to wbase + kp + kE + 1.
template <int kOff, typename Traits>
__device__ __forceinline__ void short_fma(const float* sx, const float* sw, int wbase, int kp,
                                          float (&acc)[Traits::kE]) {
  constexpr int kE = Traits::kE;
  // A 4-tap block reads staged wbase + kb + j, j = i + k + kOff <= kE + 2 + kOff: the window
  // xw[j] (j < kE + 4, its last float4 reloaded per block) and, at kOff >= 2, the first kOff - 1
  // floats of the next float4 in ex (a float4 more in the window took 4 more registers and made
  // the compiler spill the prefetched vectors, each spill store waiting on its global load).
  constexpr int kEx = kOff >= 2 ? kOff - 1 : 1;  // >= 1: no zero-length arrays
  float xw[kE + 4];
  float ex[kEx];
#pragma unroll
  for (int q = 0; q < kE; q += 4) {
    const float4 v = *reinterpret_cast<const float4*>(sx + rowwise_swizzle<kE>(wbase + q));
    xw[q] = v.x, xw[q + 1] = v.y, xw[q + 2] = v.z, xw[q + 3] = v.w;
  }
#pragma unroll
  for (int kb = 0; kb < Traits::kMaxTaps; kb += 4) {
    if (kb >= kp) break;
    const float4 v =
        *reinterpret_cast<const float4*>(sx + rowwise_swizzle<kE>(wbase + kb + kE));
    xw[kE] = v.x, xw[kE + 1] = v.y, xw[kE + 2] = v.z, xw[kE + 3] = v.w;
    if constexpr (kOff == 2) {
      ex[0] = sx[rowwise_swizzle<kE>(wbase + kb + kE + 4)];
    } else if constexpr (kOff == 3) {
      // 8-byte aligned: the swizzle moves whole float4s.
      const float2 e2 =
          *reinterpret_cast<const float2*>(sx + rowwise_swizzle<kE>(wbase + kb + kE + 4));
      ex[0] = e2.x, ex[1] = e2.y;
    }
    const float4 wv = *reinterpret_cast<const float4*>(sw + kb);  // broadcast
    const float wr[4] = {wv.x, wv.y, wv.z, wv.w};
#pragma unroll
    for (int k = 0; k < 4; ++k)
#pragma unroll
      for (int i = 0; i < kE; ++i) {
        const int j = i + k + kOff;
        acc[i] = fmaf(wr[k], j < kE + 4 ? xw[j] : ex[j - (kE + 4)], acc[i]);
      }
#pragma unroll
    for (int i = 0; i < kE; ++i) xw[i] = xw[i + 4];
  }
}

// Grid: 1-D, at most as many blocks as fit on the device at once; block i runs the non-empty
// items i, i + gridDim.x, ... (see Conv1dShortItem).
// Block: kThreads threads, thread t owns the kE outputs at staged positions t*kE + i.
// Shared memory: two buffers of [kStaged input floats (swizzled, rowwise_swizzle<kE>) | kMaxTaps
// taps]. Per tile: the raw registers are converted into buffer `buf`; barrier (staged data
// visible); the next tile's loads are issued into the registers; multiply-adds from shared
// memory (one float4 of input and one of taps per 4 taps x kE outputs); 16-byte stores straight
// from the registers. One barrier per tile suffices: a buffer is rewritten two tiles later,
// after every thread has passed the barrier of the tile in between, hence finished reading it.
// Warps whose outputs all lie past the row skip the multiply-adds (the short last tiles).
template <typename T, typename Traits>
__global__ void __launch_bounds__(Traits::kThreads, Traits::kMinBlocks)
    conv1d_rowwise_short_kernel(const Conv1dParams p, const uint32_t tiles,
                                const uint32_t total) {
  constexpr int kE = Traits::kE;
  constexpr int kV = Traits::kV;
  extern __shared__ float4 conv1d_short_smem[];
  float* const smem = reinterpret_cast<float*>(conv1d_short_smem);
  const int tid = threadIdx.x;

  // The block's items are blockIdx.x + i * gridDim.x, decoded into (n, c, tile) once and then
  // advanced without divisions (two 32-bit divisions an item took a third of the item's
  // uniform-datapath instructions): gridDim.x = dq rows + dr tiles, dq rows = dqn * C + dqc.
  // 32-bit: total + gridDim.x < 2^32 (the launcher keeps total <= INT_MAX) and C <= total.
  const uint32_t C = static_cast<uint32_t>(p.C);
  const uint32_t dq = gridDim.x / tiles;
  const uint32_t dr = gridDim.x - dq * tiles;
  const uint32_t dqn = dq / C;
  const uint32_t dqc = dq - dqn * C;
  uint32_t item = blockIdx.x;
  uint32_t tile = item % tiles;
  uint32_t n = item / tiles;  // the row, until divided
  uint32_t c = n % C;
  n /= C;
  auto advance = [&]() {
    item += gridDim.x;
    tile += dr;
    uint32_t carry = 0;
    if (tile >= tiles) tile -= tiles, carry = 1;
    c += dqc + carry;  // < 2C
    n += dqn;
    if (c >= C) c -= C, ++n;
  };
  Conv1dShortItem<T> it;
  for (;; advance()) {
    if (item >= total) return;
    it = short_item<T, Traits>(p, n, c, tile, tiles);
    if (it.l0 < p.L_out) break;
  }
  Conv1dShortRegs<T, Traits> r;
  short_prefetch<T, Traits>(p, it, r);

  for (int buf = 0;; buf ^= 1) {
    float* const sx = smem + buf * Traits::kBuf;
    float* const sw = sx + Traits::kStaged;
#pragma unroll
    for (int m = 0; m < Traits::kMain; ++m) {
      short_stage_vec<T, Traits>(sx, tid + m * Traits::kThreads, r.main[m]);
    }
    const int nh = short_halo<T, Traits>(it);
    if (tid < nh) short_stage_vec<T, Traits>(sx, Traits::kTile / kV + tid, r.halo);
    if (tid < it.kp) sw[tid] = r.tap;
    const float bias = r.bias;
    __syncthreads();  // this tile's input and taps visible to every thread

    Conv1dShortItem<T> nit;
    bool more = false;
    for (;;) {
      advance();
      if (item >= total) break;
      nit = short_item<T, Traits>(p, n, c, tile, tiles);
      if (nit.l0 < p.L_out) {
        more = true;
        break;
      }
    }
    if (more) short_prefetch<T, Traits>(p, nit, r);

    // The tile's outputs (every warp), then a row's last tile's outputs past kTile (warp 0,
    // thread t at kTile + t*kE).
    auto unit = [&](const int base) {
      const int wbase = base + it.shift;  // the window of output base (float4-aligned)
      if (it.l0 + (base - (tid & 31) * kE) < p.L_out) {  // warp-uniform
        float acc[kE];
#pragma unroll
        for (int i = 0; i < kE; ++i) acc[i] = 0.f;
        if constexpr (Traits::kShiftVariants) {
          switch (it.xoff) {  // block-uniform
            case 0: short_fma<0, Traits>(sx, sw, wbase, it.kp, acc); break;
            case 1: short_fma<1, Traits>(sx, sw, wbase, it.kp, acc); break;
            case 2: short_fma<2, Traits>(sx, sw, wbase, it.kp, acc); break;
            default: short_fma<3, Traits>(sx, sw, wbase, it.kp, acc); break;
          }
        } else {
          short_fma<0, Traits>(sx, sw, wbase, it.kp, acc);
        }

        const int64_t l = it.l0 + base;
        if (p.y_sl == 1 && l >= 0 && l + kE <= p.L_out) {
#pragma unroll
          for (int m = 0; m < Traits::kMain; ++m) {
            Vec<T, kV> o;
#pragma unroll
            for (int e = 0; e < kV; ++e) o.v[e] = from_float<T>(acc[m * kV + e] + bias);
            store_vec<T, kV>(it.yrow + l + m * kV, o);
          }
        } else {
#pragma unroll
          for (int i = 0; i < kE; ++i) {
            if (l + i >= 0 && l + i < p.L_out) {
              it.yrow[(l + i) * p.y_sl] = from_float<T>(acc[i] + bias);
            }
          }
        }
      }
    };
    // Register allocation, measured with -Xptxas -v: the fp32 variants spilled the prefetched
    // vectors (128 bytes) inside a loop over the two, the 16-bit kernel (16 bytes) with two calls.
    if constexpr (Traits::kShiftVariants) {
      unit(tid * kE);
      if (it.ext > 0 && tid < 32) unit(Traits::kTile + tid * kE);  // warp-uniform
    } else {
      const int npass = it.ext > 0 && tid < 32 ? 2 : 1;  // warp-uniform
#pragma unroll 1
      for (int pass = 0; pass < npass; ++pass) unit(pass * Traits::kTile + tid * kE);
    }
    if (!more) return;
    it = nit;
  }
}

// ------------------------------------------------------------------------------------------------
// Streaming row-wise kernel (the "rowwise16" algorithm: stride 1, dilation 1, any K)
// ------------------------------------------------------------------------------------------------

// FMA-bound filters: 16 outputs per thread in registers, 16x16 register blocks of multiply-adds
// per 16 taps, as conv1d_rowwise_kernel<16>, in a persistent loop (a block streams its tiles in
// steps of up to kMaxChunk taps). The staged input goes through a ring of kStages shared-memory
// stages filled with cp.async (16-byte LDGSTS, no registers held): the copies of step s + 2 are
// in flight while step s computes. The previous version held one step of lookahead in 17
// registers a thread, which left the FMA pipe ~60% idle on short rows (depthwise K = 31: one
// 32-tap step per 2048-output tile, about one loaded DRAM latency of arithmetic per step).
//
// Stages: 3. Two steps of arithmetic (~2 DRAM latencies at K = 31) cover a copy; with kMaxChunk
// = 128 a 3-stage ring is <= 33.5 KB (fp32) and 6 blocks of 128 threads fit an SM (the register
// cap of kMinBlocks), where 4 stages (44.7 KB) would leave 4 (fp32 at K > 64) or 5.
//
// Alignment: a tile starts up to kV - 1 outputs early (e, per row) so that its staged input
// starts at a 16-byte aligned address of x (when x's rows are contiguous), which makes every
// staged piece a whole aligned 16-byte copy. The outputs then usually start misaligned (e.g.
// padding 15 with aligned rows): the last step's stores realign them with register rotations and
// one warp shuffle per element (once per tile) and store 16-byte vectors. With strided x rows the
// tile is aligned to y instead (as before) and the input is staged with element loads.
//
// Taps are loaded into registers one step ahead (a weight row is rarely 16-byte aligned:
// depthwise [C, 1, K]) and stored to the stage as float after the next barrier; taps are small and
// usually L2 hits, so one step of arithmetic covers them, and the multiply-add loop reads them as
// float4 broadcasts without conversions.
template <typename T>
struct Conv1dStreamTraits {
  static constexpr int kThreads = 128;
  static constexpr int kR = 16;                   // outputs per thread, taps per register block
  static constexpr int kTile = kThreads * kR;     // outputs per tile
  static constexpr int kStages = 3;               // shared-memory ring (copies of 2 steps ahead)
  static constexpr int kMaxChunk = 128;           // taps per step (a multiple of kR)
  static constexpr int kTapRegs = (kMaxChunk + kThreads - 1) / kThreads;  // taps a thread loads
  static constexpr int kV = kVec16<T>;            // elements of one 16-byte piece
  // Staged input rows of kR elements (raw T) followed by 16 bytes of padding: thread t's window
  // starts at row t, i.e. 16-byte column (kRowBytes / 16) * t = 5t (fp32) or 3t (16-bit); odd
  // multipliers make a quarter warp's 8 vector reads hit 8 distinct columns (conflict-free).
  static constexpr int kRowBytes = kR * static_cast<int>(sizeof(T)) + 16;
  static constexpr int kPieceIters = ((kTile + kMaxChunk) / kV + kThreads - 1) / kThreads;
  // 6 blocks (24 warps) per SM: the register cap is 80, for the 16 accumulators, the 32-float
  // window, 16 taps and the streaming state.
  static constexpr int kMinBlocks = 6;
  static constexpr int kHeadBytes = 32;           // Conv1dStreamHead
  // Stage layout (bytes): head | chunk float taps, the bias, 3 floats unused | input rows.
  static constexpr int taps_off() { return kHeadBytes; }
  static constexpr int input_off(int chunk) { return kHeadBytes + (chunk + 4) * 4; }
  static constexpr int stage_bytes(int chunk) {
    return input_off(chunk) + (kTile + chunk) / kR * kRowBytes;
  }
  static constexpr int smem_bytes(int chunk) { return kStages * stage_bytes(chunk); }
  static_assert(kTile % kV == 0 && kR % kV == 0, "whole pieces per thread and per row");
  static_assert(kMaxChunk % kR == 0 && kMaxChunk <= kTapRegs * kThreads, "taps of a step");
  static_assert(kRowBytes % 16 == 0 && (kRowBytes / 16) % 2 == 1, "conflict-free windows");
  static_assert(stage_bytes(kR) % 16 == 0 && kHeadBytes % 16 == 0, "16-byte aligned stages");
  static_assert(kStages >= 3, "one barrier per step needs a free stage to fill (see the kernel)");
  static_assert(smem_bytes(kMaxChunk) <= 48 * 1024, "within the default shared-memory limit");
};

// What the compute side of a step needs, written into the step's stage by thread 0 when the step
// is fetched (the fetch runs kStages - 1 steps ahead, so nothing of it is held in registers).
struct Conv1dStreamHead {
  int64_t l0;   // output of thread 0's first output
  void* yrow;   // the item's output row
  int kcur_r;   // the step's taps rounded up to kR; 0: no step, the block is done
  int flags;    // 1: the item's first step (the bias starts the sums), 2: its last (stores)
  int d;        // l0 + d is the row's first 16-byte aligned output at or after l0 (y_sl == 1)
  int unused;
};
static_assert(sizeof(Conv1dStreamHead) == 32, "kHeadBytes");

__device__ __forceinline__ void conv1d_cp_async16(void* smem, const void* gmem) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const size_t src = __cvta_generic_to_global(gmem);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void conv1d_cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int kPending>
__device__ __forceinline__ void conv1d_cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// One work item (a tile of one row).
template <typename T>
struct Conv1dStreamItem {
  const T* xrow;
  T* yrow;
  int64_t c;   // channel: taps and bias
  int64_t l0;  // output of thread 0's first output; > -kV, the item is empty when >= L_out
};

// The item (row, tile). Its tile starts e < kV outputs early: so that the staged input (position
// l0 - pad_lo + k0, k0 a multiple of kR) is 16-byte aligned when x's rows are contiguous, else so
// that the outputs are (the launcher's tile count assumes the same rule).
template <typename T, typename Traits>
__device__ __forceinline__ Conv1dStreamItem<T> stream_item(const Conv1dParams& p, uint32_t row,
                                                           uint32_t tile) {
  constexpr int kV = Traits::kV;
  Conv1dStreamItem<T> it;
  uint32_t n = row, c = 0;
  if (p.C != 1) {
    const uint32_t C = static_cast<uint32_t>(p.C);
    n = row / C;
    c = row - n * C;
  }
  it.c = c;
  it.xrow = static_cast<const T*>(p.x) + static_cast<int64_t>(n) * p.x_sn + it.c * p.x_sc;
  it.yrow = static_cast<T*>(p.y) + static_cast<int64_t>(n) * p.y_sn + it.c * p.y_so;
  int e = 0;
  if (p.x_sl == 1) {
    const int64_t xa =
        static_cast<int64_t>((reinterpret_cast<uintptr_t>(it.xrow) / sizeof(T)) % kV);
    e = static_cast<int>(((xa - p.pad_lo) % kV + kV) % kV);
  } else if (p.y_sl == 1) {
    e = static_cast<int>((reinterpret_cast<uintptr_t>(it.yrow) / sizeof(T)) % kV);
  }
  it.l0 = static_cast<int64_t>(tile) * Traits::kTile - e;
  return it;
}

// A block's position in its step sequence: item = row * tiles + tile, taps from k0.
struct Conv1dStreamPos {
  uint32_t item, row, tile;
  int64_t k0;
};

// Moves pos (k0 == 0) forward to the first non-empty item at or after it (items advance by
// gridDim.x = dq rows + dr tiles, no division); false when the block has no item left.
template <typename T, typename Traits>
__device__ __forceinline__ bool stream_seek(const Conv1dParams& p, Conv1dStreamPos& pos,
                                            Conv1dStreamItem<T>& it, uint32_t dq, uint32_t dr,
                                            uint32_t tiles, uint32_t total) {
  for (;;) {
    if (pos.item >= total) return false;
    it = stream_item<T, Traits>(p, pos.row, pos.tile);
    if (it.l0 < p.L_out) return true;
    pos.item += gridDim.x;  // total + gridDim.x < 2^32
    pos.row += dq;
    pos.tile += dr;
    if (pos.tile >= tiles) pos.tile -= tiles, ++pos.row;
  }
}

// The step after pos: the item's next chunk, or the next non-empty item's first.
template <typename T, typename Traits>
__device__ __forceinline__ bool stream_next(const Conv1dParams& p, Conv1dStreamPos& pos,
                                            Conv1dStreamItem<T>& it, int chunk, uint32_t dq,
                                            uint32_t dr, uint32_t tiles, uint32_t total) {
  if (pos.k0 + chunk < p.K) {
    pos.k0 += chunk;
    it = stream_item<T, Traits>(p, pos.row, pos.tile);
    return true;
  }
  pos.k0 = 0;
  pos.item += gridDim.x;
  pos.row += dq;
  pos.tile += dr;
  if (pos.tile >= tiles) pos.tile -= tiles, ++pos.row;
  return stream_seek<T, Traits>(p, pos, it, dq, dr, tiles, total);
}

// A step's taps and bias in flight (raw: converted when stored, after the next barrier).
template <typename T, typename Traits>
struct Conv1dStreamTaps {
  T w[Traits::kTapRegs];
  T bias;  // thread 0 only
};

// Fetches step (it, k0) into the stage at st: the input's cp.async copies (the caller commits
// them as one group), the taps into registers, the head. Staged position j (0 <= j < kTile +
// kcur_r) holds x at l0 - pad_lo + k0 + j (zero outside [0, L)), in row j / kR of the stage.
template <typename T, typename Traits>
__device__ __forceinline__ void stream_fetch(const Conv1dParams& p, const Conv1dStreamItem<T>& it,
                                             int64_t k0, int chunk, char* st,
                                             Conv1dStreamTaps<T, Traits>& taps) {
  constexpr int kThreads = Traits::kThreads;
  constexpr int kR = Traits::kR;
  constexpr int kV = Traits::kV;
  const int tid = threadIdx.x;
  const int kcur = static_cast<int>(p.K - k0 < chunk ? p.K - k0 : chunk);
  const int kcur_r = (kcur + kR - 1) / kR * kR;
  const int npieces = (Traits::kTile + kcur_r) / kV;
  const int64_t g0 = it.l0 - p.pad_lo + k0;  // input position of staged position 0
  char* const sx = st + Traits::input_off(chunk);
  if (p.x_sl == 1) {
    // xrow + g0 is 16-byte aligned (stream_item): whole pieces inside the row are copied
    // asynchronously, pieces outside it are zeros, a piece across a row end (a row start or
    // length that is not a multiple of kV elements) is loaded element by element.
    // [lo, hi): the staged positions inside the row (32-bit compares per piece).
    const int n = npieces * kV;
    const int64_t lo64 = g0 < 0 ? -g0 : 0;
    const int64_t hi64 = p.L - g0;
    const int lo = static_cast<int>(lo64 < n ? lo64 : n);
    const int hi = static_cast<int>(hi64 < lo ? lo : (hi64 < n ? hi64 : n));
    const T* const src = it.xrow + g0;
#pragma unroll
    for (int q = 0; q < Traits::kPieceIters; ++q) {
      const int pc = tid + q * kThreads;
      if (pc < npieces) {
        const int j = pc * kV;
        char* const dst = sx + (j / kR) * Traits::kRowBytes + (j % kR) * static_cast<int>(sizeof(T));
        if (j >= lo && j + kV <= hi) {
          conv1d_cp_async16(dst, src + j);
        } else if (j + kV <= lo || j >= hi) {
          *reinterpret_cast<uint4*>(dst) = make_uint4(0u, 0u, 0u, 0u);
        } else {
          Vec<T, kV> v;
#pragma unroll
          for (int e = 0; e < kV; ++e) {
            v.v[e] = j + e >= lo && j + e < hi ? src[j + e] : from_float<T>(0.f);
          }
          *reinterpret_cast<Vec<T, kV>*>(dst) = v;
        }
      }
    }
  } else {
    // Strided rows: element loads through the stride (all of a thread's loads issued before its
    // stores), plain shared stores.
    Vec<T, kV> v[Traits::kPieceIters];
#pragma unroll
    for (int q = 0; q < Traits::kPieceIters; ++q) {
      const int64_t gj = g0 + static_cast<int64_t>(tid + q * kThreads) * kV;
#pragma unroll
      for (int e = 0; e < kV; ++e) {
        v[q].v[e] = tid + q * kThreads < npieces && gj + e >= 0 && gj + e < p.L
                        ? it.xrow[(gj + e) * p.x_sl]
                        : from_float<T>(0.f);
      }
    }
#pragma unroll
    for (int q = 0; q < Traits::kPieceIters; ++q) {
      const int pc = tid + q * kThreads;
      if (pc < npieces) {
        const int j = pc * kV;
        char* const dst = sx + (j / kR) * Traits::kRowBytes + (j % kR) * static_cast<int>(sizeof(T));
        *reinterpret_cast<Vec<T, kV>*>(dst) = v[q];
      }
    }
  }
  const T* const wrow = static_cast<const T*>(p.w) + it.c * p.w_so;
#pragma unroll
  for (int q = 0; q < Traits::kTapRegs; ++q) {
    const int k = tid + q * kThreads;
    taps.w[q] = k < kcur ? wrow[(k0 + k) * p.w_sk] : from_float<T>(0.f);
  }
  if (tid == 0) {
    const T* const b = static_cast<const T*>(p.b);
    taps.bias = b != nullptr ? b[it.c * p.b_s] : from_float<T>(0.f);
    Conv1dStreamHead h;
    h.l0 = it.l0;
    h.yrow = it.yrow;
    h.kcur_r = kcur_r;
    h.flags = (k0 == 0 ? 1 : 0) | (k0 + kcur >= p.K ? 2 : 0);
    const int m = static_cast<int>(
        ((reinterpret_cast<uintptr_t>(it.yrow) / sizeof(T)) % kV + (it.l0 % kV + kV)) % kV);
    h.d = (kV - m) % kV;
    h.unused = 0;
    *reinterpret_cast<Conv1dStreamHead*>(st) = h;
  }
}

// Marks the stage at st as "no step": the block is done when it gets there.
__device__ __forceinline__ void stream_mark_end(char* st) {
  if (threadIdx.x == 0) reinterpret_cast<Conv1dStreamHead*>(st)->kcur_r = 0;
}

// Stores fetched taps (zeros past the step's taps) and the bias into the stage at st.
template <typename T, typename Traits>
__device__ __forceinline__ void stream_store_taps(char* st, int chunk,
                                                  const Conv1dStreamTaps<T, Traits>& taps) {
  float* const sw = reinterpret_cast<float*>(st + Traits::taps_off());
#pragma unroll
  for (int q = 0; q < Traits::kTapRegs; ++q) {
    const int k = threadIdx.x + q * Traits::kThreads;
    if (k < chunk) sw[k] = to_float(taps.w[q]);
  }
  if (threadIdx.x == 0) sw[chunk] = to_float(taps.bias);
}

// 16 staged inputs (one padded row) as floats.
template <typename T>
__device__ __forceinline__ void stream_row16(const char* src, float* out) {
  if constexpr (sizeof(T) == 4) {
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const float4 v = *reinterpret_cast<const float4*>(src + 16 * q);
      out[4 * q] = v.x, out[4 * q + 1] = v.y, out[4 * q + 2] = v.z, out[4 * q + 3] = v.w;
    }
  } else {
#pragma unroll
    for (int q = 0; q < 2; ++q) {
      const uint4 v = *reinterpret_cast<const uint4*>(src + 16 * q);
      const unsigned u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        float lo, hi;  // element 2i is the low half (little-endian)
        if constexpr (std::is_same_v<T, __nv_bfloat16>) {
          lo = __uint_as_float(u[i] << 16);
          hi = __uint_as_float(u[i] & 0xffff0000u);
        } else {
          __half2 h2;
          memcpy(&h2, &u[i], sizeof(h2));
          const float2 f = __half22float2(h2);
          lo = f.x, hi = f.y;
        }
        out[8 * q + 2 * i] = lo, out[8 * q + 2 * i + 1] = hi;
      }
    }
  }
}

// Grid: 1-D, at most as many blocks as fit on the device at once (or fewer when there are fewer
// items). Items are (row, tile), item = row * tiles + tile (tile fastest: neighbouring blocks
// share halos in L2); block i runs items i, i + gridDim.x, ... (empty ones skipped), each in
// steps of `chunk` taps (one step when K <= chunk). The launcher keeps total <= INT_MAX.
// Block: kThreads threads; thread t owns outputs l0 + 16t + i (i < 16) of its item, accumulated
// in registers over the item's steps.
// Shared memory: a ring of kStages stages, step s in stage s % kStages: [head | chunk float taps,
// bias | tile + chunk staged inputs, raw, in padded rows].
// Pipeline: the prologue fetches steps 0 and 1 (cp.async groups 0 and 1; step 0's taps stored,
// step 1's kept in registers). Step s: wait until at most kStages - 2 = 1 group is pending (group
// s, this thread's copies of step s, has landed); barrier (everyone's copies, plain stores and
// taps of step s visible); store step s + 1's taps (registers) into stage s + 1; fetch step s + 2
// into stage s + 2 (its copies: group s + 2, committed even when empty so that groups count
// steps; its taps into registers; its head); multiply-adds from stage s; after an item's last
// step, 16-byte stores from the registers.
// One barrier per step suffices: stage (s + 2) % 3 was last read during step s - 1, which every
// thread finished before step s's barrier; the taps area of stage (s + 1) % 3 was last read during
// step s - 2 and is next read after step s + 1's barrier (its input area, written by step s + 1's
// copies, is disjoint); stage s % 3 is next written after step s + 1's barrier, by which every
// thread is done with step s (its head is re-read after the multiply-adds, before that barrier).
template <typename T, typename Traits>
__global__ void __launch_bounds__(Traits::kThreads, Traits::kMinBlocks)
    conv1d_rowwise_stream_kernel(const Conv1dParams p, const int chunk, const uint32_t tiles,
                                 const uint32_t total) {
  constexpr int kR = Traits::kR;
  constexpr int kV = Traits::kV;
  constexpr int kStages = Traits::kStages;
  extern __shared__ float4 conv1d_stream_smem[];
  char* const smem = reinterpret_cast<char*>(conv1d_stream_smem);
  const int stage_bytes = Traits::stage_bytes(chunk);
  const int input_off = Traits::input_off(chunk);
  const int tid = threadIdx.x;

  const uint32_t dq = gridDim.x / tiles;
  const uint32_t dr = gridDim.x - dq * tiles;
  Conv1dStreamPos pos;  // the fetched step's
  pos.item = blockIdx.x;
  pos.row = pos.item / tiles;
  pos.tile = pos.item - pos.row * tiles;
  pos.k0 = 0;
  Conv1dStreamItem<T> it;
  if (!stream_seek<T, Traits>(p, pos, it, dq, dr, tiles, total)) return;  // block-uniform

  Conv1dStreamTaps<T, Traits> taps;
  stream_fetch<T, Traits>(p, it, pos.k0, chunk, smem, taps);
  conv1d_cp_async_commit();
  stream_store_taps<T, Traits>(smem, chunk, taps);
  bool fetching = stream_next<T, Traits>(p, pos, it, chunk, dq, dr, tiles, total);
  if (fetching) {
    stream_fetch<T, Traits>(p, it, pos.k0, chunk, smem + stage_bytes, taps);
  } else {
    stream_mark_end(smem + stage_bytes);
  }
  conv1d_cp_async_commit();

  float acc[kR];
  const int xoff = tid * Traits::kRowBytes;  // thread t's window starts at staged row t
  for (int cs = 0;;) {
    conv1d_cp_async_wait<kStages - 2>();
    __syncthreads();
    char* const st = smem + cs * stage_bytes;
    const Conv1dStreamHead* const head = reinterpret_cast<const Conv1dStreamHead*>(st);
    const int kcur_r = head->kcur_r;
    if (kcur_r == 0) return;  // block-uniform: the same head for every thread, after the barrier
    const int c1 = cs + 1 == kStages ? 0 : cs + 1;
    const int c2 = c1 + 1 == kStages ? 0 : c1 + 1;
    stream_store_taps<T, Traits>(smem + c1 * stage_bytes, chunk, taps);
    if (fetching) fetching = stream_next<T, Traits>(p, pos, it, chunk, dq, dr, tiles, total);
    if (fetching) {
      stream_fetch<T, Traits>(p, it, pos.k0, chunk, smem + c2 * stage_bytes, taps);
    } else {
      stream_mark_end(smem + c2 * stage_bytes);
    }
    conv1d_cp_async_commit();

    const float* const sw = reinterpret_cast<const float*>(st + Traits::taps_off());
    const int flags = head->flags;
    if (flags & 1) {
      const float bias = sw[chunk];
#pragma unroll
      for (int i = 0; i < kR; ++i) acc[i] = bias;  // the bias starts the sums
    }
    const bool active = head->l0 + static_cast<int64_t>(tid & ~31) * kR < p.L_out;  // warp-uniform
    if (active) {
      const char* xp = st + input_off + xoff;
      float xw[2 * kR];
      stream_row16<T>(xp, xw);
      // Unrolled twice: the window's half-shift becomes a register renaming.
#pragma unroll 2
      for (int kb = 0; kb < kcur_r; kb += kR) {
        xp += Traits::kRowBytes;  // the next 16 staged inputs
        stream_row16<T>(xp, xw + kR);
        float wr[kR];
#pragma unroll
        for (int q = 0; q < kR; q += 4) {
          const float4 v = *reinterpret_cast<const float4*>(sw + kb + q);  // broadcast
          wr[q] = v.x, wr[q + 1] = v.y, wr[q + 2] = v.z, wr[q + 3] = v.w;
        }
#pragma unroll
        for (int k = 0; k < kR; ++k)
#pragma unroll
          for (int i = 0; i < kR; ++i) acc[i] = fmaf(wr[k], xw[i + k], acc[i]);
#pragma unroll
        for (int i = 0; i < kR; ++i) xw[i] = xw[i + kR];
      }

      if (flags & 2) {
        const int64_t l = head->l0 + tid * kR;  // this thread's first output
        T* const yrow = static_cast<T*>(head->yrow);
        const int d = head->d;
        if (p.y_sl != 1) {
#pragma unroll
          for (int i = 0; i < kR; ++i) {
            if (l + i >= 0 && l + i < p.L_out) yrow[(l + i) * p.y_sl] = from_float<T>(acc[i]);
          }
        } else if (d == 0) {  // block-uniform: l is 16-byte aligned
          if (l >= 0 && l + kR <= p.L_out) {
#pragma unroll
            for (int m = 0; m < kR / kV; ++m) {
              Vec<T, kV> o;
#pragma unroll
              for (int e = 0; e < kV; ++e) o.v[e] = from_float<T>(acc[m * kV + e]);
              store_vec<T, kV>(yrow + l + m * kV, o);
            }
          } else {
#pragma unroll
            for (int i = 0; i < kR; ++i) {
              if (l + i >= 0 && l + i < p.L_out) yrow[l + i] = from_float<T>(acc[i]);
            }
          }
        } else {
          // Outputs realigned by d (0 < d < kV, block-uniform): r[i] becomes output l + d + i,
          // the thread's own acc[d + i] for i < kR - d, the next lane's acc[i + d - kR] after.
          // Rotation by d in log2(kV) register-select steps, then one shuffle per borrowed
          // element (every lane of the warp takes part: the branch is warp-uniform).
          float r[kR];
#pragma unroll
          for (int i = 0; i < kR; ++i) r[i] = acc[i];
#pragma unroll
          for (int b = 1; b < kV; b <<= 1) {
            const bool on = (d & b) != 0;
            float t[kR];
#pragma unroll
            for (int i = 0; i < kR; ++i) t[i] = on ? r[(i + b) % kR] : r[i];
#pragma unroll
            for (int i = 0; i < kR; ++i) r[i] = t[i];
          }
#pragma unroll
          for (int i = kR - kV + 1; i < kR; ++i) {
            const float nb = __shfl_down_sync(0xffffffffu, r[i], 1);
            if (i >= kR - d) r[i] = nb;
          }
          const int lane = tid & 31;
          const int64_t ls = l + d;  // 16-byte aligned
          if (lane != 31 && ls >= 0 && ls + kR <= p.L_out) {
#pragma unroll
            for (int m = 0; m < kR / kV; ++m) {
              Vec<T, kV> o;
#pragma unroll
              for (int e = 0; e < kV; ++e) o.v[e] = from_float<T>(r[m * kV + e]);
              store_vec<T, kV>(yrow + ls + m * kV, o);
            }
          } else {
            // Lane 31's next lane is in the next warp, whose lane 0 stores its own first d.
            const int nown = lane == 31 ? kR - d : kR;
#pragma unroll
            for (int i = 0; i < kR; ++i) {
              if (i < nown && ls + i >= 0 && ls + i < p.L_out) yrow[ls + i] = from_float<T>(r[i]);
            }
          }
          if (lane == 0) {  // outputs l .. l + d - 1 (stored by the previous lane elsewhere)
#pragma unroll
            for (int i = 0; i < kV - 1; ++i) {
              if (i < d && l + i >= 0 && l + i < p.L_out) yrow[l + i] = from_float<T>(acc[i]);
            }
          }
        }
      }
    }
    cs = c1;
  }
}

}  // namespace gpukern
