#pragma once
// The 1-D FFT path ("fft", overlap-save): the kernels around cuFFT's transforms (torch-free).
// A 1-D problem has H = 1; below, L is p.W, K is p.KW and L_out is p.OW. The host side
// (overlap_save.cu) runs, on one stream:
//
//   conv1d_fft_pack_kernel      x blocks and reversed filter rows -> float buffer [xblocks + C, B]
//   cuFFT c2c, forward          the buffer read as [xblocks + C, B/2] complex (batched, size B/2)
//   conv1d_fft_product_kernel   real-spectrum split, product with the filter spectrum, real-
//                               spectrum merge, in place on the x blocks' spectra
//   cuFFT c2c, inverse          [xblocks, B/2] complex -> [xblocks, B/2] complex = [xblocks, B] real
//   conv1d_fft_epilogue_kernel  the B-K+1 valid outputs of each block, plus bias, cast, strides
//
// Why complex transforms of half length instead of r2c/c2r: a length-B real signal u packed as
// z[n] = u[2n] + i*u[2n+1] has a length-B/2 complex DFT Z from which the real DFT follows in
// one cheap step (X[k] = ((Z[k] + conj Z[M-k]) - i W^k (Z[k] - conj Z[M-k])) / 2, M = B/2,
// W = exp(-2 pi i / B)), and the inverse real DFT of a Hermitian spectrum Y is one length-M
// complex inverse DFT of U[k] = (Y[k] + conj Y[M-k]) + i W^-k (Y[k] - conj Y[M-k]), whose output
// read as floats is y[0], y[1], ... in order. Both steps fold into the product kernel, so the
// product costs no extra pass; and ATen clones the input of every c2r (cuFFT overwrites it), a
// full extra pass that the c2c inverse avoids. The 1/B of the inverse and the 1/2 of both splits
// are powers of two folded into the filter when it is packed (exact), so both transforms run
// unnormalised and no scaling pass exists.
//
// Overlap-save geometry (one output row = one x row and one filter row, stride 1, dilation 1):
// block b of a row covers outputs l in [b*S, b*S + S), S = B - K + 1, from the B inputs
// u[i] = x[b*S + i - pad_w] (zero outside [0, L)). With h[j] = w[K-1-j] (correlation as a
// convolution), the circular convolution of u and h at position n in [K-1, B) does not wrap and
// equals output l = b*S + n - (K-1).
#include <cstdint>

#include "device/vec.cuh"
#include "conv/problem.h"

