#pragma once
// Explicit im2col for the tensor-core path's stems (conv/igemm/igemm.cpp): layers with a few input
// channels (RGB images, single-channel audio) whose implicit GEMM would load 16-byte channel
// vectors through the TMA's im2col mode, one tiny box per tap (measured on an H100: ResNet-50's
// 3 -> 64 7x7 stem, C zero-padded to 8, took 650 us against cuDNN's 145). Instead the patches
// are written once as a dense [M, Kp] matrix (M = N * OH * OW output pixels, Kp = C * KH * KW
// rounded up to k_multiple, zeros past it) and multiplied by the [O, Kp] filter in a plain GEMM.
// Torch-aware host API, CUDA only (defined in conv/igemm/im2col.cu, CUDA builds).
#include <cstdint>

#include "conv/problem.h"

namespace at {
class Tensor;
}

namespace gpukern {

// A new [M, Kp] tensor of x4's dtype (contiguous, from the caching allocator) with
// row m = (n * OH + oh) * OW + ow and column k = (c * KH + r) * KW + s (the order of the filter's
// own [O, C * KH * KW] flattening) holding x4[n, c, oh * stride_h - pad_h + r * dil_h,
// ow * stride_w - pad_w + s * dil_w], zero outside the input and for k >= C * KH * KW. x4: the
// batched 4-D input [N, C, H, W] of p (any strides); k_multiple: 16 bytes of elements.
// Requires im2col_fits(p, elem_size).
at::Tensor im2col_rows(const ConvProblem& p, const at::Tensor& x4, int64_t k_multiple);

// The stem's filter w4 [O, C, KH, KW] (any strides, x4's dtype) as the GEMM's [O, Kp] rows in
// the patches' column order (k = (c * KH + r) * KW + s), zeros for k >= C * KH * KW: w4 itself
// viewed [O, Kp] when it already is that matrix (contiguous, C * KH * KW a multiple of k_multiple,
// 16-byte aligned: ConvNeXt's 4x4 3 -> 96 in 16-bit types), else a new contiguous tensor written
// by one launch (at::zeros, a reshape and a narrowed copy_ were 2 launches and 4 ATen calls on
// every stem call; the batch-1 stem was host-bound: 45 us per call against torch's 18 on an
// H100). k_multiple: 16 bytes of elements.
at::Tensor filter_rows(const at::Tensor& w4, int64_t k_multiple);

// Whether the kernel takes p: rows of Kp = C * KH * KW elements (rounded up to 16 bytes) of
// elem_size bytes fit its staging tile and index tables (64 rows, one 4-byte word of padding each,
// 16 bytes of tables per column, 48 KB in all: Kp up to 328 16-bit or 172 fp32 elements), and the
// window's rows and columns stay within 32-bit arithmetic (2^28).
inline bool im2col_fits(const ConvProblem& p, int64_t elem_size) {
  const int64_t vec = 16 / elem_size;
  const int64_t kp = (p.C * p.KH * p.KW + vec - 1) / vec * vec;
  const int64_t lim = int64_t{1} << 28;
  if (64 * (kp + 4 / elem_size) * elem_size + kp * 16 + 64 * 16 > 48 * 1024) return false;
  return p.H < lim && p.W < lim && p.OH * p.stride_h + p.pad_h < lim &&
         p.OW * p.stride_w + p.pad_w < lim && p.KH * p.dil_h < lim && p.KW * p.dil_w < lim &&
         p.C * p.KH * p.KW < lim;
}

// The column form of im2col, for NCHW GEMMs (conv/igemm/igemm.cpp's cols path: conv1d over
// [N, C, L] activations, a GEMM per image with no transpose): a new [N, Kp, Lp] tensor of x4's
// dtype (contiguous) with rows k = (c * KH + r) * KW + s < K = C * KH * KW (the filter's own
// flattening) and zero rows K <= k < Kp (K rounded up to 16 bytes of elements: im2col_cols_k),
// and column l = oh * OW + ow < L = OH * OW holding x4[n, c, oh * stride_h - pad_h + r * dil_h,
// ow * stride_w - pad_w + s * dil_w] (zero outside the input); columns L <= l < Lp (L rounded up
// to 16 bytes of elements, so that every row starts 16-byte aligned) are zero. x4: [N, C, H, W],
// any strides. Requires im2col_cols_fits(p).
at::Tensor im2col_cols(const ConvProblem& p, const at::Tensor& x4);

// Kp of im2col_cols: C * KH * KW rounded up to 16 bytes of elements (filter_rows's Kp).
inline int64_t im2col_cols_k(const ConvProblem& p) {
  const int64_t vec = 16 / p.elem_size;
  return (p.C * p.KH * p.KW + vec - 1) / vec * vec;
}

// Lp of im2col_cols: OH * OW rounded up to 16 bytes of elements.
inline int64_t im2col_cols_ld(const ConvProblem& p) {
  const int64_t vec = 16 / p.elem_size;
  return (p.OH * p.OW + vec - 1) / vec * vec;
}

// Whether im2col_cols takes p: 32-bit window arithmetic (rows, columns and output positions under
// 2^28, output positions per image under 2^31).
inline bool im2col_cols_fits(const ConvProblem& p) {
  const int64_t lim = int64_t{1} << 28;
  return p.H < lim && p.W < lim && p.OH * p.stride_h + p.pad_h < lim &&
         p.OW * p.stride_w + p.pad_w < lim && p.KH * p.dil_h < lim && p.KW * p.dil_w < lim &&
         p.C * p.KH * p.KW < lim && im2col_cols_ld(p) < (int64_t{1} << 31) &&
         (p.elem_size == 2 || p.elem_size == 4);
}

}  // namespace gpukern
