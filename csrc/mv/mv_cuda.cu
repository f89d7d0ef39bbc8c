// mv on CUDA: algorithm choice from the shape and strides, then one launch on the current stream
// (kernels in mv_kernels.cuh, checks in mv.cpp).
//   N <= 16 (any layout)                  cols kernel: a thread per row, the short row in registers
//   s1 == 1 (row-major)                   rows kernel: a warp per row when rows are many, else a
//                                         block (8 warps) per row and N split across blocks
//   s0 == 1, M >= 256 (column-major)      cols kernel: threads across rows, N split across blocks
//                                         when the row blocks alone cannot fill the GPU
//   anything else (general strides, few   rows kernel with scalar strided loads
//   column-major rows)
// 16-byte loads of A whenever pointer, strides and split boundaries keep them aligned.
#include <ATen/ATen.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <utility>

#include "common/checks.h"
#include "common/dispatch.h"
#include "common/launch.cuh"
#include "mv/mv.h"
#include "mv/mv_kernels.cuh"

namespace gpukern {
namespace {

template <typename T>
void launch_mv(const at::Tensor& self, const at::Tensor& vec, const at::Tensor& out,
               cudaStream_t stream, int tbase) {
  constexpr int V = kVec16<T>;
  constexpr int kThreads = mvk::kThreads;
  const int64_t sms = device_props().multiProcessorCount;
  const int64_t target_blocks = sms * (2048 / kThreads);
  MvParams p;
  p.M = self.size(0);
  p.N = self.size(1);
  p.s0 = self.stride(0);
  p.s1 = self.stride(1);
  p.xs = vec.stride(0);
  // Strides of size-1 dims are arbitrary: make them harmless for the layout tests below.
  if (p.N == 1) p.s1 = 0;
  if (p.M == 1) p.s0 = 0;
  const T* A = reinterpret_cast<const T*>(self.data_ptr());
  const T* x = reinterpret_cast<const T*>(vec.data_ptr());
  T* y = reinterpret_cast<T*>(out.data_ptr());
  const bool a_aligned = is_aligned16(A);
  const auto ws_opts = self.options().dtype(at::kFloat);

  const bool use_cols = p.N <= 16 || (p.s1 != 1 && p.s0 == 1 && p.M >= 256);

  if (use_cols) {
    const bool vec_a = p.s0 == 1 && a_aligned && p.s1 % V == 0;
    const int64_t rows_per_block = static_cast<int64_t>(kThreads) * (vec_a ? V : 1);
    const int64_t nrb = ceil_div(p.M, rows_per_block);
    int64_t splits = 1;
    if (nrb < target_blocks / 2 && nrb <= kTicketsPerSlot) {
      // About 4 blocks per SM (all resident at once), at least 64 columns per split; at most 64
      // partials per row (the finishing block loads them 8 at a time).
      splits = std::min({ceil_div(sms * 4, nrb), ceil_div(p.N, int64_t{64}), int64_t{64}});
      splits = std::max<int64_t>(splits, 1);
    }
    p.split_len = ceil_div(p.N, splits);
    splits = ceil_div(p.N, p.split_len);
    at::Tensor ws;
    float* wsp = nullptr;
    if (splits > 1) {
      ws = at::empty({splits * p.M}, ws_opts);
      wsp = ws.data_ptr<float>();
    }
    const int64_t gx = splits > 1 ? nrb : std::min(nrb, sms * 64);
    const dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(splits));
    if (vec_a) {
      mvk::mv_cols_kernel<T, true><<<grid, kThreads, 0, stream>>>(A, x, y, wsp, p, tbase);
    } else {
      mvk::mv_cols_kernel<T, false><<<grid, kThreads, 0, stream>>>(A, x, y, wsp, p, tbase);
    }
    GK_CHECK_LAUNCH();
    return;
  }

  const bool vec_a = p.s1 == 1 && a_aligned && p.s0 % V == 0;
  const bool x_vec = p.xs == 1 && is_aligned16(x);
  // A warp per row once rows alone give about 32 warps per SM; otherwise a block per row.
  const int rpb = p.M >= sms * 32 ? mvk::kWarps : 1;
  const int64_t groups = ceil_div(p.M, rpb);
  int64_t splits = 1;
  const int64_t align = static_cast<int64_t>(kWarpSize) * V;  // keeps split starts vector-aligned
  if (rpb == 1 && groups < target_blocks) {
    const int64_t min_cols = static_cast<int64_t>(mvk::kThreads) * V * 2;
    splits = std::min({ceil_div(target_blocks, groups), ceil_div(p.N, min_cols), int64_t{65535}});
    splits = std::max<int64_t>(splits, 1);
  }
  p.split_len = ceil_div(ceil_div(p.N, splits), align) * align;
  splits = ceil_div(p.N, p.split_len);
  at::Tensor ws;
  float* wsp = nullptr;
  if (splits > 1) {
    TORCH_INTERNAL_ASSERT(groups <= kTicketsPerSlot);
    ws = at::empty({splits * p.M}, ws_opts);
    wsp = ws.data_ptr<float>();
  }
  const int64_t gx = splits > 1 ? groups : std::min(groups, sms * 64);
  const dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(splits));
  if (vec_a) {
    mvk::mv_rows_kernel<T, true>
        <<<grid, kThreads, 0, stream>>>(A, x, y, wsp, p, rpb, x_vec, tbase);
  } else {
    mvk::mv_rows_kernel<T, false>
        <<<grid, kThreads, 0, stream>>>(A, x, y, wsp, p, rpb, x_vec, tbase);
  }
  GK_CHECK_LAUNCH();
}

}  // namespace

void mv_cuda(const at::Tensor& self, const at::Tensor& vec, const at::Tensor& out) {
  CudaLaunchContext ctx(self);
  const int tbase = ticket_slot_base(self.device().index(), ctx.stream);
  GK_DISPATCH_FLOAT_CUDA(self.scalar_type(), "mv",
                         [&] { launch_mv<scalar_t>(self, vec, out, ctx.stream, tbase); });
}

}  // namespace gpukern
