#pragma once
// mv kernels (torch-free). y[i] = sum_j A[i, j] * x[j], accumulated in float32.
//   mv_rows_kernel  row-major A (s1 == 1) or general strides: warps along a row (coalesced along
//                   j), 16-byte loads when the layout allows, warp shuffles.
//   mv_rows_mma_kernel  16-bit row-major A with aligned whole-vector rows: the products and
//                   their float32 sums on the tensor cores (no per-element conversions).
//   mv_cols_kernel  column-major A (s0 == 1, A.t() of a contiguous matrix, read in place) and
//                   very short rows: threads across rows (coalesced along i), the x chunk staged
//                   in shared memory.
// Every kernel is launched with programmatic dependent launch (device/pdl.cuh).
// Both can split N across gridDim.y when there are too few rows to fill the GPU: the splits write
// float32 partials to a workspace and the last block of a row group to arrive (atomic ticket)
// adds them in split order, so the result is deterministic and no float atomics touch y.
#include <cstdint>
#include <type_traits>

#include "device/async_mma.cuh"
#include "device/pdl.cuh"
#include "device/block_reduce.cuh"
#include "device/tickets.cuh"
#include "device/vec.cuh"
#include "mv/mv.h"

namespace gpukern {
namespace mvk {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kWarpSize;
constexpr int kRowUnroll = 4;   // rows kernel: 16-byte vectors in flight per lane
constexpr int kColChunk = 4 * kThreads;  // cols kernel: x elements staged per round
constexpr int kColUnroll = 8;  // cols kernel: 16-byte loads of A in flight per thread

// Arrival counters for the last-block finish (scheme and slots: device/tickets.cuh).
__device__ unsigned int g_tickets[kTicketSlots * kTicketsPerSlot];

// The kPeel rows kernel's dot product of row a (any alignment, s1 == 1) with x over columns
// [k0, k1), for lane `first` of `step` lanes: the row is walked in the 16-byte vectors of its
// aligned span (from a + k0 rounded down to 16 bytes), kPeelUnroll of them a lane in flight, the
// last batch predicated, so no load waits on another and nothing is left for a separate tail.
// The span's first and last vector, where they reach outside [k0, k1), are read element by
// element with bounds checks (A and x: nothing outside the row or x is touched). x for the
// other vectors: aligned vectors when the row is aligned and x_vec, else element by element
// (x is L1/L2-resident). Reading the two aligned x vectors around each position and shifting
// them with selects instead cost 1000 x 7777 fp32 12.4 us against 9.7 element by element
// (H200, back to back), and 18.2 against 10.5 with 4 rows a block.
// Before, the row's head and tail elements were peeled off before the vectors and a last batch
// of < kRowUnroll vectors followed them: at the 64-register cap the compiler spilled the peeled
// values right after their loads, and each spill store waited for its load (two extra round
// trips a row: 1000 x 7777 fp32 ran 16.5 us against 13.1 for 1000 x 7780).
// Vectors in flight per lane in peel_row_dot: 16-bit types spilled 538 bytes with 4 (their edge
// vectors take 8 element loads each way) and none with 2.
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
// the extra live values cost the aligned kernel 25% at its 64-register cap). x is read with
// vectors too when x_vec (contiguous and aligned), else element by element.
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

// 16-bit A on the tensor cores: mma.sync m16n8k16 (f16 or bf16 inputs, float32 accumulators)
// computes a 16-row tile of A times a 16-column slice of x replicated in all 8 columns of B. The
// CUDA-core path spends two conversions (fp16: HADD2.F32 on the FMA pipe) and an FFMA per
// element, which held fp16 8192^2 at 87% of the copy bandwidth while bf16 (conversions on the
// integer pipe) reached 91%; here a lane issues one mma per 8 elements of A.
// The k order inside an mma is free (a dot product), so lane (g = lane / 4, t = lane % 4) uses
// its own 16-byte loads directly as fragments: the vector at columns c..c+7 of rows g and g + 8
// and of x feed two mmas, elements c+0,1 / c+2,3 as k = 2t,2t+1 / 2t+8,2t+9 of the first and
// c+4..7 likewise of the second (the same columns for A and B, so sum_k A[i][k] B[k][n] is the
// row's partial dot product for every n). Fragment layout (PTX ISA, mma.m16n8k16 .f16/.bf16):
//   a0 = A[g][2t..2t+1], a1 = A[g+8][2t..2t+1], a2 = A[g][2t+8..2t+9], a3 = A[g+8][2t+8..2t+9]
//   b0 = B[2t..2t+1][g],  b1 = B[2t+8..2t+9][g];  d0,d1 = D[g][2t..2t+1], d2,d3 = D[g+8][...]
// Block: kWarps warps on one 16-row tile; warp w takes column steps w, w + kWarps, ... of
// kMmaStep columns (lane t loads columns step * kMmaStep + (u * 4 + t) * 8, u < kMmaUnroll:
// each load instruction covers 64 contiguous bytes of 8 rows). The warps' partials (d0 of
// lanes t == 0: rows g and g + 8) are added in warp order through smem: a fixed order.
// Host guarantees: T 16-bit, s1 == 1, A 16-byte aligned, s0 % 8 == 0, N % 8 == 0, x contiguous
// and aligned. Rows past M read row M - 1 (results dropped); columns past N load zeros.
constexpr int kMmaUnroll = 4;
constexpr int kMmaStep = kMmaUnroll * 4 * 8;  // columns per warp step

template <typename T>
__device__ __forceinline__ void mma_16816_vec(float (&d)[4], const uint4& ra, const uint4& rb8,
                                              unsigned b0, unsigned b1, bool hi) {
  // hi: the vector's second half (elements 4..7: words z, w) as this mma's k slots.
  const unsigned a0 = hi ? ra.z : ra.x, a2 = hi ? ra.w : ra.y;
  const unsigned a1 = hi ? rb8.z : rb8.x, a3 = hi ? rb8.w : rb8.y;
  mma_16816<T>(d, a0, a1, a2, a3, b0, b1);
}

template <typename T>
__global__ void __launch_bounds__(kThreads, 4)
    mv_rows_mma_kernel(const T* __restrict__ A, const T* __restrict__ x, T* __restrict__ y,
                       MvParams p) {
  static_assert(sizeof(T) == 2, "16-bit types only");
  __shared__ float part[kWarps][16];
  const int warp = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int g = lane >> 2, t = lane & 3;
  const int64_t tiles = (p.M + 15) / 16;
  const int64_t nsteps = (p.N + kMmaStep - 1) / kMmaStep;
  pdl_wait_then_release();
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t r0 = tile * 16 + g, r1 = r0 + 8;
    const T* a0p = A + (r0 < p.M ? r0 : p.M - 1) * p.s0;
    const T* a1p = A + (r1 < p.M ? r1 : p.M - 1) * p.s0;
    // Two accumulator sets (the first and second half of each vector) halve the dependent
    // chain of mmas.
    float d0[4] = {0.f, 0.f, 0.f, 0.f}, d1[4] = {0.f, 0.f, 0.f, 0.f};
    for (int64_t st = warp; st < nsteps; st += kWarps) {
      uint4 va[kMmaUnroll], vb[kMmaUnroll], vx[kMmaUnroll];
#pragma unroll
      for (int u = 0; u < kMmaUnroll; ++u) {
        const int64_t c = st * kMmaStep + (u * 4 + t) * 8;
        if (c < p.N) {
          va[u] = *reinterpret_cast<const uint4*>(a0p + c);
          vb[u] = *reinterpret_cast<const uint4*>(a1p + c);
          vx[u] = *reinterpret_cast<const uint4*>(x + c);
        } else {
          va[u] = vb[u] = vx[u] = make_uint4(0u, 0u, 0u, 0u);
        }
      }
#pragma unroll
      for (int u = 0; u < kMmaUnroll; ++u) {
        mma_16816_vec<T>(d0, va[u], vb[u], vx[u].x, vx[u].y, false);
        mma_16816_vec<T>(d1, va[u], vb[u], vx[u].z, vx[u].w, true);
      }
    }
    if (t == 0) {
      part[warp][g] = d0[0] + d1[0];
      part[warp][g + 8] = d0[2] + d1[2];
    }
    __syncthreads();  // every warp's partials in smem
    if (threadIdx.x < 16) {
      const int64_t r = tile * 16 + threadIdx.x;
      if (r < p.M) {
        float v = part[0][threadIdx.x];
#pragma unroll
        for (int w = 1; w < kWarps; ++w) v += part[w][threadIdx.x];
        y[r] = from_float<T>(v);
      }
    }
    __syncthreads();  // part free for the next tile
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
