#pragma once
// pointwise_nchw16: dense 1x1 convolution (groups 1, stride 1, no padding) over NCHW planes in
// bfloat16 / float16 on the tensor cores (mma.m16n8k16, fp32 accumulators), with the fused
// epilogue y = act(acc + bias [+ residual]) in registers, rounded to T once.
//
// Why: over NCHW a 1x1 convolution is y[n] (O x P) = W (O x C) @ x[n] (C x P), the pixels
// contiguous. torch runs it as cuDNN's convolution, which converts the layout around an NHWC
// kernel (nchwToNhwc, the kernel, nhwcToNchw: MobileNetV3's and ResNet-50's 1x1 layers over 7x7
// to 14x14 planes take 2-3x their channels_last time), then adds the bias and the activation in
// more passes; gpukern's other 1x1 forms (conv/igemm) run cuBLASLt's batched NCHW GEMM and an
// elementwise pass for the bias, or CUTLASS over NHWC copies. This kernel reads x and writes y in
// place, once each, with the epilogue inside: the fp32 pointwise_nchw's design (pointwise_nchw.cuh)
// with the 16-bit instruction.
//
// The GEMM: M = O, N = the N * P pixels of all images (column j is pixel j % P of image j / P),
// K = C, in stages of kBK = 32 channels (two k16 steps).
// Fragments from shared memory by ldmatrix, no conversion:
//   A (W, [m][k], k contiguous): ldmatrix.x4 per 16 x 16 fragment (matrices: rows 0-7 / 8-15 x
//     k 0-7 / 8-15 give a0..a3 of mma.m16n8k16).
//   B (x, [k][pixel], pixels contiguous): ldmatrix.x4.trans per two 8-column tiles: an 8 x 8
//     matrix stored k-major, transposed on the load, hands lane (g, t) B[2t..2t+1][g], the b0 (k
//     0-7) or b1 (k 8-15) register of a column tile.
//   Rows are padded by 8 elements (16 bytes): the eight rows of an ldmatrix matrix fall in
//   distinct bank groups.
// Accumulators: lane (g, t) holds pixels 2t, 2t + 1 of rows g and g + 8 of each 8-column tile:
// the epilogue reads the residual and writes y as pixel pairs (4 bytes).
//
// Contract (conv2d_pointwise_nchw16_kernel<T, kBM, kBN, kWM, kWN, kStages, kMinBlocks, kCopy>):
//   x: planes contiguous, P % 4 == 0 (kCopy 8: 4-pixel copies) or P % 8 == 0 (kCopy 16), image
//      and channel strides multiples of the copy, base aligned to it: a copy never crosses an
//      image. W: [O][C] rows with unit channel stride, C % 8 == 0, the row stride a multiple of
//      8, 16-byte aligned (16-byte copies of 8 channels). y and the residual: planes contiguous,
//      P even, strides even, 4-byte aligned (pixel pairs). The host (pointwise_nchw.cu) checks.
//   grid    1-D: blockIdx.x = column tile * m_tiles + row tile (row tiles fastest).
//   block   (kBM / kWM) x (kBN / kWN) warps, each a kWM x kWN tile of m16n8k16 tiles.
//   shared  kStages stages of W [kBM][kBK + 8] and x [kBK][kBN + 8] elements; cp.async with zero
//           fill past O, C and the last pixel; one barrier per stage.
//   indices int64 image and channel offsets; pixel offsets int32 (P < 2^31).
//   launch  launch_pdl; the kernel waits for the previous one before its first load.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "conv/direct/pointwise_nchw.cuh"
#include "conv/problem.h"
#include "device/activation.cuh"
#include "device/async_mma.cuh"
#include "device/pdl.cuh"
#include "device/vec.cuh"

namespace gpukern {
namespace conv {

constexpr int kPw16BK = 32;  // channels per stage

template <int kBM, int kBN, int kStages>
constexpr size_t pointwise16_smem_bytes() {
  return 2 * static_cast<size_t>(kStages) * (kBM * (kPw16BK + 8) + kPw16BK * (kBN + 8));
}

// Four 8x8 matrices of 16-bit elements, each transposed on the load (lane i gives the address of
// row i % 8 of matrix i / 8).
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], const void* smem_row) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(smem_row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}

