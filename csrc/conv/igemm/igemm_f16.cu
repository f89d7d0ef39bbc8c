// The f16 configuration(s) of the tensor-core implicit-GEMM path (conv/igemm/config.h).
// NDEBUG first: CUTLASS's device asserts make ptxas serialise the wgmma instructions (C7510).
#ifndef NDEBUG
#define NDEBUG
#endif
#ifdef GPUKERN_WITH_CUTLASS
#include "conv/igemm/kernel.cuh"

namespace gpukern {
namespace conv {

// Large layers: 128x128 output tiles, K step 64.
const IgemmKernel kIgemmF16Large =
    igemm_kernel<IgemmConv<cutlass::half_t, 128, 128, 64>>("f16_128x128x64", IgemmDtype::kF16);
// Small layers (under one wave of 128x128 tiles, or O <= 64): 64x64 output tiles, K step 64.
const IgemmKernel kIgemmF16Small =
    igemm_kernel<IgemmConv<cutlass::half_t, 64, 64, 64>>("f16_64x64x64", IgemmDtype::kF16);
const IgemmKernel kIgemmF16Medium =
    igemm_kernel<IgemmConv<cutlass::half_t, 64, 128, 64>>("f16_64x128x64", IgemmDtype::kF16);
const IgemmKernel kIgemmF16Narrow =
    igemm_kernel<IgemmConv<cutlass::half_t, 128, 64, 64>>("f16_128x64x64", IgemmDtype::kF16);

}  // namespace conv
}  // namespace gpukern
#endif  // GPUKERN_WITH_CUTLASS
