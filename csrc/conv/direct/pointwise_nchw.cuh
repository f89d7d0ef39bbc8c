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
// fragments from shared memory, where either layout is as cheap: this kernel reads x and writes
// y in place, once each, and fuses the epilogue (MobileNetV3's 1x1 blocks are memory-bound: the
// conv is a few microseconds, as long as one more pass).
//
// The GEMM: M = O, N = the N * P pixels of all images (column j is pixel j % P of image j / P,
// so 7x7 planes still fill the tiles), K = C.
//
// Contract (conv2d_pointwise_nchw_kernel<kBM, kBN, kVecX>): x, y and the residual with
// contiguous planes (each image's pixels at offsets 0 .. H*W-1 from its channel start; the host
// stages a residual or an output of other strides through a contiguous copy: an epilogue
// through any strides cost 10-25% on every call, in registers).
//   grid    1-D: blockIdx.x = column tile (kBN pixels) * m_tiles + row tile (kBM channels);
//           row tiles fastest, so the blocks that read the same pixels run together (L2).
//   block   (kBM / 32) x (kBN / 32) warps; warp (wm, wn) owns a 32 x 32 output tile:
//           2 x 4 mma.m16n8k8 tiles, 32 float accumulators a thread.
//   shared  kStages stages of W [kBM][kBK + 4] and x [kBK][kBN + 8] as floats (the pads make
//           the fragment reads conflict-free: rows 4 banks apart for A, 8 for B); cp.async with
//           zero fill past O, C and the last pixel; one barrier per kBK channels.
//   x       kVecX: 16-byte copies of 4 pixels (P % 4 == 0, aligned); else 4-byte copies.
//   indices int64 image and channel offsets; pixel offsets int32 (P < 2^31).
//   launch  launch_pdl; the kernel waits for the previous one before its first load.
#include <cstdint>

#include "conv/problem.h"
#include "device/activation.cuh"
#include "device/async_mma.cuh"
#include "device/pdl.cuh"

