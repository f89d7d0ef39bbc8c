#pragma once
// mv_rows_kernel: row-major A (s1 == 1) or general strides; see mv_common.cuh for the family.
#include <cstdint>
#include <type_traits>

#include "mv/kernels/mv_common.cuh"

namespace gpukern {
namespace mv {

// The kPeel rows kernel's dot product of row a (any alignment, s1 == 1) with x over columns
// [k0, k1), for lane `first` of `step` lanes: the row is walked in the 16-byte vectors of its
// aligned span (from a + k0 rounded down to 16 bytes), kPeelUnroll of them a lane in flight, the
// last batch predicated, so no load waits on another and nothing is left for a separate tail.
// The span's first and last vector, where they reach outside [k0, k1), are read element by
// element with bounds checks (A and x: nothing outside the row or x is touched). x for the
// other vectors: aligned vectors when the row is aligned and x_vec, else element by element
// (x is L1/L2-resident): cheaper than reading the two aligned x vectors around each position and
// shifting them with selects
// (docs/performance.md, mv), and peeling the row's head and tail off before the vectors made the
// compiler spill the peeled values at the 64-register cap.
// Vectors in flight per lane in peel_row_dot: 16-bit types spill with 4 (their edge vectors take
// 8 element loads each way), not with 2.
template <typename T>
constexpr int kPeelUnroll = sizeof(T) == 4 ? kRowUnroll : 2;

template <typename T>
__device__ __forceinline__ float peel_row_dot(const T* __restrict__ a, const T* __restrict__ x,
                                              int64_t k0, int64_t k1, int64_t first,
                                              int64_t step, bool x_vec, const MvParams& p) {
  constexpr int V = kVec16<T>;
  constexpr int U = kPeelUnroll<T>;
  const int m = static_cast<int>((reinterpret_cast<uintptr_t>(a + k0) & 15u) / sizeof(T));
  const Vec<T, V>* av = reinterpret_cast<const Vec<T, V>*>(a + k0 - m);
  const int64_t cbase = k0 - m;  // column of the span's first element
  const int64_t nvp = (m + (k1 - k0) + V - 1) / V;
  const bool head_edge = m != 0;
  const bool tail_edge = (m + (k1 - k0)) % V != 0;
  float acc = 0.f;
  auto loop = [&](auto mode) {
    constexpr bool kVecX = decltype(mode)::value;  // aligned x vectors, else element by element
    for (int64_t q = first; q < nvp; q += U * step) {
      Vec<T, V> va[U], vx[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int64_t j = q + u * step;
        const int64_t c = cbase + j * V;
        const bool edge = (j == 0 && head_edge) || (j == nvp - 1 && tail_edge);
        if (j < nvp && !edge) {
          va[u] = av[j];
          if constexpr (kVecX) {
            vx[u] = load_vec<T, V>(x + c);
          } else {
#pragma unroll
            for (int e = 0; e < V; ++e) vx[u].v[e] = x[(c + e) * p.xs];
          }
        } else {
#pragma unroll
          for (int e = 0; e < V; ++e) {
            const bool in = j < nvp && c + e >= k0 && c + e < k1;
            va[u].v[e] = in ? a[c + e] : from_float<T>(0.f);
            vx[u].v[e] = in ? x[(c + e) * p.xs] : from_float<T>(0.f);
          }
        }
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
#pragma unroll
        for (int e = 0; e < V; ++e) acc += to_float(va[u].v[e]) * to_float(vx[u].v[e]);
      }
    }
  };
  if (x_vec && m == 0) {
    loop(std::true_type{});
  } else {
    loop(std::false_type{});
  }
  return acc;
}

// Block = kWarps warps; a block owns rpb rows (1 or kWarps) with wpr = kWarps / rpb warps per
// row; warp w takes row (w / wpr) and interleaves its lanes with the row's other warps over the
// split's columns. grid.x strides over row groups, grid.y = splits (then gridDim.x == groups <=
// kTicketsPerSlot). kVecA: s1 == 1, split_len a multiple of V, and either A 16-byte aligned with
// s0 a multiple of V, or kPeel: rows of any alignment (peel_row_dot; a separate instantiation:
// its extra live values would slow the aligned kernel at its 64-register cap). x is read with
// vectors too when x_vec (contiguous and aligned), else element by element.
// smem: one partial per warp; barriers: after the warps write it, before it is reused (and, when
// split, the two inside last_block_arrives).
// At least 4 resident blocks per SM (<= 64 registers): the fp32 vector path otherwise took 128
// registers (2 blocks, 16 warps per SM, too few loads in flight), and 4 blocks also make the
// 1024-block grid of an 8192-row matrix two even waves.
template <typename T, bool kVecA, bool kPeel>
__global__ void __launch_bounds__(kThreads, 4)
    mv_rows_kernel(const T* __restrict__ A, const T* __restrict__ x, T* __restrict__ y,
                   float* __restrict__ ws, MvParams p, int rpb, bool x_vec, int ticket_base) {
  constexpr int V = kVec16<T>;
  __shared__ float part[kWarps];
  const int warp = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int wpr = kWarps / rpb;
  const int sub = warp % wpr;
  const int64_t k0 = static_cast<int64_t>(blockIdx.y) * p.split_len;
  const int64_t k1 = k0 + p.split_len < p.N ? k0 + p.split_len : p.N;
  const int64_t groups = (p.M + rpb - 1) / rpb;
  const SumOp op{};
  pdl_wait_then_release();
  for (int64_t g = blockIdx.x; g < groups; g += gridDim.x) {
    const int64_t row = g * rpb + warp / wpr;
    float acc = 0.f;
    if (row < p.M) {
      const T* a = A + row * p.s0;
      const int64_t first = sub * kWarpSize + lane;
      const int64_t step = static_cast<int64_t>(wpr) * kWarpSize;
      int64_t tail0 = k0;
      if constexpr (kVecA && kPeel) {
        acc = peel_row_dot<T>(a, x, k0, k1, first, step, x_vec, p);
        tail0 = k1;
      } else if constexpr (kVecA) {
        const int64_t nv = (k1 - k0) / V;
        const Vec<T, V>* av = reinterpret_cast<const Vec<T, V>*>(a + k0);
        int64_t q = first;
        // The x access mode is fixed per call: one loop each (a branch per vector inside one
        // loop kept the x loads from being issued together).
        auto main_loop = [&](auto mode) {
          constexpr bool kVecX = decltype(mode)::value;
          for (; q + (kRowUnroll - 1) * step < nv; q += kRowUnroll * step) {
            Vec<T, V> va[kRowUnroll];
#pragma unroll
            for (int u = 0; u < kRowUnroll; ++u) va[u] = av[q + u * step];
#pragma unroll
            for (int u = 0; u < kRowUnroll; ++u) {
              const int64_t k = k0 + (q + u * step) * V;
              if constexpr (kVecX) {
                const Vec<T, V> vx = load_vec<T, V>(x + k);
#pragma unroll
                for (int e = 0; e < V; ++e) acc += to_float(va[u].v[e]) * to_float(vx.v[e]);
              } else {
#pragma unroll
                for (int e = 0; e < V; ++e) {
                  acc += to_float(va[u].v[e]) * to_float(x[(k + e) * p.xs]);
                }
              }
            }
          }
        };
        if (x_vec) {
          main_loop(std::true_type{});
        } else {
          main_loop(std::false_type{});
        }
        for (; q < nv; q += step) {
          const Vec<T, V> va = av[q];
          const int64_t k = k0 + q * V;
#pragma unroll
          for (int e = 0; e < V; ++e) acc += to_float(va.v[e]) * to_float(x[(k + e) * p.xs]);
        }
        tail0 = k0 + nv * V;
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
        }
      }
    }
    if (split) {  // block-uniform: every thread reaches last_block_arrives
      unsigned int* ticket = &g_tickets[ticket_base + g];
      if (last_block_arrives(ticket, gridDim.y)) {
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
        if (threadIdx.x == 0) ticket_reset(ticket);
      }
    }
    __syncthreads();  // part (and the ticket's flag) free for the next group
  }
}

}  // namespace mv
}  // namespace gpukern
