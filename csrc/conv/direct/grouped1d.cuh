#pragma once
// grouped_reg: conv1d with several channels per group (grouped or dense), stride 1, dilation 1,
// any K, padding, groups and strides: register-blocked direct convolution for the layers the
// tensor-core path does not take (groups > 1, unaligned channels), e.g. wav2vec2's positional
// convolution (768 -> 768, K = 128, 16 groups of 48 channels), where the general kernel's
// per-output shared reads left it at a sixth of the fp32 peak.
//
// A block computes kTile = 32 * kT consecutive outputs of one image for up to kMaxWarps * kO
// (16) output channels of one group (warp w owns channels w * kO .. w * kO + kO - 1 of the block,
// lane l the outputs l * kT .. l * kT + kT - 1 of the tile): kO x kT fp32 accumulators a thread.
// The group's input channels go through shared memory `staged` at a time (a pass):
//   1. stage the pass's input rows (kBatch loads in flight a thread; the tile's window,
//      kTile + K - 1 values a channel, zero outside the signal, stored with one skipped word
//      every 32 so that lanes kT words apart hit different banks) and its taps, stored [c][k][o]
//      with a row pitch of opitch floats (one broadcast float4 read gives 4 channels' tap; 16-byte
//      loads along k where the weight allows, two threads a 32-byte row segment);
//   2. per channel and tap k: every thread's kO taps (kO / 4 float4 broadcasts), then
//      kO x kT multiply-adds on a register window of kT inputs that slides by one shared read
//      per tap.
// Epilogue: y = act(acc + bias [+ residual]) in registers, stored as kT-element vectors where y's
// rows allow, else element by element.
//
// Contract (conv1d_grouped_reg_kernel<T>):
//   grid    1-D: N * groups * oblocks * tiles blocks (tile fastest, then the output block).
//   block   warps * 32 threads (warps = ceil(min(o_per_group, kMaxWarps * kO) / kO)).
//   shared  dynamic (grouped_smem_bytes): staged * xpitch floats of input, then
//           staged * K * opitch floats of taps.
//   barriers two a pass (staged; consumed).
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "conv/direct/common2d.cuh"
#include "conv/problem.h"
#include "device/activation.cuh"
#include "device/fastdiv.cuh"
#include "device/vec.cuh"

