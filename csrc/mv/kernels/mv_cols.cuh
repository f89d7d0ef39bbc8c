#pragma once
// mv_cols_kernel: column-major A and very short rows; see mv_common.cuh for the family.
#include <cstdint>
#include <type_traits>

#include "mv/kernels/mv_common.cuh"

namespace gpukern {
namespace mv {

// Cols kernel block shape. kVecA: a warp covers 32 x V consecutive rows with one 16-byte vector
// per lane (512 contiguous bytes of a column), and the block's 8 warps take interleaved columns,
// combined in warp order through smem. 128 (f32) / 256 (16-bit) rows per block means 64 / 32 row
// blocks for 8192 rows, so few splits of N fill the GPU and the last block's finish reads few
// partials (larger row blocks need many splits, and the finish then waits on several serial L2
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
// writing the column-lane partials, the two inside last_block_arrives, and at the end of each row
// block.
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
      }
    }
    if (split) {  // block-uniform: every thread reaches last_block_arrives
      unsigned int* ticket = &g_tickets[ticket_base + rb];
      if (last_block_arrives(ticket, gridDim.y)) {
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
        if (t == 0) ticket_reset(ticket);
      }
    }
    __syncthreads();  // xs, part (and the ticket's flag) free for the next row block
  }
}

// cols_short: column-major A (s0 == 1) with few rows (M <= 256) or short rows (N <= 16). A's
// storage is [N, M] row-major: storage row n (column n of A, contiguous) holds the coefficients
// of all rows of y for x[n]. A block tile covers kTile = W * RPT consecutive rows of y: lane
// lw = threadIdx.x % W of each group owns rows i0 = rb * kTile + lw * RPT .. + RPT - 1 (RPT > 1:
// one aligned vector of RPT elements of a storage row, 16 or 8 bytes; RPT == 1: scalar loads),
// and the G = kThreads / W groups take storage rows n = k0 + group, + G, ... of the split's
// columns, KU of them in flight per lane (predicated: past k1 loads nothing), each lane
// accumulating its rows in float32 registers. A warp's load covers 32 / W storage rows of W
// vectors: for a tile that spans the whole of M and s1 == M, contiguous memory.
// Groups' partials are added through smem by halving (group g += group g + h, h = G/2 .. 1: a
// fixed pairing, log2(G) barriers), so every row's sum has a fixed order for a given launch
// shape. grid.x strides over row blocks, grid.y = splits of N (then gridDim.x == row blocks <=
// kTicketsPerSlot): each split writes float32 partials ws[split * M + row] and the last block of
// a row block to arrive adds them: kFinSub subsets of splits (s = sub, sub + kFinSub, ...) per
// row, kFin loads in flight per thread, each subset in split order, then the subsets by halving,
// so all threads of the finishing block read partials even when the tile has few rows.
// RPT > 1: A 16-byte aligned, s1 % RPT == 0 (with s0 == 1, each thread's rows of a storage row
// are one aligned vector); a thread whose rows run past M reads its rows element by element.
// Barriers: log2(G) + 1 for the group sums (G > 1), the two in last_block_arrives, and
// log2(kFinSub) + 1 per FT rows in the finish (kFinSub > 1); none otherwise (G == 1 without a
// split: threads only read A and x and write their own rows).
template <int RPT, int W>
struct ColsShortShape {
  static constexpr int kRpt = RPT;
  static constexpr int kGroups = kThreads / W;
  static constexpr int kTile = W * kRpt;
  static constexpr int kFinThreads = kTile < kThreads ? kTile : kThreads;
  static constexpr int kFinSub = kThreads / kFinThreads;
  static constexpr int kPart = kGroups * kTile > kThreads ? kGroups * kTile : kThreads;
  static_assert(W >= 1 && W <= kThreads && kThreads % W == 0, "W divides the block");
};

// Storage rows in flight per lane in cols_short: 16 of a 16-byte vector (256 bytes of A per
// lane, for every type: with 8 a lane, bf16 ran at half the bandwidth of fp32 at the same shapes,
// 71.5 against 42 us for torch at 64 x 2^20, fp32 at 1.06x), 32 of narrower loads (8-byte
// vectors, scalars), within the 128 registers of 2 blocks per SM.
template <typename T, int RPT>
constexpr int kShortColUnroll = RPT * sizeof(T) >= 16 ? 16 : 32;

