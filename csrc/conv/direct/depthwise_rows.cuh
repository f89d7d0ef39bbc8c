#pragma once
// depthwise_rows: depthwise / single-channel NCHW conv2d by row strips: groups == C == O (C == 1
// is a single-channel image), stride 1, dilation 1, square kK x kK filter (kK = 3/5/7) with
// column padding pw and kK-1-pw both <= kHalo. Built for bandwidth: no block barriers and no
// one-tile-per-block latency; each warp streams down a strip of rows with kStages input rows in
// flight through cp.async, every input element read once.
//
// Contract (conv2d_depthwise_rows_kernel<T, kK>; details above the kernel):
//   grid   x = groups of kWarps warp units (plane group, row chunk, column strip) (RowsShape).
//   block  kWarps independent warps; a lane owns kItems consecutive output columns of the
//          chunk's rows, seg_lanes lanes per plane (several narrow planes per warp).
//   shared per warp a ring of kStages slots, each one input row of the warp's segments plus
//          their kHalo-column halos.
//   barriers none across warps: the ring is private to its warp (__syncwarp after the copies
//          land, and after the reads so that the refill never overwrites a row still read).
#include <cstdint>
#include <type_traits>

#include "conv/direct/common2d.cuh"
#include "device/async_mma.cuh"
#include "device/vec.cuh"

