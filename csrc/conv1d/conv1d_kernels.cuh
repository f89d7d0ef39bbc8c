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
//  conv1d_rowwise_warp_kernel the same rows at dilation 1, any K (rowwise16: FMA-bound filters):
//                         conv1d_rowwise_kernel's 16x16 register blocks, one warp per tile of up
//                         to 2048 outputs (cp.async staging, no block barrier, whole 512-output
//                         segments stored through shared memory in 512-byte runs).
//                         conv1d_rowwise_kernel itself now runs rowwise8 and rowwise8_dilated.
//  conv1d_rowwise_reg_kernel the same rows at dilation 1 with K <= 8 (rowwise_reg): no shared
//                         memory; each lane holds 32 bytes of consecutive inputs and outputs in
//                         registers and takes the taps' halo from the next lanes by shuffles.
//  conv1d_rowwise_mma_kernel the same rows at dilation 1 in fp16/bf16 (rowwise_mma): tensor
//                         cores, the filter as a banded B matrix and the staged input read in
//                         place as A (ldmatrix), float accumulators.
//
// All accumulate in float32 (and those that stage data stage it as float, rowwise_mma excepted:
// it stages the 16-bit inputs as they are), whatever scalar_t is.
#include <cstdint>
#include <type_traits>

#include "device/async_mma.cuh"
#include "device/vec.cuh"
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
          if (kb + kR <= kcur) {
#pragma unroll
            for (int k = 0; k < kR; ++k)
#pragma unroll
              for (int i = 0; i < kR; ++i) acc[i] = fmaf(wr[k], xw[i + k], acc[i]);
          } else {
            // The chunk's last block: the taps past K are skipped, not multiplied by zero (a
            // NaN or infinity would reach the outputs whose window misses it: 0 * inf is NaN).
#pragma unroll
            for (int k = 0; k < kR; ++k) {
              if (kb + k < kcur) {
#pragma unroll
                for (int i = 0; i < kR; ++i) acc[i] = fmaf(wr[k], xw[i + k], acc[i]);
              }
            }
          }
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
// Warp-tile row-wise kernel (the "rowwise16" algorithm: stride 1, dilation 1, any K)
// ------------------------------------------------------------------------------------------------

// One warp per tile of up to 2048 outputs of a row, up to four tiles a block, no block barrier.
// A lane owns 16 consecutive outputs in each 512-output segment of the tile and accumulates them
// in registers over 16x16 register blocks of multiply-adds per 16 taps (the seeds' register
// blocking: 256 multiply-adds per 8 float4 shared loads). The warp stages its tile's input (and
// the taps) in its own part of shared memory, fp32 rows with 4-byte cp.async copies (no
// registers, no shared stores), waits, and computes every segment from it; other warps' copies
// and multiply-adds cover the wait. A whole segment's sums go back through shared memory (its
// staged inputs, which no later segment reads) so that each store instruction writes 128
// consecutive outputs: stored straight from the registers, a lane's four 16-byte vectors 64
// bytes apart made every store instruction write half of 32 sectors, and the kernel ran at 67%
// of the copy bandwidth on depthwise K = 31 (70 us on an H200; through shared memory 64 us).
// The persistent kernel it replaced (one block of 128 threads per 2048-output tile, the next
// tile's inputs prefetched into registers, one block barrier per tile, stores from registers)
// ran dw1_k31 fp32 in 72 us, B64 L1M K64 in 234 and 1 x 64M K127 in 376 (here 64, 215, 367),
// depthwise K = 64 rows of 2048 in 193 (118) and K = 28 rows of 2049 in 142 (78-82).
// Copy groups per segment (segment s computing while the later segments' inputs land) measured
// slower (B64 L1M K64 230 us against 225 before the stores went through shared memory).
// The taps past K in the last 16-tap block are skipped, not multiplied by zero: windows are exact
// (a NaN or infinity reaches only the outputs whose window holds it).
template <typename T>
struct Conv1dWarpTraits {
  static constexpr int kWarps = 4;              // tiles (one a warp) per block
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kR = 16;                 // outputs per lane and segment, taps per block
  static constexpr int kSeg = 32 * kR;          // outputs of a segment
  static constexpr int kMaxSegs = 4;            // segments of a tile: up to 2048 outputs
  static constexpr int kMaxChunk = 1024;        // taps staged at once (a multiple of kR)
  static constexpr int kWarpFloats = 3072;      // a warp's shared memory: 12 KB, 48 KB a block
  static constexpr int kMinBlocks = 5;          // 20 warps an SM: at most 96 (80 spilled)
  static constexpr int kV = kVec16<T>;
  static_assert(kR % kV == 0, "whole vectors per lane");
  // Padded shared layout, 4 floats after every 16 (stream_pad): lane l's window reads float4s
  // at logical 16l + c, padded 20l + stream_pad(c), conflict-free.
  static constexpr int padded(int n) { return n + n / 16 * 4; }
  // Floats of a warp: the staged input (tile + chunk, padded), then the chunk's taps.
  static constexpr int warp_floats(int segs, int chunk) {
    return padded(kSeg * segs + chunk) + chunk;
  }
  static_assert(warp_floats(1, kMaxChunk) <= kWarpFloats, "the longest chunk fits one segment");
};

// Row `row` of the N x C rows as (n, c), in 32 bits (the launchers keep the row count below 2^32).
__device__ __forceinline__ void split_row(const Conv1dParams& p, uint32_t row, uint32_t& n,
                                          uint32_t& c) {
  n = row;
  c = 0;
  if (p.C != 1) {
    const uint32_t C = static_cast<uint32_t>(p.C);
    n = row / C;
    c = row - n * C;
  }
}

// A warp tile of the row-wise warp kernels (rowwise16, rowwise_mma): item = row * tiles + tile
// (tile fastest), its row's input, output and filter rows and channel, and its first output l0 =
// tile * tile_len - my (my = the row's output misalignment in elements: 16-byte aligned stores).
template <typename T>
struct Conv1dWarpTile {
  const T* xrow;
  T* yrow;
  const T* wrow;
  uint32_t c;
  int64_t l0;
};

