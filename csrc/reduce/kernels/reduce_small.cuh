#pragma once
// small_reduce_kernel: short contiguous full reductions in one block, and its configuration
// tables (see reduce_common.cuh for the family).
#include <cstdint>
#include <type_traits>

#include "reduce/kernels/reduce_common.cuh"

namespace gpukern {
namespace reduce {

// small kernel configurations {threads, 16-byte vectors per thread per round}: the host takes
// the first of the dtype's table that holds the run in one round; the last takes up to two. Each
// table is the fastest configuration per run length (docs/performance.md, reductions). A 16-bit
// sum converts every element (bf16: a shift or a mask; fp32 needs none and the 16-bit max/min
// work on packed pairs), so its table takes more threads sooner. Integers (int64 accumulators,
// more registers per element) use {32, 8} and {256, 8} only.
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

// The small kernel's configuration table for T and Op.
template <typename T, typename Op>
using SmallTableOf = std::conditional_t<
    !std::is_same<typename AccOf<T>::type, float>::value, SmallTableInt,
    std::conditional_t<sizeof(T) == 2 && std::is_same<Op, SumOp>::value, SmallTableHalfSum,
                       SmallTableCheap>>;

// ---- small kernel: latency-bound accumulation on raw 16-byte words ----------------------------
// The small kernel's time is the latency of a short instruction stream, so it moves and selects
// vectors as four raw 32-bit words (a select of Vec<bf16, 8> element by element costs a byte
// permute per element) and accumulates each vector with as few instructions as the type allows
// (SlotAcc below).
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
//     the first vectors and added after the last: loaded after, the tail costs one more memory
//     round trip. The other kernels keep the plain order (early edges slowed the flat kernel);
//   - a slot beyond the run is loaded as SlotAcc's fill (the identity) instead of skipped, so
//     every slot is accumulated without a branch (a branch per slot slowed the one-warp 16-bit
//     sums); the rounds are warp-uniform (a lane past the end loads fills while its warp still
//     has data), so a warp never diverges on them.
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
    // shuffle chain.
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

}  // namespace reduce
}  // namespace gpukern
