// depthwise_rows, host side: can_run, plan, launch and the kernel's instantiations.
#include <algorithm>

#include "conv/direct/depthwise_rows.cuh"
#include "conv/direct/direct2d.h"
#include "core/launch.cuh"

namespace gpukern {
namespace {

constexpr const char* kOp = kConv2dOp;

// Warps of work the kernel aims for (row chunks are cut until there are about this many):
// ~2 waves of 132 SMs x 16 resident warps (the 7x7 instance's occupancy), fewer chunks = fewer
// re-read halo rows.
constexpr int64_t kRowsTargetWarps = 4096;

struct RowsPlan {
  conv::RowsShape shape{};  // work decomposition
  int k = 0;                // the filter: 3, 5 or 7
  size_t smem_bytes = 0;    // the warps' rings
};

bool plan_rows(const ConvProblem& p, RowsPlan& plan) {
  using Tr = conv::RowsTraits;
  const bool k_ok = p.KH == p.KW && (p.KH == 3 || p.KH == 5 || p.KH == 7);
  // The kernel indexes columns and image rows in int (offsets in int64).
  if (!p.depthwise1() || p.stride_h != 1 || p.stride_w != 1 || p.dil_h != 1 || p.dil_w != 1 ||
      !k_ok || p.pad_w > Tr::kHalo || p.KW - 1 - p.pad_w > Tr::kHalo ||
      std::max({p.H, p.W, p.OW}) > kMaxIntIndex || p.pad_h > kMaxIntIndex) {
    return false;
  }
  conv::RowsShape& s = plan.shape;
  int S = 1;
  while (S < 32 && S * Tr::kItems < p.OW) S *= 2;
  s.seg_lanes = S;
  s.strips = ceil_div(p.OW, static_cast<int64_t>(S) * Tr::kItems);
  const int64_t groups = ceil_div(p.N * p.C, 32 / S);
  s.chunks = std::max<int64_t>(
      1, std::min(ceil_div(p.OH, 16), ceil_div(kRowsTargetWarps, groups * s.strips)));
  s.rows = ceil_div(p.OH, s.chunks);
  s.chunks = ceil_div(p.OH, s.rows);
  s.units = groups * s.chunks * s.strips;
  s.x_vec = nchw_vec_x(p, Tr::kItems);
  s.y_vec = nchw_vec_y(p, Tr::kItems);
  plan.k = static_cast<int>(p.KH);
  plan.smem_bytes = static_cast<size_t>(Tr::kWarps) * Tr::kStages * Tr::slot(S) * p.elem_size;
  return true;
}

}  // namespace

bool depthwise_rows_can_run(const ConvProblem& p) {
  RowsPlan plan;
  return plan_rows(p, plan);
}

template <typename T>
void depthwise_rows_run(const ConvProblem& p, cudaStream_t stream) {
  using Tr = conv::RowsTraits;
  RowsPlan plan;
  GK_CHECK(plan_rows(p, plan), kOp, "internal error: depthwise_rows cannot run this shape");
  const dim3 grid = checked_grid(kOp, ceil_div(plan.shape.units, Tr::kWarps));
  auto go = [&](auto kernel) {
    allow_dynamic_smem(kernel, plan.smem_bytes);
    kernel<<<grid, Tr::kNThreads, plan.smem_bytes, stream>>>(p, plan.shape);
    GK_CHECK_LAUNCH();
  };
  switch (plan.k) {
    case 3: go(conv::conv2d_depthwise_rows_kernel<T, 3>); break;
    case 5: go(conv::conv2d_depthwise_rows_kernel<T, 5>); break;
    default: go(conv::conv2d_depthwise_rows_kernel<T, 7>); break;
  }
}

// Every dtype x filter 3/5/7 (7x7 runs only when forced: the choice sends it elsewhere).
template void depthwise_rows_run<float>(const ConvProblem&, cudaStream_t);
template void depthwise_rows_run<__half>(const ConvProblem&, cudaStream_t);
template void depthwise_rows_run<__nv_bfloat16>(const ConvProblem&, cudaStream_t);

}  // namespace gpukern