template <typename T>
__device__ __forceinline__ Conv1dWarpTile<T> warp_tile(const Conv1dParams& p, uint32_t item,
                                                       uint32_t tiles, int tile_len) {
  constexpr int kV = kVec16<T>;
  const uint32_t row = item / tiles;
  const uint32_t tile = item - row * tiles;
  uint32_t n, c;
  split_row(p, row, n, c);
  Conv1dWarpTile<T> t;
  t.c = c;
  t.xrow = static_cast<const T*>(p.x) + static_cast<int64_t>(n) * p.x_sn +
           static_cast<int64_t>(c) * p.x_sc;
  t.yrow = static_cast<T*>(p.y) + static_cast<int64_t>(n) * p.y_sn + static_cast<int64_t>(c) * p.y_so;
  t.wrow = static_cast<const T*>(p.w) + static_cast<int64_t>(c) * p.w_so;
  const int my =
      p.y_sl == 1 ? static_cast<int>((reinterpret_cast<uintptr_t>(t.yrow) / sizeof(T)) % kV) : 0;
  t.l0 = static_cast<int64_t>(tile) * tile_len - my;
  return t;
}

// Padded shared index: 4 floats after every 16. Thread t's window reads float4s at logical
// 16t + c (c a multiple of 4), i.e. at padded 20t + stream_pad(c): a quarter warp's 8 threads hit
// float4 columns 5t mod 8, all distinct (conflict-free), and the offsets are compile-time
// immediates from one per-thread base. Staging stores (32 consecutive floats a warp) conflict
// 2-way on 4 banks only.
__device__ __forceinline__ int stream_pad(int a) { return a + ((a >> 4) << 2); }

// Stages the warp's inputs sx[padded(j)] = x[g0 + j] (zero outside [lo, hi), the padding), j < n,
// in groups of 32: group m is j = 32m + t, lane t's element (padded: padded(t) + 40m). fp32
// unit-stride rows: cp.async 4-byte copies, unpredicated over the groups inside [lo, hi),
// zero-filled copies around them; otherwise loads (converted to float) and shared stores, 8 in
// flight a lane.
template <typename T>
__device__ __forceinline__ void warp_stage_row(const Conv1dParams& p, const T* xrow, int64_t g0,
                                               int n, int lo, int hi, float* sx, int lane) {
  float* const dst = sx + stream_pad(lane);
  const int mb = (n + 31) / 32;  // groups
  if (std::is_same<T, float>::value && p.x_sl == 1) {
    const T* const src = xrow + g0 + lane;
    auto edge = [&](int m) {
      const int j = lane + 32 * m;
      if (j < n) {
        const bool in = j >= lo && j < hi;
        cp_async_zfill<4>(dst + 40 * m, in ? src + 32 * m : xrow, in);
      }
    };
    // Groups [i0, i1) lie wholly inside [lo, hi) (hi <= n).
    const int in0 = (lo + 31) / 32;
    const int in1 = hi / 32;
    const int i0 = in0 < mb ? in0 : mb;
    const int i1 = in1 < i0 ? i0 : in1;
    for (int m = 0; m < i0; ++m) edge(m);
    // One copy instruction a group (a pointer and a shared address stepped).
    const T* s = src + 32 * i0;
    unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst + 40 * i0));
    constexpr unsigned kStep = 40 * sizeof(float);  // a group's padded shared bytes
    int q = i1 - i0;
    for (; q >= 8; q -= 8, s += 8 * 32, d += 8 * kStep) {
#pragma unroll
      for (int u = 0; u < 8; ++u) cp_async4(d + u * kStep, s + 32 * u);
    }
    for (; q > 0; --q, s += 32, d += kStep) cp_async4(d, s);
    for (int m = i1; m < mb; ++m) edge(m);
  } else {
    constexpr int kBatch = 8;
    for (int m0 = 0; m0 < mb; m0 += kBatch) {
      float v[kBatch];
#pragma unroll
      for (int q = 0; q < kBatch; ++q) {
        const int j = lane + 32 * (m0 + q);
        v[q] = (j >= lo && j < hi) ? to_float(xrow[(g0 + j) * p.x_sl]) : 0.f;
      }
#pragma unroll
      for (int q = 0; q < kBatch; ++q) {
        if (lane + 32 * (m0 + q) < n) dst[40 * (m0 + q)] = v[q];
      }
    }
  }
}

// acc[i] += w[k] x[16 lane + i + k] (i < 16): one tap of a block, the window in registers.
template <int kK>
__device__ __forceinline__ void warp_tap(float (&acc)[16], const float (&xw)[32],
                                         const float (&wr)[16]) {
#pragma unroll
  for (int i = 0; i < 16; ++i) acc[i] = fmaf(wr[kK], xw[i + kK], acc[i]);
}

// acc[i] += sum_{k < nk} w[k] x[16 lane + i + k] for one tap block: xw holds the lane's window
// (its upper 16 inputs refilled at xp), wp the block's taps (broadcast reads). kFull: nk = 16
// (taps in order); else 1 <= nk <= 16, one jump into the taps nk - 1, ..., 0 (the taps past K are
// skipped, not multiplied by zero: 15 tests and branches per block had cost 50 instructions).
template <bool kFull>
__device__ __forceinline__ void warp_tap_block(float (&acc)[16], float (&xw)[32], const float* xp,
                                               const float* wp, int nk) {
#pragma unroll
  for (int q = 0; q < 16; q += 4) {
    const float4 v = *reinterpret_cast<const float4*>(xp + q);
    xw[16 + q] = v.x, xw[17 + q] = v.y, xw[18 + q] = v.z, xw[19 + q] = v.w;
  }
  float wr[16];
#pragma unroll
  for (int q = 0; q < 16; q += 4) {
    const float4 v = *reinterpret_cast<const float4*>(wp + q);
    wr[q] = v.x, wr[q + 1] = v.y, wr[q + 2] = v.z, wr[q + 3] = v.w;
  }
  if constexpr (kFull) {
    warp_tap<0>(acc, xw, wr), warp_tap<1>(acc, xw, wr), warp_tap<2>(acc, xw, wr);
    warp_tap<3>(acc, xw, wr), warp_tap<4>(acc, xw, wr), warp_tap<5>(acc, xw, wr);
    warp_tap<6>(acc, xw, wr), warp_tap<7>(acc, xw, wr), warp_tap<8>(acc, xw, wr);
    warp_tap<9>(acc, xw, wr), warp_tap<10>(acc, xw, wr), warp_tap<11>(acc, xw, wr);
    warp_tap<12>(acc, xw, wr), warp_tap<13>(acc, xw, wr), warp_tap<14>(acc, xw, wr);
    warp_tap<15>(acc, xw, wr);
  } else {
    switch (nk) {  // falls through: taps nk - 1 down to 0
      case 16: warp_tap<15>(acc, xw, wr); [[fallthrough]];
      case 15: warp_tap<14>(acc, xw, wr); [[fallthrough]];
      case 14: warp_tap<13>(acc, xw, wr); [[fallthrough]];
      case 13: warp_tap<12>(acc, xw, wr); [[fallthrough]];
      case 12: warp_tap<11>(acc, xw, wr); [[fallthrough]];
      case 11: warp_tap<10>(acc, xw, wr); [[fallthrough]];
      case 10: warp_tap<9>(acc, xw, wr); [[fallthrough]];
      case 9: warp_tap<8>(acc, xw, wr); [[fallthrough]];
      case 8: warp_tap<7>(acc, xw, wr); [[fallthrough]];
      case 7: warp_tap<6>(acc, xw, wr); [[fallthrough]];
      case 6: warp_tap<5>(acc, xw, wr); [[fallthrough]];
      case 5: warp_tap<4>(acc, xw, wr); [[fallthrough]];
      case 4: warp_tap<3>(acc, xw, wr); [[fallthrough]];
      case 3: warp_tap<2>(acc, xw, wr); [[fallthrough]];
      case 2: warp_tap<1>(acc, xw, wr); [[fallthrough]];
      case 1: warp_tap<0>(acc, xw, wr); [[fallthrough]];
      default: break;
    }
  }
}