namespace gpukern {
namespace conv {

struct RowsTraits {
  static constexpr int kWarps = 4;  // independent warps per block (a block only groups them)
  static constexpr int kNThreads = 32 * kWarps;
  static constexpr int kItems = 4;   // consecutive output columns per lane (one 16 B fp32 vector)
  static constexpr int kHalo = 4;    // staged input columns on each side of a segment
  static constexpr int kStages = 4;  // input rows in flight per warp (cp.async ring)
  // Shared elements of T per ring slot (one input row of every segment of a warp).
  static constexpr int seg_pitch(int seg_lanes) { return seg_lanes * kItems + 2 * kHalo; }
  static constexpr int slot(int seg_lanes) { return (32 / seg_lanes) * seg_pitch(seg_lanes); }
  // Blocks per SM asked of ptxas: the register cap that holds kK*kK taps + kK*kItems partial
  // sums without spills (6 / 5 blocks for 3x3 / 5x5, i.e. <= 80 / 96 registers, spilled 44 / 88
  // bytes: kept at 4 / 3).
  static constexpr int min_blocks(int kK) { return kK <= 3 ? 4 : (kK <= 5 ? 3 : 2); }
  static_assert(kHalo == kItems, "halo vectors are staged like the lane's own vector");
  static_assert(kItems * 4 <= 16, "one fp32 vector per lane");
};

// Work decomposition of the rows kernel (host: depthwise_rows.cu, plan_rows()). A warp's unit is
// (plane group, row chunk, column strip): seg_lanes lanes (a power of two) cover one plane's
// strip of seg_lanes * kItems output columns, 32 / seg_lanes planes side by side in one warp when
// a row is narrow (seg_lanes < 32 only when one strip covers the whole row).
struct RowsShape {
  int seg_lanes;
  int64_t strips, chunks, rows, units;  // rows: output rows per chunk; units = warps of work
  bool x_vec, y_vec;  // 4-element vector staging / stores allowed (unit stride, aligned rows)
};

// Stages input columns [col, col + kItems) of one row (xr = the row's first element; zeros when
// !row_in or outside [0, W)) at dst: one asynchronous vector copy when allowed and the vector lies
// inside the row (or the whole row is padding: zero fill), else scalar loads through the column
// stride. Scalars by value: a reference to the kernel's params would force a local copy of them.
template <typename T>
__device__ __forceinline__ void rows_stage_vec(T* dst, const T* xr, int col, int W, int64_t x_sw,
                                               bool row_in, bool vec_ok) {
  constexpr int I = RowsTraits::kItems;
  if (vec_ok && (!row_in || (col >= 0 && col + I <= W))) {
    cp_async_zfill<I * sizeof(T)>(dst, row_in ? xr + col : xr, row_in);
  } else {
#pragma unroll
    for (int e = 0; e < I; ++e)
      dst[e] = (row_in && col + e >= 0 && col + e < W) ? xr[(col + e) * x_sw]
                                                       : from_float<T>(0.f);
  }
}

// One ring slot's row for a lane: its own vector at column o0, plus the halo vectors on the
// segment's edge lanes (edge = -1: none, else their first column); one commit group per row,
// also when empty (wait_group counts rows).
template <typename T>
__device__ __forceinline__ void rows_stage_row(T* dst, T* dst_edge, const T* xr, int o0, int edge,
                                               int W, int64_t x_sw, bool row_in, bool vec_ok) {
  rows_stage_vec<T>(dst, xr, o0, W, x_sw, row_in, vec_ok);
  if (edge != -1) rows_stage_vec<T>(dst_edge, xr, edge, W, x_sw, row_in, vec_ok);
  cp_async_commit();
}

// Grid: x = groups of kWarps warp units (unit = (plane group * chunks + chunk) * strips + strip,
// so neighbouring warps take neighbouring strips of the same rows). Warp: seg_lanes lanes per
// plane; lane g of a segment owns output columns o0 = strip * seg_lanes * kItems + g * kItems
// .. o0 + kItems - 1 of the chunk's rows.
// Shared memory: per warp a ring of kStages slots; a slot holds, per segment, input columns
// [c_seg - kHalo, c_seg + seg_lanes*kItems + kHalo) of one input row (lane g stages its own
// vector, lanes 0 and seg_lanes-1 also the halo vectors). Only __syncwarp: the ring is private
// to the warp (cp.async.wait_group makes a lane's copies land, the __syncwarp after it shares
// them; the __syncwarp after the reads keeps the refill from overwriting a row still read).
// Rows: input row t (ih = r0 - pad_h + t) is read once into registers (kItems + kK - 1 values
// from shared memory, at the lane's columns - pw) and scattered into the kK partial output rows
// that use it (acc[(t - kh) % kK]; the slot is compile-time after unrolling the step loop by
// kK; taps of rows outside the chunk are skipped, warp-uniformly); output row m = t - kK + 1 is
// complete after step t, stored, and its slot reset to the bias. Row t + kStages is requested
// right after row t is read, so kStages rows per warp are in flight while the FMAs run.
template <typename T, int kK>
__global__ void __launch_bounds__(RowsTraits::kNThreads, RowsTraits::min_blocks(kK))
    conv2d_depthwise_rows_kernel(const ConvProblem p, RowsShape s) {
  using Tr = RowsTraits;
  constexpr int I = Tr::kItems;
  constexpr int D = Tr::kStages;
  extern __shared__ float4 smem4[];  // float4: 16-byte aligned slots for the vector copies
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int S = s.seg_lanes;
  const int seg = lane / S;
  const int g = lane % S;
  const int pitch = Tr::seg_pitch(S);
  const int slot = Tr::slot(S);
  const int64_t unit = static_cast<int64_t>(blockIdx.x) * Tr::kWarps + warp;
  if (unit >= s.units) return;  // the whole warp: no block barriers in this kernel
  const int64_t strip = unit % s.strips;
  const int64_t chunk = (unit / s.strips) % s.chunks;
  const int64_t plane = (unit / s.strips / s.chunks) * (32 / S) + seg;
  const bool active = plane < p.N * p.C;
  const int64_t n = active ? plane / p.C : 0;
  const int64_t c = active ? plane % p.C : 0;
  const T* xc = ptr<T>(p.x) + n * p.x_sn + c * p.x_sc;
  const T* wc = ptr<T>(p.w) + c * p.w_so;
  // Columns fit int (one image row); row offsets stay int64.
  const int c_seg = static_cast<int>(strip) * S * I;
  const int o0 = c_seg + g * I;
  const int64_t r0 = chunk * s.rows;
  const int nrows = static_cast<int>(min(s.rows, p.OH - r0));
  const int nsteps = nrows + kK - 1;
  const int pw = static_cast<int>(p.pad_w);
  const int W = static_cast<int>(p.W), H = static_cast<int>(p.H), OW = static_cast<int>(p.OW);
  const int64_t x_sh = p.x_sh, x_sw = p.x_sw;
  const bool x_vec = s.x_vec;
  T* ring = reinterpret_cast<T*>(smem4) + warp * D * slot + seg * pitch;
  T* own = ring + Tr::kHalo + g * I;  // the lane's vector in slot 0
  // Edge lanes also stage a halo vector: lane 0 the one left of the strip, lane S-1 the one right
  // of it (S == 1: one lane, both; the right one then follows in a second call below).
  const int edge = g == 0 ? c_seg - Tr::kHalo : (g == S - 1 ? c_seg + S * I : -1);
  T* edge_dst = g == 0 ? ring : ring + Tr::kHalo + S * I;
  const bool both_edges = S == 1;
  // Staging cursor: the next input row to request (its index in the image and first element).
  int ih_next = static_cast<int>(r0 - p.pad_h);
  const T* x_next = xc + (r0 - p.pad_h) * x_sh;
  int t_next = 0;
  auto stage_next = [&](int rs) {
    const bool in = active && t_next < nsteps && ih_next >= 0 && ih_next < H;
    const T* xr = in ? x_next : xc;
    T* base = ring + rs * slot;
    if (both_edges) rows_stage_vec<T>(base + Tr::kHalo + I, xr, c_seg + I, W, x_sw, in, x_vec);
    rows_stage_row<T>(own + rs * slot, edge_dst + rs * slot, xr, o0, edge, W, x_sw, in, x_vec);
    ++t_next;
    ++ih_next;
    x_next += x_sh;
  };

  float wr[kK][kK];
#pragma unroll
  for (int kh = 0; kh < kK; ++kh)
#pragma unroll
    for (int kw = 0; kw < kK; ++kw) wr[kh][kw] = to_float(wc[kh * p.w_sh + kw * p.w_sw]);
  const float bias = (p.b != nullptr && active) ? to_float(ptr<T>(p.b)[c * p.b_s]) : 0.f;
  float acc[kK][I];
#pragma unroll
  for (int k = 0; k < kK; ++k)
#pragma unroll
    for (int j = 0; j < I; ++j) acc[k][j] = bias;

  for (int t = 0; t < D; ++t) stage_next(t);
  const int64_t y_sh = p.y_sh, y_sw = p.y_sw;
  const bool y_vec = s.y_vec;
  T* yrow = static_cast<T*>(p.y) + n * p.y_sn + c * p.y_so + r0 * y_sh;  // output row r0
  int rs = 0;  // ring slot of row t
#pragma unroll 1
  for (int t0 = 0; t0 < nsteps; t0 += kK) {
#pragma unroll
    for (int u = 0; u < kK; ++u) {
      const int t = t0 + u;
      if (t >= nsteps) break;
      cp_async_wait<D - 1>();
      __syncwarp();
      const T* src = ring + rs * slot + Tr::kHalo + g * I - pw;
      float win[I + kK - 1];
#pragma unroll
      for (int i = 0; i < I + kK - 1; ++i) win[i] = to_float(src[i]);
      __syncwarp();
      stage_next(rs);
      rs = rs + 1 == D ? 0 : rs + 1;
#pragma unroll
      for (int kh = 0; kh < kK; ++kh) {
        if (t - kh < 0 || t - kh >= nrows) continue;  // warp-uniform: rows outside the chunk
        const int sl = ((u - kh) % kK + kK) % kK;
#pragma unroll
        for (int kw = 0; kw < kK; ++kw)
#pragma unroll
          for (int j = 0; j < I; ++j) acc[sl][j] += wr[kh][kw] * win[j + kw];
      }
      const int m = t - (kK - 1);
      const int done = (u + 1) % kK;
      if (m >= 0) {
        if (active) {
          store_cols<T, I>(yrow + m * y_sh, acc[done], o0, OW, y_sw, y_vec);
        }
#pragma unroll
        for (int j = 0; j < I; ++j) acc[done][j] = bias;
      }
    }
  }
  cp_async_wait<0>();  // no copy may still target shared memory when the warp exits
}

}  // namespace conv
}  // namespace gpukern
