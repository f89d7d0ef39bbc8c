#pragma once
// Split-K for the implicit GEMM (conv/igemm/igemm.cpp run_split): the input channels cut into
// `splits` slices, one conv-kernel launch per slice (each on its own stream, concurrently) writing
// fp32 partial sums, then split_reduce_run adds the partials, the bias and the residual, applies
// the activation and writes y in its own layout and dtype. Torch-free; CUDA builds only.
#include <cstdint>

#include <cuda_runtime.h>

namespace gpukern {
namespace conv {

// partials: `splits` fp32 arrays [M][O] (M = N * P * Q output pixels in (n, p, q) order, rows O
// apart), split_stride elements apart. y (and the residual, with y's strides) [N, O, P, Q] in any
// element strides; bias: O elements of y's dtype or null; act: an ActKind. dtype: 0 float,
// 1 bfloat16, 2 half.
struct SplitReduce {
  const float* partials = nullptr;
  int splits = 1;
  int64_t split_stride = 0;
  int64_t M = 0, O = 0, P = 1, Q = 1;
  const void* bias = nullptr;
  const void* residual = nullptr;
  void* y = nullptr;
  int64_t y_sn = 0, y_so = 0, y_sp = 0, y_sq = 0;
  int act = 0;
  int dtype = 0;
};

void split_reduce_run(const SplitReduce& r, cudaStream_t stream);

}  // namespace conv
}  // namespace gpukern
