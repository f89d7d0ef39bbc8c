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

// rows_short: row-major A, many rows (chosen for rows of at most 1 KB, and fp32 rows up to 32 KB
// with M >= 4096: lanes then step along the row, L = 32). Lanes form groups of L (a power
// of two, 1..32) per row, RW = 32 / L rows side by side in a warp; each lane keeps kShortRows
// rows of its warp tile (rows tile * RW * kShortRows + j * RW + group, j < kShortRows) and
// loads kShortUnroll of each row's 16-byte vectors (pos, pos + L, ...) per step, so
// kShortRows * kShortUnroll loads of A are in flight per lane and no barrier or shared memory is
// used: each row's lanes add their partials with an xor butterfly of offsets L/2..1 (a fixed
// order: the group's lane 0 writes y). Warps stride over the tiles (grid.x * kWarps warps).
// The k loop is predicated: vectors past the row's whole vectors, and rows past M, load zeros
// (a row past M reads nothing; its sum is never written). Columns past the whole vectors
// (N % V of them) are read element by element.
// Host guarantees: s1 == 1, A 16-byte aligned, s0 % V == 0 (every row starts aligned), x
// contiguous and 16-byte aligned (read as vectors, L1-resident across the rows).
constexpr int kShortRows = 4;    // rows_short: rows per lane
constexpr int kShortUnroll = 2;  // rows_short: vectors of each row per lane per step
// rows_short's resident blocks per SM (launch bounds, and the grid of one wave): 4 (<= 64
// registers) for fp32; 2 for 16-bit types, whose conversions spilled at 64 registers.
template <typename T>
constexpr int kShortRowsBlocks = sizeof(T) == 4 ? 4 : 2;

template <typename T, int L>
__global__ void __launch_bounds__(kThreads, kShortRowsBlocks<T>)
    mv_rows_short_kernel(const T* __restrict__ A, const T* __restrict__ x, T* __restrict__ y,
                         MvParams p) {
  constexpr int V = kVec16<T>;
  constexpr int RW = kWarpSize / L;
  constexpr int R = kShortRows;
  constexpr int KU = kShortUnroll;
  static_assert(L >= 1 && L <= kWarpSize && kWarpSize % L == 0, "L divides the warp");
  const int lane = threadIdx.x % kWarpSize;
  const int grp = lane / L;
  const int pos = lane % L;
  const int64_t nv = p.N / V;  // whole vectors of a row
  const int64_t rows_per_tile = static_cast<int64_t>(RW) * R;
  const int64_t tiles = (p.M + rows_per_tile - 1) / rows_per_tile;
  const int64_t wstep = static_cast<int64_t>(gridDim.x) * kWarps;
  Vec<T, V> zero;
#pragma unroll
  for (int e = 0; e < V; ++e) zero.v[e] = from_float<T>(0.f);
  pdl_wait_then_release();
  // Warp-uniform loop: every lane of the warp runs the same tiles (the shuffles need all 32).
  for (int64_t tile = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / kWarpSize;
       tile < tiles; tile += wstep) {
    const int64_t row0 = tile * rows_per_tile + grp;
    float acc[R];
    bool ok[R];
#pragma unroll
    for (int j = 0; j < R; ++j) {
      acc[j] = 0.f;
      ok[j] = row0 + static_cast<int64_t>(j) * RW < p.M;
    }
    const T* a0 = A + row0 * p.s0;  // row j at a0 + j * RW * s0 (only formed when ok[j])
#pragma unroll 1
    for (int64_t k = pos; k < nv; k += static_cast<int64_t>(L) * KU) {
      Vec<T, V> xv[KU];
      Vec<T, V> av[R][KU];
#pragma unroll
      for (int u = 0; u < KU; ++u) {
        const int64_t kk = k + static_cast<int64_t>(u) * L;
        const bool in = kk < nv;
        xv[u] = in ? load_vec<T, V>(x + kk * V) : zero;
#pragma unroll
        for (int j = 0; j < R; ++j) {
          av[j][u] = in && ok[j]
                         ? load_vec<T, V>(a0 + static_cast<int64_t>(j) * RW * p.s0 + kk * V)
                         : zero;
        }
      }
#pragma unroll
      for (int u = 0; u < KU; ++u) {
#pragma unroll
        for (int j = 0; j < R; ++j) {
#pragma unroll
          for (int e = 0; e < V; ++e) {
            acc[j] += to_float(av[j][u].v[e]) * to_float(xv[u].v[e]);
          }
        }
      }
    }
    // Columns past the whole vectors (N % V): element by element.
    for (int64_t c = nv * V + pos; c < p.N; c += L) {
      const float xc = to_float(x[c]);
#pragma unroll
      for (int j = 0; j < R; ++j) {
        if (ok[j]) acc[j] += to_float(a0[static_cast<int64_t>(j) * RW * p.s0 + c]) * xc;
      }
    }
    // The group's lanes are L consecutive lanes starting at a multiple of L: xor offsets below L
    // stay inside the group.
#pragma unroll
    for (int off = L / 2; off > 0; off >>= 1) {
#pragma unroll
      for (int j = 0; j < R; ++j) acc[j] += __shfl_xor_sync(0xffffffffu, acc[j], off);
    }
    if (pos == 0) {
#pragma unroll
      for (int j = 0; j < R; ++j) {
        if (ok[j]) y[row0 + static_cast<int64_t>(j) * RW] = from_float<T>(acc[j]);
      }
    }
  }
}

}  // namespace mv
}  // namespace gpukern
