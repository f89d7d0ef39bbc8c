// rowwise8 / rowwise8_dilated: can_run, the launcher (tile and tap chunk from the dilation) and
// its instantiations. The kernel and its contract are in rowwise.cuh.
#include <algorithm>

#include "conv/direct/rowwise.cuh"
#include "conv/launch_1d.h"
#include "core/dispatch.h"
#include "core/launch.cuh"

namespace gpukern {
namespace {

template <bool kDil1>
using RowwiseTraits = conv::Conv1dRowwiseTraits<128, 8, kDil1>;

static_assert(RowwiseTraits<true>::kMaxTile == kRowwiseTile, "launch_1d.h's tile length");
static_assert(RowwiseTraits<false>::kMaxDilation == kRowwiseMaxDilation,
              "launch_1d.h's largest dilation");

}  // namespace

bool can_run_rowwise8(const ConvProblem& p) {
  return one_row(p) && p.stride_w == 1 && p.dil_w == 1;
}

bool can_run_rowwise8_dilated(const ConvProblem& p) {
  return one_row(p) && p.stride_w == 1 && p.dil_w <= kRowwiseMaxDilation;
}

template <typename T, bool kDil1>
void launch_rowwise(const ConvProblem& p, cudaStream_t stream) {
  using Traits = RowwiseTraits<kDil1>;
  constexpr int kR = Traits::kR;
  const int d = Traits::kDil1 ? 1 : static_cast<int>(p.dil_w);
  TORCH_INTERNAL_ASSERT(d >= 1 && d <= Traits::kMaxDilation && (d == 1 || !Traits::kDil1));
  const int tile_len = (Traits::kThreads / d) * d * kR;
  int64_t chunk = std::min<int64_t>(ceil_div(p.KW, kR) * kR, Traits::kMaxChunk);
  if (!Traits::kDil1) {
    chunk = std::min<int64_t>(chunk, std::max(kR, Traits::kMaxHalo / d / kR * kR));
  }
  const int64_t tiles = ceil_div(p.OW, tile_len);
  const int64_t staged = ceil_div(tile_len + chunk * d, 32) * 32;  // whole swizzle rows
  const size_t smem = static_cast<size_t>(chunk + staged) * sizeof(float);
  TORCH_INTERNAL_ASSERT(smem <= static_cast<size_t>(Traits::max_smem_bytes()));
  conv::conv1d_rowwise_kernel<T, Traits><<<grid_for(p.N * p.C * tiles), Traits::kThreads, smem,
                                            stream>>>(p, static_cast<int>(chunk), tiles);
  GK_CHECK_LAUNCH();
}

#define GK_INSTANTIATE_ROWWISE(T)                                                \
  template void launch_rowwise<T, true>(const ConvProblem&, cudaStream_t); \
  template void launch_rowwise<T, false>(const ConvProblem&, cudaStream_t);
GK_INSTANTIATE_ROWWISE(float)
GK_INSTANTIATE_ROWWISE(__half)
GK_INSTANTIATE_ROWWISE(__nv_bfloat16)
#undef GK_INSTANTIATE_ROWWISE

}  // namespace gpukern