// One segment's taps [0, kcur) of a chunk: acc[i] += sum_k w[k] x[16 lane + i + k], the lane's
// window read from xp (padded), the taps from sw.
__device__ __forceinline__ void warp_segment_taps(float (&acc)[16], const float* xp,
                                                  const float* sw, int kcur) {
  constexpr int kR = 16;
  const int nfull = kcur / kR;
  const int rem = kcur - nfull * kR;
  float xw[2 * kR];
#pragma unroll
  for (int q = 0; q < kR; q += 4) {
    const float4 v = *reinterpret_cast<const float4*>(xp + q);
    xw[q] = v.x, xw[q + 1] = v.y, xw[q + 2] = v.z, xw[q + 3] = v.w;
  }
  const float* wp = sw;
#pragma unroll 2
  for (int kb = 0; kb < nfull; ++kb) {
    xp += kR + kR / 4;  // the next 16 logical inputs
    warp_tap_block<true>(acc, xw, xp, wp, kR);
    wp += kR;
#pragma unroll
    for (int i = 0; i < kR; ++i) xw[i] = xw[i + kR];  // a register renaming, unrolled twice
  }
  if (rem > 0) warp_tap_block<false>(acc, xw, xp + kR + kR / 4, wp, rem);
}

// Stores a lane's 16 sums to y[r + i] (relative to the tile: yp = &y[r]), those in [rel_min,
// rel_end): 16-byte vectors when all are (rows of unit stride), else one by one.
template <typename T>
__device__ __forceinline__ void warp_store16(const float (&acc)[16], T* yp, int64_t y_sl, int r,
                                             int rel_min, int rel_end) {
  constexpr int kV = kVec16<T>;
  if (y_sl == 1 && r >= rel_min && r + 16 <= rel_end) {
#pragma unroll
    for (int m = 0; m < 16 / kV; ++m) {
      Vec<T, kV> o;
#pragma unroll
      for (int e = 0; e < kV; ++e) o.v[e] = from_float<T>(acc[m * kV + e]);
      store_vec<T, kV>(yp + m * kV, o);
    }
  } else {
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      if (r + i >= rel_min && r + i < rel_end) yp[i * y_sl] = from_float<T>(acc[i]);
    }
  }
}

