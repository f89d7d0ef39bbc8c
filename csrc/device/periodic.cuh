#pragma once
// Periodic column sums (torch-free): y[m] = combine over n of f(a[n * M + m], n), m < M, over a
// contiguous 16-byte aligned [N, M] array with a short period M (2..kMaxPeriod). Two users:
//   reduce "periodic"  x [N, M] reduced over dim 0 (sum / mean / amax / amin): f = the element;
//   mv "cols_periodic" y = A @ v with A = At.t(), At [N, M] contiguous: f = a * v[n].
// The other kernels of both families work per output column, and with M outputs of 2-12 bytes a
// storage row they read it element by element (mv A.t bf16 6 x 2^24: 0.55x cuBLAS) or keep few
// SMs busy (reduce [1536, 6] over dim 0). Here the array is read as one flat stream of 16-byte
// vectors, whatever M, and each lane keeps the row of each element of its vector fixed:
//
// Lanes: V elements a vector; P = M / gcd(M, V) lanes make one cycle of the vector's start
// modulo M (lane l's vector starts at l * V, so its phase is l * V mod M); a warp uses
// L = P * 2^a <= 32 lanes, so that one warp-wide chunk of L * V elements is a whole number of
// periods. Every chunk then starts at a multiple of M, and element k of lane l is always in row
// (l * V + k) mod M: one float accumulator per vector element, no index arithmetic per element
// (mv: the vector's index n of element k is chunk * (L * V / M) + (l * V + k) / M, the second
// term fixed per lane). Global warp w takes chunks w, w + W, ... (W warps in the grid), U chunks
// of loads in flight per round.
// Combine (fixed order for a given launch shape, so results are bitwise reproducible):
//   lanes of one phase class (l, l + P, ..., l + L - P) by a shuffle-down tree of stride P; then
//   lanes l < P write their V partials to shared memory; thread m < M combines row m's entries
//   (positions j = m, m + M, ... < P * V of each warp, warps in order); with one block it stores
//   y[m]; otherwise it writes the block's partial to ws[block * M + m] and the last block to
//   arrive (acquire-release ticket) combines the blocks' partials: thread t takes row t mod M and
//   blocks b = t / M, t / M + Q, ... (Q = threads / M), then thread m folds its Q subtotals in
//   order.
#include <cstdint>

#include "device/block_reduce.cuh"
#include "device/pdl.cuh"
#include "device/tickets.cuh"
#include "device/vec.cuh"

