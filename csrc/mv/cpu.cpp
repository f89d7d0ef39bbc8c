// mv on the CPU: the reference kernel for every floating dtype (float64 included).
#include "mv/cpu.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "core/dispatch.h"

namespace gpukern {
namespace {

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

}  // namespace

void mv_cpu(const at::Tensor& A, const at::Tensor& x, const at::Tensor& out) {
  GK_DISPATCH_FLOAT_CPU(A.scalar_type(), "mv", [&] { mv_cpu_kernel<scalar_t>(A, x, out); });
}

}  // namespace gpukern
