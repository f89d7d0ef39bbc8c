#pragma once
// row_reduce_kernel and row_vec_reduce_kernel: many contiguous rows, a lane group per row (see
// reduce_common.cuh for the family).
#include <cstdint>
#include <type_traits>

#include "reduce/kernels/reduce_common.cuh"

namespace gpukern {
namespace reduce {

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

}  // namespace reduce
}  // namespace gpukern