namespace gpukern {
namespace periodic {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kWarpSize;
constexpr int kUnroll = 4;      // chunks a lane has in flight per round
constexpr int kMaxPeriod = 32;  // M: at most one warp of rows, one finishing thread per row

__host__ __device__ constexpr int gcd_int(int a, int b) {
  while (b != 0) {
    const int t = a % b;
    a = b;
    b = t;
  }
  return a;
}

// P (lanes per phase cycle) and L (active lanes a warp) for period M and V elements a vector.
struct LaneShape {
  int P, L;
};
__host__ __device__ inline LaneShape lane_shape(int M, int V) {
  const int P = M / gcd_int(M, V);
  int L = P;
  while (2 * L <= kWarpSize) L *= 2;
  return {P, L};
}

struct Params {
  int64_t n;        // elements, N * M
  int64_t nchunks;  // ceil(n / (L * V))
  int64_t xs;       // mv: the vector's element stride
  int M, P, L;
};

// The host's Params for n elements of period M, V elements a vector.
inline Params make_params(int64_t n, int M, int V, int64_t xs = 0) {
  const LaneShape s = lane_shape(M, V);
  Params p;
  p.n = n;
  p.M = M;
  p.P = s.P;
  p.L = s.L;
  p.xs = xs;
  const int64_t lv = int64_t{s.L} * V;
  p.nchunks = (n + lv - 1) / lv;
  return p;
}

// Blocks of a periodic launch: every warp at least one round of U chunks, at most `wave`
// (one resident wave of the kernel).
inline int64_t grid_blocks(const Params& p, int64_t wave) {
  const int64_t per_block = int64_t{kWarps} * kUnroll;
  const int64_t want = (p.nchunks + per_block - 1) / per_block;
  return want < 1 ? 1 : (want < wave ? want : wave);
}

// The kernel body. T the element type; Op the combine (SumOp, MaxOp, MinOp over floats); kDot:
// f = a * v[n] (Op is then SumOp). Store(m, value) writes output m. ws: gridDim.x * M floats
// when gridDim.x > 1; ticket: this launch's arrival counter (0 on entry, reset on exit).
template <typename T, typename Op, bool kDot, typename Store>
__device__ __forceinline__ void body(const T* __restrict__ a, const T* __restrict__ v,
                                     const Params& p, float* __restrict__ ws,
                                     unsigned int* ticket, Store store) {
  constexpr int V = kVec16<T>;
  constexpr int U = kUnroll;
  __shared__ float part[kWarps][kWarpSize * V];
  __shared__ float fin[kThreads];
  pdl_wait_then_release();
  const Op op{};
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int64_t lv = int64_t{p.L} * V;
  const int64_t rows_per_chunk = lv / p.M;  // storage rows n a chunk spans (mv)
  int nk[kDot ? V : 1];  // mv: element k's storage row within the chunk
  if constexpr (kDot) {
#pragma unroll
    for (int k = 0; k < V; ++k) nk[k] = (lane * V + k) / p.M;
  }
  float acc[V];
#pragma unroll
  for (int k = 0; k < V; ++k) acc[k] = Op::identity();
  const int64_t nw = static_cast<int64_t>(gridDim.x) * kWarps;
  // Element k of vector w of chunk c into acc[k] (x values xv, mv).
  auto fold = [&](const Vec<T, V>& w, const float* xv, int cnt) {
#pragma unroll
    for (int k = 0; k < V; ++k) {
      if (k < cnt) {
        if constexpr (kDot) {
          acc[k] = fmaf(to_float(w.v[k]), xv[k], acc[k]);
        } else {
          acc[k] = op(acc[k], to_float(w.v[k]));
        }
      }
    }
  };
  // mv: the x values of this lane's elements of chunk c.
  auto load_x = [&](int64_t c, float* xv) {
    const int64_t nb = c * rows_per_chunk;
#pragma unroll
    for (int k = 0; k < V; ++k) xv[k] = to_float(v[(nb + nk[k]) * p.xs]);
  };
  if (lane < p.L) {
    const int64_t e_lane = int64_t{lane} * V;
    const int64_t nfull = p.n / lv;  // chunks wholly inside the array
    int64_t c0 = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
    // Rounds of U whole chunks: U 16-byte loads (and mv's x values) in flight, then the folds.
    for (; c0 + (U - 1) * nw < nfull; c0 += nw * U) {
      Vec<T, V> w[U];
      float xv[kDot ? U : 1][V];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        w[u] = load_vec<T, V>(a + (c0 + u * nw) * lv + e_lane);
        if constexpr (kDot) load_x(c0 + u * nw, xv[u]);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) fold(w[u], xv[kDot ? u : 0], V);
    }
    // The rest one chunk at a time; the last chunk may end inside a vector or before the lane.
    for (; c0 < p.nchunks; c0 += nw) {
      const int64_t e0 = c0 * lv + e_lane;
      const int64_t left = p.n - e0;
      const int cnt = left >= V ? V : (left > 0 ? static_cast<int>(left) : 0);
      Vec<T, V> w;
      float xv[V];
      if (cnt == V) {
        w = load_vec<T, V>(a + e0);
      } else {
#pragma unroll
        for (int k = 0; k < V; ++k) {
          if (k < cnt) w.v[k] = a[e0 + k];  // the others are never read
        }
      }
      if constexpr (kDot) {
        const int64_t nb = c0 * rows_per_chunk;
#pragma unroll
        for (int k = 0; k < V; ++k) xv[k] = k < cnt ? to_float(v[(nb + nk[k]) * p.xs]) : 0.f;
      }
      fold(w, xv, cnt);
    }
  }
  // Lanes of one phase class: l, l + P, ..., l + L - P (L / P a power of two).
  for (int s = (p.L / p.P) / 2; s >= 1; s /= 2) {
#pragma unroll
    for (int k = 0; k < V; ++k) {
      acc[k] = op(acc[k], __shfl_down_sync(0xffffffffu, acc[k], s * p.P));
    }
  }
  if (lane < p.P) {
#pragma unroll
    for (int k = 0; k < V; ++k) part[warp][lane * V + k] = acc[k];
  }
  __syncthreads();
  const int t = threadIdx.x;
  float r = Op::identity();
  if (t < p.M) {
    const int pv = p.P * V;
    for (int w = 0; w < kWarps; ++w) {
      for (int j = t; j < pv; j += p.M) r = op(r, part[w][j]);
    }
  }
  if (gridDim.x == 1) {
    if (t < p.M) store(t, r);
    return;
  }
  if (t < p.M) ws[static_cast<int64_t>(blockIdx.x) * p.M + t] = r;
  if (!last_block_arrives(ticket, gridDim.x)) return;
  const int q = t / p.M;
  const int nq = kThreads / p.M;
  float f = Op::identity();
  if (q < nq) {
    const int m = t - q * p.M;
    for (unsigned b = q; b < gridDim.x; b += nq) {
      f = op(f, __ldcg(&ws[static_cast<int64_t>(b) * p.M + m]));
    }
  }
  fin[t] = f;
  __syncthreads();
  if (t < p.M) {
    float g = fin[t];
    for (int j = 1; j < nq; ++j) g = op(g, fin[j * p.M + t]);
    store(t, g);
  }
  if (t == 0) ticket_reset(ticket);
}

}  // namespace periodic
}  // namespace gpukern
