#pragma once
// The 1-D general kernel ("general_ot1" / "general_ot4"): any stride, padding, dilation, groups
// and strides. A block computes a tile of outputs for kOT output channels of one group; inputs and
// filters are staged in shared memory channel by channel, taps in chunks. Accumulates in float32
// and stages as float, whatever T is (torch-free). A 1-D problem has H = 1; below, the input
// length L is p.W, the filter length K is p.KW and the output length L_out is p.OW.
#include <cstdint>

#include "conv/problem.h"
#include "device/vec.cuh"

namespace gpukern {
namespace conv {

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

// Run-time tiling of the general kernel, computed by the launcher (general1d.cu) such that
// staged * span <= kSmemX and staged * kOT * chunk <= kSmemW.
struct Conv1dGeneralPlan {
  int tile;        // outputs per tile along L (<= kTile)
  int chunk;       // taps staged per pass (== K when the whole filter fits)
  int staged;      // input channels staged per pass (> 1 only when chunk == K)
  int span;        // (tile - 1) * stride + (chunk - 1) * dilation + 1: input floats per channel
  int64_t tiles;   // tiles along OW
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
    conv1d_general_kernel(const ConvProblem p, const Conv1dGeneralPlan plan) {
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
  const int dil = static_cast<int>(p.dil_w);  // (chunk-1)*dilation < kSmemX when chunk > 1
  const int64_t total = p.N * p.groups * plan.tiles * plan.oblocks;

  // Shared offset of each item's output (the tile's last output for items past the tile, whose
  // results are dropped), so that every read stays inside the staged span.
  int xo[kItems];
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    const int j = tid + i * kThreads;
    xo[i] = (j < plan.tile ? j : plan.tile - 1) * static_cast<int>(p.stride_w);
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
      for (int64_t k0 = 0; k0 < p.KW; k0 += plan.chunk) {
        const int kcur = static_cast<int>(p.KW - k0 < plan.chunk ? p.KW - k0 : plan.chunk);
        __syncthreads();  // every thread is done reading the previous pass
        const int64_t g0 = l0 * p.stride_w - p.pad_w + k0 * p.dil_w;
        for (int cl = 0; cl < ccur; ++cl) {
          const T* xrow = x + n * p.x_sn + (g * cpg + c0 + cl) * p.x_sc;
          float* dst = sx + cl * plan.span;
          for (int j = tid; j < plan.span; j += kThreads) {
            const int64_t gi = g0 + j;
            dst[j] = (gi >= 0 && gi < p.W) ? to_float(xrow[gi * p.x_sw]) : 0.f;
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
            v = to_float(w[(g * opg + o) * p.w_so + (c0 + cl) * p.w_sc + (k0 + kk) * p.w_sw]);
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
        if (j < plan.tile && l < p.OW) yrow[l * p.y_sw] = from_float<T>(acc[oi][i] + bias);
      }
    }
  }
}

}  // namespace conv
}  // namespace gpukern
