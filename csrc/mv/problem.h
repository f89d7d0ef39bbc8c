#pragma once
// Matrix-vector product y = A @ x (torch.mv). Torch-free (the CUDA kernels include it); at::Tensor
// is only forward-declared for the CUDA launcher's prototype.
#include <cstdint>
#include <string>

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

// What the CUDA algorithm choice reads: sizes, strides (of a non-empty call), element size and
// whether A / x start on a 16-byte boundary.
struct MvShape {
  int64_t M = 0, N = 0;
  int64_t s0 = 0, s1 = 0, xs = 0;
  int elem_size = 4;
  bool a_aligned = true, x_aligned = true;
};

// The MvShape of a call (mv.cpp): sizes, strides, element size and alignment of self and vec
// (meta tensors: aligned storage, only the offset counts). Not normalised.
MvShape mv_shape(const at::Tensor& self, const at::Tensor& vec);

#if defined(GPUKERN_WITH_CUDA)
// CUDA launcher (mv_cuda.cu): out is the allocated [M] output; M > 0 and N > 0.
void mv_cuda(const at::Tensor& self, const at::Tensor& vec, const at::Tensor& out);
// Name of the algorithm mv_cuda runs for this shape (honours a forced one; raises like the call).
std::string mv_cuda_algorithm(const MvShape& shape);
#endif

}  // namespace gpukern
