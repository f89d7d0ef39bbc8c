// general_ot1 / general_ot4: the launcher (tile, chunk and staged channels planned from the
// problem) and its instantiations. The kernel and its contract are in general1d.cuh.
#include <algorithm>

#include "conv/direct/general1d.cuh"
#include "conv/launch_1d.h"
#include "core/dispatch.h"
#include "core/launch.cuh"

namespace gpukern {

template <typename T, int kOT>
void launch_general1d(const ConvProblem& p, cudaStream_t stream) {
  using Traits = conv::Conv1dGeneralTraits<128, 4, kOT>;
  constexpr int64_t kHalf = Traits::kSmemX / 2;
  int64_t tile = std::min<int64_t>(Traits::kTile, p.OW);
  // Long strides: shorten the tile so its stride part takes at most half the staged input.
  if ((tile - 1) * p.stride_w > kHalf - 1) tile = (kHalf - 1) / p.stride_w + 1;
  const int64_t room = Traits::kSmemX - (tile - 1) * p.stride_w - 1;  // >= kHalf
  int64_t chunk = std::min<int64_t>(p.KW, room / p.dil_w + 1);
  chunk = std::min<int64_t>(chunk, Traits::kSmemW / Traits::kOT);
  conv::Conv1dGeneralPlan plan;
  plan.tile = static_cast<int>(tile);
  plan.chunk = static_cast<int>(chunk);
  plan.span = static_cast<int>((tile - 1) * p.stride_w + (chunk - 1) * p.dil_w + 1);
  int64_t staged = 1;
  if (chunk == p.KW) {
    staged = std::min<int64_t>({p.c_per_group, Traits::kSmemX / plan.span,
                                Traits::kSmemW / (Traits::kOT * chunk),
                                Traits::kMaxStagedChannels});
    staged = std::max<int64_t>(staged, 1);
  }
  plan.staged = static_cast<int>(staged);
  plan.tiles = ceil_div(p.OW, tile);
  plan.oblocks = ceil_div(p.o_per_group, Traits::kOT);
  const size_t smem =
      static_cast<size_t>(staged * plan.span + staged * Traits::kOT * chunk) * sizeof(float);
  TORCH_INTERNAL_ASSERT(plan.span <= Traits::kSmemX && staged * plan.span <= Traits::kSmemX &&
                        staged * Traits::kOT * chunk <= Traits::kSmemW);
  const int64_t items = p.N * p.groups * plan.tiles * plan.oblocks;
  conv::conv1d_general_kernel<T, Traits><<<grid_for(items), Traits::kThreads, smem, stream>>>(
      p, plan);
  GK_CHECK_LAUNCH();
}

#define GK_INSTANTIATE_GENERAL1D(T)                                          \
  template void launch_general1d<T, 1>(const ConvProblem&, cudaStream_t); \
  template void launch_general1d<T, 4>(const ConvProblem&, cudaStream_t);
GK_INSTANTIATE_GENERAL1D(float)
GK_INSTANTIATE_GENERAL1D(__half)
GK_INSTANTIATE_GENERAL1D(__nv_bfloat16)
#undef GK_INSTANTIATE_GENERAL1D

}  // namespace gpukern
