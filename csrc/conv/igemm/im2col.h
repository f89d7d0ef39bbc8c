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
// Requires im2col_fits(Kp, elem_size): a 64-row tile of padded rows within 48 KB of staging.
at::Tensor im2col_rows(const ConvProblem& p, const at::Tensor& x4, int64_t k_multiple);

// Whether rows of kp elements of elem_size bytes fit the kernel's staging tile (64 rows, one
// 4-byte word of padding each, 48 KB): Kp up to 382 16-bit or 191 fp32 elements.
inline bool im2col_fits(int64_t kp, int64_t elem_size) {
  return 64 * (kp + 4 / elem_size) * elem_size <= 48 * 1024;
}

}  // namespace gpukern