// Grid: 1-D; warp w of block i takes item i * kWarps + w, item = row * tiles + tile (tile
// fastest), rows * tiles <= INT_MAX; warps past the last item exit at once.
// A tile covers outputs l0 + 512 s + 16 lane + i (s < segs, i < 16), l0 = tile * 512 segs - my
// (my = the row's output misalignment: 16-byte stores).
// Shared memory: per warp, the staged input of a chunk of taps (512 segs + chunk floats, padded)
// and the chunk's taps. Taps in chunks of `chunk` (a multiple of 16; segs == 1 when K > chunk).
// One chunk (K <= kMaxChunk): stage, wait, __syncwarp (visible); per segment: the bias, full tap
// blocks two at a time (the window's half shift a register renaming), the last partial block by
// one jump into its taps, then the stores (a whole segment through shared memory in 512-byte
// runs, a partial one lane by lane). Longer filters (segs == 1), per chunk: __syncwarp (the
// previous chunk's reads done), stage, wait, __syncwarp, the chunk's taps; stores after the last.
template <typename T, typename Traits>
__global__ void __launch_bounds__(Traits::kThreads, Traits::kMinBlocks)
    conv1d_rowwise_warp_kernel(const Conv1dParams p, const int segs, const int chunk,
                               const uint32_t tiles, const uint32_t total) {
  constexpr int kR = Traits::kR;
  constexpr int kSeg = Traits::kSeg;
  extern __shared__ float4 conv1d_warp_smem[];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const uint32_t item = blockIdx.x * Traits::kWarps + warp;
  if (item >= total) return;
  float* const sx = reinterpret_cast<float*>(conv1d_warp_smem) +
                    warp * Traits::warp_floats(segs, chunk);
  float* const sw = sx + Traits::padded(kSeg * segs + chunk);

  const int tile_len = segs * kSeg;
  const Conv1dWarpTile<T> wt = warp_tile<T>(p, item, tiles, tile_len);
  if (wt.l0 >= p.L_out) return;  // rows of other alignments: one more tile than this row needs
  const T* const xrow = wt.xrow;
  T* const yrow = wt.yrow;
  const T* const wrow = wt.wrow;
  const uint32_t c = wt.c;
  const int64_t l0 = wt.l0;
  const T* const bp = static_cast<const T*>(p.b);
  const float bias = bp != nullptr ? to_float(bp[static_cast<int64_t>(c) * p.b_s]) : 0.f;

  // The tile's outputs inside the row, relative to l0 (at most tile_len), its segments inside the
  // row, and the lane's first output relative to l0 that exists (tile 0 starts my early).
  const int rel_end = static_cast<int>(p.L_out - l0 < tile_len ? p.L_out - l0 : tile_len);
  const int segs_in = (rel_end + kSeg - 1) / kSeg;
  const int rel_min = l0 < 0 ? static_cast<int>(-l0) : 0;
  T* const ylane = yrow + (l0 + lane * kR) * p.y_sl;
  // Lane's window: logical 512 s + 16 lane + j, padded 640 s + 20 lane + stream_pad(j).
  const float* const xlane = sx + (kR + kR / 4) * lane;

  // The staged inputs of taps [k0, k0 + kcur): nst positions from g0, [lo, hi) inside the row.
  int nst, lo, hi;
  int64_t g0;
  auto span = [&](int64_t k0, int kcur) {
    nst = (rel_end + kR - 1) / kR * kR + (kcur + kR - 1) / kR * kR;
    g0 = l0 - p.pad_lo + k0;
    const int64_t lo64 = g0 < 0 ? -g0 : 0;
    const int64_t hi64 = p.L - g0;
    lo = static_cast<int>(lo64 < nst ? lo64 : nst);
    hi = static_cast<int>(hi64 < lo ? lo : (hi64 < nst ? hi64 : nst));
  };
  auto stage_taps = [&](int64_t k0, int kcur) {
    for (int k = lane; k < kcur; k += 32) sw[k] = to_float(wrow[(k0 + k) * p.w_sk]);
  };
  const int64_t y_seg = static_cast<int64_t>(kSeg) * p.y_sl;

  float acc[kR];
  if (p.K <= chunk) {
    // One chunk (every tile whose filter fits): stage once, then segment by segment.
    const int K = static_cast<int>(p.K);
    span(0, K);
    warp_stage_row<T>(p, xrow, g0, nst, lo, hi, sx, lane);
    cp_async_commit();
    stage_taps(0, K);
    cp_async_wait<0>();
    __syncwarp();  // every lane's copies and stores visible to the warp
    const float* xp = xlane;
    T* yp = ylane;
    for (int s = 0; s < segs_in; ++s, xp += kSeg + kSeg / 4, yp += y_seg) {
#pragma unroll
      for (int i = 0; i < kR; ++i) acc[i] = bias;  // the bias starts the sums
      warp_segment_taps(acc, xp, sw, K);
      if (p.y_sl == 1 && kSeg * s >= rel_min && kSeg * (s + 1) <= rel_end) {
        // A whole segment: through shared memory (its staged inputs are read by no later
        // segment), so that each store instruction writes 128 consecutive outputs.
        float* const so = const_cast<float*>(xp);
        __syncwarp();  // every lane's reads of the segment's inputs done
#pragma unroll
        for (int q = 0; q < kR; q += 4) {
          *reinterpret_cast<float4*>(so + q) = make_float4(acc[q], acc[q + 1], acc[q + 2], acc[q + 3]);
        }
        __syncwarp();
        const float* const sseg = xlane - (kR + kR / 4) * lane + (kSeg + kSeg / 4) * s;
        T* const yseg = ylane - lane * kR + kSeg * s;
#pragma unroll
        for (int m = 0; m < kSeg / 128; ++m) {
          const int o = 128 * m + 4 * lane;  // logical output of the segment
          const float4 v = *reinterpret_cast<const float4*>(sseg + stream_pad(o));
          Vec<T, 4> w4;
          w4.v[0] = from_float<T>(v.x), w4.v[1] = from_float<T>(v.y);
          w4.v[2] = from_float<T>(v.z), w4.v[3] = from_float<T>(v.w);
          store_vec<T, 4>(yseg + o, w4);
        }
      } else {
        warp_store16<T>(acc, yp, p.y_sl, kSeg * s + lane * kR, rel_min, rel_end);
      }
    }
    return;
  }
  // Longer filters (one segment a tile): chunk by chunk into the same sums.
#pragma unroll
  for (int i = 0; i < kR; ++i) acc[i] = bias;
  for (int64_t k0 = 0; k0 < p.K; k0 += chunk) {
    const int kcur = static_cast<int>(p.K - k0 < chunk ? p.K - k0 : chunk);
    if (k0 > 0) __syncwarp();  // every lane's reads of the previous chunk done
    span(k0, kcur);
    warp_stage_row<T>(p, xrow, g0, nst, lo, hi, sx, lane);
    cp_async_commit();
    stage_taps(k0, kcur);
    cp_async_wait<0>();
    __syncwarp();  // every lane's copies and stores visible to the warp
    warp_segment_taps(acc, xlane, sw, kcur);
  }
  warp_store16<T>(acc, ylane, p.y_sl, lane * kR, rel_min, rel_end);
}

// ------------------------------------------------------------------------------------------------
// Register-window row-wise kernel (the "rowwise_reg" algorithm: stride 1, dilation 1, short K)
// ------------------------------------------------------------------------------------------------

// Short filters on 16-bit data: a kernel that stages every input as a float in shared memory
// (rowwise_short, since removed: rowwise16 and this kernel measured faster at every K it ran)
// and reads it back per 4 taps spends on a bf16 element the instructions of an fp32 one (on an
// H200, depthwise B8 C4096 L4096 K4 ran 278 us in bf16 against 298 in fp32: 46% of the copy
// bandwidth).
// Here a warp owns 32 lanes x kE consecutive outputs, each lane loads the kE inputs at its own
// (aligned) position with 16-byte loads, and the taps' halo comes from the next lanes by warp
// shuffles: no shared memory, no barriers. The last `halo` lanes of a warp only load (their
// inputs are the halo of the lanes before them), so a warp's item is (32 - halo) * kE outputs
// and neighbouring items overlap by halo * kE inputs (L2 hits).
template <typename T, int kK_>
struct Conv1dRegTraits {
  static constexpr int kThreads = 128;
  static constexpr int kV = kVec16<T>;
  static constexpr int kE = 2 * kV;      // outputs (and loaded inputs) per lane: 32 bytes each way
  static constexpr int kM = kE / kV;     // 16-byte vectors per lane
  // The filter's taps, compiled in: the window and the multiply-adds are fully unrolled with no
  // run-time tap bound, so the compiler interleaves shuffles and multiply-adds (a run-time bound
  // made it materialise the whole window first: 90-108 registers for 16-bit types).
  static constexpr int kK = kK_;
  static constexpr int kWin = kE + kK - 1;  // window floats of a lane's kE outputs
  // Lanes past a lane whose inputs its window may reach: window offset < kV plus kWin floats.
  static constexpr int kMaxHalo = (kV - 1 + kWin + kE - 1) / kE - 1;
  // 7 blocks (28 warps) per SM: at most 72 registers (no spills up to K = 4; the 16-bit kernels
  // took 80-90 unbounded, 8 blocks spilled); bf16 from K = 5 spilled at 72: 6 blocks there.
  static constexpr int kMinBlocks = kV == 8 && kK > 4 ? 6 : 7;
  // The launcher cuts rows into segments of at most kMaxSegChunks chunks, about kSegsPerWarp
  // per resident warp (the last round of segments is then a small part of the run).
  static constexpr int kMaxSegChunks = 64;
  static constexpr int kSegsPerWarp = 8;
  static_assert(kMaxHalo >= 1 && kMaxHalo < 8, "a few halo lanes per warp");
  static_assert(kK >= 1 && kK <= 32, "lane k holds tap k");
};

