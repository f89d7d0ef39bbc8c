#pragma once
// The 1-D row-wise kernel ("rowwise8", "rowwise8_dilated"): stride 1 and one input row and one
// filter row per output row (C == O == groups: single-channel signals, depthwise), any dilation up
// to kMaxDilation. Sliding register windows over a shared-memory tile, 16-byte loads, the filter
// streamed in chunks of taps. Accumulates and stages in float32, whatever T is (torch-free). A
// 1-D problem has H = 1; below, L is p.W, K is p.KW and L_out is p.OW.
#include <cstdint>

#include "conv/problem.h"
#include "device/limits.cuh"
#include "device/vec.cuh"

namespace gpukern {
namespace conv {

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
  static_assert(max_smem_bytes() <= kDefaultSmemLimit,
                "stays within the default shared-memory limit");
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
// any of them to shared memory, so that a block keeps a whole tile's bytes in flight (one
// 16-byte vector per thread in flight, whose four shared stores conflict 4 ways, leaves the
// short-filter cases far from the bandwidth).
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
// cost one L2 request per element on rows that are not 16-byte aligned, e.g. an odd OW: that
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
    conv1d_rowwise_kernel(const ConvProblem p, const int chunk, const int64_t tiles) {
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
  const int d = kDil1 ? 1 : static_cast<int>(p.dil_w);
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

    for (int64_t k0 = 0; k0 < p.KW; k0 += chunk) {
      const int kcur = static_cast<int>(p.KW - k0 < chunk ? p.KW - k0 : chunk);
      const int kcur_r = (kcur + kR - 1) / kR * kR;
      __syncthreads();  // every thread is done reading the previous chunk / tile
      for (int k = tid; k < kcur_r; k += kThreads) {
        sw[k] = k < kcur ? to_float(wrow[(k0 + k) * p.w_sw]) : 0.f;
      }
      const int n_cur = tile_len + kcur_r * d;
      rowwise_stage_input<T, kThreads, kR>(sx, xrow, p.W, p.x_sw, l0 - p.pad_w + k0 * d,
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
    const int64_t left = p.OW - l0;
    rowwise_store_output<T, kThreads, kR>(sx, y + n * p.y_sn + c * p.y_so, p.y_sw, l0,
                                          static_cast<int>(left < tile_len ? left : tile_len));
  }
}

}  // namespace conv
}  // namespace gpukern
