#pragma once
// Reduction kernels (torch-free). These kernels cover every ReduceLayout:
//   small_reduce_kernel  short contiguous full reductions: one block (one warp for the shortest),
//                      no workspace, no ticket.
//   flat_reduce_kernel  longer contiguous full reductions: blocks split the run; block 0 polls
//                      the others' flagged partials, or the last block to arrive finishes.
//   seg_reduce_kernel  one or a few long segments (full reductions, few long rows, few strided
//                      columns, segments made of contiguous runs): blocks split each segment, grid-stride accumulation in registers
//                      with 16-byte loads, warp shuffles, one block step, and the last block of
//                      each segment to arrive finishes it (fixed order) in the same launch.
//   row_reduce_kernel  many contiguous rows (reduced dim innermost, stride 1): a group of 1..32
//                      lanes per row, 16-byte loads after peeling the row's misaligned head.
//   row_vec_reduce_kernel  many short aligned rows (whole vectors): one resident wave, each lane
//                      group pipelines its rows (next row's loads in flight while reducing).
//   col_reduce_kernel  many outputs whose reduced elements are strided (reduced dim not
//                      innermost): threads across outputs (coalesced), 8 row lanes per block,
//                      R split across blocks (gridDim.y) with a last-block finish.
//   col_vec_reduce_kernel  the same for float types when the outputs are contiguous and every
//                      reduced row is 16-byte aligned: each thread owns one 16-byte vector of
//                      outputs (16-byte loads instead of 4/2-byte ones).
// Every combination order is fixed by the launch shape, which the host derives from the problem
// shape and the device only, so results are bitwise reproducible run to run. No float atomics.
#include <cstdint>
#include <type_traits>

#include "device/pdl.cuh"
#include "device/block_reduce.cuh"
#include "device/tickets.cuh"
#include "device/vec.cuh"
#include "reduce/reduce.h"

