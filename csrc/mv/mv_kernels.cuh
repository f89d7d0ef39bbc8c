#pragma once
// mv kernels (torch-free). y[i] = sum_j A[i, j] * x[j], accumulated in float32.
//   mv_rows_kernel  row-major A (s1 == 1) or general strides: warps along a row (coalesced along
//                   j), 16-byte loads when the layout allows, warp shuffles.
//   mv_cols_kernel  column-major A (s0 == 1, A.t() of a contiguous matrix, read in place) and
//                   very short rows: threads across rows (coalesced along i), the x chunk staged
//                   in shared memory.
// Both can split N across gridDim.y when there are too few rows to fill the GPU: the splits write
// float32 partials to a workspace and the last block of a row group to arrive (atomic ticket)
// adds them in split order, so the result is deterministic and no float atomics touch y.
#include <cstdint>

#include "common/reduce.cuh"
#include "common/tickets.cuh"
#include "common/vec.cuh"
#include "mv/mv.h"

namespace gpukern {
namespace mvk {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kWarpSize;
constexpr int kRowUnroll = 4;   // rows kernel: 16-byte vectors in flight per lane
constexpr int kColChunk = 4 * kThreads;  // cols kernel: x elements staged per round
constexpr int kColUnroll = 8;  // cols kernel: 16-byte loads of A in flight per thread

// Arrival counters for the last-block finish (scheme and slots: common/tickets.cuh).
__device__ unsigned int g_tickets[kTicketSlots * kTicketsPerSlot];

// Block = kWarps warps; a block owns rpb rows (1 or kWarps) with wpr = kWarps / rpb warps per
// row; warp w takes row (w / wpr) and interleaves its lanes with the row's other warps over the
// split's columns. grid.x strides over row groups, grid.y = splits (then gridDim.x == groups <=
// kTicketsPerSlot). kVecA: s1 == 1, split_len a multiple of V, and either A 16-byte aligned with
// s0 a multiple of V, or kPeel: rows of any alignment, each row's h < V elements before its first
// 16-byte boundary taken by lanes 0..h-1 first (a separate instantiation: the extra live values
// cost the aligned kernel 25% at its 64-register cap). x is read with vectors too when x_vec
// (contiguous and aligned) and the row's vectors start at a column that is a multiple of V,
// else element by element.
// smem: one partial per warp; barriers: after the warps write it, before it is reused.
// At least 4 resident blocks per SM (<= 64 registers): the fp32 vector path otherwise took 128
// registers (2 blocks, 16 warps per SM, too few loads in flight), and 4 blocks also make the
// 1024-block grid of an 8192-row matrix two even waves.
template <typename T, bool kVecA, bool kPeel>
__global__ void __launch_bounds__(kThreads, 4)
    mv_rows_kernel(const T* __restrict__ A, const T* __restrict__ x, T* __restrict__ y,
                   float* __restrict__ ws, MvParams p, int rpb, bool x_vec, int ticket_base) {
  constexpr int V = kVec16<T>;
  __shared__ float part[kWarps];
  __shared__ bool s_last;
  const int warp = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int wpr = kWarps / rpb;
  const int sub = warp % wpr;
  const int64_t k0 = static_cast<int64_t>(blockIdx.y) * p.split_len;
  const int64_t k1 = k0 + p.split_len < p.N ? k0 + p.split_len : p.N;
  const int64_t groups = (p.M + rpb - 1) / rpb;
  const SumOp op{};
  for (int64_t g = blockIdx.x; g < groups; g += gridDim.x) {
    const int64_t row = g * rpb + warp / wpr;
    float acc = 0.f;
    if (row < p.M) {
      const T* a = A + row * p.s0;
      const int64_t first = sub * kWarpSize + lane;
      const int64_t step = static_cast<int64_t>(wpr) * kWarpSize;
      int64_t tail0 = k0;
      if (kVecA) {
        int64_t kv = k0;
        bool xv = x_vec;
        // kPeel: the head element (lanes < h) and the tail element (lanes < the < V elements
        // after the last whole vector) are loaded before the vectors and added after them, so
        // neither costs a round trip of its own.
        float edge_a[2] = {0.f, 0.f}, edge_x[2] = {0.f, 0.f};
        if constexpr (kPeel) {
          int64_t h = static_cast<int64_t>(
              ((16u - (static_cast<unsigned>(reinterpret_cast<uintptr_t>(a + k0)) & 15u)) & 15u) /
              sizeof(T));
          if (h > k1 - k0) h = k1 - k0;
          kv = k0 + h;
          xv = x_vec && kv % V == 0;
          const int64_t t0 = kv + (k1 - kv) / V * V;  // first element after the whole vectors
          if (first < h) {
            edge_a[0] = to_float(a[k0 + first]);
            edge_x[0] = to_float(x[(k0 + first) * p.xs]);
          }
          if (t0 + first < k1) {
            edge_a[1] = to_float(a[t0 + first]);
            edge_x[1] = to_float(x[(t0 + first) * p.xs]);
          }
        }
        const int64_t nv = (k1 - kv) / V;
        const Vec<T, V>* av = reinterpret_cast<const Vec<T, V>*>(a + kv);
        int64_t q = first;
        for (; q + (kRowUnroll - 1) * step < nv; q += kRowUnroll * step) {
          Vec<T, V> va[kRowUnroll];
#pragma unroll
          for (int u = 0; u < kRowUnroll; ++u) va[u] = av[q + u * step];
#pragma unroll
          for (int u = 0; u < kRowUnroll; ++u) {
            const int64_t k = kv + (q + u * step) * V;
            if (xv) {
              const Vec<T, V> vx = load_vec<T, V>(x + k);
#pragma unroll
              for (int e = 0; e < V; ++e) acc += to_float(va[u].v[e]) * to_float(vx.v[e]);
            } else {
#pragma unroll
              for (int e = 0; e < V; ++e) acc += to_float(va[u].v[e]) * to_float(x[(k + e) * p.xs]);
            }
          }
        }
        if constexpr (kPeel && sizeof(T) == 4) {
          // The thread's last (< kRowUnroll) vectors as one predicated batch of loads (fp32
          // only: the 16-bit instantiations spilled with it, at their 64-register cap).
          Vec<T, V> va[kRowUnroll - 1];
#pragma unroll
          for (int u = 0; u < kRowUnroll - 1; ++u) {
            if (q + u * step < nv) va[u] = av[q + u * step];
          }
#pragma unroll
          for (int u = 0; u < kRowUnroll - 1; ++u) {
            if (q + u * step < nv) {
              const int64_t k = kv + (q + u * step) * V;
#pragma unroll
              for (int e = 0; e < V; ++e) {
                acc += to_float(va[u].v[e]) * to_float(x[(k + e) * p.xs]);
              }
            }
          }
        } else {
          for (; q < nv; q += step) {
            const Vec<T, V> va = av[q];
            const int64_t k = kv + q * V;
#pragma unroll
            for (int e = 0; e < V; ++e) acc += to_float(va.v[e]) * to_float(x[(k + e) * p.xs]);
          }
        }
        tail0 = kv + nv * V;
        if constexpr (kPeel) {
          acc += edge_a[0] * edge_x[0];
          acc += edge_a[1] * edge_x[1];
          tail0 = k1;  // the tail element is done
        }
      }
      for (int64_t k = tail0 + first; k < k1; k += step) {
        acc += to_float(a[k * p.s1]) * to_float(x[k * p.xs]);
      }
    }
    acc = warp_reduce(acc, op);
    if (lane == 0) part[warp] = acc;
    __syncthreads();  // every warp's partial in smem
    const bool split = gridDim.y > 1;
    if (threadIdx.x < rpb) {
      const int64_t r = g * rpb + threadIdx.x;
      if (r < p.M) {
        float v = 0.f;
        for (int j = 0; j < wpr; ++j) v += part[threadIdx.x * wpr + j];
        if (!split) {
          y[r] = from_float<T>(v);
        } else {
          ws[static_cast<int64_t>(blockIdx.y) * p.M + r] = v;
          __threadfence();  // partial visible device-wide before the ticket
        }
      }
    }
    if (split) {
      __syncthreads();  // partials written and fenced
      unsigned int* ticket = &g_tickets[ticket_base + g];
      if (threadIdx.x == 0) s_last = atomicAdd(ticket, 1u) == gridDim.y - 1;
      __syncthreads();  // s_last visible
      if (s_last) {
        __threadfence();
        // Warp w finishes row w of the group: lanes take splits lane, lane + 32, ... in order,
        // then the fixed-order butterfly.
        if (warp < rpb) {
          const int64_t r = g * rpb + warp;
          float v = 0.f;
          if (r < p.M) {
            for (int64_t s = lane; s < gridDim.y; s += kWarpSize) v += __ldcg(&ws[s * p.M + r]);
          }
          v = warp_reduce(v, op);
          if (lane == 0 && r < p.M) y[r] = from_float<T>(v);
        }
        if (threadIdx.x == 0) *ticket = 0u;
      }
    }
    __syncthreads();  // part and s_last free for the next group
  }
}

// Cols kernel block shape. kVecA: a warp covers 32 x V consecutive rows with one 16-byte vector
// per lane (512 contiguous bytes of a column), and the block's 8 warps take interleaved columns,
// combined in warp order through smem. 128 (f32) / 256 (16-bit) rows per block means 64 / 32 row
// blocks for 8192 rows, so few splits of N fill the GPU and the last block's finish reads few
// partials (with 1024 rows per block it was 64 splits: 256 partials per thread, ~8 serial L2
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
// writing the column-lane partials, around the ticket, and at the end of each row block.
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
  __shared__ bool s_last;
  const int rl = threadIdx.x % Shape::kRowLanes;
  const int cl = threadIdx.x / Shape::kRowLanes;
  const int64_t k0 = static_cast<int64_t>(blockIdx.y) * p.split_len;
  const int64_t k1 = k0 + p.split_len < p.N ? k0 + p.split_len : p.N;
  const int64_t nrb = (p.M + kRowsPerBlock - 1) / kRowsPerBlock;
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
        __threadfence();  // partial visible device-wide before the ticket
      }
    }
    if (split) {
      __syncthreads();  // every thread has written and fenced
      unsigned int* ticket = &g_tickets[ticket_base + rb];
      if (t == 0) s_last = atomicAdd(ticket, 1u) == gridDim.y - 1;
      __syncthreads();  // s_last visible
      if (s_last) {
        __threadfence();
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
        if (t == 0) *ticket = 0u;
      }
    }
    __syncthreads();  // xs, part and s_last free for the next row block
  }
}

}  // namespace mvk
}  // namespace gpukern
