// general2d, host side: can_run and plan of the staged variant, launch of both variants, and the
// kernel's instantiations.
#include <algorithm>

#include "conv/direct/direct2d.h"
#include "conv/direct/general2d.cuh"
#include "core/launch.cuh"

namespace gpukern {
namespace {

constexpr const char* kOp = kConv2dOp;

struct StagedPlan {
  int rows_per_chunk = 0;  // filter rows per staged chunk
  int region_cols = 0;     // staged input columns
  size_t smem_bytes = 0;
};

// Whether the tile's input region of one filter row fits GeneralTraits' shared budget, and how
// many filter rows a chunk stages.
bool plan_staged(const ConvProblem& p, StagedPlan& plan) {
  using Tr = conv::GeneralTraits;
  const int64_t region_cols = (Tr::kTileW - 1) * p.stride_w + (p.KW - 1) * p.dil_w + 1;
  const int64_t one_row = (Tr::kTileH - 1) * p.stride_h + 1;  // region rows of one filter row
  if (p.KW > Tr::kMaxTaps || region_cols > Tr::kMaxRegion ||
      one_row * region_cols > Tr::kMaxRegion) {
    return false;
  }
  // Most filter rows R with region rows one_row + (R-1)*dil_h and R*KW taps inside budget.
  const int64_t by_region = (Tr::kMaxRegion / region_cols - one_row) / p.dil_h + 1;
  const int64_t by_taps = Tr::kMaxTaps / p.KW;
  const int64_t R = std::max<int64_t>(1, std::min({p.KH, by_region, by_taps}));
  const int64_t region_rows = one_row + (R - 1) * p.dil_h;
  plan.rows_per_chunk = static_cast<int>(R);
  plan.region_cols = static_cast<int>(region_cols);
  plan.smem_bytes = static_cast<size_t>(R * p.KW + region_rows * region_cols) * sizeof(float);
  return true;
}

// x = output tiles (tile row * tiles_w + tile column), y = (n, o) planes (grid-stride past
// kMaxGridY).
dim3 general_grid(const ConvProblem& p, int64_t& tiles_w) {
  using Tr = conv::GeneralTraits;
  tiles_w = ceil_div(p.OW, Tr::kTileW);
  return checked_grid(kOp, ceil_div(p.OH, Tr::kTileH) * tiles_w, std::min(p.N * p.O, kMaxGridY));
}

}  // namespace

bool general_staged_can_run(const ConvProblem& p) {
  StagedPlan plan;
  return plan_staged(p, plan);
}

template <typename T>
void general_staged_run(const ConvProblem& p, cudaStream_t stream) {
  StagedPlan plan;
  GK_CHECK(plan_staged(p, plan), kOp, "internal error: general_staged cannot run this shape");
  int64_t tiles_w = 0;
  const dim3 grid = general_grid(p, tiles_w);
  conv::conv2d_general_kernel<T, true><<<grid, conv::GeneralTraits::kNThreads, plan.smem_bytes,
                                         stream>>>(p, plan.rows_per_chunk, plan.region_cols,
                                                   tiles_w);
  GK_CHECK_LAUNCH();
}

template <typename T>
void general_direct_run(const ConvProblem& p, cudaStream_t stream) {
  int64_t tiles_w = 0;
  const dim3 grid = general_grid(p, tiles_w);
  conv::conv2d_general_kernel<T, false><<<grid, conv::GeneralTraits::kNThreads, 0, stream>>>(
      p, 0, 0, tiles_w);
  GK_CHECK_LAUNCH();
}

// Every dtype, staged and direct.
template void general_staged_run<float>(const ConvProblem&, cudaStream_t);
template void general_staged_run<__half>(const ConvProblem&, cudaStream_t);
template void general_staged_run<__nv_bfloat16>(const ConvProblem&, cudaStream_t);
template void general_direct_run<float>(const ConvProblem&, cudaStream_t);
template void general_direct_run<__half>(const ConvProblem&, cudaStream_t);
template void general_direct_run<__nv_bfloat16>(const ConvProblem&, cudaStream_t);

}  // namespace gpukern
