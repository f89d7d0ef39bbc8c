#pragma once
// pointwise_nchw as its callers see it, host side: the conv2d dispatch (forced by name only) and
// igemm's 1x1 forms (conv/igemm/igemm.cpp run4). Its own header, not only direct2d.h's, so that
// igemm.cpp needs nothing else of the direct kernels. Torch-free.
#include <cuda_runtime.h>

#include "conv/problem.h"

namespace gpukern {

// Dense 1x1 (stride 1, unpadded) over NCHW planes on mma.sync, the fused epilogue in registers:
// fp32 as TF32 (pointwise_nchw.cuh; the caller checks torch's TF32 setting), bfloat16 and
// float16 (pointwise_nchw16.cuh). Each sends a 2-byte problem to its pointwise_nchw16_ twin.
bool pointwise_nchw_can_run(const ConvProblem& p);
// Where igemm's 1x1 forms take it for a call with a bias or a fused epilogue.
bool pointwise_nchw_preferred(const ConvProblem& p);
void pointwise_nchw_run(const ConvProblem& p, cudaStream_t stream);

// The 16-bit kernel's (conv/direct/pointwise_nchw16.cu).
bool pointwise_nchw16_can_run(const ConvProblem& p);
bool pointwise_nchw16_preferred(const ConvProblem& p);
void pointwise_nchw16_run(const ConvProblem& p, cudaStream_t stream);

}  // namespace gpukern