template <typename T, int kBM, int kBN, int kWM, int kWN, int kStages, int kMinBlocks, int kCopy>
__global__ void __launch_bounds__(kBM / kWM * kBN / kWN * 32, kMinBlocks)
    conv2d_pointwise_nchw16_kernel(const ConvProblem p, const PointwisePlan s) {
  static_assert(kWM % 16 == 0 && kWN % 16 == 0 && kBM % kWM == 0 && kBN % kWN == 0, "tiles");
  static_assert(kCopy == 8 || kCopy == 16, "x copies of 4 or 8 pixels");
  constexpr int kWarpsN = kBN / kWN;
  constexpr int kThreads = kBM / kWM * kWarpsN * 32;
  constexpr int kMI = kWM / 16;  // 16-row fragments per warp
  constexpr int kNJ = kWN / 8;   // 8-column tiles per warp
  constexpr int kAP = kPw16BK + 8, kBP = kBN + 8;  // row pitches (elements)
  constexpr int kAStage = kBM * kAP, kBStage = kPw16BK * kBP;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* s_a = reinterpret_cast<T*>(smem_raw);
  T* s_b = s_a + kStages * kAStage;

  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31, warp = tid >> 5;
  const int wm = warp / kWarpsN, wn = warp % kWarpsN;
  const int g = lane >> 2, t = lane & 3;
  const int m_tile = static_cast<int>(blockIdx.x % static_cast<unsigned>(s.m_tiles));
  const int64_t n_tile = blockIdx.x / static_cast<unsigned>(s.m_tiles);
  const int64_t m0 = static_cast<int64_t>(m_tile) * kBM;
  const int64_t j0 = n_tile * kBN;
  const int64_t C = p.C, O = p.O;
  const T* __restrict__ x = static_cast<const T*>(p.x);
  const T* __restrict__ w = static_cast<const T*>(p.w);

  // x copies: kPx pixels each; a thread's columns are fixed across stages.
  constexpr int kPx = kCopy / 2;
  constexpr int kXPerRow = kBN / kPx;
  static_assert(kThreads % kXPerRow == 0, "x copies");
  constexpr int kXRowStep = kThreads / kXPerRow;
  constexpr int kXCopies = kPw16BK / kXRowStep;
  const int x_row0 = tid / kXPerRow;
  const int x_col = (tid % kXPerRow) * kPx;
  const int64_t jx = j0 + x_col;
  const bool x_ok = jx < s.cols;
  const T* x_ptr = x;
  if (x_ok) {
    const int64_t n = jx / s.P;
    x_ptr = x + n * p.x_sn + (jx - n * s.P);
  }
  // W copies: 8 channels (16 bytes) each, [kBM][kBK / 8] chunks, channels fastest.
  constexpr int kWPerRow = kPw16BK / 8;
  static_assert(kThreads % kWPerRow == 0 && (kBM * kWPerRow) % kThreads == 0, "W copies");
  constexpr int kWCopies = kBM * kWPerRow / kThreads;
  constexpr int kWRowStep = kThreads / kWPerRow;
  const int w_k = (tid % kWPerRow) * 8, w_row0 = tid / kWPerRow;

  pdl_wait_then_release();

  const int k_tiles = static_cast<int>((C + kPw16BK - 1) / kPw16BK);
  auto load_stage = [&](int kt, int stage) {
    const int64_t k0 = static_cast<int64_t>(kt) * kPw16BK;
    T* a = s_a + stage * kAStage;
    T* b = s_b + stage * kBStage;
#pragma unroll
    for (int i = 0; i < kWCopies; ++i) {
      const int r = w_row0 + i * kWRowStep;
      const int64_t o = m0 + r, c = k0 + w_k;
      const bool ok = o < O && c < C;  // C % 8 == 0: c < C covers the 8 channels
      cp_async_zfill<16>(a + r * kAP + w_k, ok ? w + o * p.w_so + c : w, ok);
    }
#pragma unroll
    for (int i = 0; i < kXCopies; ++i) {
      const int r = x_row0 + i * kXRowStep;
      const int64_t c = k0 + r;
      const bool ok = x_ok && c < C;
      cp_async_zfill<kCopy>(b + r * kBP + x_col, ok ? x_ptr + c * p.x_sc : x, ok);
    }
  };

  float acc[kMI][kNJ][4];
#pragma unroll
  for (int mi = 0; mi < kMI; ++mi)
#pragma unroll
    for (int nj = 0; nj < kNJ; ++nj)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mi][nj][e] = 0.f;

  // ldmatrix rows: lane l gives row l % 8 of matrix l / 8. A: matrices (rows +0 / +8, k +0 / +8);
  // B: matrices (k +0 / +8, columns +0 / +8).
  const int a_lane_off = (wm * kWM + (lane & 7) + ((lane >> 3) & 1) * 8) * kAP + (lane >> 4) * 8;
  const int b_lane_off = ((lane & 7) + ((lane >> 3) & 1) * 8) * kBP + wn * kWN + (lane >> 4) * 8;
  pointwise_pipeline<kStages>(k_tiles, load_stage, [&](int stage) {
    const T* a = s_a + stage * kAStage + a_lane_off;
    const T* b = s_b + stage * kBStage + b_lane_off;
#pragma unroll
    for (int kk = 0; kk < kPw16BK; kk += 16) {
      unsigned af[kMI][4];
#pragma unroll
      for (int mi = 0; mi < kMI; ++mi) ldmatrix_x4(af[mi], a + mi * 16 * kAP + kk);
#pragma unroll
      for (int nj = 0; nj < kNJ; nj += 2) {
        unsigned bf[4];  // b0, b1 of tile nj, then of tile nj + 1
        ldmatrix_x4_trans(bf, b + kk * kBP + nj * 8);
#pragma unroll
        for (int mi = 0; mi < kMI; ++mi) {
          mma_16816<T>(acc[mi][nj], af[mi][0], af[mi][1], af[mi][2], af[mi][3], bf[0], bf[1]);
          mma_16816<T>(acc[mi][nj + 1], af[mi][0], af[mi][1], af[mi][2], af[mi][3], bf[2],
                       bf[3]);
        }
      }
    }
  });

  // Epilogue: pixel pairs j, j + 1 (P even: one image), rows g and g + 8 of each fragment.
  T* __restrict__ y = static_cast<T*>(p.y);
  const T* __restrict__ r = static_cast<const T*>(p.r);
  const T* __restrict__ bias = static_cast<const T*>(p.b);
  float bv[kMI][2];
  pointwise_fragment_bias(bias, p.b_s, m0 + wm * kWM, g, O, bv);
  with_activation(p.act, [&](auto kind) {
    constexpr int kAct = decltype(kind)::value;
#pragma unroll
    for (int nj = 0; nj < kNJ; ++nj) {
      const int64_t j = j0 + wn * kWN + nj * 8 + 2 * t;
      if (j >= s.cols) continue;
      const int64_t n = j / s.P;
      const int64_t px = j - n * s.P;
#pragma unroll
      for (int mi = 0; mi < kMI; ++mi)
#pragma unroll
        for (int h2 = 0; h2 < 2; ++h2) {
          const int64_t o = m0 + wm * kWM + mi * 16 + h2 * 8 + g;
          if (o >= O) continue;
          float v0 = acc[mi][nj][2 * h2] + bv[mi][h2];
          float v1 = acc[mi][nj][2 * h2 + 1] + bv[mi][h2];
          if (r != nullptr) {
            const unsigned rv =
                *reinterpret_cast<const unsigned*>(r + n * p.r_sn + o * p.r_so + px);
            const T* rp = reinterpret_cast<const T*>(&rv);
            v0 += to_float(rp[0]);
            v1 += to_float(rp[1]);
          }
          *reinterpret_cast<unsigned*>(y + n * p.y_sn + o * p.y_so + px) =
              reg_pack2<T>(activate_k<kAct>(v0), activate_k<kAct>(v1));
        }
    }
  });
}

}  // namespace conv
}  // namespace gpukern
