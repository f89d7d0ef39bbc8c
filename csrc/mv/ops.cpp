// mv: argument checks, the CPU kernel, and the registration of both backends (the CUDA launcher
// lives in mv_cuda.cu; registering its key here keeps mv.h torch-free for the kernels).
#include "mv/mv.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/checks.h"
#include "core/dispatch.h"

namespace gpukern {
namespace {

constexpr const char* kOp = "mv";

// Two-level summation: each row's dot product is summed in blocks of kBlock terms whose partial
// sums are then added, so the fp32 rounding error grows with kBlock + N/kBlock terms instead of N
// (a 1M-term dot product loses ~30x less); inside a block 8 interleaved partial sums break the
// add chain so the loop vectorises.
constexpr int64_t kBlock = 1024;
constexpr int kLanes = 8;

// Rows are split across threads. When consecutive rows are closer in memory than consecutive
// columns (a transposed matrix), each task walks the columns outermost and keeps one accumulator
// per row, so memory is read in order either way.
template <typename T>
void mv_cpu_kernel(const at::Tensor& A, const at::Tensor& x, const at::Tensor& out) {
  using acc_t = cpu_acc_t<T>;
  const int64_t M = A.size(0), N = A.size(1);
  const int64_t s0 = A.stride(0), s1 = A.stride(1), xs = x.stride(0);
  const T* a = A.data_ptr<T>();
  const T* xv = x.data_ptr<T>();
  T* y = out.data_ptr<T>();
  const bool by_columns = M > 1 && N > 1 && std::llabs(s0) < std::llabs(s1);
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(N, 1));
  at::parallel_for(0, M, grain, [&](int64_t b, int64_t e) {
    if (by_columns) {
      std::vector<acc_t> total(static_cast<size_t>(e - b), acc_t(0));
      std::vector<acc_t> part(static_cast<size_t>(e - b));
      for (int64_t j0 = 0; j0 < N; j0 += kBlock) {
        std::fill(part.begin(), part.end(), acc_t(0));
        for (int64_t j = j0; j < std::min(N, j0 + kBlock); ++j) {
          const acc_t v = static_cast<acc_t>(xv[j * xs]);
          const T* col = a + j * s1;
          for (int64_t i = b; i < e; ++i) part[i - b] += static_cast<acc_t>(col[i * s0]) * v;
        }
        for (int64_t i = b; i < e; ++i) total[i - b] += part[i - b];
      }
      for (int64_t i = b; i < e; ++i) y[i] = static_cast<T>(total[i - b]);
    } else {
      for (int64_t i = b; i < e; ++i) {
        const T* row = a + i * s0;
        acc_t total(0);
        for (int64_t j0 = 0; j0 < N; j0 += kBlock) {
          const int64_t j1 = std::min(N, j0 + kBlock);
          acc_t lane[kLanes] = {};
          int64_t j = j0;
          for (; j + kLanes <= j1; j += kLanes) {
            for (int l = 0; l < kLanes; ++l) {
              lane[l] += static_cast<acc_t>(row[(j + l) * s1]) *
                         static_cast<acc_t>(xv[(j + l) * xs]);
            }
          }
          for (; j < j1; ++j) {
            lane[0] += static_cast<acc_t>(row[j * s1]) * static_cast<acc_t>(xv[j * xs]);
          }
          total += ((lane[0] + lane[1]) + (lane[2] + lane[3])) +
                   ((lane[4] + lane[5]) + (lane[6] + lane[7]));
        }
        y[i] = static_cast<T>(total);
      }
    }
  });
}

void check_mv_args(const at::Tensor& self, const at::Tensor& vec) {
  check_defined(kOp, self, "self");
  check_defined(kOp, vec, "vec");
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

at::Tensor mv(const at::Tensor& self, const at::Tensor& vec) {
  check_mv_args(self, vec);
  GK_CHECK(self.device().is_cpu() || self.device().is_cuda(), kOp, "unsupported device ",
           self.device());

  at::Tensor out = at::empty({self.size(0)}, self.options());
  if (out.numel() == 0) return out;
  if (self.size(1) == 0) return out.zero_();
  if (self.device().is_cpu()) {
    GK_DISPATCH_FLOAT_CPU(self.scalar_type(), kOp,
                          [&] { mv_cpu_kernel<scalar_t>(self, vec, out); });
  } else {
#if defined(GPUKERN_WITH_CUDA)
    mv_cuda(self, vec, out);
#else
    GK_CHECK(false, kOp, "gpukern was built without CUDA kernels");
#endif
  }
  return out;
}

// Whether t's data starts on a 16-byte boundary; meta tensors have no address, so their storage
// is taken as aligned (as fresh allocations are) and only the offset counts.
bool starts_aligned16(const at::Tensor& t) {
  if (t.is_meta()) return (t.storage_offset() * t.element_size()) % 16 == 0;
  return (reinterpret_cast<uintptr_t>(t.const_data_ptr()) & 15u) == 0;
}

// gpukern::_algorithm_mv: the CUDA algorithm a call with these arguments would run (see
// core/algo_table.h). Only sizes, strides, dtype and alignment are read; meta tensors work.
std::string mv_algorithm(const at::Tensor& self, const at::Tensor& vec) {
  check_mv_args(self, vec);
#if defined(GPUKERN_WITH_CUDA)
  if (self.size(0) == 0 || self.size(1) == 0) return "empty";
  return mv_cuda_algorithm(mv_shape(self, vec));
#else
  return "cpu (built without CUDA kernels)";
#endif
}

}  // namespace

MvShape mv_shape(const at::Tensor& self, const at::Tensor& vec) {
  MvShape s;
  s.M = self.size(0);
  s.N = self.size(1);
  s.s0 = self.stride(0);
  s.s1 = self.stride(1);
  s.xs = vec.stride(0);
  s.elem_size = static_cast<int>(self.element_size());
  s.a_aligned = starts_aligned16(self);
  s.x_aligned = starts_aligned16(vec);
  return s;
}

}  // namespace gpukern

TORCH_LIBRARY_IMPL(gpukern, CompositeExplicitAutograd, m) {
  m.impl("_algorithm_mv", &gpukern::mv_algorithm);
}

TORCH_LIBRARY_IMPL(gpukern, CPU, m) { m.impl("mv", &gpukern::mv); }

#if defined(GPUKERN_WITH_CUDA)
TORCH_LIBRARY_IMPL(gpukern, CUDA, m) { m.impl("mv", &gpukern::mv); }
#endif