namespace gpukern {
namespace conv {

// Block geometry of one call, chosen by the host (overlap_save.cu documents the rule).
struct Conv1dFftGeom {
  int64_t B = 0;        // transform length in reals (a power of two >= 16)
  int64_t S = 0;        // valid outputs per block, B - K + 1 >= 1
  int64_t nblk = 0;     // blocks per output row, ceil(OW / S)
  int64_t xblocks = 0;  // N * C * nblk: x blocks, the first rows of the buffer
  float scale = 0.f;    // 1 / (4 B): the inverse's 1/B and both splits' 1/2, folded into h
};

template <int kThreads_>
struct Conv1dFftTraits {
  static constexpr int kThreads = kThreads_;  // threads per block; a block owns one buffer row
  static_assert(kThreads % 32 == 0 && kThreads <= 1024, "whole warps");
};

using Conv1dFftDefaultTraits = Conv1dFftTraits<256>;

// Pack. Grid-stride over buffer rows (one row of B floats per block iteration, so the row's
// divisions happen once): rows r < xblocks hold block b = r % nblk of output row r / nblk
// (= n*C + c); rows xblocks + c hold scale * w[c, 0, K-1-j] for j < K, zero after. Threads step
// through the row one float at a time: consecutive threads read consecutive x elements (when
// x_sw == 1) and write consecutive floats, both coalesced, whatever the alignment of x.
template <typename T, typename Traits>
__global__ void __launch_bounds__(Traits::kThreads)
    conv1d_fft_pack_kernel(const ConvProblem p, const Conv1dFftGeom g, float* __restrict__ buf) {
  const T* __restrict__ x = static_cast<const T*>(p.x);
  const T* __restrict__ w = static_cast<const T*>(p.w);
  const int64_t rows = g.xblocks + p.C;
  // blockIdx.y splits one buffer row over gridDim.y blocks (few long rows would leave most
  // SMs idle): this block handles positions lane0, lane0 + lanes, ...
  const int64_t lane0 = threadIdx.x + static_cast<int64_t>(blockIdx.y) * Traits::kThreads;
  const int64_t lanes = static_cast<int64_t>(gridDim.y) * Traits::kThreads;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float* __restrict__ dst = buf + r * g.B;
    if (r < g.xblocks) {
      const int64_t row = r / g.nblk;
      const int64_t b = r - row * g.nblk;
      const int64_t n = row / p.C;
      const int64_t c = row - n * p.C;
      const T* __restrict__ xr = x + n * p.x_sn + c * p.x_sc;
      const int64_t m0 = b * g.S - p.pad_w;  // x index of u[0]
      for (int64_t i = lane0; i < g.B; i += lanes) {
        const int64_t m = m0 + i;
        dst[i] = (m >= 0 && m < p.W) ? to_float(xr[m * p.x_sw]) : 0.f;
      }
    } else {
      const T* __restrict__ wr = w + (r - g.xblocks) * p.w_so;
      for (int64_t j = lane0; j < g.B; j += lanes) {
        dst[j] = j < p.KW ? g.scale * to_float(wr[(p.KW - 1 - j) * p.w_sw]) : 0.f;
      }
    }
  }
}

__device__ __forceinline__ float2 cmul(float2 a, float2 b) {
  return make_float2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}
__device__ __forceinline__ float2 cadd(float2 a, float2 b) { return make_float2(a.x + b.x, a.y + b.y); }
__device__ __forceinline__ float2 conj_add(float2 a, float2 b) {  // a + conj(b)
  return make_float2(a.x + b.x, a.y - b.y);
}
__device__ __forceinline__ float2 conj_sub(float2 a, float2 b) {  // a - conj(b)
  return make_float2(a.x - b.x, a.y + b.y);
}

// Twice the real DFT at bin k of the signal whose packed complex DFT has p = Z[k], q = Z[M-k]
// (indices mod M), given rot = -i * W^k: (p + conj q) + rot * (p - conj q).
__device__ __forceinline__ float2 real_bin2(float2 p, float2 q, float2 rot) {
  return cadd(conj_add(p, q), cmul(rot, conj_sub(p, q)));
}

// Product. Grid-stride over the x blocks' spectra (one row of M = B/2 complex per block
// iteration). Thread item t in [0, M/2] owns the bin pair (t, M-t): it reads Z[t], Z[M-t] of the
// x block and of its filter row (c = (r / nblk) % C, rows xblocks + c of the same buffer, read
// only), forms the real-DFT bins X[t], X[M-t] and H[t], H[M-t] (real_bin2), multiplies, and
// writes U[t], U[M-t] of the inverse's input over Z[t], Z[M-t]. Pairs are disjoint (t = 0 owns
// index 0 alone, using Z[M] = Z[0] for bin M; t = M/2 is its own partner), so the update is in
// place without barriers. With W = W^t: W^(M-t) = -conj(W), W^-t = conj(W), W^-(M-t) = -W.
// The products carry 2 * 2 * scale = 1/B of the inverse, so U is formed without further scaling.
template <typename Traits>
__global__ void __launch_bounds__(Traits::kThreads)
    conv1d_fft_product_kernel(const Conv1dFftGeom g, const int64_t channels,
                              float2* __restrict__ spec) {
  const int64_t M = g.B / 2;
  const float inv_half_b = 2.f / static_cast<float>(g.B);  // exact: B is a power of two
  // blockIdx.y splits one buffer row over gridDim.y blocks (few long rows would leave most
  // SMs idle): this block handles positions lane0, lane0 + lanes, ...
  const int64_t lane0 = threadIdx.x + static_cast<int64_t>(blockIdx.y) * Traits::kThreads;
  const int64_t lanes = static_cast<int64_t>(gridDim.y) * Traits::kThreads;
  for (int64_t r = blockIdx.x; r < g.xblocks; r += gridDim.x) {
    float2* __restrict__ z = spec + r * M;
    const float2* __restrict__ zh = spec + (g.xblocks + (r / g.nblk) % channels) * M;
    for (int64_t t = lane0; t <= M / 2; t += lanes) {
      const int64_t tm = t == 0 ? 0 : M - t;
      float s, c;
      sincospif(static_cast<float>(t) * inv_half_b, &s, &c);  // angle 2 pi t / B
      const float2 wt = make_float2(c, -s);                    // W^t
      const float2 rot_t = make_float2(wt.y, -wt.x);           // -i W^t
      const float2 rot_m = make_float2(wt.y, wt.x);            // -i W^(M-t) = -i (-conj W^t)
      const float2 a = z[t], b = z[tm];
      const float2 ha = zh[t], hb = zh[tm];
      const float2 yt = cmul(real_bin2(a, b, rot_t), real_bin2(ha, hb, rot_t));
      const float2 ym = cmul(real_bin2(b, a, rot_m), real_bin2(hb, ha, rot_m));
      // U[t] = (Y[t] + conj Y[M-t]) + i conj(W) (Y[t] - conj Y[M-t]); i conj(W) = (W.y, W.x).
      z[t] = cadd(conj_add(yt, ym), cmul(make_float2(wt.y, wt.x), conj_sub(yt, ym)));
      if (t != 0 && tm != t) {
        // U[M-t] = (Y[M-t] + conj Y[t]) - i W (Y[M-t] - conj Y[t]); -i W = rot_t.
        z[tm] = cadd(conj_add(ym, yt), cmul(rot_t, conj_sub(ym, yt)));
      }
    }
  }
}

// Epilogue. Grid-stride over the x blocks (one block's valid outputs per iteration, divisions
// once per block): output l = b*S + i, i < min(S, OW - b*S), is the inverse's real element
// K - 1 + i of row r (floats, contiguous rows of B). Consecutive threads read consecutive floats
// and write consecutive outputs (coalesced when y_sw == 1).
template <typename T, typename Traits>
__global__ void __launch_bounds__(Traits::kThreads)
    conv1d_fft_epilogue_kernel(const ConvProblem p, const Conv1dFftGeom g,
                               const float* __restrict__ res) {
  const T* __restrict__ bias = static_cast<const T*>(p.b);
  T* __restrict__ y = static_cast<T*>(p.y);
  // blockIdx.y splits one buffer row over gridDim.y blocks (few long rows would leave most
  // SMs idle): this block handles positions lane0, lane0 + lanes, ...
  const int64_t lane0 = threadIdx.x + static_cast<int64_t>(blockIdx.y) * Traits::kThreads;
  const int64_t lanes = static_cast<int64_t>(gridDim.y) * Traits::kThreads;
  for (int64_t r = blockIdx.x; r < g.xblocks; r += gridDim.x) {
    const int64_t row = r / g.nblk;
    const int64_t b = r - row * g.nblk;
    const int64_t n = row / p.C;
    const int64_t c = row - n * p.C;
    const int64_t l0 = b * g.S;
    const int64_t count = p.OW - l0 < g.S ? p.OW - l0 : g.S;
    const float bv = bias != nullptr ? to_float(bias[c * p.b_s]) : 0.f;
    const float* __restrict__ src = res + r * g.B + (p.KW - 1);
    T* __restrict__ dst = y + n * p.y_sn + c * p.y_so + l0 * p.y_sw;
    for (int64_t i = lane0; i < count; i += lanes) {
      dst[i * p.y_sw] = from_float<T>(src[i] + bv);
    }
  }
}

}  // namespace conv
}  // namespace gpukern
