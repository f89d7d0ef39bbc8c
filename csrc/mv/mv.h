#pragma once
// Matrix-vector product y = A @ x (torch.mv). Torch-free (the CUDA kernels include it); at::Tensor
// is only forward-declared for the CUDA launcher's prototype.
#include <cstdint>

namespace at {
class Tensor;
}

namespace gpukern {

// Sizes and strides in elements, int64. A is [M, N] with strides (s0, s1), x has stride xs.
// The kernels read columns [split * split_len, min(N, (split + 1) * split_len)) in split
// `split` (split_len == N when the reduction is not split).
struct MvParams {
  int64_t M = 0, N = 0;
  int64_t s0 = 0, s1 = 0, xs = 0;
  int64_t split_len = 0;
};

#if defined(GPUKERN_WITH_CUDA)
// CUDA launcher (mv_cuda.cu): out is the allocated [M] output; M > 0 and N > 0.
void mv_cuda(const at::Tensor& self, const at::Tensor& vec, const at::Tensor& out);
#endif

}  // namespace gpukern
