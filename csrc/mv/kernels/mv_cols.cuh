#pragma once
// mv_cols_kernel: column-major A and very short rows; see mv_common.cuh for the family.
#include <cstdint>
#include <type_traits>

#include "mv/kernels/mv_common.cuh"

namespace gpukern {
namespace mv {

// Cols kernel block shape. kVecA: a warp covers 32 x V consecutive rows with one 16-byte vector
// per lane (512 contiguous bytes of a column), and the block's 8 warps take interleaved columns,
// combined in warp order through smem. 128 (f32) / 256 (16-bit) rows per block means 64 / 32 row
// blocks for 8192 rows, so few splits of N fill the GPU and the last block's finish reads few
// partials (larger row blocks need many splits, and the finish then waits on several serial L2
// round trips after the last split arrived). Scalar: a thread per row, all 256 threads on every
// column (short rows, N <= 16, keep every thread busy).
template <bool kVecA, int V>
struct ColsShape {
  static constexpr int kRowLanes = kVecA ? kWarpSize : kThreads;
  static constexpr int kColLanes = kThreads / kRowLanes;
  static constexpr int kRpt = kVecA ? V : 1;
  static constexpr int kRowsPerBlock = kRowLanes * kRpt;
  static_assert(kRowsPerBlock <= kThreads, "one finishing thread per row of the block");
};

// Block = kThreads threads: row lane l = threadIdx.x % kRowLanes owns kRpt consecutive rows
// i0 = rb * kRowsPerBlock + l * kRpt; column lane c = threadIdx.x / kRowLanes takes columns
// c, c + kColLanes, ... of each staged chunk. grid.x strides over row blocks, grid.y = splits of
// N (then gridDim.x == row blocks <= kTicketsPerSlot). The split's columns are walked in chunks
// of kColChunk: x[chunk] staged in smem as float. kVecA: s0 == 1, A aligned, s1 multiple of V
// (rows i0..i0+V-1 of a column are one aligned vector); threads whose rows run past M take the
// scalar path. Column lanes' partials are combined in lane order in smem, so every row's sum
// has a fixed order for a given launch shape.
// Barriers: before overwriting the staged chunk (previous one consumed), after staging it, after
// writing the column-lane partials, the two inside last_block_arrives, and at the end of each row
// block.
template <typename T, bool kVecA>
__global__ void __launch_bounds__(kThreads, 4)
    mv_cols_kernel(const T* __restrict__ A, const T* __restrict__ x, T* __restrict__ y,
                   float* __restrict__ ws, MvParams p, int ticket_base) {
  using Shape = ColsShape<kVecA, kVec16<T>>;
  constexpr int RPT = Shape::kRpt;
  constexpr int kColLanes = Shape::kColLanes;
  constexpr int kRowsPerBlock = Shape::kRowsPerBlock;
  __shared__ float xs[kColChunk];
  __shared__ float part[kColLanes][kRowsPerBlock];
  const int rl = threadIdx.x % Shape::kRowLanes;
  const int cl = threadIdx.x / Shape::kRowLanes;
  const int64_t k0 = static_cast<int64_t>(blockIdx.y) * p.split_len;
  const int64_t k1 = k0 + p.split_len < p.N ? k0 + p.split_len : p.N;
  const int64_t nrb = (p.M + kRowsPerBlock - 1) / kRowsPerBlock;
  pdl_wait_then_release();
  for (int64_t rb = blockIdx.x; rb < nrb; rb += gridDim.x) {
    const int64_t i0 = rb * kRowsPerBlock + static_cast<int64_t>(rl) * RPT;
    const bool full_vec = kVecA && i0 + RPT <= p.M;
    float acc[RPT];
#pragma unroll
    for (int r = 0; r < RPT; ++r) acc[r] = 0.f;
    for (int64_t kc = k0; kc < k1; kc += kColChunk) {
      const int n = static_cast<int>(k1 - kc < kColChunk ? k1 - kc : kColChunk);
      __syncthreads();  // the previous chunk has been consumed
      for (int j = threadIdx.x; j < n; j += kThreads) xs[j] = to_float(x[(kc + j) * p.xs]);
      __syncthreads();  // chunk staged
      if (full_vec) {
        const T* a = A + i0 + kc * p.s1;
        int c = cl;
        for (; c + (kColUnroll - 1) * kColLanes < n; c += kColUnroll * kColLanes) {
          Vec<T, RPT> va[kColUnroll];
#pragma unroll
          for (int u = 0; u < kColUnroll; ++u) {
            va[u] = load_vec<T, RPT>(a + static_cast<int64_t>(c + u * kColLanes) * p.s1);
          }
#pragma unroll
          for (int u = 0; u < kColUnroll; ++u) {
            const float xv = xs[c + u * kColLanes];
#pragma unroll
            for (int r = 0; r < RPT; ++r) acc[r] += to_float(va[u].v[r]) * xv;
          }
        }
        for (; c < n; c += kColLanes) {
          const Vec<T, RPT> va = load_vec<T, RPT>(a + static_cast<int64_t>(c) * p.s1);
#pragma unroll
          for (int r = 0; r < RPT; ++r) acc[r] += to_float(va.v[r]) * xs[c];
        }
      } else if (i0 < p.M) {
        const T* a = A + i0 * p.s0 + kc * p.s1;
        for (int c = cl; c < n; c += kColLanes) {
          const float xv = xs[c];
#pragma unroll
          for (int r = 0; r < RPT; ++r) {
            if (i0 + r < p.M) acc[r] += to_float(a[r * p.s0 + c * p.s1]) * xv;
          }
        }
      }
    }
#pragma unroll
    for (int r = 0; r < RPT; ++r) part[cl][rl * RPT + r] = acc[r];
    __syncthreads();  // every column lane's partials in smem
    const bool split = gridDim.y > 1;
    const int t = threadIdx.x;
    const int64_t row = rb * kRowsPerBlock + t;
    if (t < kRowsPerBlock && row < p.M) {
      float v = part[0][t];
#pragma unroll
      for (int c = 1; c < kColLanes; ++c) v += part[c][t];
      if (!split) {
        y[row] = from_float<T>(v);
      } else {
        ws[static_cast<int64_t>(blockIdx.y) * p.M + row] = v;
      }
    }
    if (split) {  // block-uniform: every thread reaches last_block_arrives
      unsigned int* ticket = &g_tickets[ticket_base + rb];
      if (last_block_arrives(ticket, gridDim.y)) {
        // Thread t finishes row t of the block: kFin splits loaded together, added in split
        // order (at most 64 splits: 4 L2 round trips).
        if (t < kRowsPerBlock && row < p.M) {
          constexpr int kFin = 16;
          float v = 0.f;
          const unsigned S = gridDim.y;
          for (unsigned s0 = 0; s0 < S; s0 += kFin) {
            float w[kFin];
#pragma unroll
            for (int u = 0; u < kFin; ++u) {
              w[u] = s0 + u < S ? __ldcg(&ws[static_cast<int64_t>(s0 + u) * p.M + row]) : 0.f;
            }
#pragma unroll
            for (int u = 0; u < kFin; ++u) {
              if (s0 + u < S) v += w[u];
            }
          }
          y[row] = from_float<T>(v);
        }
        if (t == 0) ticket_reset(ticket);
      }
    }
    __syncthreads();  // xs, part (and the ticket's flag) free for the next row block
  }
}

}  // namespace mv
}  // namespace gpukern
