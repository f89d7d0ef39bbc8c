#pragma once
// depthwise_plane: depthwise / single-channel NCHW conv2d with small planes whole in shared
// memory (sm_90+): groups == C == O, stride 1, dilation 1, square kK x kK filter with 'same'
// padding, W a multiple of 4 up to 128 and a plane of at most kMaxPlaneBytes (MobileNet's
// 56x56, 28x28). One warp per plane: one bulk copy brings the whole plane into the warp's shared
// slot (no halo re-read, no tile edges: the TMA kernel's 64x64 tiles leave threads idle on 56x56
// planes), then the lanes slide down it, 4 columns each, every staged row read once per lane and
// the next row's load issued before the current row's multiply-adds. 16-bit planes whose rows
// are an odd number of 16-byte units take the tensor cores instead (plane_mma3).
// Not persistent: the warps' multiply-adds need the occupancy (one plane per warp, one slot
// each) to hide their latency; warps streaming planes through two slots each were slower.
//
// Contract (conv2d_depthwise_plane_kernel<T, kK>; details above the kernel):
//   grid   1-D: warp w of block b takes plane b * kWarps + w (PlaneShape).
//   block  kWarps warps; a warp's lanes form `bands` bands of W / 4 lanes, each lane 4 columns
//          of its band's rows.
//   shared kWarpBarrierBytes (the warps' mbarriers), a zero row (the mma path's padding), then
//          one slot per warp holding its plane (the mma path: after a spare row).
//   barriers no block barrier: a warp's slot is its own; its mbarrier says the bulk copy landed,
//          __syncwarp orders the lanes' staging, reads and output staging within the warp.
#include <cstdint>
#include <type_traits>

#include "conv/direct/common2d.cuh"
#include "device/async_mma.cuh"
#include "device/fastdiv.cuh"
#include "device/pdl.cuh"
#include "device/tma.cuh"
#include "device/vec.cuh"

