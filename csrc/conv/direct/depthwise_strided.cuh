#pragma once
// depthwise_strided: depthwise NCHW conv2d (groups == C == O, multiplier 1) with a square
// kK x kK filter (3/5/7), equal strides kS (1 or 2), dilation 1, any padding, any element
// strides. Built for the layers real networks run at small planes: stride-2 downsampling and
// stride-1 planes of 7x7 .. 28x28, where one plane is too little work for a block and the
// row / tile kernels leave most of their threads idle or re-read their halo.
//
// A unit is an output tile of one plane: tile_h x tile_w outputs (tile_w <= 64 columns,
// tile_h a multiple of kRows), whole planes when they fit the thread budget. A block stages the
// input of `upb` consecutive units (several planes of small images) into shared memory as fp32
// with coalesced reads (consecutive threads take consecutive columns of an input row, each
// thread batching kStageBatch loads so that they are in flight together), zeros outside the
// image (the padding). For stride 2 every staged row is stored de-interleaved: its even columns,
// then its odd ones, so that consecutive output columns read consecutive words (conflict-free,
// as at stride 1) instead of every other bank. Then each thread computes a strip of kRows
// outputs of one column: every staged row under the strip is read once (kK words) and feeds the
// strip's outputs whose window holds it, taps and sums in registers, fp32 accumulation. Stores
// go out column-consecutive across the warp (coalesced rows), through the output's strides,
// with the fused epilogue y = act(acc + bias + residual) applied in registers when the problem
// asks for it (act chosen at run time: one switch per thread).
//
// Contract (conv2d_depthwise_strided_kernel<T, kK, kS>):
//   grid   1-D: block b takes units [b * upb, b * upb + upb) (unit = plane * tiles + tile,
//          tile = tile row * tiles_w + tile column; plane = n * C + c).
//   block  kThreads threads; thread t serves unit t / tpu, strip (t % tpu) / tile_w, column
//          (t % tpu) % tile_w (tpu = tile_w * strips threads per unit).
//   shared the units' descriptors (kMaxUnits), then upb staged tiles of in_rows x pitch floats.
//   barriers two: descriptors written, tiles staged.
#include <cstdint>
#include <type_traits>

#include "conv/direct/common2d.cuh"
#include "device/activation.cuh"
#include "device/fastdiv.cuh"
#include "device/limits.cuh"
#include "device/vec.cuh"

