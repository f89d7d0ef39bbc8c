// rowwise_mma: can_run, the launcher (tile length from the number of rows, warps a block from the
// shared-memory budget, k steps from K) and its instantiations. The kernel and its contract are in
// rowwise_mma.cuh.
#include <algorithm>
#include <climits>

#include "conv/direct/rowwise_mma.cuh"
#include "conv/launch_1d.h"
#include "core/dispatch.h"
#include "core/launch.cuh"

namespace gpukern {
namespace {

// One warp per tile of up to 2048 outputs (the tiles of a row evened out to whole 128-output mma
// tiles), as many warps a block as their staged tiles fit in 48 KB (up to 4), k steps by K.
template <typename T, int kKS>
void launch_rowwise_mma_ks(const ConvProblem& p, cudaStream_t stream) {
  using Traits = conv::Conv1dMmaTraits<T, kKS>;
  TORCH_INTERNAL_ASSERT(one_row(p) && p.stride_w == 1 && p.dil_w == 1 &&
                        p.KW <= kRowwiseMmaMaxK);
  const int64_t span = p.OW + conv::rows_start_early<T>(p);
  const int64_t rows = p.N * p.C;
  int64_t tiles = ceil_div(span, Traits::kMaxOb * Traits::kBlock);
  // Fewer tiles than one wave of warps (a single row of 1M samples is 512 tiles of 2048): tiles
  // down to kMinOb mma tiles, so that every SM gets its warps.
  const int64_t wave = static_cast<int64_t>(device_props().multiProcessorCount) *
                       Traits::kMinBlocks * Traits::kMaxWarps;
  if (rows * tiles < wave) {
    tiles = std::max(tiles, std::min(ceil_div(span, Traits::kMinOb * Traits::kBlock),
                                     ceil_div(wave, rows)));
  }
  const int64_t nob = ceil_div(ceil_div(span, tiles), Traits::kBlock);
  const int64_t npass = p.KW <= Traits::kPassTaps ? 1 : ceil_div(p.KW, Traits::kPassStride);
  const int64_t total = rows * tiles;
  GK_CHECK(total <= INT_MAX, "conv1d", "too many rows for the rowwise_mma kernel (", p.N * p.C,
           " rows of ", tiles, " tiles)");
  const int64_t stage =
      Traits::staged(static_cast<int>(nob), static_cast<int>((npass - 1) * Traits::kPassStride));
  const int64_t stage_bytes = stage * static_cast<int64_t>(sizeof(T));
  TORCH_INTERNAL_ASSERT(nob <= Traits::kMaxOb && stage_bytes <= Traits::kSmemBudget);
  const int64_t warps = std::max<int64_t>(
      1, std::min<int64_t>({Traits::kMaxWarps, Traits::kSmemBudget / stage_bytes, total}));
  conv::conv1d_rowwise_mma_kernel<T, Traits>
      <<<static_cast<int>(ceil_div(total, warps)), static_cast<int>(32 * warps),
         static_cast<size_t>(warps * stage_bytes), stream>>>(
          p, static_cast<int>(nob), static_cast<int>(npass), static_cast<uint32_t>(tiles),
          static_cast<uint32_t>(total), static_cast<int>(stage));
  GK_CHECK_LAUNCH();
}

}  // namespace

bool can_run_rowwise_mma(const ConvProblem& p) {
  return one_row(p) && p.stride_w == 1 && p.dil_w == 1 && p.elem_size == 2 &&
         p.KW <= kRowwiseMmaMaxK;
}

template <typename T>
void launch_rowwise_mma(const ConvProblem& p, cudaStream_t stream) {
  if constexpr (sizeof(T) == 2) {
    using conv::Conv1dMmaTraits;
    if (p.KW <= Conv1dMmaTraits<T, 2>::kPassTaps) return launch_rowwise_mma_ks<T, 2>(p, stream);
    if (p.KW <= Conv1dMmaTraits<T, 3>::kPassTaps) return launch_rowwise_mma_ks<T, 3>(p, stream);
    if (p.KW <= Conv1dMmaTraits<T, 4>::kPassTaps) return launch_rowwise_mma_ks<T, 4>(p, stream);
    return launch_rowwise_mma_ks<T, 8>(p, stream);
  } else {
    (void)p, (void)stream;
    TORCH_INTERNAL_ASSERT(false, "rowwise_mma: 16-bit types only");
  }
}

template void launch_rowwise_mma<float>(const ConvProblem&, cudaStream_t);
template void launch_rowwise_mma<__half>(const ConvProblem&, cudaStream_t);
template void launch_rowwise_mma<__nv_bfloat16>(const ConvProblem&, cudaStream_t);

}  // namespace gpukern
