#pragma once
// Matrix-vector product y = A @ x (torch.mv): the normalised problem that the host entry
// (mv/ops.cpp), the CPU kernel and the CUDA choice read, and the CUDA kernels' parameters.
// Torch-free on purpose: the kernel headers include it.
#include <cstdint>

namespace gpukern {

// One mv call as the algorithm choice sees it: A is [M, N] with element strides (s0, s1), x has
// element stride xs; elem_size bytes per element (one dtype); whether A and x start on a 16-byte
// boundary (meta tensors: aligned storage, only the offset counts). Built by make_mv_problem
// (mv/ops.cpp); not normalised (the choice zeroes the strides of size-1 dims itself).
struct MvProblem {
  int64_t M = 0, N = 0;
  int64_t s0 = 0, s1 = 0, xs = 0;
  int elem_size = 4;
  bool a_aligned = true, x_aligned = true;
};

// The CUDA kernels' parameters: sizes and strides in elements, int64. The kernels read columns
// [split * split_len, min(N, (split + 1) * split_len)) in split `split` (split_len == N when the
// reduction is not split).
struct MvParams {
  int64_t M = 0, N = 0;
  int64_t s0 = 0, s1 = 0, xs = 0;
  int64_t split_len = 0;
};

}  // namespace gpukern
