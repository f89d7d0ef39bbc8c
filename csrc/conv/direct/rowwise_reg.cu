// rowwise_reg: can_run, the launcher (segments of chunks per resident warp) and its
// instantiations, one kernel per K <= kRowwiseRegMaxK. The kernel and its contract are in
// rowwise_reg.cuh.
#include <algorithm>
#include <climits>

#include "conv/direct/rowwise_reg.cuh"
#include "conv/launch_1d.h"
#include "core/dispatch.h"
#include "core/launch.cuh"

namespace gpukern {
namespace {

// Resident blocks per SM of a kernel (at least 1).
template <typename Kernel>
int blocks_per_sm(Kernel kernel, int threads, int smem) {
  int n = 0;
  C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, smem));
  return std::max(n, 1);
}

// Warps walk segments of consecutive (32 - halo) * kE-output chunks of a row; as many blocks as
// fit at once (or fewer when there are fewer segments).
template <typename T, int kK>
void launch_rowwise_reg_k(const ConvProblem& p, cudaStream_t stream) {
  using Traits = conv::Conv1dRegTraits<T, kK>;
  constexpr int kWarps = Traits::kThreads / 32;
  TORCH_INTERNAL_ASSERT(one_row(p) && p.stride_w == 1 && p.dil_w == 1 && p.KW == kK);
  const int halo = conv::reg_halo_lanes<Traits>(p.KW, p.x_sw == 1);
  TORCH_INTERNAL_ASSERT(halo >= 0 && halo <= Traits::kMaxHalo);  // 0: K = 1, strided rows
  const int64_t q = (32 - halo) * Traits::kE;
  const int64_t early = conv::rows_start_early<T>(p);
  const int64_t chunks = ceil_div(p.OW + early, q);
  static const int per_sm =
      blocks_per_sm(conv::conv1d_rowwise_reg_kernel<T, Traits>, Traits::kThreads, 0);
  const int64_t warps = int64_t{device_props().multiProcessorCount} * per_sm * kWarps;
  // Segments: about kSegsPerWarp per resident warp, at most kMaxSegChunks chunks each, whole
  // rows when rows are short.
  const int64_t rows = p.N * p.C;
  const int64_t seg_chunks = std::max<int64_t>(
      1, std::min<int64_t>({chunks, Traits::kMaxSegChunks,
                            ceil_div(rows * chunks, Traits::kSegsPerWarp * warps)}));
  const int64_t segs = ceil_div(chunks, seg_chunks);
  const int64_t total = rows * segs;
  GK_CHECK(total <= INT_MAX && chunks <= INT_MAX, "conv1d",
           "too many rows for the rowwise_reg kernel (", rows, " rows of ", chunks, " chunks)");
  const int64_t grid = std::min<int64_t>(ceil_div(total, kWarps), warps / kWarps);
  conv::conv1d_rowwise_reg_kernel<T, Traits>
      <<<static_cast<int>(grid), Traits::kThreads, 0, stream>>>(
          p, static_cast<uint32_t>(chunks), static_cast<uint32_t>(seg_chunks),
          static_cast<uint32_t>(segs), static_cast<uint32_t>(total), halo);
  GK_CHECK_LAUNCH();
}

}  // namespace

bool can_run_rowwise_reg(const ConvProblem& p) {
  return one_row(p) && p.stride_w == 1 && p.dil_w == 1 && p.KW <= kRowwiseRegMaxK;
}

template <typename T>
void launch_rowwise_reg(const ConvProblem& p, cudaStream_t stream) {
  static_assert(kRowwiseRegMaxK == 8, "one case per K below");
  switch (p.KW) {
    case 1: return launch_rowwise_reg_k<T, 1>(p, stream);
    case 2: return launch_rowwise_reg_k<T, 2>(p, stream);
    case 3: return launch_rowwise_reg_k<T, 3>(p, stream);
    case 4: return launch_rowwise_reg_k<T, 4>(p, stream);
    case 5: return launch_rowwise_reg_k<T, 5>(p, stream);
    case 6: return launch_rowwise_reg_k<T, 6>(p, stream);
    case 7: return launch_rowwise_reg_k<T, 7>(p, stream);
    case 8: return launch_rowwise_reg_k<T, 8>(p, stream);
    default: TORCH_INTERNAL_ASSERT(false, "rowwise_reg: K = ", p.KW);
  }
}

template void launch_rowwise_reg<float>(const ConvProblem&, cudaStream_t);
template void launch_rowwise_reg<__half>(const ConvProblem&, cudaStream_t);
template void launch_rowwise_reg<__nv_bfloat16>(const ConvProblem&, cudaStream_t);

}  // namespace gpukern
