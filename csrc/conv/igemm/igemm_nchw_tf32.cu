// The tf32 configurations of the implicit-GEMM path with the NCHW-output epilogue
// (conv/igemm/config.h, conv/igemm/epilogue_nchw.cuh): the tiles of igemm_tf32.cu, y written in
// any [N, O, P, Q] strides from the accumulators.
// NDEBUG first: CUTLASS's device asserts make ptxas serialise the wgmma instructions (C7510).
#ifndef NDEBUG
#define NDEBUG
#endif
#ifdef GPUKERN_WITH_CUTLASS
#include "conv/igemm/kernel.cuh"
#include "conv/igemm/epilogue_nchw.cuh"  // after kernel.cuh: CUTLASS first

namespace gpukern {
namespace conv {

const IgemmKernel kIgemmTf32LargeNchw =
    igemm_kernel<IgemmConv<float, 128, 128, 32, 1, 1, true>>(
        "tf32_128x128x32_nchw", IgemmDtype::kTf32);
const IgemmKernel kIgemmTf32SmallNchw =
    igemm_kernel<IgemmConv<float, 64, 64, 32, 1, 1, true>>(
        "tf32_64x64x32_nchw", IgemmDtype::kTf32);
const IgemmKernel kIgemmTf32MediumNchw =
    igemm_kernel<IgemmConv<float, 64, 128, 32, 1, 2, true>>(
        "tf32_64x128x32_c1x2_nchw", IgemmDtype::kTf32);
const IgemmKernel kIgemmTf32NarrowNchw =
    igemm_kernel<IgemmConv<float, 128, 64, 32, 1, 1, true>>(
        "tf32_128x64x32_nchw", IgemmDtype::kTf32);

}  // namespace conv
}  // namespace gpukern
#endif  // GPUKERN_WITH_CUTLASS
