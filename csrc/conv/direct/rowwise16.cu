// rowwise16: can_run, the launcher (segments per tile from the shared-memory budget and the
// number of rows) and its instantiations. The kernel and its contract are in rowwise16.cuh.
#include <algorithm>
#include <climits>

#include "conv/direct/rowwise16.cuh"
#include "conv/launch_1d.h"
#include "core/dispatch.h"
#include "core/launch.cuh"

namespace gpukern {

bool can_run_rowwise16(const ConvProblem& p) {
  return one_row(p) && p.stride_w == 1 && p.dil_w == 1;
}

// One warp per tile of up to kMaxSegs 512-output segments (fewer when the staged tile would pass
// a warp's 12 KB, or when rows are too few to give every SM its warps), 4 warps a block; taps in
// chunks of up to kMaxChunk (then one segment a tile).
template <typename T>
void launch_rowwise16(const ConvProblem& p, cudaStream_t stream) {
  using Traits = conv::Conv1dWarpTraits<T>;
  TORCH_INTERNAL_ASSERT(one_row(p) && p.stride_w == 1 && p.dil_w == 1);
  const int64_t kr = ceil_div(p.KW, Traits::kR) * Traits::kR;
  const int chunk = static_cast<int>(std::min<int64_t>(kr, Traits::kMaxChunk));
  int segs = 1;
  if (kr <= Traits::kMaxChunk) {
    while (segs < Traits::kMaxSegs && Traits::warp_floats(segs + 1, chunk) <= Traits::kWarpFloats) {
      ++segs;
    }
  }
  const int64_t span = p.OW + conv::rows_start_early<T>(p);
  const int64_t rows = p.N * p.C;
  // Fewer tiles than one wave of warps: shorter tiles, down to one segment.
  const int64_t wave = static_cast<int64_t>(device_props().multiProcessorCount) *
                       Traits::kMinBlocks * Traits::kWarps;
  while (segs > 1 && rows * ceil_div(span, int64_t{segs} * Traits::kSeg) < wave) --segs;
  const int64_t tiles = ceil_div(span, int64_t{segs} * Traits::kSeg);
  const int64_t total = rows * tiles;
  GK_CHECK(total <= INT_MAX, "conv1d", "too many rows for the rowwise16 kernel (", rows,
           " rows of ", tiles, " tiles)");
  const int smem =
      Traits::kWarps * Traits::warp_floats(segs, chunk) * static_cast<int>(sizeof(float));
  conv::conv1d_rowwise_warp_kernel<T, Traits>
      <<<static_cast<int>(ceil_div(total, Traits::kWarps)), Traits::kThreads, smem, stream>>>(
          p, segs, chunk, static_cast<uint32_t>(tiles), static_cast<uint32_t>(total));
  GK_CHECK_LAUNCH();
}

template void launch_rowwise16<float>(const ConvProblem&, cudaStream_t);
template void launch_rowwise16<__half>(const ConvProblem&, cudaStream_t);
template void launch_rowwise16<__nv_bfloat16>(const ConvProblem&, cudaStream_t);

}  // namespace gpukern
