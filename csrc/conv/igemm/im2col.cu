// Explicit im2col for the tensor-core path's stems (conv/igemm/im2col.h). One thread writes one
// 16-byte vector of a patch row (8 16-bit or 4 fp32 elements, consecutive k): the stores are
// coalesced along the row, the reads gather from the input (a stem's input is a few MB: L2).
#include "conv/igemm/im2col.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>

#include <algorithm>
#include <cstdint>

#include "core/checks.h"
#include "core/launch.cuh"

namespace gpukern {
namespace conv {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = int64_t{1} << 20;  // grid-stride beyond

struct Im2colParams {
  int64_t N, C, H, W, KH, KW, OH, OW;
  int64_t stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
  int64_t x_sn, x_sc, x_sh, x_sw;
  int64_t K, Kp;     // taps x channels, and the padded row length (a multiple of kVec)
  int64_t vectors;   // M * Kp / kVec
};

// E: the raw element word (uint16_t for 16-bit types, uint32_t for fp32): a pure gather.
template <typename E>
__global__ void __launch_bounds__(kThreads)
    im2col_rows_kernel(const E* __restrict__ x, E* __restrict__ out, Im2colParams a) {
  constexpr int kVec = 16 / sizeof(E);
  const int64_t per_row = a.Kp / kVec;
  for (int64_t v = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; v < a.vectors;
       v += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int64_t m = v / per_row;
    const int64_t k0 = (v - m * per_row) * kVec;
    const int64_t ow = m % a.OW;
    const int64_t t = m / a.OW;
    const int64_t oh = t % a.OH;
    const int64_t n = t / a.OH;
    const int64_t h0 = oh * a.stride_h - a.pad_h;
    const int64_t w0 = ow * a.stride_w - a.pad_w;
    const E* xn = x + n * a.x_sn;
    alignas(16) E vals[kVec];
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      const int64_t k = k0 + j;
      E val = 0;
      if (k < a.K) {
        const int64_t c = k / (a.KH * a.KW);
        const int64_t rs = k - c * (a.KH * a.KW);
        const int64_t r = rs / a.KW;
        const int64_t s = rs - r * a.KW;
        const int64_t ih = h0 + r * a.dil_h;
        const int64_t iw = w0 + s * a.dil_w;
        if (ih >= 0 && ih < a.H && iw >= 0 && iw < a.W) {
          val = xn[c * a.x_sc + ih * a.x_sh + iw * a.x_sw];
        }
      }
      vals[j] = val;
    }
    *reinterpret_cast<uint4*>(out + m * a.Kp + k0) = *reinterpret_cast<const uint4*>(vals);
  }
}

}  // namespace
}  // namespace conv

at::Tensor im2col_rows(const ConvProblem& p, const at::Tensor& x4, int64_t k_multiple) {
  constexpr const char* op = "conv";
  const int64_t es = x4.element_size();
  GK_CHECK(es == 2 || es == 4, op, "im2col: unsupported element size ", es);
  const int64_t vec = 16 / es;
  GK_CHECK(k_multiple > 0 && k_multiple % vec == 0, op, "im2col: k_multiple ", k_multiple,
           " is not a multiple of ", vec);
  conv::Im2colParams a{};
  a.N = p.N;
  a.C = p.C;
  a.H = p.H;
  a.W = p.W;
  a.KH = p.KH;
  a.KW = p.KW;
  a.OH = p.OH;
  a.OW = p.OW;
  a.stride_h = p.stride_h;
  a.stride_w = p.stride_w;
  a.pad_h = p.pad_h;
  a.pad_w = p.pad_w;
  a.dil_h = p.dil_h;
  a.dil_w = p.dil_w;
  a.x_sn = x4.stride(0);
  a.x_sc = x4.stride(1);
  a.x_sh = x4.stride(2);
  a.x_sw = x4.stride(3);
  a.K = p.C * p.KH * p.KW;
  a.Kp = (a.K + k_multiple - 1) / k_multiple * k_multiple;
  const int64_t M = p.N * p.OH * p.OW;
  at::Tensor out = at::empty({M, a.Kp}, x4.options().memory_format(at::MemoryFormat::Contiguous));
  a.vectors = M * (a.Kp / vec);
  if (a.vectors == 0) return out;
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream(x4.device().index()).stream();
  const dim3 grid =
      checked_grid(op, std::min((a.vectors + conv::kThreads - 1) / conv::kThreads,
                                conv::kMaxBlocks));
  if (es == 2) {
    conv::im2col_rows_kernel<uint16_t><<<grid, conv::kThreads, 0, stream>>>(
        static_cast<const uint16_t*>(x4.const_data_ptr()), static_cast<uint16_t*>(out.data_ptr()),
        a);
  } else {
    conv::im2col_rows_kernel<uint32_t><<<grid, conv::kThreads, 0, stream>>>(
        static_cast<const uint32_t*>(x4.const_data_ptr()), static_cast<uint32_t*>(out.data_ptr()),
        a);
  }
  GK_CHECK_LAUNCH();
  return out;
}

}  // namespace gpukern
