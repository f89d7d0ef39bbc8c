#pragma once
// col_reduce_kernel and col_vec_reduce_kernel: many outputs whose reduced elements are strided,
// threads across outputs, a block of 32 output lanes x 8 row lanes (see reduce_common.cuh for the
// family). col_lanes_reduce_kernel: the same work with the block's output x row lanes chosen by
// the shape, for the shapes that block fits badly (narrow reduced rows, few reduced rows).
#include <cstdint>
#include <type_traits>

#include "reduce/kernels/reduce_common.cuh"

namespace gpukern {
namespace reduce {

// Adds rows r, r + g, r + 2g, ... (below r1) of the UV-element column vector at p (rows rs
// elements apart) into acc: kU rows a round with all of their loads issued before the adds, then
// one predicated round for the fewer than kU rows left. Shared by col_vec_reduce_kernel (g = its
// row lanes) and col_lanes_reduce_kernel (g = the block's row lanes for the shape).
template <int kU, int UV, typename T, typename A, typename Op>
__device__ __forceinline__ void col_vec_rows(A (&acc)[UV], const T* p, int64_t r, int64_t r1,
                                             int64_t g, int64_t rs, const Op& op) {
  static_assert(kU >= 2, "one full round plus a predicated remainder");
  for (; r + (kU - 1) * g < r1; r += kU * g) {
    Vec<T, UV> v[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) v[u] = load_vec<T, UV>(p + (r + u * g) * rs);
#pragma unroll
    for (int u = 0; u < kU; ++u) {
#pragma unroll
      for (int e = 0; e < UV; ++e) acc[e] = op(acc[e], to_float(v[u].v[e]));
    }
  }
  Vec<T, UV> v[kU - 1];
#pragma unroll
  for (int u = 0; u < kU - 1; ++u) {
    if (r + u * g < r1) v[u] = load_vec<T, UV>(p + (r + u * g) * rs);
  }
#pragma unroll
  for (int u = 0; u < kU - 1; ++u) {
    if (r + u * g < r1) {
#pragma unroll
      for (int e = 0; e < UV; ++e) acc[e] = op(acc[e], to_float(v[u].v[e]));
    }
  }
}

// Strided reductions with many outputs. Block (kColX, kColY): threadIdx.x picks the output
// (consecutive outputs -> consecutive addresses when the innermost kept dim has stride 1),
// threadIdx.y the row lane. grid.x strides over output tiles of kColX; grid.y = S splits of R,
// each covering rchunk reduced elements. Each thread accumulates rows y, y + kColY, ... of its
// split in order; the kColY lanes are combined in order through smem. S == 1: stored directly.
// S > 1 (then gridDim.x == number of tiles <= kTicketsPerSlot): partials to ws[s * n_out + o],
// last block of the tile (ticket per tile) combines the S partials in order.
// smem: kColY x kColX partials; barriers: after writing them (before the y == 0 lanes read), the
// two inside last_block_arrives, and at the end of each tile (before they are overwritten).
template <typename T, typename Op>
__global__ void __launch_bounds__(kThreads)
    col_reduce_kernel(const T* __restrict__ x, ReduceLayout L, ReduceOut out,
                      typename AccOf<T>::type* __restrict__ ws, int ticket_base, int64_t rchunk) {
  using Acc = typename AccOf<T>::type;
  __shared__ Acc part[kColY][kColX];
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
        }
      }
    }
    if (gridDim.y > 1) {  // block-uniform: every thread reaches last_block_arrives
      unsigned int* ticket = &g_tickets[ticket_base + tile];
      if (last_block_arrives(ticket, gridDim.y)) {
        if (ty == 0 && o < L.n_out) {
          Acc v = Acc(Op::identity());
          for (unsigned s = 0; s < gridDim.y; ++s) v = op(v, __ldcg(&ws[s * L.n_out + o]));
          store_out<T, Acc>(out, o, v);
        }
        if (tx == 0 && ty == 0) ticket_reset(ticket);
      }
    }
    __syncthreads();  // smem (and the ticket's flag) free for the next tile
  }
}

