// The f16 configurations of the implicit-GEMM path with the NCHW-output epilogue
// (conv/igemm/config.h, conv/igemm/epilogue_nchw.cuh): the tiles of igemm_f16.cu, y written in
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

const IgemmKernel kIgemmF16LargeNchw =
    igemm_kernel<IgemmConv<cutlass::half_t, 128, 128, 64, 1, 1, true>>(
        "f16_128x128x64_nchw", IgemmDtype::kF16);
const IgemmKernel kIgemmF16SmallNchw =
    igemm_kernel<IgemmConv<cutlass::half_t, 64, 64, 64, 1, 1, true>>(
        "f16_64x64x64_nchw", IgemmDtype::kF16);
const IgemmKernel kIgemmF16MediumNchw =
    igemm_kernel<IgemmConv<cutlass::half_t, 64, 128, 64, 1, 1, true>>(
        "f16_64x128x64_nchw", IgemmDtype::kF16);
const IgemmKernel kIgemmF16NarrowNchw =
    igemm_kernel<IgemmConv<cutlass::half_t, 128, 64, 64, 1, 1, true>>(
        "f16_128x64x64_nchw", IgemmDtype::kF16);

}  // namespace conv
}  // namespace gpukern
#endif  // GPUKERN_WITH_CUTLASS
