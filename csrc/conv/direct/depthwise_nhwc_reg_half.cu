// depthwise_nhwc_reg's float16 instances (the planner: depthwise_nhwc_reg.cu).
#include "conv/direct/depthwise_nhwc_reg_run.cuh"

namespace gpukern {
template void depthwise_nhwc_reg_run<__half>(const ConvProblem&, cudaStream_t);
}  // namespace gpukern
