#pragma once
// Reduction kernels (torch-free): what every reduction kernel shares (block shape, tickets,
// accumulator types, the output store, the contiguous thread step, the index decode). One header
// per kernel family; together they cover every ReduceLayout:
//   reduce_small.cuh  small_reduce_kernel: short contiguous full reductions, one block (one warp
//                     for the shortest), no workspace, no ticket.
//   reduce_flat.cuh   flat_reduce_kernel: longer contiguous full reductions, blocks split the
//                     run; block 0 polls the others' flagged partials, or the last block to
//                     arrive finishes.
//   reduce_seg.cuh    seg_reduce_kernel: one or a few long segments (full reductions, few long
//                     rows, few strided columns, segments made of contiguous runs): blocks split
//                     each segment, grid-stride accumulation in registers with 16-byte loads,
//                     warp shuffles, one block step, and the last block of each segment to
//                     arrive finishes it (fixed order) in the same launch.
//   reduce_row.cuh    row_reduce_kernel: many contiguous rows (reduced dim innermost, stride 1),
//                     a group of 1..32 lanes per row, 16-byte loads after peeling the row's
//                     misaligned head. row_vec_reduce_kernel: many short aligned rows (whole
//                     vectors), one resident wave, each lane group pipelines its rows (next
//                     row's loads in flight while reducing).
//   reduce_col.cuh    col_reduce_kernel: many outputs whose reduced elements are strided (reduced
//                     dim not innermost), threads across outputs (coalesced), 8 row lanes per
//                     block, R split across blocks (gridDim.y) with a last-block finish.
//                     col_vec_reduce_kernel: the same for float types when the outputs are
//                     contiguous and every reduced row is 16-byte aligned, each thread owning one
//                     16-byte vector of outputs (16-byte loads instead of 4/2-byte ones).
//                     col_lanes_reduce_kernel: either of them with the block's output x row lanes
//                     chosen by the shape (narrow reduced rows, few reduced rows).
// Every combination order is fixed by the launch shape, which the host derives from the problem
// shape and the device only, so results are bitwise reproducible run to run. No float atomics.
#include <cstdint>
#include <type_traits>

#include "device/block_reduce.cuh"
#include "device/pdl.cuh"
#include "device/tickets.cuh"
#include "device/vec.cuh"
#include "reduce/problem.h"