namespace gpukern {
namespace conv {

struct StridedTraits {
  static constexpr int kThreads = 256;
  static constexpr int kRows = 4;         // output rows per thread (a strip): staged rows are
                                          // read (kRows - 1) * kS + kK times per kRows outputs
  static constexpr int kMaxTileW = 64;    // output columns of a unit
  static constexpr int kMaxUnits = 64;    // units a block stages at once
  static constexpr int kStageBatch = 8;   // staging loads in flight per thread
  // Shared bytes a block's tiles may take: small enough for 8 blocks of 256 threads per SM
  // (228 KB), large enough for one 64-wide 7x7 stride-2 tile (37 x 135 floats).
  static constexpr int kTileBudget = 24 * 1024;
  // Resident blocks asked of ptxas: 4 (64 registers a thread), 3 for 7x7 (80: its 49 taps in
  // registers spilled at 64).
  static constexpr int min_blocks(int k) { return k == 7 ? 3 : 4; }
};

// Work decomposition (host: depthwise_strided.cu, plan_strided()).
struct StridedShape {
  int tile_h, tile_w;     // output tile (tile_h = strips * kRows)
  int tiles_h, tiles_w;   // tiles per plane
  int strips;             // kRows-row strips per tile
  int tpu;                // threads per unit: tile_w * strips
  int upb;                // units per block
  int in_rows, in_cols;   // staged input tile: (tile_h - 1) * kS + kK, (tile_w - 1) * kS + kK
  int half;               // kS == 2: the even columns' count, where the odd ones start
  int pitch;              // floats between staged rows (odd: rows start in different banks)
  int tile_floats;        // in_rows * pitch
  int64_t units;          // N * C * tiles_h * tiles_w
  FastDiv tile_elems;     // in_rows * in_cols: staging index -> unit
  FastDiv cols;           // in_cols: staging index -> row
};

// One unit's placement, computed once per block by the thread of the same index.
struct StridedUnit {
  int64_t x_off, y_off, r_off;  // element offsets of the unit's plane in x, y and the residual
  int iy0, ix0;                 // input origin of the staged tile (may be negative: padding)
  int oy0, ox0;                 // output origin of the tile
  int c;                        // channel (its taps and bias)
  int valid;                    // 0: past the last unit
};

template <typename T, int kK, int kS>
__global__ void __launch_bounds__(StridedTraits::kThreads, StridedTraits::min_blocks(kK))
    conv2d_depthwise_strided_kernel(const ConvProblem p, StridedShape s) {
  using Tr = StridedTraits;
  static_assert(kS == 1 || kS == 2, "stride 1 or 2");
  __shared__ StridedUnit s_unit[Tr::kMaxUnits];
  extern __shared__ float s_in[];
  const int tid = threadIdx.x;
  const int64_t unit0 = static_cast<int64_t>(blockIdx.x) * s.upb;

  if (tid < s.upb) {
    StridedUnit d{};
    const int64_t unit = unit0 + tid;
    d.valid = unit < s.units;
    if (d.valid) {
      const int64_t per_plane = int64_t{s.tiles_h} * s.tiles_w;
      const int64_t plane = unit / per_plane;
      const int tile = static_cast<int>(unit - plane * per_plane);
      const int th = tile / s.tiles_w, tw = tile - th * s.tiles_w;
      const int64_t n = plane / p.C;
      d.c = static_cast<int>(plane - n * p.C);
      d.x_off = n * p.x_sn + d.c * p.x_sc;
      d.y_off = n * p.y_sn + d.c * p.y_so;
      d.r_off = n * p.r_sn + d.c * p.r_so;
      d.oy0 = th * s.tile_h;
      d.ox0 = tw * s.tile_w;
      d.iy0 = d.oy0 * kS - static_cast<int>(p.pad_h);
      d.ix0 = d.ox0 * kS - static_cast<int>(p.pad_w);
    }
    s_unit[tid] = d;
  }
  __syncthreads();  // descriptors written

  // Staging: index i -> (unit, row, column), columns fastest: a warp reads consecutive elements
  // of an input row. kStageBatch loads are issued before their shared stores.
  {
    const T* x = ptr<T>(p.x);
    const int H = static_cast<int>(p.H), W = static_cast<int>(p.W);
    const int te = s.in_rows * s.in_cols;
    const int total = s.upb * te;
#pragma unroll 1
    for (int i0 = tid; i0 < total; i0 += Tr::kThreads * Tr::kStageBatch) {
      float v[Tr::kStageBatch];
      int dst[Tr::kStageBatch];
#pragma unroll
      for (int b = 0; b < Tr::kStageBatch; ++b) {
        const int i = i0 + b * Tr::kThreads;
        v[b] = 0.f;
        dst[b] = -1;
        if (i < total) {
          const int u = s.tile_elems.div(i);
          const int rem = i - u * te;
          const int row = s.cols.div(rem);
          const int col = rem - row * s.in_cols;
          const int scol = kS == 2 ? (col & 1) * s.half + (col >> 1) : col;
          dst[b] = u * s.tile_floats + row * s.pitch + scol;
          const StridedUnit& d = s_unit[u];
          const int iy = d.iy0 + row, ix = d.ix0 + col;
          if (d.valid && iy >= 0 && iy < H && ix >= 0 && ix < W) {
            v[b] = to_float(x[d.x_off + iy * p.x_sh + ix * p.x_sw]);
          }
        }
      }
#pragma unroll
      for (int b = 0; b < Tr::kStageBatch; ++b)
        if (dst[b] >= 0) s_in[dst[b]] = v[b];
    }
  }
  __syncthreads();  // tiles staged

  const int u = tid / s.tpu;
  if (u >= s.upb) return;
  const StridedUnit& d = s_unit[u];
  if (!d.valid) return;
  const int r = tid - u * s.tpu;
  const int strip = r / s.tile_w;
  const int col = r - strip * s.tile_w;
  const int ox = d.ox0 + col;
  const int oy_first = d.oy0 + strip * Tr::kRows;
  const int OH = static_cast<int>(p.OH), OW = static_cast<int>(p.OW);
  if (ox >= OW || oy_first >= OH) return;  // the last tiles' columns / strips past the plane

  float w[kK][kK];
  {
    const T* wp = ptr<T>(p.w) + d.c * p.w_so;
#pragma unroll
    for (int kh = 0; kh < kK; ++kh)
#pragma unroll
      for (int kw = 0; kw < kK; ++kw) w[kh][kw] = to_float(wp[kh * p.w_sh + kw * p.w_sw]);
  }
  const float bias = p.b != nullptr ? to_float(ptr<T>(p.b)[d.c * p.b_s]) : 0.f;
  float acc[Tr::kRows];
#pragma unroll
  for (int i = 0; i < Tr::kRows; ++i) acc[i] = bias;

  // Staged row strip * kRows * kS + t is input row t of the strip; it meets output row i of the
  // strip at filter row t - i * kS.
  const float* sp = s_in + u * s.tile_floats + strip * Tr::kRows * kS * s.pitch;
  constexpr int kSteps = (Tr::kRows - 1) * kS + kK;
#pragma unroll
  for (int t = 0; t < kSteps; ++t) {
    const float* row = sp + t * s.pitch;
    float v[kK];
#pragma unroll
    for (int kw = 0; kw < kK; ++kw)
      v[kw] = kS == 1 ? row[col + kw] : row[(kw & 1) * s.half + col + (kw >> 1)];
#pragma unroll
    for (int i = 0; i < Tr::kRows; ++i) {
      const int kh = t - i * kS;
      if (kh < 0 || kh >= kK) continue;
#pragma unroll
      for (int kw = 0; kw < kK; ++kw) acc[i] = fmaf(w[kh][kw], v[kw], acc[i]);
    }
  }

  T* yp = static_cast<T*>(p.y) + d.y_off + ox * p.y_sw;
  const T* rp = p.r != nullptr ? ptr<T>(p.r) + d.r_off + ox * p.r_sw : nullptr;
  // The epilogue, specialised per activation (one switch per thread, none per output).
  with_activation(p.act, [&](auto kind) {
    constexpr int kAct = decltype(kind)::value;
#pragma unroll
    for (int i = 0; i < Tr::kRows; ++i) {
      const int oy = oy_first + i;
      if (oy >= OH) break;
      float v = acc[i];
      if (rp != nullptr) v += to_float(rp[oy * p.r_sh]);
      yp[oy * p.y_sh] = from_float<T>(activate_k<kAct>(v));
    }
  });
}

}  // namespace conv
}  // namespace gpukern
