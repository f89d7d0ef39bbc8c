// mv's host entry: check -> problem -> CPU kernel (mv/cpu.cpp) or CUDA run (mv/dispatch.cu), the
// algorithm query, and the registration of both backends.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <cstdint>
#include <string>

#include "core/checks.h"
#include "mv/cpu.h"
#include "mv/dispatch.h"
#include "mv/problem.h"

namespace gpukern {
namespace {

constexpr const char* kOp = "mv";

void check_mv_args(const at::Tensor& self, const at::Tensor& vec) {
  check_defined(kOp, self, "self");
  check_defined(kOp, vec, "vec");
  // A 0-d self is an IndexError in torch.mv (it reads self.size(0) first); as torch.
  if (C10_UNLIKELY(self.dim() == 0)) {
    TORCH_CHECK_INDEX(false, detail::check_msg("gpukern::", kOp, ": expected self to be a 2-D ",
                                               "matrix, got 0-D (shape [])"));
  }
  GK_CHECK(self.dim() == 2, kOp, "expected self to be a 2-D matrix, got ", self.dim(),
           "-D (shape ", self.sizes(), ")");
  GK_CHECK(vec.dim() == 1, kOp, "expected vec to be 1-D, got ", vec.dim(), "-D (shape ",
           vec.sizes(), ")");
  GK_CHECK(self.size(1) == vec.size(0), kOp, "size mismatch: self is ", self.sizes(),
           " and vec is ", vec.sizes(), " (self.size(1) must equal vec.size(0))");
  check_same_device(kOp, self, "self", vec, "vec");
  check_same_dtype(kOp, self, "self", vec, "vec");
  check_floating(kOp, self, "self");
}

#if defined(GPUKERN_WITH_CUDA)
// Whether t's data starts on a 16-byte boundary; meta tensors have no address, so their storage
// is taken as aligned (as fresh allocations are) and only the offset counts.
bool starts_aligned16(const at::Tensor& t) {
  if (t.is_meta()) return (t.storage_offset() * t.element_size()) % 16 == 0;
  return (reinterpret_cast<uintptr_t>(t.const_data_ptr()) & 15u) == 0;
}

// The MvProblem of a checked call: sizes, strides, element size and alignment of self and vec.
MvProblem make_mv_problem(const at::Tensor& self, const at::Tensor& vec) {
  MvProblem p;
  p.M = self.size(0);
  p.N = self.size(1);
  p.s0 = self.stride(0);
  p.s1 = self.stride(1);
  p.xs = vec.stride(0);
  p.elem_size = static_cast<int>(self.element_size());
  p.a_aligned = starts_aligned16(self);
  p.x_aligned = starts_aligned16(vec);
  return p;
}
#endif

// gpukern::mv (CPU and CUDA keys).
at::Tensor mv_op(const at::Tensor& self, const at::Tensor& vec) {
  check_mv_args(self, vec);
  GK_CHECK(self.device().is_cpu() || self.device().is_cuda(), kOp, "unsupported device ",
           self.device());

  at::Tensor out = at::empty({self.size(0)}, self.options());
  if (out.numel() == 0) return out;
  if (self.size(1) == 0) return out.zero_();
  if (self.device().is_cpu()) {
    mv_cpu(self, vec, out);
  } else {
#if defined(GPUKERN_WITH_CUDA)
    mv_cuda_run(make_mv_problem(self, vec), self, vec, out);
#else
    GK_CHECK(false, kOp, "gpukern was built without CUDA kernels");
#endif
  }
  return out;
}

// gpukern::_algorithm_mv: the CUDA algorithm a call with these arguments would run (see
// core/algo_table.h). Only sizes, strides, dtype and alignment are read; meta tensors work.
std::string mv_algorithm(const at::Tensor& self, const at::Tensor& vec) {
  check_mv_args(self, vec);
#if defined(GPUKERN_WITH_CUDA)
  if (self.size(0) == 0 || self.size(1) == 0) return "empty";
  return mv_cuda_algorithm(make_mv_problem(self, vec));
#else
  return "cpu (built without CUDA kernels)";
#endif
}

}  // namespace
}  // namespace gpukern

TORCH_LIBRARY_IMPL(gpukern, CompositeExplicitAutograd, m) {
  m.impl("_algorithm_mv", &gpukern::mv_algorithm);
}

TORCH_LIBRARY_IMPL(gpukern, CPU, m) { m.impl("mv", &gpukern::mv_op); }

#if defined(GPUKERN_WITH_CUDA)
TORCH_LIBRARY_IMPL(gpukern, CUDA, m) { m.impl("mv", &gpukern::mv_op); }
#endif