// Column reduction with 16-byte loads (float types). Host guarantees: nr == 1, nk == 1,
// kstride[0] == 1, x 16-byte aligned, rstride[0] % V == 0 and n_out % V == 0, so every thread's V
// outputs o..o+V-1 are in range together and each row's vector is aligned. Block (kColX, kColY):
// thread (tx, ty) owns outputs tile * kColX * V + tx * V + [0, V) and rows ty, ty + kColY, ... of
// its split (grid.y = splits, as in col_reduce_kernel; S > 1 needs gridDim.x == number of tiles
// <= kTicketsPerSlot). Row lanes are combined in order through smem; the S partials of an output
// are combined in split order by the last block of the tile (all its threads, one output each).
// Barriers: after the smem partials are written, the two inside last_block_arrives, at the end
// of each tile.
template <typename T, typename Op>
__global__ void __launch_bounds__(kThreads)
    col_vec_reduce_kernel(const T* __restrict__ x, ReduceLayout L, ReduceOut out,
                          float* __restrict__ ws, int ticket_base, int64_t rchunk) {
  constexpr int V = kVec16<T>;
  constexpr int U = kColVecUnroll;
  constexpr int kTileOut = kColX * V;
  __shared__ float part[kColY][kTileOut];
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
      col_vec_rows<U>(acc, x + o, r0 + ty, r1, kColY, rs, op);
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
        if (gridDim.y == 1 && out.aligned) {
          store_out_vec<T, V>(out, o, acc);
        } else if (gridDim.y == 1) {
#pragma unroll
          for (int e = 0; e < V; ++e) store_out<T, float>(out, o + e, acc[e]);
        } else {
#pragma unroll
          for (int e = 0; e < V; ++e) {
            ws[static_cast<int64_t>(blockIdx.y) * L.n_out + o + e] = acc[e];
          }
        }
      }
    }
    if (gridDim.y > 1) {  // block-uniform: every thread reaches last_block_arrives
      unsigned int* ticket = &g_tickets[ticket_base + tile];
      if (last_block_arrives(ticket, gridDim.y)) {
        for (int i = ty * kColX + tx; i < kTileOut; i += kThreads) {
          const int64_t oo = tile * kTileOut + i;
          if (oo < L.n_out) {
            float v = Op::identity();
            for (unsigned s = 0; s < gridDim.y; ++s) v = op(v, __ldcg(&ws[s * L.n_out + oo]));
            store_out<T, float>(out, oo, v);
          }
        }
        if (tx == 0 && ty == 0) ticket_reset(ticket);
      }
    }
    __syncthreads();  // smem (and the ticket's flag) free for the next tile
  }
}