namespace gpukern {
namespace conv {

constexpr int kGroupedO = 8;        // output channels per warp
constexpr int kGroupedT = 4;        // consecutive outputs per lane
constexpr int kGroupedMaxWarps = 2;  // output channels per block: up to 16 (several blocks an
                                     // SM, so that one's staging overlaps another's math)
constexpr int kGroupedBatch = 8;     // staging loads a thread issues before the first store
constexpr int kGroupedTile = 32 * kGroupedT;

struct GroupedPlan {
  int warps = 1;        // output channel slices of kGroupedO per block
  int oblocks = 1;      // output blocks per group
  int tiles = 1;        // output tiles along the length
  int staged = 1;       // input channels per pass
  int xpitch = 0;       // floats per staged input row (skew included)
  int opitch = 0;       // floats per staged tap row ([c][k] rows of the block's channels)
  int och_shift = 3;     // log2(warps * kGroupedO)
  FastDiv span_div, k_div;  // by the staged row length (kTile + K - 1) and by K
  bool w_vec = false;       // taps loaded as 16-byte vectors along k (K a multiple of two)
  int64_t blocks = 0;
};

// Skewed position of element j of a staged input row: one word skipped every 32.
__host__ __device__ __forceinline__ int grouped_skew(int j) { return j + (j >> 5); }

template <typename T>
__global__ void __launch_bounds__(kGroupedMaxWarps * 32)
    conv1d_grouped_reg_kernel(const ConvProblem p, const GroupedPlan s) {
  extern __shared__ float4 grouped_smem[];
  float* xs = reinterpret_cast<float*>(grouped_smem);
  float* ws = xs + s.staged * s.xpitch;
  const int K = static_cast<int>(p.KW);
  const int cpg = static_cast<int>(p.c_per_group), opg = static_cast<int>(p.o_per_group);
  const int L = static_cast<int>(p.W), OL = static_cast<int>(p.OW);
  const int oblock_ch = s.warps * kGroupedO;

  int64_t b = blockIdx.x;
  const int tile = static_cast<int>(b % s.tiles);
  b /= s.tiles;
  const int ob = static_cast<int>(b % s.oblocks);
  b /= s.oblocks;
  const int g = static_cast<int>(b % p.groups);
  const int n = static_cast<int>(b / p.groups);
  const int t0 = tile * kGroupedTile;
  const int o_first = ob * oblock_ch;  // within the group
  const int span = kGroupedTile + K - 1;
  const int tid = threadIdx.x, nthreads = blockDim.x;
  const int warp = tid >> 5, lane = tid & 31;

  const T* __restrict__ x = static_cast<const T*>(p.x) + n * p.x_sn +
                            static_cast<int64_t>(g) * cpg * p.x_sc;
  const T* __restrict__ w = static_cast<const T*>(p.w) +
                            (static_cast<int64_t>(g) * opg + o_first) * p.w_so;
  const int in0 = t0 - static_cast<int>(p.pad_w);

  float acc[kGroupedO][kGroupedT];
#pragma unroll
  for (int o = 0; o < kGroupedO; ++o)
#pragma unroll
    for (int j = 0; j < kGroupedT; ++j) acc[o][j] = 0.f;

  const int och = min(oblock_ch, opg - o_first);  // the block's real output channels
  for (int c0 = 0; c0 < cpg; c0 += s.staged) {
    const int cc_n = min(s.staged, cpg - c0);
    // 1. Stage the pass's input rows and taps, kGroupedBatch loads in flight per thread.
    const int nx = cc_n * span;
    for (int i0 = tid; i0 < nx; i0 += kGroupedBatch * nthreads) {
      float v[kGroupedBatch];
#pragma unroll
      for (int q = 0; q < kGroupedBatch; ++q) {
        const int i = i0 + q * nthreads;
        const int cc = s.span_div.div(i);
        const int pos = in0 + (i - cc * span);
        v[q] = (i < nx && pos >= 0 && pos < L)
                   ? to_float(x[(c0 + cc) * p.x_sc + pos * p.x_sw]) : 0.f;
      }
#pragma unroll
      for (int q = 0; q < kGroupedBatch; ++q) {
        const int i = i0 + q * nthreads;
        const int cc = s.span_div.div(i);
        if (i < nx) xs[cc * s.xpitch + grouped_skew(i - cc * span)] = v[q];
      }
    }
    // Taps: rows (cc, o) of K taps, o fastest among rows (oblock_ch is 8 or 16: a shift); as
    // 16-byte vectors along k where the weight's rows allow it (w_vec), else element by element.
    if (s.w_vec) {
      // Per staged channel: item i = (pair kp, channel o, half h), h fastest: two threads read
      // one row's 32 consecutive bytes, and their stores (kV * opitch words apart) plus the
      // 16 channels' land on distinct banks (fp32; bf16 two-way).
      constexpr int kV = kVec16<T>;
      const int kq = K / kV;  // vectors a row (even: w_vec)
      const int items = kq * oblock_ch;
      for (int cc = 0; cc < cc_n; ++cc) {
        const T* wc = w + (c0 + cc) * p.w_sc;
        float* wsc = ws + cc * K * s.opitch;
        for (int i0 = tid; i0 < items; i0 += kGroupedBatch * nthreads) {
          Vec<T, kV> v[kGroupedBatch];
#pragma unroll
          for (int q = 0; q < kGroupedBatch; ++q) {
            const int i = i0 + q * nthreads;
            const int o = (i >> 1) & (oblock_ch - 1);
            const int kv = ((i >> (1 + s.och_shift)) << 1) | (i & 1);
            if (i < items && o < och) {
              v[q] = load_vec<T, kV>(wc + o * p.w_so + kv * kV);
            } else {
#pragma unroll
              for (int e = 0; e < kV; ++e) v[q].v[e] = from_float<T>(0.f);
            }
          }
#pragma unroll
          for (int q = 0; q < kGroupedBatch; ++q) {
            const int i = i0 + q * nthreads;
            if (i >= items) break;
            const int o = (i >> 1) & (oblock_ch - 1);
            const int kv = ((i >> (1 + s.och_shift)) << 1) | (i & 1);
            float* dst = wsc + kv * kV * s.opitch + o;
#pragma unroll
            for (int e = 0; e < kV; ++e) dst[e * s.opitch] = to_float(v[q].v[e]);
          }
        }
      }
    } else {
      const int nw = cc_n * oblock_ch * K;
      for (int i0 = tid; i0 < nw; i0 += kGroupedBatch * nthreads) {
        float v[kGroupedBatch];
#pragma unroll
        for (int q = 0; q < kGroupedBatch; ++q) {
          const int i = i0 + q * nthreads;
          const int row = s.k_div.div(i);
          const int o = row & (oblock_ch - 1);
          const int cc = row >> s.och_shift;
          v[q] = (i < nw && o < och)
                     ? to_float(w[o * p.w_so + (c0 + cc) * p.w_sc + (i - row * K) * p.w_sw])
                     : 0.f;
        }
#pragma unroll
        for (int q = 0; q < kGroupedBatch; ++q) {
          const int i = i0 + q * nthreads;
          const int row = s.k_div.div(i);
          const int cc = row >> s.och_shift;
          if (i < nw) ws[(cc * K + i - row * K) * s.opitch + (row & (oblock_ch - 1))] = v[q];
        }
      }
    }
    __syncthreads();
    // 2. Multiply-adds.
    for (int cc = 0; cc < cc_n; ++cc) {
      const float* xr = xs + cc * s.xpitch;
      const float4* wr =
          reinterpret_cast<const float4*>(ws + cc * K * s.opitch + warp * kGroupedO);
      const int opitch4 = s.opitch / 4;
      float v[kGroupedT];
#pragma unroll
      for (int j = 0; j < kGroupedT; ++j) v[j] = xr[grouped_skew(lane * kGroupedT + j)];
#pragma unroll 4
      for (int k = 0; k < K; ++k) {
        float wv[kGroupedO];
#pragma unroll
        for (int q = 0; q < kGroupedO / 4; ++q) {
          const float4 w4 = wr[k * opitch4 + q];
          wv[4 * q + 0] = w4.x;
          wv[4 * q + 1] = w4.y;
          wv[4 * q + 2] = w4.z;
          wv[4 * q + 3] = w4.w;
        }
#pragma unroll
        for (int o = 0; o < kGroupedO; ++o)
#pragma unroll
          for (int j = 0; j < kGroupedT; ++j) acc[o][j] = fmaf(wv[o], v[j], acc[o][j]);
        // Slide the window: the next tap's inputs are this one's shifted by one.
#pragma unroll
        for (int j = 0; j + 1 < kGroupedT; ++j) v[j] = v[j + 1];
        if (k + 1 < K) v[kGroupedT - 1] = xr[grouped_skew(lane * kGroupedT + kGroupedT + k)];
      }
    }
    __syncthreads();
  }

  // Epilogue.
  const int tb = t0 + lane * kGroupedT;
  if (tb >= OL) return;
  const bool has_bias = p.b != nullptr;
  const bool has_res = p.r != nullptr;
  const int64_t o_abs0 = static_cast<int64_t>(g) * opg + o_first + warp * kGroupedO;
  with_activation(p.act, [&](auto kind) {
    constexpr int kAct = decltype(kind)::value;
#pragma unroll
    for (int o = 0; o < kGroupedO; ++o) {
      if (o_first + warp * kGroupedO + o >= opg) break;
      const int64_t oa = o_abs0 + o;
      const float bias = has_bias ? to_float(static_cast<const T*>(p.b)[oa * p.b_s]) : 0.f;
      float vals[kGroupedT];
#pragma unroll
      for (int j = 0; j < kGroupedT; ++j) {
        float v = acc[o][j] + bias;
        if (has_res && tb + j < OL) {
          v += to_float(
              static_cast<const T*>(p.r)[n * p.r_sn + oa * p.r_so + (tb + j) * p.r_sw]);
        }
        vals[j] = activate_k<kAct>(v);
      }
      T* yr = static_cast<T*>(p.y) + n * p.y_sn + oa * p.y_so;
      // A kT-element vector store where the row is unit-stride and the vector aligned.
      const bool vec = p.y_sw == 1 &&
                       reinterpret_cast<uintptr_t>(yr + tb) % (kGroupedT * sizeof(T)) == 0;
      store_cols<T, kGroupedT>(yr, vals, tb, OL, p.y_sw, vec);
    }
  });
}

// ---- Host planning (torch-free) ----
// Shared memory a block may take (the pass's channels are cut to fit).
constexpr int64_t kGroupedSmemBudget = 48 * 1024;
// Lengths, taps and channels in int inside the kernel.
constexpr int64_t kGroupedMaxIndex = int64_t{1} << 24;

inline bool grouped_plan(const ConvProblem& p, GroupedPlan& s) {
  if (p.nsp != 1 || p.stride_w != 1 || p.dil_w != 1) return false;
  if (p.c_per_group < 2 && p.o_per_group < 2) return false;  // one row: the row-wise kernels
  for (int64_t v : {p.W, p.OW, p.KW, p.pad_w, p.c_per_group, p.o_per_group, p.groups, p.N}) {
    if (v < 0 || v > kGroupedMaxIndex) return false;
  }
  const int64_t och = std::min<int64_t>(p.o_per_group, kGroupedMaxWarps * kGroupedO);
  s.warps = static_cast<int>((och + kGroupedO - 1) / kGroupedO);
  const int64_t block_ch = s.warps * kGroupedO;
  static_assert(kGroupedO == 8 && kGroupedMaxWarps <= 2, "block channels 8 or 16 (a shift)");
  s.och_shift = block_ch == 8 ? 3 : 4;
  s.oblocks = static_cast<int>((p.o_per_group + block_ch - 1) / block_ch);
  s.tiles = static_cast<int>((p.OW + kGroupedTile - 1) / kGroupedTile);
  const int64_t span = kGroupedTile + p.KW - 1;
  s.xpitch = static_cast<int>((span + span / 32 + 4) / 4 * 4);
  s.span_div = FastDiv(static_cast<uint32_t>(span));
  s.k_div = FastDiv(static_cast<uint32_t>(p.KW));
  // 16-byte tap vectors: unit tap stride, K a multiple of two vectors, the channel and output
  // strides multiples of one, an aligned base (every row start is then aligned).
  const int64_t v = 16 / p.elem_size;
  s.w_vec = p.w_sw == 1 && p.KW % (2 * v) == 0 && p.w_sc % v == 0 && p.w_so % v == 0 &&
            reinterpret_cast<uintptr_t>(p.w) % 16 == 0;
  s.opitch = static_cast<int>(block_ch + 4);  // a multiple of 4: float4 reads stay aligned
  const int64_t per_channel = (s.xpitch + p.KW * s.opitch) * static_cast<int64_t>(sizeof(float));
  if (per_channel > kGroupedSmemBudget) return false;
  s.staged = static_cast<int>(std::min<int64_t>(p.c_per_group, kGroupedSmemBudget / per_channel));
  s.blocks = p.N * p.groups * s.oblocks * s.tiles;
  return s.blocks <= (int64_t{1} << 31) - 1;
}

inline size_t grouped_smem_bytes(const ConvProblem& p, const GroupedPlan& s) {
  return sizeof(float) * static_cast<size_t>(s.staged) *
         (static_cast<size_t>(s.xpitch) + static_cast<size_t>(p.KW) * s.opitch);
}

}  // namespace conv
}  // namespace gpukern