// The halo lanes a filter of K taps needs (offset < kV when rows are read as vectors, else 0).
template <typename Traits>
__host__ __device__ constexpr int reg_halo_lanes(int64_t K, bool vec_rows) {
  return static_cast<int>(((vec_rows ? Traits::kV - 1 : 0) + Traits::kE + K - 1 + Traits::kE - 1) /
                          Traits::kE) - 1;
}

// A warp's position: chunk `chunk` of row `row`. Lane t's outputs are l0 + t*kE + i (i < kE),
// l0 = chunk * q - my (my = the row's output misalignment, so lane outputs start 16-byte
// aligned). Lane t loads inputs a0 + t*kE + j (j < kE), a0 = l0 - pad_lo - off with off < kV
// chosen so that those loads are 16-byte aligned; output i of lane t reads loaded position
// off + i + k: the lane's own inputs and, past kE, the next lanes'. A warp walks `left` chunks of
// one row (its segment) by adding q to l0 and a0.
template <typename T>
struct Conv1dRegPos {
  const T* xrow;
  T* yrow;
  int64_t l0;
  int64_t a0;
  int off;
  int left;  // chunks of the segment from this one on
};

// The first chunk of segment `seg` of row `row`; also loads the row's tap (lane k: tap k) and bias.
template <typename T, typename Traits>
__device__ __forceinline__ Conv1dRegPos<T> reg_start(const Conv1dParams& p, uint32_t row,
                                                     uint32_t seg, uint32_t seg_chunks,
                                                     uint32_t chunks, int q, int lane, T& tap,
                                                     float& bias) {
  constexpr int kV = Traits::kV;
  Conv1dRegPos<T> it;
  uint32_t n, c;
  split_row(p, row, n, c);
  it.xrow = static_cast<const T*>(p.x) + static_cast<int64_t>(n) * p.x_sn +
            static_cast<int64_t>(c) * p.x_sc;
  it.yrow = static_cast<T*>(p.y) + static_cast<int64_t>(n) * p.y_sn + static_cast<int64_t>(c) * p.y_so;
  const uint32_t chunk = seg * seg_chunks;
  it.left = static_cast<int>(min(seg_chunks, chunks - chunk));
  const int my =
      p.y_sl == 1 ? static_cast<int>((reinterpret_cast<uintptr_t>(it.yrow) / sizeof(T)) % kV) : 0;
  it.l0 = static_cast<int64_t>(chunk) * q - my;
  int off = 0;
  if (p.x_sl == 1) {
    const int mx = static_cast<int>((reinterpret_cast<uintptr_t>(it.xrow) / sizeof(T)) % kV);
    // mx + l0 - pad_lo mod kV, from non-negative parts (l0 + my = chunk * q is a multiple of kV).
    const int pm = static_cast<int>(p.pad_lo % kV);
    off = (mx - my - pm + 2 * kV) % kV;
  }
  it.off = off;
  it.a0 = it.l0 - p.pad_lo - off;
  const T* w = static_cast<const T*>(p.w) + static_cast<int64_t>(c) * p.w_so;
  tap = lane < p.K ? w[lane * p.w_sk] : from_float<T>(0.f);
  const T* b = static_cast<const T*>(p.b);
  bias = b != nullptr ? to_float(b[static_cast<int64_t>(c) * p.b_s]) : 0.f;
  return it;
}

// x[gi, gi + kV) of a row at its ends or with a strided row: element by element, zeros outside
// [0, L). Not inlined: its 64-bit address arithmetic would otherwise set the kernel's register
// count, and it runs only for the vectors at a row's two ends (or strided rows).
template <typename T, int kV>
__device__ __noinline__ Vec<T, kV> reg_load_edge(const T* xrow, int64_t gi, int64_t L, int64_t sl) {
  Vec<T, kV> v;
#pragma unroll
  for (int e = 0; e < kV; ++e) {
    const int64_t g = gi + e;
    v.v[e] = (g >= 0 && g < L) ? xrow[g * sl] : from_float<T>(0.f);
  }
  return v;
}

// A lane's input vectors, as 32-bit words (16-byte loads; the row's ends element by element).
template <typename T, typename Traits>
__device__ __forceinline__ void reg_load(const Conv1dParams& p, const Conv1dRegPos<T>& it,
                                         int lane, uint4 (&x)[Traits::kM]) {
  constexpr int kV = Traits::kV;
  const int64_t g0 = it.a0 + lane * Traits::kE;
  const bool inside = p.x_sl == 1 && it.a0 >= 0 && it.a0 + 32 * Traits::kE <= p.L;  // warp-uniform
#pragma unroll
  for (int m = 0; m < Traits::kM; ++m) {
    const int64_t gi = g0 + m * kV;
    if (inside || (p.x_sl == 1 && gi >= 0 && gi + kV <= p.L)) {  // aligned by construction
      x[m] = *reinterpret_cast<const uint4*>(it.xrow + gi);
    } else if (gi >= p.L || gi + kV <= 0) {
      // Wholly outside the row (the lanes past a row's end in its last chunk: a row of 4099
      // outputs ends in a chunk of 131 of 496): zeros, without the element-by-element call.
      x[m] = make_uint4(0u, 0u, 0u, 0u);
    } else {
      const Vec<T, kV> v = reg_load_edge<T, kV>(it.xrow, gi, p.L, p.x_sl);
      x[m] = *reinterpret_cast<const uint4*>(&v);
    }
  }
}

