#pragma once
// mv_rows_mma_kernel: 16-bit row-major A on the tensor cores; see mv_common.cuh for the family.
#include <cstdint>
#include <type_traits>

#include "device/async_mma.cuh"
#include "mv/kernels/mv_common.cuh"

namespace gpukern {
namespace mv {

// 16-bit A on the tensor cores: mma.sync m16n8k16 (f16 or bf16 inputs, float32 accumulators)
// computes a 16-row tile of A times a 16-column slice of x replicated in all 8 columns of B. The
// CUDA-core path spends two conversions (fp16: HADD2.F32 on the FMA pipe) and an FFMA per
// element, which kept fp16 below bf16 (whose conversions run on the integer pipe); here a lane
// issues one mma per 8 elements of A.
// The k order inside an mma is free (a dot product), so lane (g = lane / 4, t = lane % 4) uses
// its own 16-byte loads directly as fragments: the vector at columns c..c+7 of rows g and g + 8
// and of x feed two mmas, elements c+0,1 / c+2,3 as k = 2t,2t+1 / 2t+8,2t+9 of the first and
// c+4..7 likewise of the second (the same columns for A and B, so sum_k A[i][k] B[k][n] is the
// row's partial dot product for every n). Fragment layout (PTX ISA, mma.m16n8k16 .f16/.bf16):
//   a0 = A[g][2t..2t+1], a1 = A[g+8][2t..2t+1], a2 = A[g][2t+8..2t+9], a3 = A[g+8][2t+8..2t+9]
//   b0 = B[2t..2t+1][g],  b1 = B[2t+8..2t+9][g];  d0,d1 = D[g][2t..2t+1], d2,d3 = D[g+8][...]
// Block: kWarps warps on kWarps / wpt 16-row tiles, wpt warps a tile (wpt = 8 from 1024 columns;
// 4 or 2 for short rows, whose 128-column steps would leave warps idle: 2 a tile at 256 columns,
// where 8 a tile ran 6 of 8 warps idle); warp w works on tile w / wpt and takes column steps
// w % wpt, + wpt, ... of kMmaStep columns (lane t loads columns step * kMmaStep + (u * 4 + t) * 8,
// u < kMmaUnroll: each load instruction covers 64 contiguous bytes of 8 rows). A tile's warps'
// partials (d0 of lanes t == 0: rows g and g + 8) are added in warp order through smem: a fixed
// order.
// Host guarantees: T 16-bit, s1 == 1, A 16-byte aligned, s0 % 8 == 0, N % 8 == 0, x contiguous
// and aligned. Rows past M read row M - 1 (results dropped); columns past N load zeros.
constexpr int kMmaUnroll = 4;
constexpr int kMmaStep = kMmaUnroll * 4 * 8;  // columns per warp step

template <typename T>
__device__ __forceinline__ void mma_16816_vec(float (&d)[4], const uint4& ra, const uint4& rb8,
                                              unsigned b0, unsigned b1, bool hi) {
  // hi: the vector's second half (elements 4..7: words z, w) as this mma's k slots.
  const unsigned a0 = hi ? ra.z : ra.x, a2 = hi ? ra.w : ra.y;
  const unsigned a1 = hi ? rb8.z : rb8.x, a3 = hi ? rb8.w : rb8.y;
  mma_16816<T>(d, a0, a1, a2, a3, b0, b1);
}

// kWpt (warps a tile) is a template parameter: as a runtime value its derived indices spilled
// 64 bytes at the 64-register cap.
template <typename T, int kWpt>
__global__ void __launch_bounds__(kThreads, 4)
    mv_rows_mma_kernel(const T* __restrict__ A, const T* __restrict__ x, T* __restrict__ y,
                       MvParams p) {
  static_assert(sizeof(T) == 2, "16-bit types only");
  static_assert(kWpt >= 1 && kWpt <= kWarps && kWarps % kWpt == 0, "wpt divides the block");
  constexpr int wpt = kWpt;
  __shared__ float part[kWarps][16];
  const int warp = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int g = lane >> 2, t = lane & 3;
  constexpr int tpb = kWarps / wpt;  // tiles a block
  const int sub = warp % wpt;
  const int64_t tiles = (p.M + 15) / 16;
  const int64_t groups = (tiles + tpb - 1) / tpb;
  const int64_t nsteps = (p.N + kMmaStep - 1) / kMmaStep;
  pdl_wait_then_release();
  // Block-uniform loop over groups of tpb tiles (the barriers below).
  for (int64_t tg = blockIdx.x; tg < groups; tg += gridDim.x) {
    const int64_t tile = tg * tpb + warp / wpt;
    const int64_t r0 = tile * 16 + g, r1 = r0 + 8;
    const T* a0p = A + (r0 < p.M ? r0 : p.M - 1) * p.s0;
    const T* a1p = A + (r1 < p.M ? r1 : p.M - 1) * p.s0;
    // Two accumulator sets (the first and second half of each vector) halve the dependent
    // chain of mmas.
    float d0[4] = {0.f, 0.f, 0.f, 0.f}, d1[4] = {0.f, 0.f, 0.f, 0.f};
    for (int64_t st = sub; st < nsteps; st += wpt) {
      uint4 va[kMmaUnroll], vb[kMmaUnroll], vx[kMmaUnroll];
#pragma unroll
      for (int u = 0; u < kMmaUnroll; ++u) {
        const int64_t c = st * kMmaStep + (u * 4 + t) * 8;
        if (c < p.N) {
          va[u] = *reinterpret_cast<const uint4*>(a0p + c);
          vb[u] = *reinterpret_cast<const uint4*>(a1p + c);
          vx[u] = *reinterpret_cast<const uint4*>(x + c);
        } else {
          va[u] = vb[u] = vx[u] = make_uint4(0u, 0u, 0u, 0u);
        }
      }
#pragma unroll
      for (int u = 0; u < kMmaUnroll; ++u) {
        mma_16816_vec<T>(d0, va[u], vb[u], vx[u].x, vx[u].y, false);
        mma_16816_vec<T>(d1, va[u], vb[u], vx[u].z, vx[u].w, true);
      }
    }
    if (t == 0) {
      part[warp][g] = d0[0] + d1[0];
      part[warp][g + 8] = d0[2] + d1[2];
    }
    __syncthreads();  // every warp's partials in smem
    if (threadIdx.x < 16 * tpb) {
      const int lt = threadIdx.x / 16, rr = threadIdx.x % 16;
      const int64_t r = (tg * tpb + lt) * 16 + rr;
      if (r < p.M) {
        float v = part[lt * wpt][rr];
#pragma unroll
        for (int w = 1; w < wpt; ++w) v += part[lt * wpt + w][rr];
        y[r] = from_float<T>(v);
      }
    }
    __syncthreads();  // part free for the next group of tiles
  }
}

}  // namespace mv
}  // namespace gpukern
