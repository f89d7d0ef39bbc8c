// The tf32 configuration(s) of the tensor-core implicit-GEMM path (conv/igemm/config.h).
// NDEBUG first: CUTLASS's device asserts make ptxas serialise the wgmma instructions (C7510).
#ifndef NDEBUG
#define NDEBUG
#endif
#ifdef GPUKERN_WITH_CUTLASS
#include "conv/igemm/kernel.cuh"

namespace gpukern {
namespace conv {

// Large layers: 128x128 output tiles, K step 32.
const IgemmKernel kIgemmTf32Large =
    igemm_kernel<IgemmConv<float, 128, 128, 32>>("tf32_128x128x32", IgemmDtype::kTf32);
// Small layers (under one wave of 128x128 tiles, or O <= 64): 64x64 output tiles, K step 32.
const IgemmKernel kIgemmTf32Small =
    igemm_kernel<IgemmConv<float, 64, 64, 32>>("tf32_64x64x32", IgemmDtype::kTf32);
const IgemmKernel kIgemmTf32Medium =
    igemm_kernel<IgemmConv<float, 64, 128, 32>>("tf32_64x128x32", IgemmDtype::kTf32);
const IgemmKernel kIgemmTf32Narrow =
    igemm_kernel<IgemmConv<float, 128, 64, 32>>("tf32_128x64x32", IgemmDtype::kTf32);

}  // namespace conv
}  // namespace gpukern
#endif  // GPUKERN_WITH_CUTLASS