// Adds the kSets sets part[s * kLen + t] (t < kLen, kSets a power of two) into part[t] by
// halving: set s += set s + h for h = kSets / 2, ..., 1, a fixed pairing. Opens with a barrier
// (every set written) and closes with one (part[0..kLen) final, for every thread).
template <int kSets, int kLen>
__device__ __forceinline__ void sum_sets_halving(float* part) {
  __syncthreads();
#pragma unroll
  for (int h = kSets / 2; h >= 1; h /= 2) {
    for (int i = threadIdx.x; i < h * kLen; i += kThreads) part[i] += part[i + h * kLen];
    __syncthreads();
  }
}

// At least 2 resident blocks per SM (<= 128 registers): the launch uses at most 2 per SM, which
// with KU 16-byte loads in flight per lane keep 128 KB per SM in flight.
template <typename T, int RPT, int W>
__global__ void __launch_bounds__(kThreads, 2)
    mv_cols_short_kernel(const T* __restrict__ A, const T* __restrict__ x, T* __restrict__ y,
                         float* __restrict__ ws, MvParams p, int ticket_base) {
  using Shape = ColsShortShape<RPT, W>;
  constexpr int G = Shape::kGroups;
  constexpr int kTile = Shape::kTile;
  constexpr int KU = kShortColUnroll<T, RPT>;
  constexpr int KT = KU / 2;
  __shared__ float part[Shape::kPart];  // [G][kTile] group partials, then [kFinSub][kFinThreads]
  const int lw = threadIdx.x % W;
  const int grp = threadIdx.x / W;
  const int64_t k0 = static_cast<int64_t>(blockIdx.y) * p.split_len;
  const int64_t k1 = k0 + p.split_len < p.N ? k0 + p.split_len : p.N;
  const int64_t nrb = (p.M + kTile - 1) / kTile;
  const bool split = gridDim.y > 1;
  pdl_wait_then_release();
  for (int64_t rb = blockIdx.x; rb < nrb; rb += gridDim.x) {
    const int64_t i0 = rb * kTile + static_cast<int64_t>(lw) * RPT;
    float acc[RPT];
#pragma unroll
    for (int r = 0; r < RPT; ++r) acc[r] = 0.f;
    if (RPT > 1 && i0 + RPT <= p.M) {
      // Whole vector of rows: s0 == 1, so rows i0.. of storage row n start at A + i0 + n * s1.
      const T* a = A + i0;
      const int64_t as = static_cast<int64_t>(G) * p.s1;  // next storage row of the group
      const int64_t xstep = static_cast<int64_t>(G) * p.xs;
      int64_t n = k0 + grp;
      // Whole batches without predicates (the pointers advance by as / xstep per load, so no
      // per-load index or predicate stays live), then predicated batches of KT for the rest
      // (at most two: KT = KU / 2; a full predicated batch of KU spilled 16-bit types).
#pragma unroll 1
      for (; n + static_cast<int64_t>(KU - 1) * G < k1; n += static_cast<int64_t>(KU) * G) {
        Vec<T, RPT> va[KU];
        T xv[KU];
        const T* pa = a + n * p.s1;
        const T* px = x + n * p.xs;
#pragma unroll
        for (int u = 0; u < KU; ++u) {
          va[u] = load_vec<T, RPT>(pa);
          xv[u] = *px;
          pa += as;
          px += xstep;
        }
#pragma unroll
        for (int u = 0; u < KU; ++u) {
          const float xf = to_float(xv[u]);
#pragma unroll
          for (int r = 0; r < RPT; ++r) acc[r] += to_float(va[u].v[r]) * xf;
        }
      }
#pragma unroll 1
      for (; n < k1; n += static_cast<int64_t>(KT) * G) {
        Vec<T, RPT> va[KT];
        float xv[KT];
#pragma unroll
        for (int u = 0; u < KT; ++u) {
          const int64_t nn = n + static_cast<int64_t>(u) * G;
          if (nn < k1) {
            va[u] = load_vec<T, RPT>(a + nn * p.s1);
            xv[u] = to_float(x[nn * p.xs]);
          } else {
#pragma unroll
            for (int r = 0; r < RPT; ++r) va[u].v[r] = from_float<T>(0.f);
            xv[u] = 0.f;
          }
        }
#pragma unroll
        for (int u = 0; u < KT; ++u) {
#pragma unroll
          for (int r = 0; r < RPT; ++r) acc[r] += to_float(va[u].v[r]) * xv[u];
        }
      }
    } else if (i0 < p.M) {
      // Element by element (RPT > 1: the last, partial vector of rows, one lane of the tile, one
      // storage row at a time; else every row, KU storage rows in flight).
      constexpr int KS = RPT > 1 ? 1 : KU;
      const T* a = A + i0 * p.s0;
#pragma unroll 1
      for (int64_t n = k0 + grp; n < k1; n += static_cast<int64_t>(KS) * G) {
        float av[KS][RPT];
        float xv[KS];
#pragma unroll
        for (int u = 0; u < KS; ++u) {
          const int64_t nn = n + static_cast<int64_t>(u) * G;
          const bool in = nn < k1;
          xv[u] = in ? to_float(x[nn * p.xs]) : 0.f;
#pragma unroll
          for (int r = 0; r < RPT; ++r) {
            av[u][r] = in && i0 + r < p.M ? to_float(a[r * p.s0 + nn * p.s1]) : 0.f;
          }
        }
#pragma unroll
        for (int u = 0; u < KS; ++u) {
#pragma unroll
          for (int r = 0; r < RPT; ++r) acc[r] += av[u][r] * xv[u];
        }
      }
    }
    // Row t of the tile (t < kTile): its sum in the owning thread (G == 1) or over the groups
    // (G > 1, by halving); to y, or to the split's partials.
    auto put = [&](int t, float v) {
      const int64_t row = rb * kTile + t;
      if (row < p.M) {
        if (!split) {
          y[row] = from_float<T>(v);
        } else {
          ws[static_cast<int64_t>(blockIdx.y) * p.M + row] = v;
        }
      }
    };
    if constexpr (G == 1) {
#pragma unroll
      for (int r = 0; r < RPT; ++r) put(lw * RPT + r, acc[r]);
    } else {
#pragma unroll
      for (int r = 0; r < RPT; ++r) part[grp * kTile + lw * RPT + r] = acc[r];
      sum_sets_halving<G, kTile>(part);
      for (int t = threadIdx.x; t < kTile; t += kThreads) put(t, part[t]);
      __syncthreads();  // part read: free for the finish or the next row block
    }
    if (split) {  // block-uniform: every thread reaches last_block_arrives
      unsigned int* ticket = &g_tickets[ticket_base + rb];
      if (last_block_arrives(ticket, gridDim.y)) {
        constexpr int FT = Shape::kFinThreads;
        constexpr int FS = Shape::kFinSub;
        constexpr int kFin = 16;
        const int fr = threadIdx.x % FT;
        const int sub = threadIdx.x / FT;
        const int S = static_cast<int>(gridDim.y);
        // Block-uniform loop over the tile's rows, FT at a time.
        for (int t0 = 0; t0 < kTile; t0 += FT) {
          const int64_t row = rb * kTile + t0 + fr;
          float v = 0.f;
          if (row < p.M) {
            for (int s0 = sub; s0 < S; s0 += kFin * FS) {
              float w[kFin];
#pragma unroll
              for (int u = 0; u < kFin; ++u) {
                const int s = s0 + u * FS;
                w[u] = s < S ? __ldcg(&ws[static_cast<int64_t>(s) * p.M + row]) : 0.f;
              }
#pragma unroll
              for (int u = 0; u < kFin; ++u) v += w[u];
            }
          }
          if constexpr (FS == 1) {
            if (row < p.M) y[row] = from_float<T>(v);
          } else {
            part[sub * FT + fr] = v;
            sum_sets_halving<FS, FT>(part);  // the subsets' sums, by halving
            if (sub == 0 && row < p.M) y[row] = from_float<T>(part[fr]);
            __syncthreads();  // part read before the next rows' subsets overwrite it
          }
        }
        if (threadIdx.x == 0) ticket_reset(ticket);
      }
    }
    // No barrier here: part was last read before a barrier (after the group sums, or the
    // finish's last one), and last_block_arrives opens with its own before reusing its flag.
  }
}

}  // namespace mv
}  // namespace gpukern
