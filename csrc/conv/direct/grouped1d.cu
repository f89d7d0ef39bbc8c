// grouped_reg: the launcher and its instantiations (the kernel, its contract and its planning
// are in grouped1d.cuh).
#include "conv/direct/grouped1d.cuh"
#include "conv/launch_1d.h"
#include "core/dispatch.h"
#include "core/launch.cuh"

namespace gpukern {

bool can_run_grouped_reg(const ConvProblem& p) {
  conv::GroupedPlan s;
  return conv::grouped_plan(p, s);
}

template <typename T>
void launch_grouped_reg(const ConvProblem& p, cudaStream_t stream) {
  conv::GroupedPlan s;
  GK_CHECK(conv::grouped_plan(p, s), "conv1d",
           "internal error: grouped_reg cannot run this shape");
  if (s.blocks == 0) return;
  const size_t smem = conv::grouped_smem_bytes(p, s);
  auto kernel = conv::conv1d_grouped_reg_kernel<T>;
  allow_dynamic_smem(kernel, smem);
  kernel<<<static_cast<unsigned>(s.blocks), s.warps * 32, smem, stream>>>(p, s);
  GK_CHECK_LAUNCH();
}

template void launch_grouped_reg<float>(const ConvProblem&, cudaStream_t);
template void launch_grouped_reg<__half>(const ConvProblem&, cudaStream_t);
template void launch_grouped_reg<__nv_bfloat16>(const ConvProblem&, cudaStream_t);

}  // namespace gpukern