// Word w of a 16-byte vector as floats (elements 2w, 2w + 1 for 16-bit types; bf16 -> float is
// exact by moving the bits up).
template <typename T>
__device__ __forceinline__ void reg_unpack(unsigned w, float* f) {
  if constexpr (std::is_same<T, float>::value) {
    f[0] = __uint_as_float(w);
  } else if constexpr (std::is_same<T, __nv_bfloat16>::value) {
    f[0] = __uint_as_float(w << 16);
    f[1] = __uint_as_float(w & 0xffff0000u);
  } else {
    const float2 h = __half22float2(*reinterpret_cast<const __half2*>(&w));
    f[0] = h.x;
    f[1] = h.y;
  }
}

// acc[i] = bias + sum_{k < K} w[k] * loaded position kOff + i + k of this lane's window: its own
// inputs (`own`), then the next lanes' (warp shuffles; every lane takes part, the halo lanes'
// sums are unused). One compiled variant per window offset: the window is a register renaming.
template <int kOff, typename Traits>
__device__ __forceinline__ void reg_fma(const float (&own)[Traits::kE], float tap, float bias,
                                        int lane, float (&acc)[Traits::kE]) {
  constexpr int kE = Traits::kE;
  constexpr int K = Traits::kK;
  float win[Traits::kWin];
#pragma unroll
  for (int j = 0; j < Traits::kWin; ++j) {
    const int s = j + kOff;
    const float v = own[s % kE];
    win[j] = s < kE ? v : __shfl_sync(0xffffffffu, v, lane + s / kE);
  }
#pragma unroll
  for (int i = 0; i < kE; ++i) acc[i] = bias;  // the bias starts the sums
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const float w = __shfl_sync(0xffffffffu, tap, k);
#pragma unroll
    for (int i = 0; i < kE; ++i) acc[i] = fmaf(w, win[i + k], acc[i]);
  }
}

// Grid: 1-D, as many blocks as fit at once (or fewer). Items are (row, segment of seg_chunks
// chunks), segment fastest; warp w of the grid takes items w, w + warps, ... and walks each
// item's chunks, so the item decoding (divisions, row addresses, alignment, taps) is paid once
// per segment: per chunk only two 64-bit adds (decoding every 496-output chunk took half of the
// kernel's instructions, 511 an item against ~100 for the multiply-adds, with the ALU pipe the
// busiest).
// Per chunk: the loads issued one chunk earlier are converted, the next chunk's loads are issued
// (the next item's first chunk at a segment's end), then the window (shuffles), kE x K
// multiply-adds and 16-byte stores of the output lanes (chunks past the row's end are skipped).
template <typename T, typename Traits>
__global__ void __launch_bounds__(Traits::kThreads, Traits::kMinBlocks)
    conv1d_rowwise_reg_kernel(const Conv1dParams p, const uint32_t chunks,
                              const uint32_t seg_chunks, const uint32_t segs,
                              const uint32_t total, const int halo) {
  constexpr int kE = Traits::kE;
  constexpr int kV = Traits::kV;
  constexpr int kM = Traits::kM;
  constexpr int kWarps = Traits::kThreads / 32;
  const int lane = threadIdx.x & 31;
  const uint32_t nw = gridDim.x * kWarps;
  const int q = (32 - halo) * kE;
  uint32_t item = blockIdx.x * kWarps + threadIdx.x / 32;
  if (item >= total) return;
  T ntap;
  float nbias;
  Conv1dRegPos<T> it = reg_start<T, Traits>(p, item / segs, item % segs, seg_chunks, chunks, q,
                                            lane, ntap, nbias);
  uint4 r[kM];
  reg_load<T, Traits>(p, it, lane, r);
  for (;;) {
    float own[kE];
#pragma unroll
    for (int m = 0; m < kM; ++m) {
      const unsigned w4[4] = {r[m].x, r[m].y, r[m].z, r[m].w};
#pragma unroll
      for (int k = 0; k < 4; ++k) reg_unpack<T>(w4[k], own + m * kV + k * (kV / 4));
    }
    const float tap = to_float(ntap);
    const float bias = nbias;

    // The next chunk: the segment's next one inside the row, else the next item's first.
    Conv1dRegPos<T> nit = it;
    nit.l0 += q;
    nit.a0 += q;
    --nit.left;
    bool more = nit.left > 0 && nit.l0 < p.L_out;
    if (!more) {
      item += nw;
      if (item < total) {
        nit = reg_start<T, Traits>(p, item / segs, item % segs, seg_chunks, chunks, q, lane, ntap,
                                   nbias);
        more = true;
      }
    }
    if (more) reg_load<T, Traits>(p, nit, lane, r);

    if (it.l0 < p.L_out) {  // warp-uniform: a segment's first chunk may start past a short row
      float acc[kE];
      switch (it.off) {  // warp-uniform
        case 0: reg_fma<0, Traits>(own, tap, bias, lane, acc); break;
        case 1: reg_fma<1, Traits>(own, tap, bias, lane, acc); break;
        case 2: reg_fma<2, Traits>(own, tap, bias, lane, acc); break;
        case 3: reg_fma<3, Traits>(own, tap, bias, lane, acc); break;
        default:
          if constexpr (kV == 8) {
            switch (it.off) {
              case 4: reg_fma<4, Traits>(own, tap, bias, lane, acc); break;
              case 5: reg_fma<5, Traits>(own, tap, bias, lane, acc); break;
              case 6: reg_fma<6, Traits>(own, tap, bias, lane, acc); break;
              default: reg_fma<7, Traits>(own, tap, bias, lane, acc); break;
            }
          }
          break;
      }
      const int64_t l = it.l0 + lane * kE;
      if (lane < 32 - halo) {
        if (p.y_sl == 1 && l >= 0 && l + kE <= p.L_out) {
#pragma unroll
          for (int m = 0; m < kM; ++m) {
            uint4 o;
            unsigned* ow = &o.x;
#pragma unroll
            for (int k = 0; k < 4; ++k) {
              if constexpr (std::is_same<T, float>::value) {
                ow[k] = __float_as_uint(acc[m * kV + k]);
              } else {
                ow[k] = reg_pack2<T>(acc[m * kV + 2 * k], acc[m * kV + 2 * k + 1]);
              }
            }
            *reinterpret_cast<uint4*>(it.yrow + l + m * kV) = o;
          }
        } else {
#pragma unroll
          for (int i = 0; i < kE; ++i) {
            if (l + i >= 0 && l + i < p.L_out) it.yrow[(l + i) * p.y_sl] = from_float<T>(acc[i]);
          }
        }
      }
    }
    if (!more) return;
    it = nit;
  }
}

