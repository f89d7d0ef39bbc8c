// The fp32 (TF32) 1x1-convolution GEMMs over NCHW planes on CUTLASS 2.x's SM80 kernels
// (conv/igemm/gemm80.cuh): K steps of 32 and 16 channels, each without and with a residual.
#ifndef NDEBUG
#define NDEBUG
#endif
#ifdef GPUKERN_WITH_CUTLASS
#include "conv/igemm/gemm80.cuh"

namespace gpukern {
namespace conv {

const GemmKernel kGemm80NchwTf32 =
    gemm80_kernel<Gemm80Nchw<float, 4, false>>("gemm80_nchw_tf32_64x64x32", IgemmDtype::kTf32);
const GemmKernel kGemm80NchwTf32Res = gemm80_kernel<Gemm80Nchw<float, 4, true>>(
    "gemm80_nchw_tf32_64x64x32_res", IgemmDtype::kTf32);
const GemmKernel kGemm80NchwTf32K16 = gemm80_kernel<Gemm80Nchw<float, 4, false, 16>>(
    "gemm80_nchw_tf32_64x64x16", IgemmDtype::kTf32);
const GemmKernel kGemm80NchwTf32K16Res = gemm80_kernel<Gemm80Nchw<float, 4, true, 16>>(
    "gemm80_nchw_tf32_64x64x16_res", IgemmDtype::kTf32);

}  // namespace conv
}  // namespace gpukern
#endif  // GPUKERN_WITH_CUTLASS
