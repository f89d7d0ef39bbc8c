#pragma once
// The 1-D register-window row-wise kernel ("rowwise_reg"): stride 1, dilation 1, one input row
// and one filter row per output row, K <= 8 taps compiled in; no shared memory. Accumulates in
// float32 (torch-free). A 1-D problem has H = 1; below, L is p.W, K is p.KW and L_out is p.OW.
#include <cstdint>
#include <type_traits>

#include "conv/direct/rowwise_common.cuh"
#include "conv/problem.h"
#include "device/async_mma.cuh"
#include "device/vec.cuh"

namespace gpukern {
namespace conv {

// Short filters on 16-bit data: a kernel that stages every input as a float in shared memory
// and reads it back per 4 taps spends on a bf16 element the instructions of an fp32 one, and
// short 16-bit filters stay far below the copy bandwidth.
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
  // made it materialise the whole window first, 90-108 registers for 16-bit types).
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
// aligned). Lane t loads inputs a0 + t*kE + j (j < kE), a0 = l0 - pad_w - off with off < kV
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
__device__ __forceinline__ Conv1dRegPos<T> reg_start(const ConvProblem& p, uint32_t row,
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
      p.y_sw == 1 ? static_cast<int>((reinterpret_cast<uintptr_t>(it.yrow) / sizeof(T)) % kV) : 0;
  it.l0 = static_cast<int64_t>(chunk) * q - my;
  int off = 0;
  if (p.x_sw == 1) {
    const int mx = static_cast<int>((reinterpret_cast<uintptr_t>(it.xrow) / sizeof(T)) % kV);
    // mx + l0 - pad_w mod kV, from non-negative parts (l0 + my = chunk * q is a multiple of kV).
    const int pm = static_cast<int>(p.pad_w % kV);
    off = (mx - my - pm + 2 * kV) % kV;
  }
  it.off = off;
  it.a0 = it.l0 - p.pad_w - off;
  const T* w = static_cast<const T*>(p.w) + static_cast<int64_t>(c) * p.w_so;
  tap = lane < p.KW ? w[lane * p.w_sw] : from_float<T>(0.f);
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
__device__ __forceinline__ void reg_load(const ConvProblem& p, const Conv1dRegPos<T>& it,
                                         int lane, uint4 (&x)[Traits::kM]) {
  constexpr int kV = Traits::kV;
  const int64_t g0 = it.a0 + lane * Traits::kE;
  const bool inside = p.x_sw == 1 && it.a0 >= 0 && it.a0 + 32 * Traits::kE <= p.W;  // warp-uniform
#pragma unroll
  for (int m = 0; m < Traits::kM; ++m) {
    const int64_t gi = g0 + m * kV;
    if (inside || (p.x_sw == 1 && gi >= 0 && gi + kV <= p.W)) {  // aligned by construction
      x[m] = *reinterpret_cast<const uint4*>(it.xrow + gi);
    } else if (gi >= p.W || gi + kV <= 0) {
      // Wholly outside the row (the lanes past a row's end in its last chunk: a row of 4099
      // outputs ends in a chunk of 131 of 496): zeros, without the element-by-element call.
      x[m] = make_uint4(0u, 0u, 0u, 0u);
    } else {
      const Vec<T, kV> v = reg_load_edge<T, kV>(it.xrow, gi, p.W, p.x_sw);
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
// per segment: per chunk only two 64-bit adds (decoding every chunk would cost several times the
// instructions of its multiply-adds, on the busiest pipe).
// Per chunk: the loads issued one chunk earlier are converted, the next chunk's loads are issued
// (the next item's first chunk at a segment's end), then the window (shuffles), kE x K
// multiply-adds and 16-byte stores of the output lanes (chunks past the row's end are skipped).
template <typename T, typename Traits>
__global__ void __launch_bounds__(Traits::kThreads, Traits::kMinBlocks)
    conv1d_rowwise_reg_kernel(const ConvProblem p, const uint32_t chunks,
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
    bool more = nit.left > 0 && nit.l0 < p.OW;
    if (!more) {
      item += nw;
      if (item < total) {
        nit = reg_start<T, Traits>(p, item / segs, item % segs, seg_chunks, chunks, q, lane, ntap,
                                   nbias);
        more = true;
      }
    }
    if (more) reg_load<T, Traits>(p, nit, lane, r);

    if (it.l0 < p.OW) {  // warp-uniform: a segment's first chunk may start past a short row
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
        if (p.y_sw == 1 && l >= 0 && l + kE <= p.OW) {
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
            if (l + i >= 0 && l + i < p.OW) it.yrow[(l + i) * p.y_sw] = from_float<T>(acc[i]);
          }
        }
      }
    }
    if (!more) return;
    it = nit;
  }
}

}  // namespace conv
}  // namespace gpukern