// ------------------------------------------------------------------------------------------------
// Tensor-core row-wise kernel (the "rowwise_mma" algorithm: fp16/bf16, stride 1, dilation 1)
// ------------------------------------------------------------------------------------------------

// 16-bit rows on the tensor cores. The fp32 multiply-add kernels convert every element and issue
// K multiply-adds per output: depthwise K = 31 in bf16 ran no faster than in fp32 (60 us on an
// H200, 51% of the copy bandwidth; the multiply-adds alone take 32 us). Here 128 consecutive
// outputs y[b + 8m + n] (m < 16, n < 8) are one m16n8 mma tile, D = A B over j < 16 kKS with
//   A[m][j] = x[a0 + 8m + j]            (the staged input: row m of A is 16 kKS inputs from 8m),
//   B[j][n] = w[j - n - off]            (zero outside the filter: a banded Toeplitz matrix),
// where a0 = b - pad_lo - off is the 16-byte aligned input position at or before the window of
// y[b]. Each 16-wide k step of A is one ldmatrix.x4 of 8-element rows of the staged input (rows
// 8m + 16s and 8m + 16s + 8: the input is read in place, never expanded), B is built once per
// row in registers, and bf16 x bf16 products are exact in the float accumulators, so the result
// is the fp32 kernels' up to the order of the additions. A k step serves 128 outputs: K = 31
// takes 3 mma + 3 ldmatrix per 128 outputs instead of 31 multiply-adds per output, and the
// kernel is left with its loads and stores.
// A pass covers kPassTaps = 16 kKS - 14 taps (j = off + n + k with off, n <= 7); longer filters
// take passes kPassStride taps apart (a multiple of 8, so a pass shifts A by whole rows).
// One warp per tile, up to four tiles a block: each warp stages, checks and computes its own tile
// with no block barrier, and a tile of 2048 outputs keeps 4 KB of copies in flight per warp. On
// an H200 this ran dw1_k31 bf16 in 37 us (83% of the roofline); the first version (one block of
// 4 warps per tile, 512 outputs a warp, a barrier between staging and the mma: 1 KB in flight
// per warp) took 51 us, and persistent blocks streaming tiles through 3-4 cp.async stages 74-82
// us (5-7 blocks an SM). The same banded scheme for fp32 (3xTF32, m16n8k8: the input and taps
// split into two TF32 parts, three mma per k step) measured slower than the fp32 multiply-add
// kernels (dw1_k31 92 us against 71, B64 L1M K64 324 against 236), so fp32 stays off the
// tensor cores.
// A staged non-finite input would also reach the outputs whose window misses it (through a zero
// of B: 0 * inf is NaN), so a tile holding one is computed tap by tap instead (exact windows).
template <typename T, int kKS_>
struct Conv1dMmaTraits {
  static_assert(sizeof(T) == 2, "16-bit types only");
  static constexpr int kMaxWarps = 4;         // tiles (one a warp) per block
  static constexpr int kMaxThreads = 32 * kMaxWarps;
  // Blocks an SM: 10 (40 warps, at most 48 registers) up to 3 k steps, else 8 (64 registers; 4
  // and 8 k steps spill at 48). Unbounded, ptxas took 78 for 3 k steps and 164 for 8, hoisting
  // a batch's ldmatrix loads.
  static constexpr int kMinBlocks = kKS_ <= 3 ? 10 : 8;
  static constexpr int kMinOb = 4;            // mma tiles of a tile when rows are few (launcher)
  static constexpr int kV = kVec16<T>;        // elements of a staged 16-byte vector (= 8, the
                                              // 16-byte rows of an ldmatrix 8x8 matrix)
  static constexpr int kKS = kKS_;            // 16-input k steps of one pass
  static constexpr int kBlock = 128;          // outputs of one mma tile
  static constexpr int kBatch = 4;            // mma tiles accumulated at once: 16 accumulators
  static constexpr int kMaxOb = 16;           // mma tiles of a tile: up to 2048 outputs
  static constexpr int kSmemBudget = 48 * 1024;  // a block's staged tiles (default limit)
  static constexpr int kPassTaps = 16 * kKS - 14;
  static constexpr int kPassStride = kPassTaps / 8 * 8;
  // Staged elements of a tile of nob mma tiles whose last pass starts t0_last taps in: every
  // ldmatrix row (up to 128 nob - 8 + 16 kKS - 1 + t0_last) and every window of the exact path
  // (up to 7 + 128 nob - 1 + K - 1) lies inside. A multiple of kV (16-byte slots per warp).
  static constexpr int staged(int nob, int t0_last) { return kBlock * nob + 16 * kKS + t0_last; }
  static_assert(kKS >= 2 && kPassStride >= 8, "passes shift by whole rows of 8");
};

// Whether a 16-byte vector of 16-bit elements holds an infinity or a NaN (exponent all ones:
// adding one to the exponent field carries into the element's sign bit only then).
template <typename T>
__device__ __forceinline__ bool has_nonfinite16(const uint4& v) {
  constexpr unsigned kExp = std::is_same<T, __half>::value ? 0x7c007c00u : 0x7f807f80u;
  constexpr unsigned kOne = std::is_same<T, __half>::value ? 0x04000400u : 0x00800080u;
  const unsigned r = ((v.x & kExp) + kOne) | ((v.y & kExp) + kOne) | ((v.z & kExp) + kOne) |
                     ((v.w & kExp) + kOne);
  return (r & 0x80008000u) != 0;
}