namespace gpukern {
namespace reduce {

constexpr int kThreads = 256;  // every reduction block
constexpr int kColX = 32;      // col kernel: outputs per block (one warp wide)
constexpr int kColY = kThreads / kColX;  // col kernel: row lanes per block
constexpr int kColUnroll = 8;  // col kernel: independent loads in flight per thread
constexpr int64_t kColMaxSplits = 64;  // col kernels: splits of R per finishing thread (at most)
constexpr int kSegUnroll = 4;  // seg kernel: 16-byte vectors per round (all in flight together)
constexpr int kColVecUnroll = 4;  // col vec kernel: 16-byte loads in flight per thread
constexpr int kRowUnroll = 4;  // row kernel: 16-byte vectors per lane (lanes per row chosen to match)
constexpr int kRowVecUnroll = 4;  // row_vec kernel: 16-byte vectors per lane per row (max)
// Vectors one seg or flat block takes in one round (kThreads threads x kSegUnroll vectors).
constexpr int64_t kSegBlockVecs = int64_t{kThreads} * kSegUnroll;
static_assert(kColX * kColY == kThreads, "col block shape");

// Arrival counters for the last-block finish (scheme and slots: device/tickets.cuh).
__device__ unsigned int g_tickets[kTicketSlots * kTicketsPerSlot];

struct SumI64Op {
  __device__ __forceinline__ long long operator()(long long a, long long b) const { return a + b; }
  __device__ __forceinline__ static long long identity() { return 0; }
};

// Element -> accumulator. Floats accumulate in float32, integers (and bool, read as uint8) in
// int64.
template <typename T>
struct AccOf {
  using type = long long;
};
template <>
struct AccOf<float> {
  using type = float;
};
template <>
struct AccOf<__half> {
  using type = float;
};
template <>
struct AccOf<__nv_bfloat16> {
  using type = float;
};


template <typename T>
__device__ __forceinline__ typename AccOf<T>::type to_acc(T v) {
  if constexpr (std::is_same<typename AccOf<T>::type, float>::value) {
    return to_float(v);
  } else {
    return static_cast<long long>(v);
  }
}

struct ReduceOut {
  void* ptr;
  ReduceOutKind kind;
  float factor;    // mean: 1/R; applied once, at the final store
  bool has_factor;
  bool aligned;    // ptr 16-byte aligned: store_out_vec may be used
};

template <typename T, typename Acc>
__device__ __forceinline__ void store_out(const ReduceOut& o, int64_t idx, Acc v) {
  if constexpr (std::is_same<Acc, float>::value) {
    if (o.has_factor) v *= o.factor;
    if (o.kind == ReduceOutKind::kFloat) {
      static_cast<float*>(o.ptr)[idx] = v;
    } else {
      static_cast<T*>(o.ptr)[idx] = from_float<T>(v);
    }
  } else {
    static_cast<long long*>(o.ptr)[idx] = v;
  }
}

// Outputs idx .. idx + N - 1 from float accumulators in 16-byte stores (one vector of T, or N
// floats as float4s for the float outputs of 16-bit inputs), instead of N scalar stores 16 bytes
// apart across a warp. Needs o.aligned and idx % N == 0 (N = kVec16<T>).
template <typename T, int N>
__device__ __forceinline__ void store_out_vec(const ReduceOut& o, int64_t idx, const float* v) {
  float a[N];
#pragma unroll
  for (int e = 0; e < N; ++e) a[e] = o.has_factor ? v[e] * o.factor : v[e];
  if (o.kind == ReduceOutKind::kFloat) {
#pragma unroll
    for (int q = 0; q < N / 4; ++q) {
      Vec<float, 4> w;
#pragma unroll
      for (int e = 0; e < 4; ++e) w.v[e] = a[4 * q + e];
      store_vec<float, 4>(static_cast<float*>(o.ptr) + idx + 4 * q, w);
    }
  } else {
    Vec<T, N> w;
#pragma unroll
    for (int e = 0; e < N; ++e) w.v[e] = from_float<T>(a[e]);
    store_vec<T, N>(static_cast<T*>(o.ptr) + idx, w);
  }
}

// Elements of T from p up to the next 16-byte boundary (p is a multiple of sizeof(T)).
template <typename T>
__device__ __forceinline__ int64_t head_to_align16(const T* p) {
  const unsigned mis = static_cast<unsigned>(reinterpret_cast<uintptr_t>(p) & 15u);
  return static_cast<int64_t>(((16u - mis) & 15u) / sizeof(T));
}

// Thread step over a contiguous run p[0, n): thread t of nthr takes the misaligned head elements
// t, t + nthr, ..., then aligned vectors t, t + nthr, ..., then tail element t. Fixed per (t, nthr).
// Vectors go in rounds of U (i, i + nthr, ..., i + (U-1) nthr), software-pipelined: the next
// round's loads are issued before the current round is accumulated. Written as one unrolled
// round, ptxas placed each load next to its first use and kept only ~2 of the U loads in flight;
// loads issued in the loop's prologue / previous iteration cannot be sunk past the adds. Every
// slot is predicated, so a thread's last partial round (often its only one, for short rows) is
// also one batch of loads. Slot u has its own accumulator, combined in slot order at the end.
// (The launch-bound small kernel has its own step, accumulate_small.)
template <int U, typename T, typename Op, typename Acc>
__device__ __forceinline__ Acc accumulate_contig(const T* p, int64_t n, int64_t t, int64_t nthr,
                                                 Acc acc, Op op) {
  constexpr int V = kVec16<T>;
  int64_t h = head_to_align16(p);
  if (h > n) h = n;
  const int64_t nvec = (n - h) / V;
  const int64_t tail0 = h + nvec * V;
  const Vec<T, V>* vp = reinterpret_cast<const Vec<T, V>*>(p + h);
  for (int64_t j = t; j < h; j += nthr) acc = op(acc, to_acc(p[j]));
  Acc a[U];
#pragma unroll
  for (int u = 0; u < U; ++u) a[u] = Acc(Op::identity());
  int64_t i = t;
  if (i < nvec) {
    Vec<T, V> v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (i + u * nthr < nvec) v[u] = vp[i + u * nthr];
    }
    for (;;) {
      const int64_t in = i + U * nthr;
      const bool more = in < nvec;
      Vec<T, V> w[U];
      if (more) {
#pragma unroll
        for (int u = 0; u < U; ++u) {
          if (in + u * nthr < nvec) w[u] = vp[in + u * nthr];
        }
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (i + u * nthr < nvec) {
#pragma unroll
          for (int e = 0; e < V; ++e) a[u] = op(a[u], to_acc(v[u].v[e]));
        }
      }
      if (!more) break;
      i = in;
#pragma unroll
      for (int u = 0; u < U; ++u) v[u] = w[u];
    }
  }
#pragma unroll
  for (int u = 0; u < U; ++u) acc = op(acc, a[u]);
  for (int64_t j = tail0 + t; j < n; j += nthr) acc = op(acc, to_acc(p[j]));
  return acc;
}

// Offset of kept index o: one kept dim (no 64-bit division) or the general decode.
__device__ __forceinline__ int64_t kept_offset(const ReduceLayout& L, int64_t o) {
  return L.nk == 1 ? o * L.kstride[0] : offset_of(o, L.nk, L.ksize, L.kstride);
}

// Offset of reduced element r: one strided dim (no division) or the general decode.
__device__ __forceinline__ int64_t reduced_offset(const ReduceLayout& L, int64_t r) {
  return L.nr == 1 ? r * L.rstride[0] : offset_of(r, L.nr, L.rsize, L.rstride);
}

}  // namespace reduce
}  // namespace gpukern
