#pragma once
// Helpers shared by the 1-D warp-tile row-wise kernels (rowwise16, rowwise_reg, rowwise_mma):
// a row index as (n, c), a warp tile's rows and first output, and the host's count of outputs a
// row's first tile starts early (torch-free). A 1-D problem has H = 1 (L = p.W, K = p.KW,
// L_out = p.OW).
#include <cstdint>

#include "conv/problem.h"
#include "device/vec.cuh"

namespace gpukern {
namespace conv {

// Row `row` of the N x C rows as (n, c), in 32 bits (the launchers keep the row count below 2^32).
__device__ __forceinline__ void split_row(const ConvProblem& p, uint32_t row, uint32_t& n,
                                          uint32_t& c) {
  n = row;
  c = 0;
  if (p.C != 1) {
    const uint32_t C = static_cast<uint32_t>(p.C);
    n = row / C;
    c = row - n * C;
  }
}

// A warp tile of the row-wise warp kernels (rowwise16, rowwise_mma): item = row * tiles + tile
// (tile fastest), its row's input, output and filter rows and channel, and its first output l0 =
// tile * tile_len - my (my = the row's output misalignment in elements: 16-byte aligned stores).
template <typename T>
struct Conv1dWarpTile {
  const T* xrow;
  T* yrow;
  const T* wrow;
  uint32_t c;
  int64_t l0;
};

template <typename T>
__device__ __forceinline__ Conv1dWarpTile<T> warp_tile(const ConvProblem& p, uint32_t item,
                                                       uint32_t tiles, int tile_len) {
  constexpr int kV = kVec16<T>;
  const uint32_t row = item / tiles;
  const uint32_t tile = item - row * tiles;
  uint32_t n, c;
  split_row(p, row, n, c);
  Conv1dWarpTile<T> t;
  t.c = c;
  t.xrow = static_cast<const T*>(p.x) + static_cast<int64_t>(n) * p.x_sn +
           static_cast<int64_t>(c) * p.x_sc;
  t.yrow = static_cast<T*>(p.y) + static_cast<int64_t>(n) * p.y_sn + static_cast<int64_t>(c) * p.y_so;
  t.wrow = static_cast<const T*>(p.w) + static_cast<int64_t>(c) * p.w_so;
  const int my =
      p.y_sw == 1 ? static_cast<int>((reinterpret_cast<uintptr_t>(t.yrow) / sizeof(T)) % kV) : 0;
  t.l0 = static_cast<int64_t>(tile) * tile_len - my;
  return t;
}

// Host: how many outputs early (< kV) the warp-tile kernels' first tile of a row starts, at the
// row's 16-byte aligned output position: the output's misalignment when every row start has the
// same one, else kV - 1 (then some rows get one empty tile, which the kernels skip).
template <typename T>
inline int64_t rows_start_early(const ConvProblem& p) {
  constexpr int64_t kV = kVec16<T>;
  if (p.y_sw == 1 && (p.C == 1 || p.y_so % kV == 0) && (p.N == 1 || p.y_sn % kV == 0)) {
    return static_cast<int64_t>((reinterpret_cast<uintptr_t>(p.y) / sizeof(T)) % kV);
  }
  return kV - 1;
}

}  // namespace conv
}  // namespace gpukern