// Grid: 1-D; warp w of block i takes item i * warps + w (warps = blockDim.x / 32), item = row *
// tiles + tile (tile fastest), rows * tiles <= INT_MAX; warps past the last item exit at once.
// A tile's nob mma tiles cover outputs l0 + 128 ob + 8m + n, l0 = tile * 128 nob - my (my = the
// row's output misalignment); the warp takes them kBatch at a time.
// Shared memory: per warp, its tile's staged input xs[i] = x[a0 + i] (zeros outside [0, L)),
// `stage` elements: 16-byte cp.async copies inside the row, element by element at its ends (or
// for strided rows).
// Per warp: stage; the B fragments of the first pass (global loads of the taps) while the copies
// fly; wait; each lane checks its own staged vectors for non-finite values; __syncwarp (the
// staged tile visible to the warp's lanes) and a vote. Then per batch and pass: B fragments (one
// pass: loaded once), per mma tile kKS ldmatrix + mma; after the last pass each lane stores its
// two pairs of outputs (32-bit stores: a warp store instruction covers 128 contiguous bytes).
template <typename T, typename Traits>
__global__ void __launch_bounds__(Traits::kMaxThreads, Traits::kMinBlocks)
    conv1d_rowwise_mma_kernel(const Conv1dParams p, const int nob, const int npass,
                              const uint32_t tiles, const uint32_t total, const int stage) {
  constexpr int kKS = Traits::kKS;
  constexpr int kBlock = Traits::kBlock;
  constexpr int kV = Traits::kV;
  constexpr int kBatch = Traits::kBatch;
  extern __shared__ uint4 conv1d_mma_smem[];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const uint32_t item = blockIdx.x * (blockDim.x >> 5) + warp;
  if (item >= total) return;
  T* const xs = reinterpret_cast<T*>(conv1d_mma_smem) + warp * stage;

  const int tile_len = nob * kBlock;
  const Conv1dWarpTile<T> t = warp_tile<T>(p, item, tiles, tile_len);
  if (t.l0 >= p.L_out) return;  // rows of other alignments: one more tile than this row needs
  int off = 0;
  if (p.x_sl == 1) {
    const int mx = static_cast<int>((reinterpret_cast<uintptr_t>(t.xrow) / sizeof(T)) % kV);
    off = (mx + static_cast<int>(t.l0 & (kV - 1)) - static_cast<int>(p.pad_lo & (kV - 1))) &
          (kV - 1);  // mod kV
  }
  const int64_t a0 = t.l0 - p.pad_lo - off;  // x + a0 is 16-byte aligned when x_sl == 1
  const int nq = stage / kV;               // staged 16-byte vectors

  for (int q = lane; q < nq; q += 32) {
    const int64_t g = a0 + kV * static_cast<int64_t>(q);
    T* const dst = xs + kV * q;
    if (p.x_sl == 1 && g >= 0 && g + kV <= p.L) {
      cp_async_zfill<16>(dst, t.xrow + g, true);
    } else {
#pragma unroll
      for (int e = 0; e < kV; ++e) {
        dst[e] = (g + e >= 0 && g + e < p.L) ? t.xrow[(g + e) * p.x_sl] : from_float<T>(0.f);
      }
    }
  }
  cp_async_commit();

  // B fragments of a pass from taps [t0, t_end): lane (g, t) holds B[16s + 2t + 8h + e][g] =
  // w[t0 + 16s + 2t + 8h + e - g - off] in register b[s][h], element e in bits 16e.
  const int bg = lane >> 2;
  const int bt = lane & 3;
  unsigned b[kKS][2];
  auto load_b = [&](int pass) {
    const int t0 = pass * Traits::kPassStride;
    const int64_t t_end = pass == npass - 1 ? p.K : t0 + Traits::kPassStride;
#pragma unroll
    for (int s = 0; s < kKS; ++s) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        unsigned v = 0;
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int k = t0 + 16 * s + 2 * bt + 8 * h + e - bg - off;
          const T tap = (k >= t0 && k < t_end) ? t.wrow[static_cast<int64_t>(k) * p.w_sk]
                                               : from_float<T>(0.f);
          v |= static_cast<unsigned>(*reinterpret_cast<const uint16_t*>(&tap)) << (16 * e);
        }
        b[s][h] = v;
      }
    }
  };
  if (npass == 1) load_b(0);  // while the copies fly (passes: loaded per batch and pass)
  const T* const bp = static_cast<const T*>(p.b);
  const float bias = bp != nullptr ? to_float(bp[static_cast<int64_t>(t.c) * p.b_s]) : 0.f;

  cp_async_wait<0>();
  bool bad = false;
  for (int q = lane; q < nq; q += 32) {
    bad |= has_nonfinite16<T>(*reinterpret_cast<const uint4*>(xs + kV * q));
  }
  __syncwarp();  // every lane's copies and stores visible to the warp
  if (__any_sync(0xffffffffu, bad)) {
    // Exact windows, tap by tap (only tiles holding an infinity or a NaN).
    for (int o = lane; o < tile_len; o += 32) {
      const int64_t l = t.l0 + o;
      if (l < 0 || l >= p.L_out) continue;
      float acc = bias;
      for (int64_t k = 0; k < p.K; ++k) {
        acc = fmaf(to_float(t.wrow[k * p.w_sk]), to_float(xs[o + off + k]), acc);
      }
      t.yrow[l * p.y_sl] = from_float<T>(acc);
    }
    return;
  }

  // ldmatrix rows of lane l: A row (l % 8) + 8 ((l / 8) % 2), k half l / 16.
  const int arow = 8 * ((lane & 7) + 8 * ((lane >> 3) & 1)) + 8 * (lane >> 4);
  for (int ob0 = 0; ob0 < nob; ob0 += kBatch) {
    float d[kBatch][4];
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
#pragma unroll
      for (int e = 0; e < 4; ++e) d[i][e] = bias;
    }
    for (int pass = 0; pass < npass; ++pass) {
      if (npass > 1) load_b(pass);
      const T* const xa = xs + pass * Traits::kPassStride + arow + kBlock * ob0;
#pragma unroll
      for (int i = 0; i < kBatch; ++i) {
        if (ob0 + i < nob) {  // warp-uniform
#pragma unroll
          for (int s = 0; s < kKS; ++s) {
            unsigned a[4];
            ldmatrix_x4(a, xa + kBlock * i + 16 * s);
            mma_16816<T>(d[i], a[0], a[1], a[2], a[3], b[s][0], b[s][1]);
          }
        }
      }
    }

#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const int ob = ob0 + i;
      if (ob < nob) {
        const int64_t lb = t.l0 + kBlock * ob;
        const int64_t l = lb + 8 * bg + 2 * bt;  // d0, d1; d2, d3 64 outputs later
        if (p.y_sl == 1 && lb >= 0 && lb + kBlock <= p.L_out) {  // 4-byte aligned: t.l0 is 16
          *reinterpret_cast<unsigned*>(t.yrow + l) = reg_pack2<T>(d[i][0], d[i][1]);
          *reinterpret_cast<unsigned*>(t.yrow + l + 64) = reg_pack2<T>(d[i][2], d[i][3]);
        } else {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int64_t le = l + (e & 1) + 64 * (e >> 1);
            if (le >= 0 && le < p.L_out) t.yrow[le * p.y_sl] = from_float<T>(d[i][e]);
          }
        }
      }
    }
  }
}

}  // namespace gpukern
