#pragma once
// pointwise_nchw: dense 1x1 convolution (groups 1, stride 1, no padding) over NCHW planes in
// fp32 on the TF32 tensor cores (mma.m16n8k8), with the fused epilogue
// y = act(acc + bias [+ residual]) in registers.
//
// Why: over NCHW a 1x1 convolution is y[n] (O x P) = W (O x C) @ x[n] (C x P), P = H * W, with
// the pixels contiguous: the B operand is N-major. The wgmma TF32 instructions take K-major
// operands only, so CUTLASS's SM90 GEMMs cannot read it in place (igemm converts x to NHWC and
// y back, two more passes), and cuBLASLt's batched GEMM has no per-O bias in that form; cuDNN's
// convolution then leaves bias, activation and residual to separate passes. mma.sync reads its
// fragments from shared memory, where either layout serves: this kernel reads x and writes y in
// place, once each, and fuses the epilogue (MobileNetV3's 1x1 blocks are memory-bound: the conv
// is a few microseconds, as long as one more pass).
//
// The GEMM: M = O, N = the N * P pixels of all images (column j is pixel j % P of image j / P,
// so 7x7 planes still fill the tiles), K = C.
//
// Fragments without scalar shared loads or conversions:
//   A (W, [m][k] in shared memory): one ldmatrix.x4 per 16 x 8 fragment. ldmatrix moves 8 x 8
//     matrices of 16-bit elements; read as 32-bit words, lane l receives word l % 4 of row l / 4,
//     which is the m16n8k8 TF32 A fragment (a0 = A[g][t] ...) of an 8 x 4 block of floats.
//   B (x, [k][pixel]): the 32 columns of a warp's column group are permuted, column n of 8-column
//     tile q being pixel 16 (n % 2) + 4 (n / 2) + q. Lane (g, t) then needs pixels 16 (g % 2) +
//     4 (g / 2) + 0..3 of rows t and t + 4 for the four tiles of the group: two 16-byte loads,
//     conflict-free with rows 4 words apart (mod 32). Its accumulators hold columns 2 t and
//     2 t + 1 of the four tiles: pixels 4 t .. 4 t + 3 and 16 + 4 t .. 16 + 4 t + 3 of the group,
//     stored as 16-byte vectors; the warp's four lanes of a row write 64 contiguous bytes, whole
//     32-byte sectors. (Pixels 8 t .. 8 t + 7 instead, two quads 16 bytes apart per lane: 64 -> 64
//     channels at 56x56 took 20.1 us, against 15.2 with the 64-byte runs.)
//   kPermute = false keeps the plain order: B as two scalar loads a tile (rows 8 banks apart),
//     pixel pairs 8 q + 2 t in the epilogue. Measured faster without a residual (64 -> 64 56x56
//     12.0 us against 14.9 permuted), slower with one (the residual's loads are 8-byte), so the
//     host takes either (pointwise_nchw.cu, choose_tile).
//   TF32 rounding: the register's bits + 0x1000 (tf32_round_bits, device/async_mma.cuh): cvt.rna's
//     rounding where the tensor core takes 10 mantissa bits, one integer add instead of a
//     conversion per operand register.
//
// Contract (conv2d_pointwise_nchw_kernel<kBM, kBN, kWM, kWN, kStages, kMinBlocks, kPermute,
// kVec>): x, y and the residual with
// contiguous planes (each image's pixels at offsets 0 .. H*W-1 from its channel start; the host
// stages a residual or an output of other strides through a contiguous copy: an epilogue
// through any strides cost 10-25% on every call, in registers).
//   grid    1-D: blockIdx.x = column tile (kBN pixels) * m_tiles + row tile (kBM channels);
//           row tiles fastest, so the blocks that read the same pixels run together (L2).
//   block   (kBM / kWM) x (kBN / kWN) warps; warp (wm, wn) owns a kWM x kWN output tile:
//           kWM / 16 x kWN / 8 mma.m16n8k8 tiles.
//   blocks  kMinBlocks per SM (launch bounds: the register cap; the host's smem fits them).
//   shared  kStages stages of W [kBM][kBK + 4] and x [kBK][kBN + 4] as floats (rows 4 banks
//           apart: conflict-free ldmatrix and 16-byte B loads); cp.async with zero fill
//           past O, C and the last pixel; one barrier per kBK channels.
//   kVec    16-byte copies of 4 pixels of x and 4 channels of W (P % 4 == 0, C % 4 == 0,
//           aligned); else 4-byte copies.
//   y_vec   (plan) y and the residual as 16-byte pixel quads; else element by element.
//   indices int64 image and channel offsets; pixel offsets int32 (P < 2^31).
//   launch  launch_pdl; the kernel waits for the previous one before its first load.
#include <cooperative_groups.h>

