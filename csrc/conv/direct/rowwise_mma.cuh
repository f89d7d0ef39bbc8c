#pragma once
// The 1-D tensor-core row-wise kernel ("rowwise_mma"): fp16/bf16, stride 1, dilation 1, one input
// row and one filter row per output row. Float32 accumulators (torch-free). A 1-D problem has
// H = 1; below, L is p.W, K is p.KW and L_out is p.OW.
#include <cstdint>
#include <type_traits>

#include "conv/direct/rowwise_common.cuh"
#include "conv/problem.h"
#include "device/async_mma.cuh"
#include "device/limits.cuh"
#include "device/vec.cuh"

namespace gpukern {
namespace conv {

// 16-bit rows on the tensor cores. The fp32 multiply-add kernels convert every element and issue
// K multiply-adds per output, so 16-bit rows ran no faster than fp32 ones, bound by the
// multiply-adds rather than the copy bandwidth. Here 128 consecutive
// outputs y[b + 8m + n] (m < 16, n < 8) are one m16n8 mma tile, D = A B over j < 16 kKS with
//   A[m][j] = x[a0 + 8m + j]            (the staged input: row m of A is 16 kKS inputs from 8m),
//   B[j][n] = w[j - n - off]            (zero outside the filter: a banded Toeplitz matrix),
// where a0 = b - pad_w - off is the 16-byte aligned input position at or before the window of
// y[b]. Each 16-wide k step of A is one ldmatrix.x4 of 8-element rows of the staged input (rows
// 8m + 16s and 8m + 16s + 8: the input is read in place, never expanded), B is built once per
// row in registers, and bf16 x bf16 products are exact in the float accumulators, so the result
// is the fp32 kernels' up to the order of the additions. A k step serves 128 outputs: K = 31
// takes 3 mma + 3 ldmatrix per 128 outputs instead of 31 multiply-adds per output, and the
// kernel is left with its loads and stores.
// A pass covers kPassTaps = 16 kKS - 14 taps (j = off + n + k with off, n <= 7); longer filters
// take passes kPassStride taps apart (a multiple of 8, so a pass shifts A by whole rows).
// One warp per tile, up to four tiles a block: each warp stages, checks and computes its own tile
// with no block barrier, and a tile of 2048 outputs keeps 4 KB of copies in flight per warp
// (block-per-tile and persistent multi-stage variants kept less in flight and lost). fp32 stays
// off the tensor cores: the same banded scheme in 3xTF32 lost to the fp32 multiply-add kernels
// (docs/perf_notes/conv1d.md).
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
  // A block's staged tiles: the default shared-memory limit (no cudaFuncSetAttribute).
  static constexpr int kSmemBudget = static_cast<int>(kDefaultSmemLimit);
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
    conv1d_rowwise_mma_kernel(const ConvProblem p, const int nob, const int npass,
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
  if (t.l0 >= p.OW) return;  // rows of other alignments: one more tile than this row needs
  int off = 0;
  if (p.x_sw == 1) {
    const int mx = static_cast<int>((reinterpret_cast<uintptr_t>(t.xrow) / sizeof(T)) % kV);
    off = (mx + static_cast<int>(t.l0 & (kV - 1)) - static_cast<int>(p.pad_w & (kV - 1))) &
          (kV - 1);  // mod kV
  }
  const int64_t a0 = t.l0 - p.pad_w - off;  // x + a0 is 16-byte aligned when x_sw == 1
  const int nq = stage / kV;               // staged 16-byte vectors

  for (int q = lane; q < nq; q += 32) {
    const int64_t g = a0 + kV * static_cast<int64_t>(q);
    T* const dst = xs + kV * q;
    if (p.x_sw == 1 && g >= 0 && g + kV <= p.W) {
      cp_async_zfill<16>(dst, t.xrow + g, true);
    } else {
#pragma unroll
      for (int e = 0; e < kV; ++e) {
        dst[e] = (g + e >= 0 && g + e < p.W) ? t.xrow[(g + e) * p.x_sw] : from_float<T>(0.f);
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
    const int64_t t_end = pass == npass - 1 ? p.KW : t0 + Traits::kPassStride;
#pragma unroll
    for (int s = 0; s < kKS; ++s) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        unsigned v = 0;
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int k = t0 + 16 * s + 2 * bt + 8 * h + e - bg - off;
          const T tap = (k >= t0 && k < t_end) ? t.wrow[static_cast<int64_t>(k) * p.w_sw]
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
      if (l < 0 || l >= p.OW) continue;
      float acc = bias;
      for (int64_t k = 0; k < p.KW; ++k) {
        acc = fmaf(to_float(t.wrow[k * p.w_sw]), to_float(xs[o + off + k]), acc);
      }
      t.yrow[l * p.y_sw] = from_float<T>(acc);
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
        if (p.y_sw == 1 && lb >= 0 && lb + kBlock <= p.OW) {  // 4-byte aligned: t.l0 is 16
          *reinterpret_cast<unsigned*>(t.yrow + l) = reg_pack2<T>(d[i][0], d[i][1]);
          *reinterpret_cast<unsigned*>(t.yrow + l + 64) = reg_pack2<T>(d[i][2], d[i][3]);
        } else {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int64_t le = l + (e & 1) + 64 * (e >> 1);
            if (le >= 0 && le < p.OW) t.yrow[le * p.y_sw] = from_float<T>(d[i][e]);
          }
        }
      }
    }
  }
}

}  // namespace conv
}  // namespace gpukern