namespace gpukern {
namespace red {

constexpr int kThreads = 256;  // every reduction block
constexpr int kColX = 32;      // col kernel: outputs per block (one warp wide)
constexpr int kColY = kThreads / kColX;  // col kernel: row lanes per block
constexpr int kColUnroll = 8;  // col kernel: independent loads in flight per thread
constexpr int kSegUnroll = 4;  // seg kernel: 16-byte vectors per round (all in flight together)
constexpr int kColVecUnroll = 4;  // col vec kernel: 16-byte loads in flight per thread
constexpr int kRowUnroll = 4;  // row kernel: 16-byte vectors per lane (lanes per row chosen to match)
constexpr int kRowVecUnroll = 4;  // row_vec kernel: 16-byte vectors per lane per row (max)
// small kernel configurations {threads, 16-byte vectors per thread per round}: the host takes
// the first of the dtype's table that holds the run in one round; the last takes up to two.
// H200, kernel time in a CUDA graph, fp32 sum: 1024 elements (256 vectors) {32, 8} 0.87 us,
// 2048 {128, 8} 0.91 ({32, 16} 0.93), 4096 {128, 8} 0.96, 8192 {128, 16} 1.07 ({256, 8} 1.09),
// 16384 {512, 8} 1.22, 32768 (two rounds) 1.70; torch.sum 1.93, 2.11, 2.31, 2.70, 3.39, 4.74.
// A 16-bit sum converts every element (bf16: a shift or a mask; fp32 needs none and the 16-bit
// max/min work on packed pairs), so its table takes more threads sooner: bf16 1024 elements
// {32, 4} 0.89 us ({32, 8} 0.93), 2048 {32, 8} 0.95, 4096 {128, 8} 0.97, 16384 {256, 8} 1.17
// ({128, 16} 1.18), 32768 {512, 8} 1.34. Integers (int64 accumulators, more registers per
// element) use {32, 8} and {256, 8} only.
struct SmallConfig {
  int threads;
  int unroll;
};
struct SmallTableCheap {  // fp32 (one FADD per element), 16-bit max/min (packed pairs)
  static constexpr SmallConfig kC[] = {{kWarpSize, 8}, {128, 8}, {128, 16}, {512, 8}};
};
struct SmallTableHalfSum {  // 16-bit sums
  static constexpr SmallConfig kC[] = {
      {kWarpSize, 4}, {kWarpSize, 8}, {128, 8}, {256, 8}, {512, 8}};
};
struct SmallTableInt {
  static constexpr SmallConfig kC[] = {{kWarpSize, 8}, {256, 8}};
};
template <typename Table>
constexpr int small_table_size() {
  return static_cast<int>(sizeof(Table::kC) / sizeof(Table::kC[0]));
}
// Vectors configuration c of Table takes in one round (c = -1: the last configuration).
template <typename Table>
constexpr int64_t small_round_vecs(int c) {
  const SmallConfig k = Table::kC[c < 0 ? small_table_size<Table>() - 1 : c];
  return int64_t{k.threads} * k.unroll;
}
// The small kernel takes up to two rounds of the float tables' last configuration, one round of
// the integer table's (the host's use_small() says where).
constexpr int64_t kSmallMaxVecs = 2 * small_round_vecs<SmallTableCheap>(-1);
constexpr int64_t kSmallMaxVecsInt = small_round_vecs<SmallTableInt>(-1);
static_assert(small_round_vecs<SmallTableHalfSum>(-1) == small_round_vecs<SmallTableCheap>(-1),
              "the float tables end alike (use_small does not know the op)");
// The small kernel indexes with 32-bit ints: a forced small on a longer run is refused.
constexpr int64_t kSmallMaxElems = int64_t{1} << 30;
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

// The small kernel's configuration table for T and Op.
template <typename T, typename Op>
using SmallTableOf = std::conditional_t<
    !std::is_same<typename AccOf<T>::type, float>::value, SmallTableInt,
    std::conditional_t<sizeof(T) == 2 && std::is_same<Op, SumOp>::value, SmallTableHalfSum,
                       SmallTableCheap>>;

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

// ---- small kernel: latency-bound accumulation on raw 16-byte words ----------------------------
// The small kernel's time is the latency of a short instruction stream, so it moves and selects
// vectors as four raw 32-bit words (a select of Vec<bf16, 8> element by element cost ptxas 131
// PRMTs per lane in the one-warp bf16 sum) and accumulates each vector with as few instructions
// as the type allows (SlotAcc below).
using Words = Vec<uint32_t, 4>;

template <typename To, typename From>
__device__ __forceinline__ To bit_cast_dev(const From& f) {
  static_assert(sizeof(To) == sizeof(From), "bit_cast_dev: sizes differ");
  To t;
  memcpy(&t, &f, sizeof(To));
  return t;
}

template <typename T>
constexpr bool kIsHalfFloat =
    std::is_same<T, __half>::value || std::is_same<T, __nv_bfloat16>::value;

// The identity of Op as an element of T: slots beyond the run are filled with it, so that every
// slot is accumulated without a branch.
template <typename T, typename Op>
__device__ __forceinline__ T identity_elem() {
  if constexpr (std::is_same<typename AccOf<T>::type, float>::value) {
    return from_float<T>(Op::identity());
  } else {
    return T(0);
  }
}

// e[0] op e[1] op ... op e[N-1] as a pairwise tree (depth log2 N rather than a chain of N - 1
// dependent ops); N a power of two. Overwrites e.
template <int N, typename Acc, typename Op>
__device__ __forceinline__ Acc tree_combine(Acc (&e)[N], Op op) {
  static_assert((N & (N - 1)) == 0, "tree_combine: N a power of two");
#pragma unroll
  for (int s = 1; s < N; s *= 2) {
#pragma unroll
    for (int k = 0; k < N; k += 2 * s) e[k] = op(e[k], e[k + s]);
  }
  return e[0];
}

// The V elements of one 16-byte vector of raw words, converted to the accumulator type. 16-bit
// floats are converted from the packed words directly (bf16: a shift or a mask per element).
template <typename T>
__device__ __forceinline__ void words_to_acc(const Words& w,
                                             typename AccOf<T>::type (&e)[kVec16<T>]) {
  if constexpr (std::is_same<T, __nv_bfloat16>::value) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      e[2 * k] = __uint_as_float(w.v[k] << 16);
      e[2 * k + 1] = __uint_as_float(w.v[k] & 0xffff0000u);
    }
  } else if constexpr (std::is_same<T, __half>::value) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float2 f = __half22float2(bit_cast_dev<__half2>(w.v[k]));
      e[2 * k] = f.x;
      e[2 * k + 1] = f.y;
    }
  } else {
    const Vec<T, kVec16<T>> v = bit_cast_dev<Vec<T, kVec16<T>>>(w);
#pragma unroll
    for (int k = 0; k < kVec16<T>; ++k) e[k] = to_acc(v.v[k]);
  }
}