#include <cstdint>
#include <type_traits>

#include "conv/problem.h"
#include "device/activation.cuh"
#include "device/async_mma.cuh"
#include "device/pdl.cuh"
#include "device/vec.cuh"

namespace gpukern {
namespace conv {

// The biases of a warp's output-channel fragment rows, as floats (0 past O or without a bias):
// bv[mi][h2] for output channel o0 + mi * 16 + h2 * 8 + g (an m16n8 MMA accumulator's rows g and
// g + 8 of fragment mi). The epilogue of pointwise_nchw and pointwise_nchw16.
template <typename T, int kMI>
__device__ __forceinline__ void pointwise_fragment_bias(const T* __restrict__ bias, int64_t b_s,
                                                        int64_t o0, int g, int64_t O,
                                                        float (&bv)[kMI][2]) {
#pragma unroll
  for (int mi = 0; mi < kMI; ++mi)
#pragma unroll
    for (int h2 = 0; h2 < 2; ++h2) {
      const int64_t o = o0 + mi * 16 + h2 * 8 + g;
      bv[mi][h2] = (bias != nullptr && o < O) ? to_float(bias[o * b_s]) : 0.f;
    }
}

constexpr int kPwBK = 32;  // channels per stage

struct PointwisePlan {
  int64_t cols = 0;     // N * P
  int P = 1;            // pixels per image
  int m_tiles = 1;      // ceil(O / kBM)
  int64_t blocks = 0;   // m_tiles * ceil(cols / kBN)
  int tile = 0;         // index into the host's tile list
  int splits = 1;       // kSplitK: CTAs of a cluster sharing one output tile's channels (<= 8)
  bool vec = false;     // kVec
  bool y_vec = false;   // y (and the residual) read / written as 16-byte pixel quads
};

// The x row pitch: kBN + 4 floats for the permuted columns' 16-byte loads, kBN + 8 for the
// scalar loads of the plain order (rows 8 banks apart).
template <int kBN, bool kPermute>
constexpr int pointwise_b_pitch() {
  return kPermute ? kBN + 4 : kBN + 8;
}

template <int kBM, int kBN, int kStages, bool kPermute>
constexpr size_t pointwise_smem_bytes() {
  return sizeof(float) * kStages * (kBM * (kPwBK + 4) + kPwBK * pointwise_b_pitch<kBN, kPermute>());
}

// The kernels' main loop (pointwise_nchw and pointwise_nchw16): kStages - 1 stages in flight
// through cp.async, one barrier per stage. load(kt, stage) issues stage kt's copies into buffer
// `stage`; compute(stage) runs the mma steps over a landed buffer. Returns with every copy done.
template <int kStages, typename Load, typename Compute>
__device__ __forceinline__ void pointwise_pipeline(int k_tiles, Load&& load, Compute&& compute) {
#pragma unroll
  for (int st = 0; st < kStages - 1; ++st) {
    if (st < k_tiles) load(st, st);
    cp_async_commit();
  }
  for (int kt = 0; kt < k_tiles; ++kt) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // stage kt landed for every thread; stage kt - 1 is free again
    const int next = kt + kStages - 1;
    if (next < k_tiles) load(next, next % kStages);
    cp_async_commit();
    compute(kt % kStages);
  }
  cp_async_wait<0>();
}

template <int kBM, int kBN, int kWM, int kWN, int kStages, int kMinBlocks, bool kPermute,
          bool kVec, bool kSplitK = false>
__global__ void __launch_bounds__(kBM / kWM * kBN / kWN * 32, kMinBlocks)
    conv2d_pointwise_nchw_kernel(const ConvProblem p, const PointwisePlan s) {
  static_assert(kWM % 16 == 0 && kWN % 32 == 0 && kBM % kWM == 0 && kBN % kWN == 0, "tiles");
  constexpr int kWarpsN = kBN / kWN;
  constexpr int kThreads = kBM / kWM * kWarpsN * 32;
  constexpr int kMI = kWM / 16;  // 16-row fragments per warp
  constexpr int kNH = kWN / 32;  // 32-column groups per warp
  constexpr int kAP = kPwBK + 4;  // A row pitch (floats)
  constexpr int kBP = pointwise_b_pitch<kBN, kPermute>();  // B row pitch
  constexpr int kAStage = kBM * kAP, kBStage = kPwBK * kBP;
  extern __shared__ __align__(16) float smem[];
  float* s_a = smem;
  float* s_b = smem + kStages * kAStage;

  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31, warp = tid >> 5;
  const int wm = warp / kWarpsN, wn = warp % kWarpsN;
  const int g = lane >> 2, t = lane & 3;
  // kSplitK: the s.splits CTAs of a cluster (consecutive blocks) share one output tile, rank r
  // walking channel stages [r * k_tiles / splits, (r + 1) * k_tiles / splits).
  const unsigned tile_idx = kSplitK ? blockIdx.x / static_cast<unsigned>(s.splits) : blockIdx.x;
  const int rank = kSplitK ? static_cast<int>(blockIdx.x % static_cast<unsigned>(s.splits)) : 0;
  const int m_tile = static_cast<int>(tile_idx % static_cast<unsigned>(s.m_tiles));
  const int64_t n_tile = tile_idx / static_cast<unsigned>(s.m_tiles);
  const int64_t m0 = static_cast<int64_t>(m_tile) * kBM;
  const int64_t j0 = n_tile * kBN;
  const int64_t C = p.C, O = p.O;
  const float* __restrict__ x = static_cast<const float*>(p.x);
  const float* __restrict__ w = static_cast<const float*>(p.w);

  // This thread's x column(s): fixed across stages (kThreads is a multiple of the row width).
  constexpr int kXPerRow = kVec ? kBN / 4 : kBN;  // copies per x row of the tile
  static_assert(kThreads % kXPerRow == 0 || kXPerRow % kThreads == 0, "x copies");
  constexpr int kXCopies = kPwBK * kXPerRow / kThreads;
  const float* x_ptr[kXPerRow > kThreads ? kXPerRow / kThreads : 1];
  bool x_ok[kXPerRow > kThreads ? kXPerRow / kThreads : 1];
  constexpr int kXCols = kXPerRow > kThreads ? kXPerRow / kThreads : 1;
  constexpr int kXRowStep = kXPerRow > kThreads ? 1 : kThreads / kXPerRow;
  const int x_row0 = kXPerRow > kThreads ? 0 : tid / kXPerRow;
  int x_col[kXCols];
#pragma unroll
  for (int i = 0; i < kXCols; ++i) {
    x_col[i] = ((tid + i * kThreads) % kXPerRow) * (kVec ? 4 : 1);
    const int64_t jx = j0 + x_col[i];
    x_ok[i] = jx < s.cols;
    x_ptr[i] = x;
    if (x_ok[i]) {
      const int64_t n = jx / s.P;
      x_ptr[i] = x + n * p.x_sn + (jx - n * s.P);
    }
  }
  // W copies: chunk e = tid + i * kThreads of the [kBM][kBK / kWV] tile, channels fastest.
  constexpr int kWV = kVec ? 4 : 1;
  constexpr int kWPerRow = kPwBK / kWV;
  static_assert(kThreads % kWPerRow == 0 && (kBM * kWPerRow) % kThreads == 0, "W copies");
  constexpr int kWCopies = kBM * kWPerRow / kThreads;
  const int w_k = (tid % kWPerRow) * kWV, w_row0 = tid / kWPerRow;
  constexpr int kWRowStep = kThreads / kWPerRow;

  pdl_wait_then_release();

  const int k_all = static_cast<int>((C + kPwBK - 1) / kPwBK);
  const int kt_first = kSplitK ? static_cast<int>(int64_t{rank} * k_all / s.splits) : 0;
  const int k_tiles =
      kSplitK ? static_cast<int>(int64_t{rank + 1} * k_all / s.splits) - kt_first : k_all;
  auto load_stage = [&](int kt, int stage) {
    const int64_t k0 = static_cast<int64_t>(kt_first + kt) * kPwBK;
    float* a = s_a + stage * kAStage;
    float* b = s_b + stage * kBStage;
#pragma unroll
    for (int i = 0; i < kWCopies; ++i) {
      const int r = w_row0 + i * kWRowStep;
      const int64_t o = m0 + r, c = k0 + w_k;
      const bool ok = o < O && c < C;  // kVec: C % 4 == 0, so c < C covers the 4 channels
      cp_async_zfill<4 * kWV>(a + r * kAP + w_k, ok ? w + o * p.w_so + c * p.w_sc : w, ok);
    }
#pragma unroll
    for (int i = 0; i < kXCopies; ++i) {
      const int ci = kXCols > 1 ? i % kXCols : 0;
      const int r = kXCols > 1 ? i / kXCols : x_row0 + i * kXRowStep;
      const int64_t c = k0 + r;
      const bool ok = x_ok[ci] && c < C;
      cp_async_zfill<kVec ? 16 : 4>(b + r * kBP + x_col[ci], ok ? x_ptr[ci] + c * p.x_sc : x,
                                    ok);
    }
  };

  float acc[kMI][kNH][4][4];
#pragma unroll
  for (int mi = 0; mi < kMI; ++mi)
#pragma unroll
    for (int h = 0; h < kNH; ++h)
#pragma unroll
      for (int q = 0; q < 4; ++q)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[mi][h][q][e] = 0.f;

  // ldmatrix rows: lane l gives row l % 8 of matrix l / 8 (matrices: rows +0 / +8, k +0 / +4).
  const int a_lane_off = (wm * kWM + (lane & 7) + ((lane >> 3) & 1) * 8) * kAP + (lane >> 4) * 4;
  const int b_lane_off =
      t * kBP + wn * kWN + (kPermute ? (g & 1) * 16 + (g >> 1) * 4 : g);
  pointwise_pipeline<kStages>(k_tiles, load_stage, [&](int stage) {
    const float* a = s_a + stage * kAStage + a_lane_off;
    const float* b = s_b + stage * kBStage + b_lane_off;
#pragma unroll
    for (int kk = 0; kk < kPwBK; kk += 8) {
      unsigned af[kMI][4];
#pragma unroll
      for (int mi = 0; mi < kMI; ++mi) {
        ldmatrix_x4(af[mi], a + mi * 16 * kAP + kk);
#pragma unroll
        for (int e = 0; e < 4; ++e) af[mi][e] = tf32_round_bits(af[mi][e]);
      }
#pragma unroll
      for (int h = 0; h < kNH; ++h) {
        unsigned b0[4], b1[4];
        if constexpr (kPermute) {
          const float4 lo = *reinterpret_cast<const float4*>(b + kk * kBP + h * 32);
          const float4 hi = *reinterpret_cast<const float4*>(b + (kk + 4) * kBP + h * 32);
          const float lo_f[4] = {lo.x, lo.y, lo.z, lo.w}, hi_f[4] = {hi.x, hi.y, hi.z, hi.w};
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            b0[q] = tf32_round_bits(__float_as_uint(lo_f[q]));
            b1[q] = tf32_round_bits(__float_as_uint(hi_f[q]));
          }
        } else {
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            b0[q] = tf32_round_bits(__float_as_uint(b[kk * kBP + h * 32 + q * 8]));
            b1[q] = tf32_round_bits(__float_as_uint(b[(kk + 4) * kBP + h * 32 + q * 8]));
          }
        }
#pragma unroll
        for (int q = 0; q < 4; ++q)
#pragma unroll
          for (int mi = 0; mi < kMI; ++mi) mma_1688_tf32(acc[mi][h][q], af[mi], b0[q], b1[q]);
      }
    }
  });

  // kSplitK: every CTA stages its partial sums in its shared memory, the cluster syncs, and
  // rank r sums, in rank order, the runs it owns (piece % splits == r; a piece is one epilogue
  // run: kRun values of one row) from every CTA's shared memory; a second cluster sync keeps
  // each CTA's shared memory alive until all have read it. A piece's values sit together (one
  // float4 / float2 per thread and piece, thread-fastest: conflict-free), so the remote reads
  // are one vector a rank, the eight ranks' loads issued together (distributed shared memory
  // reads are ~200 cycles each: one scalar read at a time made the split 2-4x slower).
  constexpr int kRun = kPermute ? 4 : 2;
  constexpr int kRuns = 8 / kRun;  // per 32-column group
  using RunVec = typename std::conditional<kPermute, float4, float2>::type;
  auto piece = [&](int mi, int h, int h2, int u) { return ((mi * kNH + h) * 2 + h2) * kRuns + u; };
  auto owned = [&](int mi, int h, int h2, int u) {
    return !kSplitK || piece(mi, h, h2, u) % s.splits == rank;
  };
  // Value q of run u, row half h2: permuted acc[.][.][q][2 h2 + u], plain acc[.][.][u][2 h2 + q].
  auto val = [&](int mi, int h, int h2, int u, int q) -> float& {
    return kPermute ? acc[mi][h][q][2 * h2 + u] : acc[mi][h][u][2 * h2 + q];
  };
  // f(mi, h, h2, u) for every epilogue run of this thread.
  auto for_each_run = [&](auto&& f) {
#pragma unroll
    for (int mi = 0; mi < kMI; ++mi)
#pragma unroll
      for (int h = 0; h < kNH; ++h)
#pragma unroll
        for (int h2 = 0; h2 < 2; ++h2)
#pragma unroll
          for (int u = 0; u < kRuns; ++u) f(mi, h, h2, u);
  };
  if (kSplitK && s.splits > 1) {
    constexpr int kPieces = kMI * kNH * 2 * kRuns;
    static_assert(kPieces * kRun * kThreads <= kStages * (kAStage + kBStage), "split staging");
    __syncthreads();  // every warp is past its last shared read of the pipeline
    RunVec* stage_buf = reinterpret_cast<RunVec*>(smem);
    for_each_run([&](int mi, int h, int h2, int u) {
      float v[4];
#pragma unroll
      for (int q = 0; q < kRun; ++q) v[q] = val(mi, h, h2, u, q);
      RunVec rv;
      if constexpr (kPermute) {
        rv = make_float4(v[0], v[1], v[2], v[3]);
      } else {
        rv = make_float2(v[0], v[1]);
      }
      stage_buf[piece(mi, h, h2, u) * kThreads + tid] = rv;
    });
    cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
    cluster.sync();
    for_each_run([&](int mi, int h, int h2, int u) {
      if (!owned(mi, h, h2, u)) return;
      const int at = piece(mi, h, h2, u) * kThreads + tid;
      RunVec parts[8];
#pragma unroll
      for (int r = 0; r < 8; ++r) {
        if (r < s.splits) parts[r] = cluster.map_shared_rank(stage_buf, r)[at];
      }
      float sum[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int r = 0; r < 8; ++r) {
        if (r < s.splits) {
          const float* pv = reinterpret_cast<const float*>(&parts[r]);
#pragma unroll
          for (int q = 0; q < kRun; ++q) sum[q] += pv[q];
        }
      }
#pragma unroll
      for (int q = 0; q < kRun; ++q) val(mi, h, h2, u, q) = sum[q];
    });
    cluster.sync();
  }

  // Epilogue.
  float* __restrict__ y = static_cast<float*>(p.y);
  const float* __restrict__ r = static_cast<const float*>(p.r);
  const float* __restrict__ bias = static_cast<const float*>(p.b);
  float bv[kMI][2];
  pointwise_fragment_bias(bias, p.b_s, m0 + wm * kWM, g, O, bv);
  // A run: kRun consecutive pixels j .. j + kRun - 1 of one row. Permuted: quads j = group base
  // + 16 e + 4 t, value q in acc[.][.][q][2 * (row half) + e]; plain order: pairs j = group base
  // + 8 q + 2 t, value e in acc[.][.][q][2 * (row half) + e].
  with_activation(p.act, [&](auto kind) {
    constexpr int kAct = decltype(kind)::value;
#pragma unroll
    for (int h = 0; h < kNH; ++h)
#pragma unroll
      for (int u = 0; u < kRuns; ++u) {
        const int64_t j =
            j0 + wn * kWN + h * 32 + (kPermute ? 16 * u + 4 * t : 8 * u + 2 * t);
        if (j >= s.cols) continue;
        const int64_t n = j / s.P;
        const int64_t px = j - n * s.P;
#pragma unroll
        for (int mi = 0; mi < kMI; ++mi)
#pragma unroll
          for (int h2 = 0; h2 < 2; ++h2) {
            const int64_t o = m0 + wm * kWM + mi * 16 + h2 * 8 + g;
            if (o >= O || !owned(mi, h, h2, u)) continue;
            float v[kRun];
#pragma unroll
            for (int q = 0; q < kRun; ++q) {
              v[q] = (kPermute ? acc[mi][h][q][2 * h2 + u] : acc[mi][h][u][2 * h2 + q]) +
                     bv[mi][h2];
            }
            if (s.y_vec) {  // P % 4 == 0: the run lies in one image
              const int64_t ro = n * p.r_sn + o * p.r_so + px;
              const int64_t yo = n * p.y_sn + o * p.y_so + px;
              if constexpr (kPermute) {
                if (r != nullptr) {
                  const float4 rv = *reinterpret_cast<const float4*>(r + ro);
                  v[0] += rv.x, v[1] += rv.y, v[2] += rv.z, v[3] += rv.w;
                }
#pragma unroll
                for (int q = 0; q < kRun; ++q) v[q] = activate_k<kAct>(v[q]);
                *reinterpret_cast<float4*>(y + yo) = make_float4(v[0], v[1], v[2], v[3]);
              } else {
                if (r != nullptr) {
                  const float2 rv = *reinterpret_cast<const float2*>(r + ro);
                  v[0] += rv.x, v[1] += rv.y;
                }
#pragma unroll
                for (int q = 0; q < kRun; ++q) v[q] = activate_k<kAct>(v[q]);
                *reinterpret_cast<float2*>(y + yo) = make_float2(v[0], v[1]);
              }
            } else {
              int64_t nq = n, pq = px;
#pragma unroll
              for (int q = 0; q < kRun; ++q) {
                if (q > 0 && ++pq == s.P) ++nq, pq = 0;
                if (j + q >= s.cols) break;
                float vq = v[q];
                if (r != nullptr) vq += r[nq * p.r_sn + o * p.r_so + pq];
                y[nq * p.y_sn + o * p.y_so + pq] = activate_k<kAct>(vq);
              }
            }
          }
      }
  });
}

}  // namespace conv
}  // namespace gpukern
