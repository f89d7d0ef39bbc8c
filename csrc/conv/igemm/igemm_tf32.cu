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
// Medium: 64x128 tiles in clusters of 1x2 along N (the activation tile multicast to both CTAs):
// on an H100 (benchmarks/igemm_variants.py, census timing, us, without / with the cluster /
// torch) 3x3 256->256 at 14x14 19.1 / 15.1 / 18.1, 1x1 s2 512->1024 to 14x14 20.9 / 19.2 / 17.2,
// 3x3 512->512 at 7x7 26.3 / 28.1 / 20.4 (the 16-bit medium tile lost with it: bf16 64x64 in
// 1x2 clusters ran 46.0 against 19.3 on 3x3 64->64 at 56x56).
const IgemmKernel kIgemmTf32Medium = igemm_kernel<IgemmConv<float, 64, 128, 32, 1, 2>>(
    "tf32_64x128x32_c1x2", IgemmDtype::kTf32);
const IgemmKernel kIgemmTf32Narrow =
    igemm_kernel<IgemmConv<float, 128, 64, 32>>("tf32_128x64x32", IgemmDtype::kTf32);

}  // namespace conv
}  // namespace gpukern
#endif  // GPUKERN_WITH_CUTLASS