// One slot's accumulator over 16-byte vectors of raw words: add(w) takes a vector, merge()
// combines two slots, value() is the thread's contribution to the block reduction.
// Generic form: the vector's elements converted to Acc and combined as a pairwise tree
// (tree_combine), then into the slot.
template <typename T, typename Op, typename Enable = void>
struct SlotAcc {
  using Acc = typename AccOf<T>::type;
  static constexpr int V = kVec16<T>;
  Acc a = Acc(Op::identity());
  __device__ __forceinline__ static Words fill() {
    Vec<T, V> f;
#pragma unroll
    for (int e = 0; e < V; ++e) f.v[e] = identity_elem<T, Op>();
    return bit_cast_dev<Words>(f);
  }
  __device__ __forceinline__ void add(const Words& w, Op op) {
    Acc e[V];
    words_to_acc<T>(w, e);
    a = op(a, tree_combine<V>(e, op));
  }
  __device__ __forceinline__ void merge(const SlotAcc& o, Op op) { a = op(a, o.a); }
  __device__ __forceinline__ Acc value(Op) const { return a; }
};

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
// 16-bit floats, max / min: packed pairs (max.NaN.bf16x2 / .f16x2: exact, NaN-propagating like
// the float op), 4 instructions per vector instead of 8 conversions and 8 float ops; the pair
// is unpacked once at the end.
template <typename T>
__device__ __forceinline__ uint32_t packed_maxmin(uint32_t a, uint32_t b, bool is_max) {
  uint32_t d;
  if constexpr (std::is_same<T, __nv_bfloat16>::value) {
    if (is_max) {
      asm("max.NaN.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    } else {
      asm("min.NaN.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    }
  } else {
    if (is_max) {
      asm("max.NaN.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    } else {
      asm("min.NaN.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    }
  }
  return d;
}

template <typename T, typename Op>
struct SlotAcc<T, Op,
               std::enable_if_t<kIsHalfFloat<T> && (std::is_same<Op, MaxOp>::value ||
                                                   std::is_same<Op, MinOp>::value)>> {
  static constexpr bool kMax = std::is_same<Op, MaxOp>::value;
  uint32_t a = fill().v[0];
  __device__ __forceinline__ static Words fill() {
    const T id = identity_elem<T, Op>();
    const uint32_t h = bit_cast_dev<uint16_t>(id);
    const uint32_t pair = h | (h << 16);
    return Words{{pair, pair, pair, pair}};
  }
  __device__ __forceinline__ void add(const Words& w, Op) {
    const uint32_t m = packed_maxmin<T>(packed_maxmin<T>(w.v[0], w.v[1], kMax),
                                        packed_maxmin<T>(w.v[2], w.v[3], kMax), kMax);
    a = packed_maxmin<T>(a, m, kMax);
  }
  __device__ __forceinline__ void merge(const SlotAcc& o, Op) {
    a = packed_maxmin<T>(a, o.a, kMax);
  }
  __device__ __forceinline__ float value(Op op) const {
    const T lo = bit_cast_dev<T>(static_cast<uint16_t>(a & 0xffffu));
    const T hi = bit_cast_dev<T>(static_cast<uint16_t>(a >> 16));
    return op(to_float(lo), to_float(hi));
  }
};

#endif

// The small kernel's thread step over p[0, n) (thread t of nthr, nthr a multiple of 32 and
// >= V): like accumulate_contig, but
//   - the head and tail (< V elements each, so at most one of each per thread) are loaded before
//     the first vectors and added after the last: loaded after, the tail cost one more memory
//     round trip (1025 fp32 elements: 1.37 us against 1.19 us for 4096, 1.17 us with early
//     edges). The other kernels keep the plain order: the flat kernel measured 3.06 us on 1M
//     fp32 with early edges against 2.69-2.70 us without (separate runs on the H200);
//   - a slot beyond the run is loaded as SlotAcc's fill (the identity) instead of skipped, so
//     every slot is accumulated without a branch (with a branch per slot a one-warp bf16 sum of
//     1024 elements, 4 of 8 slots used, took 1.24 us against fp32's 0.95, 8 of 8); the rounds
//     are warp-uniform (a lane past the end loads fills while its warp still has data), so a
//     warp never diverges on them.
template <int U, typename T, typename Op>
__device__ __forceinline__ typename AccOf<T>::type accumulate_small(const T* p, int n, int t,
                                                                    int nthr, Op op) {
  using Acc = typename AccOf<T>::type;
  using S = SlotAcc<T, Op>;
  constexpr int V = kVec16<T>;
  int h = static_cast<int>(head_to_align16(p));
  if (h > n) h = n;
  const int nvec = (n - h) / V;
  const int tail0 = h + nvec * V;
  const Words* vp = reinterpret_cast<const Words*>(p + h);
  const Words fill = S::fill();
  const T id = identity_elem<T, Op>();
  const T head = t < h ? p[t] : id;
  const T tail = tail0 + t < n ? p[tail0 + t] : id;
  S a[U];
  const int warp0 = t & ~(kWarpSize - 1);  // the warp's first vector: rounds are warp-uniform
  int i = t;
  if (warp0 < nvec) {
    Words v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = i + u * nthr < nvec ? vp[i + u * nthr] : fill;
    for (int w0 = warp0;;) {
      const int in = i + U * nthr;
      w0 += U * nthr;
      const bool more = w0 < nvec;
      Words w[U];
      if (more) {
#pragma unroll
        for (int u = 0; u < U; ++u) w[u] = in + u * nthr < nvec ? vp[in + u * nthr] : fill;
      }
#pragma unroll
      for (int u = 0; u < U; ++u) a[u].add(v[u], op);
      if (!more) break;
      i = in;
#pragma unroll
      for (int u = 0; u < U; ++u) v[u] = w[u];
    }
  }
#pragma unroll
  for (int u = 1; u < U; ++u) a[0].merge(a[u], op);
  Acc acc = a[0].value(op);
  acc = op(acc, to_acc(head));
  return op(acc, to_acc(tail));
}

// Offset of kept index o: one kept dim (no 64-bit division) or the general decode.
__device__ __forceinline__ int64_t kept_offset(const ReduceLayout& L, int64_t o) {
  return L.nk == 1 ? o * L.kstride[0] : offset_of(o, L.nk, L.ksize, L.kstride);
}

// Offset of reduced element r: one strided dim (no division) or the general decode.
__device__ __forceinline__ int64_t reduced_offset(const ReduceLayout& L, int64_t r) {
  return L.nr == 1 ? r * L.rstride[0] : offset_of(r, L.nr, L.rsize, L.rstride);
}

// How the seg kernel walks a segment's reduced elements.
//   kSegGeneral  element r at reduced_offset(r): any layout (a decode per element)
//   kSegContig   one contiguous run of R (16-byte loads after the misaligned head)
//   kSegRuns     the innermost reduced dim is stride 1: the segment is R / run contiguous runs
//                (e.g. NCHW over (0, 2, 3): N runs of H*W). The block's threads form 1 << runs_lg
//                groups; group g of block b takes runs (b << runs_lg) + g, stepping by
//                gridDim.x << runs_lg, each run walked like kSegContig by the group's threads.
constexpr int kSegGeneral = 0;
constexpr int kSegContig = 1;
constexpr int kSegRuns = 2;

// grid.x = blocks per segment (B), grid.y strides over segments (outputs). Block: kThreads
// threads, each accumulating in registers, then block_reduce. B == 1: thread 0 stores the
// segment's result. B > 1 (only when n_out <= kTicketsPerSlot, gridDim.y == n_out): each block
// writes its partial to ws[seg * B + blockIdx.x], fences, and takes a ticket; the last block of
// the segment reduces the B partials in a fixed order, stores, and resets the counter.
// smem: kThreads / 32 partials for block_reduce (reused across segments; block_reduce ends with a
// barrier, and the s_last barrier below separates the ticket write from its reads).
template <typename T, typename Op, int kMode>
__global__ void __launch_bounds__(kThreads)
    seg_reduce_kernel(const T* __restrict__ x, ReduceLayout L, ReduceOut out,
                      typename AccOf<T>::type* __restrict__ ws, int ticket_base, int runs_lg) {
  using Acc = typename AccOf<T>::type;
  __shared__ Acc smem[kThreads / kWarpSize];
  __shared__ bool s_last;
  pdl_wait_then_release();
  const Op op{};
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  const int64_t nthr = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t seg = blockIdx.y; seg < L.n_out; seg += gridDim.y) {
    const T* base = x + offset_of(seg, L.nk, L.ksize, L.kstride);
    Acc acc = Acc(Op::identity());
    if (kMode == kSegContig) {
      acc = accumulate_contig<kSegUnroll, T, Op, Acc>(base, L.R, t, nthr, acc, op);
    } else if (kMode == kSegRuns) {
      const int64_t run = L.rsize[L.nr - 1];
      const int64_t nruns = L.R / run;
      const int gthreads = kThreads >> runs_lg;
      const int64_t step = static_cast<int64_t>(gridDim.x) << runs_lg;
      for (int64_t j = (static_cast<int64_t>(blockIdx.x) << runs_lg) + threadIdx.x / gthreads;
           j < nruns; j += step) {
        const int64_t off = L.nr == 2 ? j * L.rstride[0] : offset_of(j, L.nr - 1, L.rsize, L.rstride);
        acc = accumulate_contig<kSegUnroll, T, Op, Acc>(
            base + off, run, threadIdx.x % gthreads, gthreads, acc, op);
      }
    } else {
      for (int64_t r = t; r < L.R; r += nthr) acc = op(acc, to_acc(base[reduced_offset(L, r)]));
    }
    acc = block_reduce<kThreads>(acc, op, smem);
    if (gridDim.x == 1) {
      if (threadIdx.x == 0) store_out<T, Acc>(out, seg, acc);
      continue;
    }
    unsigned int* ticket = &g_tickets[ticket_base + seg];
    if (threadIdx.x == 0) {
      ws[seg * gridDim.x + blockIdx.x] = acc;
      __threadfence();  // the partial is visible device-wide before the ticket is taken
      s_last = atomicAdd(ticket, 1u) == gridDim.x - 1;
    }
    __syncthreads();  // s_last visible to the block
    if (s_last) {
      __threadfence();  // every other block's partial is visible before reading
      Acc v = Acc(Op::identity());
      for (int64_t i = threadIdx.x; i < gridDim.x; i += kThreads) {
        v = op(v, __ldcg(&ws[seg * gridDim.x + i]));
      }
      v = block_reduce<kThreads>(v, op, smem);
      if (threadIdx.x == 0) {
        store_out<T, Acc>(out, seg, v);
        *ticket = 0u;  // ready for the next launch on this stream
      }
    }
    __syncthreads();  // s_last read by all before a later segment rewrites it
  }
}

// Full reduction of a short contiguous run x[0, n), launch-bound: one block of kBlock threads,
// kU 16-byte vectors per thread per round (the host picks the configuration from the dtype's
// table, SmallTableOf), no workspace or ticket, and a parameter block of 32 bytes rather than
// the ~830-byte ReduceLayout. For kBlock > 32 one shared-memory step, then the butterfly; thread
// 0 stores. Fixed order per (n, kBlock, kU), so reproducible. Any n up to kSmallMaxElems works
// (more rounds).
template <typename T, typename Op, int kBlock, int kU>
__global__ void __launch_bounds__(kBlock)
    small_reduce_kernel(const T* __restrict__ x, int n, ReduceOut out) {
  using Acc = typename AccOf<T>::type;
  constexpr int kPer = kBlock / kWarpSize;  // partials per lane of warp 0
  __shared__ Acc smem[kBlock];
  pdl_wait_then_release();
  const Op op{};
  Acc acc = accumulate_small<kU, T, Op>(x, n, threadIdx.x, kBlock, op);
  if constexpr (kPer > 1) {
    // Block step through shared memory first: every thread stores its partial, and warp 0's lane
    // l combines partials l, l + 32, ... as a tree before the one butterfly. Against
    // block_reduce (a butterfly per warp, then one over the warps' partials) this saves a
    // shuffle chain: fp32 4096 elements on 128 threads 0.96 us against 1.06.
    smem[threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.x >= kWarpSize) return;
    Acc e[kPer];
#pragma unroll
    for (int j = 0; j < kPer; ++j) e[j] = smem[threadIdx.x + j * kWarpSize];
    acc = tree_combine<kPer>(e, op);
  }
  acc = warp_reduce(acc, op);
  if (threadIdx.x == 0) store_out<T, Acc>(out, 0, acc);
}

// flat kernel, polled finish: at most this many blocks, one float partial each, per ticket slot.
constexpr int kFlatPollMax = kThreads;
// Whether a flat grid of `blocks` (> 1) blocks finishes by polling (no workspace, no ticket):
// float accumulators and at most kFlatPollMax blocks. The launcher allocates the ticket's
// workspace otherwise.
template <typename Acc, typename I>
__host__ __device__ constexpr bool flat_polled(I blocks) {
  return std::is_same<Acc, float>::value && blocks <= I{kFlatPollMax};
}
// Partial slots of the polled finish: {flag in the high word, float bits in the low word}, one
// 8-byte word per block, so one single-copy-atomic store publishes value and flag together.
// Zeroed at module load; the finishing block zeroes every slot it consumed.
__device__ unsigned long long g_flat_slots[kTicketSlots * kFlatPollMax];

__device__ __forceinline__ void st_relaxed_gpu_u64(unsigned long long* p, unsigned long long v) {
  asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ unsigned long long ld_relaxed_gpu_u64(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

// Full reduction of one contiguous run x[0, n) by a grid of B blocks (the launch-bound middle
// sizes beyond the small kernel's, up to a few M elements, and the bandwidth-bound large ones). Thread t of B * kThreads
// walks the run like the seg kernel (kSegUnroll 16-byte vectors in flight) and the block
// combines its threads. Then one of two finishes, both combining the B partials in index order
// (fixed per (n, B), so reproducible):
//   polled (float accumulators, B <= kFlatPollMax): each block b > 0 publishes its partial with
//     one 8-byte store {1, bits} to its slot (g_flat_slots); block 0 polls the slots (thread i
//     slot i) until each is flagged, zeroes them, and combines. No fence, no atomic: the last
//     partial costs one store reaching L2 plus one poll.
//   ticket (integer accumulators, or more blocks): thread 0 writes the partial to ws[b] and takes
//     the ticket with acquire-release semantics (ticket_arrive_acq_rel); the last block to
//     arrive combines, stores and resets the ticket.
// Block 0 waiting on the others cannot deadlock: they never wait on anything, so they finish
// and free their slots whatever the order the GPU schedules them in. Lean parameters (48 bytes
// instead of the seg kernel's ~830-byte ReduceLayout).
template <typename T, typename Op>
__global__ void __launch_bounds__(kThreads)
    flat_reduce_kernel(const T* __restrict__ x, int64_t n, ReduceOut out,
                       typename AccOf<T>::type* __restrict__ ws, int ticket_slot) {
  using Acc = typename AccOf<T>::type;
  __shared__ Acc smem[kThreads / kWarpSize];
  __shared__ bool s_last;
  pdl_wait_then_release();
  const Op op{};
  Acc acc = accumulate_contig<kSegUnroll, T, Op, Acc>(
      x, n, static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x,
      static_cast<int64_t>(gridDim.x) * kThreads, Acc(Op::identity()), op);
  acc = block_reduce<kThreads>(acc, op, smem);
  if (gridDim.x == 1) {
    if (threadIdx.x == 0) store_out<T, Acc>(out, 0, acc);
    return;
  }
  if constexpr (std::is_same<Acc, float>::value) {
    if (flat_polled<Acc>(gridDim.x)) {
      unsigned long long* slots = &g_flat_slots[ticket_slot * kFlatPollMax];
      if (blockIdx.x != 0) {
        if (threadIdx.x == 0) {
          st_relaxed_gpu_u64(&slots[blockIdx.x],
                             (1ull << 32) | __float_as_uint(acc));
        }
        return;
      }
      // Block 0: thread 0 holds its own partial (acc, from block_reduce); thread i < B polls
      // slot i.
      float v = threadIdx.x == 0 ? acc : Op::identity();
      if (threadIdx.x > 0 && threadIdx.x < gridDim.x) {
        unsigned long long w;
        do {
          w = ld_relaxed_gpu_u64(&slots[threadIdx.x]);
        } while ((w >> 32) == 0);
        slots[threadIdx.x] = 0ull;
        v = __uint_as_float(static_cast<unsigned>(w));
      }
      v = block_reduce<kThreads>(v, op, smem);
      if (threadIdx.x == 0) store_out<T, Acc>(out, 0, v);
      return;
    }
  }
  unsigned int* ticket = &g_tickets[ticket_slot * kTicketsPerSlot];
  if (threadIdx.x == 0) {
    ws[blockIdx.x] = acc;
    s_last = ticket_arrive_acq_rel(ticket) == gridDim.x - 1;
  }
  __syncthreads();  // s_last (and, for the last block, the acquired partials) visible to the block
  if (!s_last) return;
  Acc v = Acc(Op::identity());
  for (unsigned i = threadIdx.x; i < gridDim.x; i += kThreads) v = op(v, __ldcg(&ws[i]));
  v = block_reduce<kThreads>(v, op, smem);
  if (threadIdx.x == 0) {
    store_out<T, Acc>(out, 0, v);
    *ticket = 0u;  // ready for the next launch on this stream
  }
}

// Contiguous rows: groups of G = 1 << lg lanes (G <= 32, inside one warp) per row; kThreads / G
// rows per block; blocks stride over the rows. Rows beyond n_out still run the shuffle loop
// (with the identity), so every lane of a warp reaches every shuffle.
template <typename T, typename Op>
__global__ void __launch_bounds__(kThreads)
    row_reduce_kernel(const T* __restrict__ x, ReduceLayout L, ReduceOut out, int lg) {
  using Acc = typename AccOf<T>::type;
  const Op op{};
  const int G = 1 << lg;
  const int rows_per_block = kThreads >> lg;
  const int grp = threadIdx.x >> lg;
  const int lane = threadIdx.x & (G - 1);
  const int64_t stride_rows = static_cast<int64_t>(gridDim.x) * rows_per_block;
  for (int64_t row0 = static_cast<int64_t>(blockIdx.x) * rows_per_block; row0 < L.n_out;
       row0 += stride_rows) {
    const int64_t row = row0 + grp;
    Acc acc = Acc(Op::identity());
    if (row < L.n_out) {
      const T* p = x + kept_offset(L, row);
      acc = accumulate_contig<kRowUnroll, T, Op, Acc>(p, L.R, lane, G, acc, op);
    }
    for (int off = G >> 1; off > 0; off >>= 1) {
      acc = op(acc, __shfl_xor_sync(0xffffffffu, acc, off));
    }
    if (lane == 0 && row < L.n_out) store_out<T, Acc>(out, row, acc);
  }
}

// Many short contiguous rows, every row 16-byte aligned and a whole number of vectors (host
// guarantees: nk == 1, x 16-byte aligned, row_stride % V == 0, nvec = R / V <= kRowVecUnroll *
// 32). G = 1 << lg lanes per row (inside one warp); lane l holds the row's vectors l, l + G, ...
// (up to kRowVecUnroll, each predicated on < nvec). The grid is one resident wave; group gid
// takes rows gid, gid + ngroups, ... (the whole GPU sweeps memory in order). Software-pipelined
// across rows: the next row's 16-byte loads are issued before the current row is reduced, so a
// thread always has a row of loads in flight and no block ever launches after the first wave.
// Warp-uniform loop (the warp's first group decides), so every lane reaches every shuffle.
// Slot u has its own accumulator, combined in slot order, then the butterfly: fixed order.
// One 16-byte vector held as four 32-bit words (a Vec of 8 bf16 was kept as 8 registers and
// spilled at 64 registers), folded into acc element by element in memory order. bf16 -> float
// is exact by moving the bits up; half and float through the usual conversions.
template <typename T, typename Op>
__device__ __forceinline__ float fold_words(float acc, const uint4& r, Op op) {
  const unsigned w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    if constexpr (std::is_same<T, float>::value) {
      acc = op(acc, __uint_as_float(w[k]));
    } else if constexpr (std::is_same<T, __nv_bfloat16>::value) {
      acc = op(acc, __uint_as_float(w[k] << 16));
      acc = op(acc, __uint_as_float(w[k] & 0xffff0000u));
    } else {
      const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&w[k]));
      acc = op(acc, f.x);
      acc = op(acc, f.y);
    }
  }
  return acc;
}

template <typename T, typename Op>
__global__ void __launch_bounds__(kThreads, 4)
    row_vec_reduce_kernel(const T* __restrict__ x, int64_t n_out, int64_t row_stride, int nvec,
                          ReduceOut out, int lg) {
  static_assert(std::is_same<typename AccOf<T>::type, float>::value, "float types only");
  constexpr int U = kRowVecUnroll;
  using VT = uint4;
  pdl_wait_then_release();  // one resident wave: dependents' blocks can only take spare slots
  const Op op{};
  const int G = 1 << lg;
  const int grp = threadIdx.x >> lg;
  const int lane = threadIdx.x & (G - 1);
  const int wslot = grp & ((kWarpSize >> lg) - 1);  // group index inside its warp
  const int64_t ngroups = static_cast<int64_t>(gridDim.x) * (kThreads >> lg);
  const int64_t gid = static_cast<int64_t>(blockIdx.x) * (kThreads >> lg) + grp;
  bool ok[U];
#pragma unroll
  for (int u = 0; u < U; ++u) ok[u] = lane + u * G < nvec;
  // This lane's vectors of row r (nothing past the last row).
  auto load_row = [&](int64_t r, VT (&dst)[U]) {
    if (r < n_out) {
      const VT* rp = reinterpret_cast<const VT*>(x + r * row_stride) + lane;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (ok[u]) dst[u] = rp[u * G];
      }
    }
  };
  VT v[U];
  load_row(gid, v);
  for (int64_t row = gid; row - wslot < n_out; row += ngroups) {
    VT w[U];
    load_row(row + ngroups, w);
    float a[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      a[u] = Op::identity();
      if (ok[u] && row < n_out) a[u] = fold_words<T>(a[u], v[u], op);
    }
    float acc = a[0];
#pragma unroll
    for (int u = 1; u < U; ++u) acc = op(acc, a[u]);
    for (int off = G >> 1; off > 0; off >>= 1) {
      acc = op(acc, __shfl_xor_sync(0xffffffffu, acc, off));
    }
    if (lane == 0 && row < n_out) store_out<T, float>(out, row, acc);
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = w[u];
  }
}

// Strided reductions with many outputs. Block (kColX, kColY): threadIdx.x picks the output
// (consecutive outputs -> consecutive addresses when the innermost kept dim has stride 1),
// threadIdx.y the row lane. grid.x strides over output tiles of kColX; grid.y = S splits of R,
// each covering rchunk reduced elements. Each thread accumulates rows y, y + kColY, ... of its
// split in order; the kColY lanes are combined in order through smem. S == 1: stored directly.
// S > 1 (then gridDim.x == number of tiles <= kTicketsPerSlot): partials to ws[s * n_out + o],
// last block of the tile (ticket per tile) combines the S partials in order.
// smem: kColY x kColX partials; barriers: after writing them (before the y == 0 lanes read) and
// at the end of each tile (before they are overwritten).
template <typename T, typename Op>
__global__ void __launch_bounds__(kThreads)
    col_reduce_kernel(const T* __restrict__ x, ReduceLayout L, ReduceOut out,
                      typename AccOf<T>::type* __restrict__ ws, int ticket_base, int64_t rchunk) {
  using Acc = typename AccOf<T>::type;
  __shared__ Acc part[kColY][kColX];
  __shared__ bool s_last;
  const Op op{};
  const int tx = threadIdx.x;
  const int ty = threadIdx.y;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * rchunk;
  const int64_t r1 = r0 + rchunk < L.R ? r0 + rchunk : L.R;
  const int64_t ntiles = (L.n_out + kColX - 1) / kColX;
  for (int64_t tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
    const int64_t o = tile * kColX + tx;
    Acc acc = Acc(Op::identity());
    if (o < L.n_out) {
      const T* p = x + kept_offset(L, o);
      int64_t r = r0 + ty;
      if (L.nr == 1) {
        const int64_t rs = L.rstride[0];
        for (; r + (kColUnroll - 1) * kColY < r1; r += kColUnroll * kColY) {
          Acc v[kColUnroll];
#pragma unroll
          for (int u = 0; u < kColUnroll; ++u) v[u] = to_acc(p[(r + u * kColY) * rs]);
#pragma unroll
          for (int u = 0; u < kColUnroll; ++u) acc = op(acc, v[u]);
        }
        for (; r < r1; r += kColY) acc = op(acc, to_acc(p[r * rs]));
      } else {
        for (; r < r1; r += kColY) acc = op(acc, to_acc(p[reduced_offset(L, r)]));
      }
    }
    part[ty][tx] = acc;
    __syncthreads();  // all row lanes' partials in smem
    if (ty == 0) {
#pragma unroll
      for (int y = 1; y < kColY; ++y) acc = op(acc, part[y][tx]);
      if (o < L.n_out) {
        if (gridDim.y == 1) {
          store_out<T, Acc>(out, o, acc);
        } else {
          ws[static_cast<int64_t>(blockIdx.y) * L.n_out + o] = acc;
          __threadfence();  // partial visible device-wide before the ticket
        }
      }
    }
    if (gridDim.y > 1) {
      __syncthreads();  // the y == 0 warp has written and fenced its partials
      unsigned int* ticket = &g_tickets[ticket_base + tile];
      if (tx == 0 && ty == 0) s_last = atomicAdd(ticket, 1u) == gridDim.y - 1;
      __syncthreads();  // s_last visible to the block
      if (s_last) {
        __threadfence();
        if (ty == 0 && o < L.n_out) {
          Acc v = Acc(Op::identity());
          for (unsigned s = 0; s < gridDim.y; ++s) v = op(v, __ldcg(&ws[s * L.n_out + o]));
          store_out<T, Acc>(out, o, v);
        }
        if (tx == 0 && ty == 0) *ticket = 0u;
      }
    }
    __syncthreads();  // smem and s_last free for the next tile
  }
}

// Column reduction with 16-byte loads (float types). Host guarantees: nr == 1, nk == 1,
// kstride[0] == 1, x 16-byte aligned, rstride[0] % V == 0 and n_out % V == 0, so every thread's V
// outputs o..o+V-1 are in range together and each row's vector is aligned. Block (kColX, kColY):
// thread (tx, ty) owns outputs tile * kColX * V + tx * V + [0, V) and rows ty, ty + kColY, ... of
// its split (grid.y = splits, as in col_reduce_kernel; S > 1 needs gridDim.x == number of tiles
// <= kTicketsPerSlot). Row lanes are combined in order through smem; the S partials of an output
// are combined in split order by the last block of the tile (all its threads, one output each).
// Barriers: after the smem partials are written, around the ticket, at the end of each tile.
template <typename T, typename Op>
__global__ void __launch_bounds__(kThreads)
    col_vec_reduce_kernel(const T* __restrict__ x, ReduceLayout L, ReduceOut out,
                          float* __restrict__ ws, int ticket_base, int64_t rchunk) {
  constexpr int V = kVec16<T>;
  constexpr int U = kColVecUnroll;
  constexpr int kTileOut = kColX * V;
  __shared__ float part[kColY][kTileOut];
  __shared__ bool s_last;
  const Op op{};
  const int tx = threadIdx.x;
  const int ty = threadIdx.y;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * rchunk;
  const int64_t r1 = r0 + rchunk < L.R ? r0 + rchunk : L.R;
  const int64_t rs = L.rstride[0];
  const int64_t ntiles = (L.n_out + kTileOut - 1) / kTileOut;
  for (int64_t tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
    const int64_t o = tile * kTileOut + static_cast<int64_t>(tx) * V;
    float acc[V];
#pragma unroll
    for (int e = 0; e < V; ++e) acc[e] = Op::identity();
    if (o < L.n_out) {
      const T* p = x + o;
      int64_t r = r0 + ty;
      for (; r + (U - 1) * kColY < r1; r += U * kColY) {
        Vec<T, V> v[U];
#pragma unroll
        for (int u = 0; u < U; ++u) v[u] = load_vec<T, V>(p + (r + u * kColY) * rs);
#pragma unroll
        for (int u = 0; u < U; ++u) {
#pragma unroll
          for (int e = 0; e < V; ++e) acc[e] = op(acc[e], to_float(v[u].v[e]));
        }
      }
      // Fewer than U rows left for this lane: one predicated round.
      Vec<T, V> v[U - 1];
#pragma unroll
      for (int u = 0; u < U - 1; ++u) {
        if (r + u * kColY < r1) v[u] = load_vec<T, V>(p + (r + u * kColY) * rs);
      }
#pragma unroll
      for (int u = 0; u < U - 1; ++u) {
        if (r + u * kColY < r1) {
#pragma unroll
          for (int e = 0; e < V; ++e) acc[e] = op(acc[e], to_float(v[u].v[e]));
        }
      }
    }
#pragma unroll
    for (int e = 0; e < V; ++e) part[ty][tx * V + e] = acc[e];
    __syncthreads();  // all row lanes' partials in smem
    if (ty == 0) {
#pragma unroll
      for (int y = 1; y < kColY; ++y) {
#pragma unroll
        for (int e = 0; e < V; ++e) acc[e] = op(acc[e], part[y][tx * V + e]);
      }
      if (o < L.n_out) {
        if (gridDim.y == 1) {
#pragma unroll
          for (int e = 0; e < V; ++e) store_out<T, float>(out, o + e, acc[e]);
        } else {
#pragma unroll
          for (int e = 0; e < V; ++e) ws[static_cast<int64_t>(blockIdx.y) * L.n_out + o + e] = acc[e];
          __threadfence();  // partials visible device-wide before the ticket
        }
      }
    }
    if (gridDim.y > 1) {
      __syncthreads();  // the y == 0 warp has written and fenced its partials
      unsigned int* ticket = &g_tickets[ticket_base + tile];
      if (tx == 0 && ty == 0) s_last = atomicAdd(ticket, 1u) == gridDim.y - 1;
      __syncthreads();  // s_last visible to the block
      if (s_last) {
        __threadfence();
        for (int i = ty * kColX + tx; i < kTileOut; i += kThreads) {
          const int64_t oo = tile * kTileOut + i;
          if (oo < L.n_out) {
            float v = Op::identity();
            for (unsigned s = 0; s < gridDim.y; ++s) v = op(v, __ldcg(&ws[s * L.n_out + oo]));
            store_out<T, float>(out, oo, v);
          }
        }
        if (tx == 0 && ty == 0) *ticket = 0u;
      }
    }
    __syncthreads();  // smem and s_last free for the next tile
  }
}

}  // namespace red
}  // namespace gpukern
