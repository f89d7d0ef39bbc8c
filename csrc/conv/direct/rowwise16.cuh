#pragma once
// The 1-D warp-tile row-wise kernel ("rowwise16"): stride 1, dilation 1, one input row and one
// filter row per output row, any K (FMA-bound filters). Accumulates and stages in float32,
// whatever T is (torch-free). A 1-D problem has H = 1; below, L is p.W, K is p.KW and L_out
// is p.OW.
#include <cstdint>
#include <type_traits>

#include "conv/direct/rowwise_common.cuh"
#include "conv/problem.h"
#include "device/async_mma.cuh"
#include "device/vec.cuh"

namespace gpukern {
namespace conv {

// One warp per tile of up to 2048 outputs of a row, up to four tiles a block, no block barrier.
// A lane owns 16 consecutive outputs in each 512-output segment of the tile and accumulates them
// in registers over 16x16 register blocks of multiply-adds per 16 taps (the seeds' register
// blocking: 256 multiply-adds per 8 float4 shared loads). The warp stages its tile's input (and
// the taps) in its own part of shared memory, fp32 rows with 4-byte cp.async copies (no
// registers, no shared stores), waits, and computes every segment from it; other warps' copies
// and multiply-adds cover the wait. A whole segment's sums go back through shared memory (its
// staged inputs, which no later segment reads) so that each store instruction writes 128
// consecutive outputs: stored straight from the registers, a lane's four 16-byte vectors 64
// bytes apart made every store instruction write half of 32 sectors. (The alternatives this
// replaced, and why they lost, are in docs/perf_notes/conv1d.md.)
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
__device__ __forceinline__ void warp_stage_row(const ConvProblem& p, const T* xrow, int64_t g0,
                                               int n, int lo, int hi, float* sx, int lane) {
  float* const dst = sx + stream_pad(lane);
  const int mb = (n + 31) / 32;  // groups
  if (std::is_same<T, float>::value && p.x_sw == 1) {
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
        v[q] = (j >= lo && j < hi) ? to_float(xrow[(g0 + j) * p.x_sw]) : 0.f;
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
__device__ __forceinline__ void warp_store16(const float (&acc)[16], T* yp, int64_t y_sw, int r,
                                             int rel_min, int rel_end) {
  constexpr int kV = kVec16<T>;
  if (y_sw == 1 && r >= rel_min && r + 16 <= rel_end) {
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
      if (r + i >= rel_min && r + i < rel_end) yp[i * y_sw] = from_float<T>(acc[i]);
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
    conv1d_rowwise_warp_kernel(const ConvProblem p, const int segs, const int chunk,
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
  if (wt.l0 >= p.OW) return;  // rows of other alignments: one more tile than this row needs
  const T* const xrow = wt.xrow;
  T* const yrow = wt.yrow;
  const T* const wrow = wt.wrow;
  const uint32_t c = wt.c;
  const int64_t l0 = wt.l0;
  const T* const bp = static_cast<const T*>(p.b);
  const float bias = bp != nullptr ? to_float(bp[static_cast<int64_t>(c) * p.b_s]) : 0.f;

  // The tile's outputs inside the row, relative to l0 (at most tile_len), its segments inside the
  // row, and the lane's first output relative to l0 that exists (tile 0 starts my early).
  const int rel_end = static_cast<int>(p.OW - l0 < tile_len ? p.OW - l0 : tile_len);
  const int segs_in = (rel_end + kSeg - 1) / kSeg;
  const int rel_min = l0 < 0 ? static_cast<int>(-l0) : 0;
  T* const ylane = yrow + (l0 + lane * kR) * p.y_sw;
  // Lane's window: logical 512 s + 16 lane + j, padded 640 s + 20 lane + stream_pad(j).
  const float* const xlane = sx + (kR + kR / 4) * lane;

  // The staged inputs of taps [k0, k0 + kcur): nst positions from g0, [lo, hi) inside the row.
  int nst, lo, hi;
  int64_t g0;
  auto span = [&](int64_t k0, int kcur) {
    nst = (rel_end + kR - 1) / kR * kR + (kcur + kR - 1) / kR * kR;
    g0 = l0 - p.pad_w + k0;
    const int64_t lo64 = g0 < 0 ? -g0 : 0;
    const int64_t hi64 = p.W - g0;
    lo = static_cast<int>(lo64 < nst ? lo64 : nst);
    hi = static_cast<int>(hi64 < lo ? lo : (hi64 < nst ? hi64 : nst));
  };
  auto stage_taps = [&](int64_t k0, int kcur) {
    for (int k = lane; k < kcur; k += 32) sw[k] = to_float(wrow[(k0 + k) * p.w_sw]);
  };
  const int64_t y_seg = static_cast<int64_t>(kSeg) * p.y_sw;

  float acc[kR];
  if (p.KW <= chunk) {
    // One chunk (every tile whose filter fits): stage once, then segment by segment.
    const int K = static_cast<int>(p.KW);
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
      if (p.y_sw == 1 && kSeg * s >= rel_min && kSeg * (s + 1) <= rel_end) {
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
        warp_store16<T>(acc, yp, p.y_sw, kSeg * s + lane * kR, rel_min, rel_end);
      }
    }
    return;
  }
  // Longer filters (one segment a tile): chunk by chunk into the same sums.
#pragma unroll
  for (int i = 0; i < kR; ++i) acc[i] = bias;
  for (int64_t k0 = 0; k0 < p.KW; k0 += chunk) {
    const int kcur = static_cast<int>(p.KW - k0 < chunk ? p.KW - k0 : chunk);
    if (k0 > 0) __syncwarp();  // every lane's reads of the previous chunk done
    span(k0, kcur);
    warp_stage_row<T>(p, xrow, g0, nst, lo, hi, sx, lane);
    cp_async_commit();
    stage_taps(k0, kcur);
    cp_async_wait<0>();
    __syncwarp();  // every lane's copies and stores visible to the warp
    warp_segment_taps(acc, xlane, sw, kcur);
  }
  warp_store16<T>(acc, ylane, p.y_sw, lane * kR, rel_min, rel_end);
}

}  // namespace conv
}  // namespace gpukern