// Block: kThreads threads as G row lanes x W output lanes, W = 1 << lg_w, G = kThreads / W
// (chosen by the host from the shape: W = 32 lanes across wide outputs with 8 row lanes, as many
// output lanes as a narrow row has units with the rest of the block on rows, or 1-4 row lanes
// when few rows are reduced). A unit is one output (col) or V outputs (col_vec); a tile is the
// W units of one block step. Thread (ty, tx) owns the units of tile * W + tx and accumulates
// rows r0 + ty, r0 + ty + G, ... of its split [r0, r1) in order, kU loads in flight. The G row
// lanes are combined through smem by a fixed-order tree. grid.x strides over tiles, grid.y = S
// splits of R of rchunk rows each. S == 1: the row-lane-0 threads store. S > 1 (then gridDim.x ==
// number of tiles <= kTicketsPerSlot): partials to ws[s * n_out + o], and the last block of the
// tile to arrive (ticket per tile) combines the S partials of each output in split order: with
// TO = W * units outputs in the tile, kThreads / TO split lanes per output (when TO < kThreads)
// take splits lane, lane + lanes, ... and a fixed-order tree combines the lanes.
// Barriers: after the smem partials are written and after each tree level, inside
// last_block_arrives, in the finishing tree, and at the end of each tile (smem and the ticket's
// flag reused by the next tile).
template <typename T, typename Op, bool kVec>
__global__ void __launch_bounds__(kThreads, 4)
    col_lanes_reduce_kernel(const T* __restrict__ x, ReduceLayout L, ReduceOut out,
                      typename AccOf<T>::type* __restrict__ ws, int ticket_base, int64_t rchunk,
                      int lg_w) {
  using Acc = typename AccOf<T>::type;
  constexpr int UV = kVec ? kVec16<T> : 1;  // outputs per unit
  constexpr int kU = kVec ? kColVecUnroll : kColUnroll;
  __shared__ Acc part[kThreads * UV];
  const Op op{};
  const int w = 1 << lg_w;
  const int g = kThreads >> lg_w;
  const int tx = threadIdx.x & (w - 1);
  const int ty = threadIdx.x >> lg_w;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * rchunk;
  const int64_t r1 = r0 + rchunk < L.R ? r0 + rchunk : L.R;
  const int64_t tile_out = static_cast<int64_t>(w) * UV;
  const int64_t ntiles = (L.n_out + tile_out - 1) / tile_out;
  for (int64_t tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
    const int64_t o = tile * tile_out + static_cast<int64_t>(tx) * UV;
    Acc acc[UV];
#pragma unroll
    for (int e = 0; e < UV; ++e) acc[e] = Acc(Op::identity());
    if (o < L.n_out) {
      int64_t r = r0 + ty;
      if constexpr (kVec) {
        col_vec_rows<kU>(acc, x + o, r, r1, g, L.rstride[0], op);
      } else {
        const T* p = x + kept_offset(L, o);
        if (L.nr == 1) {
          const int64_t rs = L.rstride[0];
          for (; r + (kU - 1) * g < r1; r += kU * g) {
            Acc v[kU];
#pragma unroll
            for (int u = 0; u < kU; ++u) v[u] = to_acc(p[(r + u * g) * rs]);
#pragma unroll
            for (int u = 0; u < kU; ++u) acc[0] = op(acc[0], v[u]);
          }
          for (; r < r1; r += g) acc[0] = op(acc[0], to_acc(p[r * rs]));
        } else {
          for (; r < r1; r += g) acc[0] = op(acc[0], to_acc(p[reduced_offset(L, r)]));
        }
      }
    }
    // Row lanes (g > 1, block-uniform): a fixed-order tree over ty (lane ty takes ty + h at each
    // level h), the total back in row lane 0's registers. One row lane: no smem, no barrier.
    if (g > 1) {
      Acc* mine = &part[(static_cast<int>(threadIdx.x)) * UV];
#pragma unroll
      for (int e = 0; e < UV; ++e) mine[e] = acc[e];
      __syncthreads();  // all row lanes' partials in smem
      for (int h = g >> 1; h > 0; h >>= 1) {
        if (ty < h) {
          const Acc* other = &part[(static_cast<int>(threadIdx.x) + (h << lg_w)) * UV];
#pragma unroll
          for (int e = 0; e < UV; ++e) mine[e] = op(mine[e], other[e]);
        }
        __syncthreads();  // this level written before the next reads it
      }
#pragma unroll
      for (int e = 0; e < UV; ++e) acc[e] = mine[e];
    }
    if (ty == 0 && o < L.n_out) {
      if constexpr (kVec) {
        if (gridDim.y == 1 && out.aligned) {
          store_out_vec<T, UV>(out, o, acc);
        } else {
#pragma unroll
          for (int e = 0; e < UV; ++e) {
            if (gridDim.y == 1) {
              store_out<T, Acc>(out, o + e, acc[e]);
            } else {
              ws[static_cast<int64_t>(blockIdx.y) * L.n_out + o + e] = acc[e];
            }
          }
        }
      } else if (gridDim.y == 1) {
        store_out<T, Acc>(out, o, acc[0]);
      } else {
        ws[static_cast<int64_t>(blockIdx.y) * L.n_out + o] = acc[0];
      }
    }
    if (gridDim.y > 1) {  // block-uniform: every thread reaches last_block_arrives
      unsigned int* ticket = &g_tickets[ticket_base + tile];
      if (last_block_arrives(ticket, gridDim.y)) {
        const int S = static_cast<int>(gridDim.y);
        if (tile_out >= kThreads) {  // one thread per output, splits in order
          for (int64_t i = threadIdx.x; i < tile_out; i += kThreads) {
            const int64_t oo = tile * tile_out + i;
            if (oo < L.n_out) {
              Acc v = Acc(Op::identity());
              for (int s = 0; s < S; ++s) v = op(v, __ldcg(&ws[s * L.n_out + oo]));
              store_out<T, Acc>(out, oo, v);
            }
          }
        } else {  // tile_out (a power of 2) < kThreads: split lanes per output, then a tree
          const int to = static_cast<int>(tile_out);
          const int lanes = kThreads / to;
          const int i = threadIdx.x & (to - 1);
          const int lane = threadIdx.x / to;
          const int64_t oo = tile * tile_out + i;
          Acc v = Acc(Op::identity());
          if (oo < L.n_out) {
            int s = lane;
            for (; s + 3 * lanes < S; s += 4 * lanes) {  // four loads in flight, combined in order
              Acc p[4];
#pragma unroll
              for (int k = 0; k < 4; ++k) p[k] = __ldcg(&ws[(s + k * lanes) * L.n_out + oo]);
#pragma unroll
              for (int k = 0; k < 4; ++k) v = op(v, p[k]);
            }
            for (; s < S; s += lanes) v = op(v, __ldcg(&ws[s * L.n_out + oo]));
          }
          part[threadIdx.x] = v;  // the row-lane tree's reads all ended at its last barrier
          __syncthreads();
          for (int h = lanes >> 1; h > 0; h >>= 1) {
            if (lane < h) part[threadIdx.x] = op(part[threadIdx.x], part[threadIdx.x + h * to]);
            __syncthreads();
          }
          if (lane == 0 && oo < L.n_out) store_out<T, Acc>(out, oo, part[threadIdx.x]);
        }
        if (threadIdx.x == 0) ticket_reset(ticket);
      }
    }
    __syncthreads();  // smem (and the ticket's flag) free for the next tile
  }
}

}  // namespace reduce
}  // namespace gpukern