namespace gpukern {
namespace conv {

// fp32 -> TF32 (round to nearest, ties away: cvt.rna), as a 32-bit register for mma.m16n8k8.
__device__ __forceinline__ unsigned to_tf32(float x) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
}

// d += A * B, TF32 operands (to_tf32), float accumulators: mma.m16n8k8. Fragments (PTX ISA,
// mma.m16n8k8 .tf32), lane (g = lane / 4, t = lane % 4):
//   a0 = A[g][t], a1 = A[g+8][t], a2 = A[g][t+4], a3 = A[g+8][t+4]
//   b0 = B[t][g],  b1 = B[t+4][g];  d0,d1 = D[g][2t..2t+1], d2,d3 = D[g+8][2t..2t+1]
__device__ __forceinline__ void mma_1688_tf32(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                              unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

constexpr int kPwBK = 32;     // channels per stage
constexpr int kPwStages = 4;  // stages in flight

struct PointwisePlan {
  int64_t cols = 0;     // N * P
  int P = 1;            // pixels per image
  int m_tiles = 1;      // ceil(O / kBM)
  int64_t blocks = 0;   // m_tiles * ceil(cols / kBN)
  int bm = 64, bn = 128;
  bool x_vec = false;   // kVecX
  bool y_pair = false;  // y (and the residual) read / written as float2 pixel pairs
};

template <int kBM, int kBN>
constexpr size_t pointwise_smem_bytes() {
  return sizeof(float) * kPwStages * (kBM * (kPwBK + 4) + kPwBK * (kBN + 8));
}

template <int kBM, int kBN, bool kVecX>
__global__ void __launch_bounds__(kBM * kBN / 32)
    conv2d_pointwise_nchw_kernel(const ConvProblem p, const PointwisePlan s) {
  constexpr int kThreads = kBM * kBN / 32;
  constexpr int kAP = kPwBK + 4;  // A row pitch (floats)
  constexpr int kBP = kBN + 8;    // B row pitch
  constexpr int kAStage = kBM * kAP, kBStage = kPwBK * kBP;
  extern __shared__ __align__(16) float smem[];
  float* s_a = smem;
  float* s_b = smem + kPwStages * kAStage;

  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31, warp = tid >> 5;
  constexpr int kWarpsN = kBN / 32;
  const int wm = warp / kWarpsN, wn = warp % kWarpsN;
  const int g = lane >> 2, t = lane & 3;
  const int m_tile = static_cast<int>(blockIdx.x % static_cast<unsigned>(s.m_tiles));
  const int64_t n_tile = blockIdx.x / static_cast<unsigned>(s.m_tiles);
  const int64_t m0 = static_cast<int64_t>(m_tile) * kBM;
  const int64_t j0 = n_tile * kBN;
  const int64_t C = p.C, O = p.O;
  const float* __restrict__ x = static_cast<const float*>(p.x);
  const float* __restrict__ w = static_cast<const float*>(p.w);

  // This thread's x column(s): fixed across stages (kThreads is a multiple of the row width).
  constexpr int kXPerRow = kVecX ? kBN / 4 : kBN;  // copies per x row of the tile
  static_assert(kThreads % kXPerRow == 0, "x copies: whole rows per pass");
  constexpr int kXRowStep = kThreads / kXPerRow;
  constexpr int kXCopies = kPwBK / kXRowStep;
  const int x_col = (tid % kXPerRow) * (kVecX ? 4 : 1);
  const int x_row0 = tid / kXPerRow;
  const int64_t jx = j0 + x_col;
  const bool x_ok = jx < s.cols;
  const float* x_col_ptr = x;
  if (x_ok) {
    const int64_t n = jx / s.P;
    x_col_ptr = x + n * p.x_sn + (jx - n * s.P);
  }
  // W copies: element e = tid + i * kThreads of the [kBM][kBK] tile, channels fastest.
  constexpr int kWCopies = kBM * kPwBK / kThreads;
  static_assert(kThreads % kPwBK == 0, "W copies: whole rows per pass");
  const int w_k = tid % kPwBK, w_row0 = tid / kPwBK;
  constexpr int kWRowStep = kThreads / kPwBK;

  pdl_wait_then_release();

  const int k_tiles = static_cast<int>((C + kPwBK - 1) / kPwBK);
  auto load_stage = [&](int kt, int stage) {
    const int64_t k0 = static_cast<int64_t>(kt) * kPwBK;
    float* a = s_a + stage * kAStage;
    float* b = s_b + stage * kBStage;
#pragma unroll
    for (int i = 0; i < kWCopies; ++i) {
      const int r = w_row0 + i * kWRowStep;
      const int64_t o = m0 + r, c = k0 + w_k;
      const bool ok = o < O && c < C;
      cp_async_zfill<4>(a + r * kAP + w_k, ok ? w + o * p.w_so + c * p.w_sc : w, ok);
    }
#pragma unroll
    for (int i = 0; i < kXCopies; ++i) {
      const int r = x_row0 + i * kXRowStep;
      const int64_t c = k0 + r;
      const bool ok = x_ok && c < C;
      const float* src = ok ? x_col_ptr + c * p.x_sc : x;
      if constexpr (kVecX) {
        cp_async_zfill<16>(b + r * kBP + x_col, src, ok);
      } else {
        cp_async_zfill<4>(b + r * kBP + x_col, src, ok);
      }
    }
  };

  float acc[2][4][4];
#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int ni = 0; ni < 4; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mi][ni][e] = 0.f;

#pragma unroll
  for (int st = 0; st < kPwStages - 1; ++st) {
    if (st < k_tiles) load_stage(st, st);
    cp_async_commit();
  }
  for (int kt = 0; kt < k_tiles; ++kt) {
    cp_async_wait<kPwStages - 2>();
    __syncthreads();  // stage kt landed for every thread; stage kt - 1 is free again
    const int next = kt + kPwStages - 1;
    if (next < k_tiles) load_stage(next, next % kPwStages);
    cp_async_commit();
    const float* a = s_a + (kt % kPwStages) * kAStage + (wm * 32 + g) * kAP + t;
    const float* b = s_b + (kt % kPwStages) * kBStage + t * kBP + wn * 32 + g;
#pragma unroll
    for (int kk = 0; kk < kPwBK; kk += 8) {
      unsigned af[2][4];
#pragma unroll
      for (int mi = 0; mi < 2; ++mi) {
        const float* ap = a + mi * 16 * kAP + kk;
        af[mi][0] = to_tf32(ap[0]);
        af[mi][1] = to_tf32(ap[8 * kAP]);
        af[mi][2] = to_tf32(ap[4]);
        af[mi][3] = to_tf32(ap[8 * kAP + 4]);
      }
#pragma unroll
      for (int ni = 0; ni < 4; ++ni) {
        const float* bp = b + kk * kBP + ni * 8;
        const unsigned b0 = to_tf32(bp[0]), b1 = to_tf32(bp[4 * kBP]);
#pragma unroll
        for (int mi = 0; mi < 2; ++mi) mma_1688_tf32(acc[mi][ni], af[mi], b0, b1);
      }
    }
  }
  cp_async_wait<0>();

  // Epilogue: rows o, columns j, j + 1 (a pixel pair; P even when s.y_pair).
  float* __restrict__ y = static_cast<float*>(p.y);
  const float* __restrict__ r = static_cast<const float*>(p.r);
  const float* __restrict__ bias = static_cast<const float*>(p.b);
  float bv[2][2];
#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t o = m0 + wm * 32 + mi * 16 + h * 8 + g;
      bv[mi][h] = (bias != nullptr && o < O) ? bias[o * p.b_s] : 0.f;
    }
  with_activation(p.act, [&](auto kind) {
    constexpr int kAct = decltype(kind)::value;
#pragma unroll
    for (int ni = 0; ni < 4; ++ni) {
      const int64_t j = j0 + wn * 32 + ni * 8 + 2 * t;
      if (j >= s.cols) continue;
      const int64_t n = j / s.P;
      const int64_t px = j - n * s.P;
      // The pair's second pixel: the next one of the same image (y_pair), else looked up.
      const bool has2 = j + 1 < s.cols;
      int64_t n2 = n, px2 = px + 1;
      if (!s.y_pair && px2 == s.P) n2 = n + 1, px2 = 0;
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int64_t o = m0 + wm * 32 + mi * 16 + h * 8 + g;
          if (o >= O) continue;
          float v0 = acc[mi][ni][2 * h] + bv[mi][h];
          float v1 = acc[mi][ni][2 * h + 1] + bv[mi][h];
          const int64_t y0 = n * p.y_sn + o * p.y_so + px;
          const int64_t y1 = n2 * p.y_sn + o * p.y_so + px2;
          if (r != nullptr) {
            const int64_t r0 = n * p.r_sn + o * p.r_so + px;
            if (s.y_pair) {
              const float2 rv = *reinterpret_cast<const float2*>(r + r0);
              v0 += rv.x;
              v1 += rv.y;
            } else {
              v0 += r[r0];
              if (has2) v1 += r[n2 * p.r_sn + o * p.r_so + px2];
            }
          }
          v0 = activate_k<kAct>(v0);
          v1 = activate_k<kAct>(v1);
          if (s.y_pair) {
            *reinterpret_cast<float2*>(y + y0) = make_float2(v0, v1);
          } else {
            y[y0] = v0;
            if (has2) y[y1] = v1;
          }
        }
    }
  });
}

}  // namespace conv
}  // namespace gpukern
