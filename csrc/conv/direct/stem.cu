// stem_direct, host side: can_run, launch and the kernel's instantiations (the kernel and its
// planning: stem.cuh).
#include "conv/direct/direct2d.h"
#include "conv/direct/stem.cuh"
#include "core/launch.cuh"

namespace gpukern {
namespace {

constexpr const char* kOp = kConv2dOp;

}  // namespace

bool stem_direct_can_run(const ConvProblem& p) {
  conv::StemPlan s;
  return conv::stem_plan(p, s);
}

template <typename T>
void stem_direct_run(const ConvProblem& p, cudaStream_t stream) {
  conv::StemPlan s;
  GK_CHECK(conv::stem_plan(p, s), kOp, "internal error: stem_direct cannot run this shape");
  if (s.blocks_x == 0) return;
  const int k = static_cast<int>(p.KH);
  const size_t smem = conv::stem_smem_bytes(s, k);
  const dim3 grid = checked_grid(kOp, s.blocks_x);
  auto go = [&](auto kernel) {
    allow_dynamic_smem(kernel, smem);
    launch_pdl(kernel, grid, dim3(conv::kStemThreads), smem, stream, p, s);
  };
  switch (k * 10 + p.stride_h) {
    case 31: go(conv::conv2d_stem_kernel<T, 3, 1>); break;
    case 32: go(conv::conv2d_stem_kernel<T, 3, 2>); break;
    case 51: go(conv::conv2d_stem_kernel<T, 5, 1>); break;
    case 52: go(conv::conv2d_stem_kernel<T, 5, 2>); break;
    case 71: go(conv::conv2d_stem_kernel<T, 7, 1>); break;
    default: go(conv::conv2d_stem_kernel<T, 7, 2>); break;
  }
}

// Every dtype x filter 3/5/7 x stride 1/2.
template void stem_direct_run<float>(const ConvProblem&, cudaStream_t);
template void stem_direct_run<__half>(const ConvProblem&, cudaStream_t);
template void stem_direct_run<__nv_bfloat16>(const ConvProblem&, cudaStream_t);

}  // namespace gpukern