namespace gpukern {
namespace conv {

struct PlaneTraits {
  // One warp a block: a block leaves as soon as its plane is done (no waiting for the slowest
  // warp of four).
  static constexpr int kWarps = 1;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kCols = 4;                    // output columns per lane
  static constexpr int kMaxW = 32 * kCols;           // one row across at most a warp
  static constexpr int kMaxPlaneBytes = 16384;       // a 64 x 64 fp32 plane
  static constexpr int kWarpBarrierBytes = 128;      // the warps' barriers, first
  static constexpr int kZeroBytes = 2 * kMaxW;       // then a zero row (the mma path's padding)
  static constexpr int kSlotsOffset = kWarpBarrierBytes + kZeroBytes;  // then the warps' slots
  static constexpr int kSlotAlign = 128;
  // Warps an SM asked of ptxas: 80 registers, which hold 25 (shared memory: 29 warps of
  // 16-bit 56x56 planes, 16 of fp32). More warps (fewer registers) are slower: the mma chains'
  // interleaving needs the registers.
  static constexpr int kMinBlocks = 24 / kWarps;
  static constexpr int kBandRows = 16;               // mma path: output rows of an m16 tile,
                                                     // computed together
};

// Work decomposition (host: depthwise_plane.cu, plan_plane()). Warp w of block b takes plane
// b * kWarps + w. Its lanes form `bands` bands of lanes_w lanes (W / 4); band i covers output
// rows [i * band_rows, (i + 1) * band_rows), lane g of a band output columns 4g .. 4g + 3.
struct PlaneShape {
  int planes;          // N * C
  FastDiv channels;    // C
  int lanes_w;         // W / 4
  int bands;           // 32 / lanes_w
  int band_rows;       // ceil(H / bands)
  int plane_bytes;     // H * W * sizeof(T)
  int slot_bytes;      // bytes between warps' slots (a multiple of kSlotAlign): the plane, for
                       // the mma path after a spare row (its output staging, one row up)
  bool bulk;           // rows contiguous (x_sw == 1, x_sh == W) and plane_bytes % 16 == 0: one
                       // bulk copy per plane whose start is 16-byte aligned, else the warp
                       // stages the plane element by element
  bool y_vec;          // 4-element vector stores allowed
  bool mma;            // 16-bit, W * 2 an odd number of 16-byte units: the tensor-core path
                       // (plane_mma3; its ldmatrix rows and staged 4-byte writes then hit
                       // distinct banks)
  bool y_rows16;       // unit column stride, rows 16-byte aligned apart: the mma path stores
                       // whole staged rows by bulk copies (when the plane's start is aligned)
};

// The tensor-core path of the plane kernel (16-bit, 3x3 'same', W * 2 an odd multiple of 16
// bytes: W = 8, 24, 40, 56, ...): the per-output multiply-adds and conversions left bf16 planes
// issue-bound, far further from the copy roof than fp32 planes. Each
// m16n8 mma tile is 16 output rows x 8 columns,
//   y[m0 + m][c0 + n] = bias + sum_{i < 3} sum_{k < 16} A_i[m][k] B_i[k][n],
//   A_i[m][k] = x[m0 + m + i - 1][c0 - 2 + k],   B_i[k][n] = w[i][k - n - 1] (0 outside 0..2),
// with c0 = 8 q - 6 for tile column q = 0 .. W / 8: A_i's two 8-column halves are the aligned
// column blocks q - 1 and q of the staged rows, so the output pairs start on even columns.
// Tiles go in pairs (q, q + 1): one ldmatrix.x4 of blocks q and q + 1 is tile q + 1's A_i, and its
// first half with block q - 1 kept from the pair before is tile q's, so every block is read once
// per row offset i (two x4 loads a tile kept the shared-memory pipe nearly saturated). Rows outside
// the image read the zero row, block -1 is zeros in registers, block W / 8 (outside) reads the zero
// row. bf16/fp16 products are exact in the float accumulators.
// Outputs: a tile's fragments cover 8 rows x 16 bytes per store instruction, 3x the sectors of
// whole rows (written straight from the fragments, the stores throttled the warps). So the outputs
// are staged in shared memory and written by bulk copies from lane 0 (y_rows16 and an aligned
// plane), else element by element through the strides.
// The staging is the plane itself, one row up: output row r goes to staged row r - 1 (row -1 is
// the slot's spare row before the plane). Band m0 reads input rows m0 - 1 .. m0 + 16 and writes
// rows m0 - 1 .. m0 + 14, so within a band a tile pair's outputs wait in registers until the
// next pair has read its columns (the pairs overlap by two columns); the next band reads rows
// m0 + 15 .. on. The staged plane goes out at the end, one copy where the output
// rows are contiguous (staging each band in 16 rows of its own, copied out before the next
// band's outputs, costs more shared memory a warp and a wait per band).
// Planes whose rows are an even number of 16-byte units (32 or 64 wide) would need padded rows
// copied row by row, slower than the multiply-add path: they stay there.
// A non-finite input reaches outputs outside its window through a zero of B (0 * inf is NaN).
// The loads of row offset 1 hold every element of the plane once: x * 0 + acc over them in
// packed 16-bit arithmetic stays 0 unless an x is inf/NaN. A plane holding one returns false
// once its outputs are written (the bulk copies complete): the caller reads the plane again and
// rewrites every output by the multiply-add path.
// buf: the staged plane (16-byte aligned, W * 2 an odd multiple of 16 bytes) after one spare
// row; zero_row: the shared address of W * 2 zero bytes.
template <typename T>
__device__ __forceinline__ bool plane_mma3(T* buf, uint32_t zero_row, int H, int W,
                                           const float (&wr)[3][3], float bias, T* yp,
                                           int64_t y_sh, int64_t y_sw, bool bulk_out, int lane) {
  constexpr int kBand = PlaneTraits::kBandRows;
  static_assert(kBand == 16, "one m16 mma tile of rows");
  using T2 = std::conditional_t<std::is_same_v<T, __half>, __half2, __nv_bfloat162>;
  const T2 zero2 = reinterpret_cast<const T2&>(static_cast<const unsigned&>(0u));
  T2 nf = zero2;  // the non-finite test's sum
  const uint32_t base = tma::smem_addr(buf);

  const int g = lane >> 2, t = lane & 3;
  // B_i fragments: b[i][h] = B_i[2t + 8h .. 2t + 8h + 1][g] = (w[i][j], w[i][j + 1]) for
  // j = 2t + 8h - g - 1, zero outside 0..2. The filter row packed as four 16-bit halves
  // {w0, w1, w2, 0} gives each value by a byte permutation (half 3 for the zeros).
  unsigned sel[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int j = 2 * t + 8 * h - g - 1;
    const unsigned h0 = j >= 0 && j <= 2 ? j : 3, h1 = j + 1 >= 0 && j + 1 <= 2 ? j + 1 : 3;
    sel[h] = (2 * h0) | (2 * h0 + 1) << 4 | (2 * h1) << 8 | (2 * h1 + 1) << 12;
  }
  unsigned b[3][2];
#pragma unroll
  for (int i = 0; i < 3; ++i) {
    const unsigned lo = reg_pack2<T>(wr[i][0], wr[i][1]), hi = reg_pack2<T>(wr[i][2], 0.f);
#pragma unroll
    for (int h = 0; h < 2; ++h) b[i][h] = __byte_perm(lo, hi, sel[h]);
  }
  const float bias4[4] = {bias, bias, bias, bias};
  // ldmatrix rows of lane l: A row (l % 8) + 8 ((l / 8) % 2), column block q + l / 16.
  const int ar = (lane & 7) + 8 * ((lane >> 3) & 1);
  const int kb = lane >> 4;
  const int row_bytes = W * static_cast<int>(sizeof(T));
  const int blocks = W / 8;
  auto run = [&](auto bulk) {
    constexpr bool kBulk = decltype(bulk)::value;
#pragma unroll 1
    for (int m0 = 0; m0 < H; m0 += kBand) {
      uint32_t rows[3];  // the lane's A_i row at column block kb
#pragma unroll
      for (int i = 0; i < 3; ++i) {
        const int r = m0 + ar + i - 1;
        rows[i] = (r >= 0 && r < H ? base + r * row_bytes : zero_row) + 16 * kb;
      }
      // The lane's output rows m0 + g and m0 + g + 8 (staged: one row up, shared addresses).
      const bool oka = m0 + g < H, okb = m0 + g + 8 < H;
      const uint32_t sa = base + (m0 + g - 1) * row_bytes, sb = sa + 8 * row_bytes;
      T* const ya = kBulk ? nullptr : yp + (oka ? m0 + g : 0) * y_sh;  // direct stores only
      T* const yb = kBulk ? nullptr : yp + (okb ? m0 + g + 8 : 0) * y_sh;
      unsigned prev[3][2] = {};  // block q - 1 of each A_i (block -1: zeros)
      unsigned pend[2][2];       // staged path: the previous pair's packed outputs (tile, row)
      int pend_oc = 0;           // and its first tile's column
      auto flush = [&]() {  // predicated stores, no branches (columns outside: edge tiles)
#pragma unroll
        for (int u = 0; u < 2; ++u) {
          const int oc = pend_oc + 8 * u;
          const bool in = static_cast<unsigned>(oc) < static_cast<unsigned>(W);
          tma::st_shared_b32_if(sa + 2 * oc, pend[u][0], in && oka);
          tma::st_shared_b32_if(sb + 2 * oc, pend[u][1], in && okb);
        }
      };
      // Tiles q and q + 1 (their mma chains interleaved: one tile at a time left each chain's
      // latency exposed). kEdge: the pair holds tile W / 8, whose block W / 8 lies outside the
      // row (W / 8 + 1 tiles: always an even number). kFirst: no outputs pending before it.
      auto pair = [&](int q, auto edge, auto first) {
        constexpr bool kEdge = decltype(edge)::value;
        constexpr bool kFirst = decltype(first)::value;
        unsigned x[3][4];
        const bool in = !kEdge || q + kb < blocks;
#pragma unroll
        for (int i = 0; i < 3; ++i) ldmatrix_x4(x[i], in ? rows[i] + 16 * q : zero_row);
        if constexpr (kBulk && !kFirst) {
          // This pair's loads have read the columns the previous pair's outputs overwrite.
          __syncwarp();
          flush();
        }
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          nf = __hfma2(reinterpret_cast<const T2&>(x[1][e]), zero2, nf);
        }
        float d[2][4];
#pragma unroll
        for (int i = 0; i < 3; ++i) {
          if (i == 0) {
            mma_16816<T>(d[0], prev[i][0], prev[i][1], x[i][0], x[i][1], b[i][0], b[i][1],
                         bias4);
            mma_16816<T>(d[1], x[i][0], x[i][1], x[i][2], x[i][3], b[i][0], b[i][1], bias4);
          } else {
            mma_16816<T>(d[0], prev[i][0], prev[i][1], x[i][0], x[i][1], b[i][0], b[i][1]);
            mma_16816<T>(d[1], x[i][0], x[i][1], x[i][2], x[i][3], b[i][0], b[i][1]);
          }
          prev[i][0] = x[i][2];
          prev[i][1] = x[i][3];
        }
        const int oc0 = 8 * q - 6 + 2 * t;  // even: both columns in [0, W) or neither
        if constexpr (kBulk) {
#pragma unroll
          for (int u = 0; u < 2; ++u) {
            pend[u][0] = reg_pack2<T>(d[u][0], d[u][1]);
            pend[u][1] = reg_pack2<T>(d[u][2], d[u][3]);
          }
          pend_oc = oc0;
        } else {
#pragma unroll
          for (int u = 0; u < 2; ++u) {
            const int oc = oc0 + 8 * u;
            if (oc < 0 || oc >= W) continue;  // tiles 0 and W / 8 only
            if (oka) {
              ya[oc * y_sw] = from_float<T>(d[u][0]);
              ya[(oc + 1) * y_sw] = from_float<T>(d[u][1]);
            }
            if (okb) {
              yb[oc * y_sw] = from_float<T>(d[u][2]);
              yb[(oc + 1) * y_sw] = from_float<T>(d[u][3]);
            }
          }
        }
      };
      if (blocks == 1) {
        pair(0, std::true_type{}, std::true_type{});
      } else {
        pair(0, std::false_type{}, std::true_type{});
#pragma unroll 1
        for (int q = 2; q < blocks - 1; q += 2) pair(q, std::false_type{}, std::false_type{});
        pair(blocks - 1, std::true_type{}, std::false_type{});
      }
      if constexpr (kBulk) flush();
    }
    if constexpr (kBulk) {
      tma::fence_proxy_async();  // the staging writes before the bulk copies read them
      __syncwarp();
      // Lane 0 issues the copies (a bulk copy takes its operands from uniform registers:
      // copies issued by 16 lanes at once ran as a 16-step loop, 20% of this kernel's stall
      // samples), once the whole plane is staged: one copy where the output rows are
      // contiguous (y_sh == W), else one a row.
      if (lane == 0) {
        const uint32_t src = base - row_bytes;
        if (y_sh == W) {
          tma::store_bulk(yp, src, H * row_bytes);
        } else {
          for (int r = 0; r < H; ++r) {
            tma::store_bulk(yp + r * y_sh, src + r * row_bytes, row_bytes);
          }
        }
        tma::bulk_commit();
      }
    }
  };
  if (bulk_out) {
    run(std::true_type{});
  } else {
    run(std::false_type{});
  }
  const bool finite = !__any_sync(0xffffffffu, (reinterpret_cast<const unsigned&>(nf) &
                                                0x7fff7fffu) != 0u);
  if (bulk_out && lane == 0) {
    if (finite) {
      tma::bulk_wait_read<0>();  // the slot stays allocated until the copies have read it
    } else {
      tma::bulk_wait<0>();  // the outputs are rewritten after the copies' writes
      tma::fence_proxy_async_all();
    }
  }
  __syncwarp();
  return finite;
}

template <typename T, int kK>
__global__ void __launch_bounds__(PlaneTraits::kThreads, PlaneTraits::kMinBlocks)
    conv2d_depthwise_plane_kernel(const ConvProblem p, const PlaneShape s) {
  constexpr int kC = PlaneTraits::kCols;
  constexpr int kP = kK / 2;  // 'same' padding on every side
  extern __shared__ __align__(PlaneTraits::kSlotAlign) unsigned char smem_raw[];
  pdl_wait_then_release();  // launched with launch_pdl: no global memory touched before it
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int plane = blockIdx.x * PlaneTraits::kWarps + warp;
  if (plane >= s.planes) return;  // warp-uniform; no block barrier below
  const int n = s.channels.div(plane);
  const int c = plane - n * static_cast<int>(s.channels.d);
  const int H = static_cast<int>(p.H), W = static_cast<int>(p.W);
  const T* xp = ptr<T>(p.x) + n * p.x_sn + c * p.x_sc;
  // The mma path's slot holds a spare row before the plane (its staged outputs, plane_mma3).
  T* buf = reinterpret_cast<T*>(smem_raw + PlaneTraits::kSlotsOffset + warp * s.slot_bytes) +
           (s.mma ? static_cast<int>(p.W) : 0);
  const uint32_t bar = tma::smem_addr(smem_raw) + 8 * warp;
  // The zero row (the mma path's rows outside the image): every warp writes all of it, so it is
  // complete for a warp after its own __syncwarp below whatever the other warps do.
  const uint32_t zero_row = tma::smem_addr(smem_raw) + PlaneTraits::kWarpBarrierBytes;
  if constexpr (sizeof(T) == 2) {
    for (int i = lane; i < PlaneTraits::kZeroBytes / 4; i += 32) {
      reinterpret_cast<uint32_t*>(smem_raw + PlaneTraits::kWarpBarrierBytes)[i] = 0u;
    }
  }
  // The plane element by element through x's strides (no bulk copy, or read again).
  auto stage_by_hand = [&]() {
    for (int r = 0; r < H; ++r)
      for (int col = lane; col < W; col += 32) buf[r * W + col] = xp[r * p.x_sh + col * p.x_sw];
  };
  const bool bulk = s.bulk && reinterpret_cast<uintptr_t>(xp) % 16 == 0;  // warp-uniform
  if (bulk) {
    if (lane == 0) {
      tma::mbar_init(bar, 1);
      tma::fence_mbar_init();
      tma::arrive_expect_tx(bar, s.plane_bytes);
      tma::load_bulk(tma::smem_addr(buf), xp, s.plane_bytes, bar);
    }
    __syncwarp();  // the barrier is initialised before any lane waits on it
  } else {
    stage_by_hand();
  }
  // The taps and bias while the copy flies.
  float wr[kK][kK];
  float bias;
  auto load_taps = [&]() {
    const T* wc = ptr<T>(p.w) + c * p.w_so;
#pragma unroll
    for (int kh = 0; kh < kK; ++kh)
#pragma unroll
      for (int kw = 0; kw < kK; ++kw) wr[kh][kw] = to_float(wc[kh * p.w_sh + kw * p.w_sw]);
    bias = p.b != nullptr ? to_float(ptr<T>(p.b)[c * p.b_s]) : 0.f;
  };
  load_taps();
  if (bulk) {
    tma::wait_parity(bar, 0);
  } else {
    __syncwarp();
  }

  T* yp = static_cast<T*>(p.y) + n * p.y_sn + c * p.y_so;
  if constexpr (sizeof(T) == 2 && kK == 3) {
    const bool bulk_out = s.y_rows16 && reinterpret_cast<uintptr_t>(yp) % 16 == 0;
    if (s.mma) {
      if (plane_mma3<T>(buf, zero_row, H, W, wr, bias, yp, p.y_sh, p.y_sw, bulk_out, lane)) {
        return;
      }
      // A non-finite input: the outputs are done again by the multiply-add path below, from
      // the plane and taps read again (the mma path staged its outputs over the plane; the
      // taps, read again, need no registers during it).
      stage_by_hand();
      load_taps();
      __syncwarp();
    }
  }

  const int G = s.lanes_w;
  const int g = lane % G;
  const int band = lane / G;
  const bool active = band < s.bands;
  const int R = s.band_rows;
  const int row0 = band * R;  // the band's first output row
  const T* colp = buf + kC * g;
  // Input row t of the band is image row row0 - kP + t; rows outside the image (and every row of
  // the idle lanes) are read from a clamped row and zeroed, so the loads carry no branch and the
  // next row's is issued ahead.
  auto row_load = [&](int t) {
    const int ir = row0 - kP + t;
    return load_vec<T, kC>(colp + min(max(ir, 0), H - 1) * W);
  };
  auto row_in = [&](int t) {
    const int ir = row0 - kP + t;
    return active && ir >= 0 && ir < H;
  };
  // Row t feeds its outputs t - kh (kh < kK); their sums rotate through kK register sets, set
  // (t - kh) mod kK, compile-time in the unrolled j.
  float acc[kK][kC];
#pragma unroll
  for (int i = 0; i < kK; ++i)
#pragma unroll
    for (int e = 0; e < kC; ++e) acc[i][e] = 0.f;
  const int steps = R + kK - 1;
  Vec<T, kC> raw = row_load(0);
#pragma unroll 1
  for (int u = 0; u < steps; u += kK) {
#pragma unroll
    for (int j = 0; j < kK; ++j) {
      const int t = u + j;
      if (t >= steps) break;  // warp-uniform
      const Vec<T, kC> cur = raw;
      raw = row_load(t + 1);
      const bool in = row_in(t);
      float v[kC];
#pragma unroll
      for (int e = 0; e < kC; ++e) v[e] = in ? to_float(cur.v[e]) : 0.f;
      // The row window: kP columns from the lane on the left, the lane's 4, kP from the right
      // (zeros past the image's edges, which are a band's ends).
      float win[kC + 2 * kP];
#pragma unroll
      for (int e = 0; e < kC; ++e) win[kP + e] = v[e];
#pragma unroll
      for (int q = 0; q < kP; ++q) {
        const float l = __shfl_up_sync(0xffffffffu, v[kC - kP + q], 1);
        const float r = __shfl_down_sync(0xffffffffu, v[q], 1);
        win[q] = g > 0 ? l : 0.f;
        win[kP + kC + q] = g < G - 1 ? r : 0.f;
      }
#pragma unroll
      for (int kh = 0; kh < kK; ++kh) {
        const int a = (j - kh + kK) % kK;  // compile-time after unrolling
#pragma unroll
        for (int kw = 0; kw < kK; ++kw)
#pragma unroll
          for (int e = 0; e < kC; ++e)
            acc[a][e] = fmaf(wr[kh][kw], win[e + kw], kh == 0 && kw == 0 ? bias : acc[a][e]);
      }
      // Output t - (kK - 1) has seen its last row.
      const int o = t - (kK - 1);
      if (active && o >= 0 && o < R && row0 + o < H) {
        store_cols<T, kC>(yp + (row0 + o) * p.y_sh, acc[(j + 1) % kK], kC * g, W, p.y_sw,
                          s.y_vec);
      }
    }
  }
}

}  // namespace conv
}  // namespace gpukern
