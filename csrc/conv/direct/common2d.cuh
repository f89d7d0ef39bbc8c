#pragma once
// What the 2-D direct kernels share (torch-free): the problem they compute, typed access to its
// pointers, the image-bounds test, the row store every NCHW kernel ends with, and the host's one
// test for vector access of an NCHW tensor.
//
// Cross-correlation as torch.nn.functional.conv2d:
//   y[n, o, oh, ow] = b[o] + sum_{c in group(o), kh, kw}
//                     w[o, c, kh, kw] * x[n, c, oh*sh - ph + kh*dh, ow*sw - pw + kw*dw]
// with x = 0 outside the image (the padding). Every kernel reads and writes through the element
// strides of ConvProblem, accumulates in float32 and converts half/bfloat16 to float on load.
// The host (conv/dispatch_2d.cu) picks one algorithm; each algorithm's .cu plans and launches it.
#include <cstdint>

#include "conv/problem.h"
#include "device/vec.cuh"

namespace gpukern {
namespace conv {

template <typename T>
__device__ __forceinline__ const T* ptr(const void* p) {
  return static_cast<const T*>(p);
}

__device__ __forceinline__ bool inside(int64_t i, int64_t n) { return i >= 0 && i < n; }

// Stores the I outputs v of one row at columns o0 .. o0 + I - 1 of yr (those in [0, OW)): one
// vector store when allowed (unit stride, aligned; vec_ok) and all I are inside, else scalars.
template <typename T, int I>
__device__ __forceinline__ void store_cols(T* yr, const float (&v)[I], int o0, int OW,
                                           int64_t y_sw, bool vec_ok) {
  if (vec_ok && o0 >= 0 && o0 + I <= OW) {
    Vec<T, I> out;
#pragma unroll
    for (int j = 0; j < I; ++j) out.v[j] = from_float<T>(v[j]);
    store_vec<T, I>(yr + o0, out);
  } else {
#pragma unroll
    for (int j = 0; j < I; ++j)
      if (o0 + j >= 0 && o0 + j < OW) yr[(o0 + j) * y_sw] = from_float<T>(v[j]);
  }
}

}  // namespace conv

// Whether the [N, C, H, W] tensor at `data` (element strides sn, sc, sh, sw) allows v-element
// vector accesses along its rows from every column that is a multiple of v: unit column stride,
// rows, planes and images v elements apart (the stride of a size-1 dim never steps) and `data`
// aligned to align_bytes (16: a 16-byte vector of v elements).
inline bool nchw_vec(const void* data, int64_t N, int64_t C, int64_t sn, int64_t sc, int64_t sh,
                     int64_t sw, int64_t v, int64_t align_bytes = 16) {
  return sw == 1 && sh % v == 0 && (N == 1 || sn % v == 0) && (C == 1 || sc % v == 0) &&
         reinterpret_cast<uintptr_t>(data) % static_cast<uintptr_t>(align_bytes) == 0;
}
// The same for the problem's input and output.
inline bool nchw_vec_x(const ConvProblem& p, int64_t v) {
  return nchw_vec(p.x, p.N, p.C, p.x_sn, p.x_sc, p.x_sh, p.x_sw, v);
}
inline bool nchw_vec_y(const ConvProblem& p, int64_t v, int64_t align_bytes = 16) {
  return nchw_vec(p.y, p.N, p.O, p.y_sn, p.y_so, p.y_sh, p.y_sw, v, align_bytes);
}

}  // namespace gpukern
