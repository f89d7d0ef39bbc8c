// The tf32 1x1-convolution GEMM kernel(s) of the tensor-core path (conv/igemm/config.h, "1x1
// convolutions as plain GEMMs"; conv/igemm/gemm.cuh).
// NDEBUG first: CUTLASS's device asserts make ptxas serialise the wgmma instructions (C7510).
#ifndef NDEBUG
#define NDEBUG
#endif
#ifdef GPUKERN_WITH_CUTLASS
#include "conv/igemm/gemm.cuh"

namespace gpukern {
namespace conv {

// Activations as rows (channels_last x): 128x128 output tiles, K step 32 (128 bytes), bias per
// column. The only tf32 form: TF32 wgmma reads both operands K-major, which kNchw's B is not.
const GemmKernel kGemmNhwcTf32 =
    gemm_kernel<IgemmGemm<float, GemmForm::kNhwc, 128, 128, 32>>(
        "gemm_nhwc_tf32_128x128x32", IgemmDtype::kTf32, GemmForm::kNhwc);

}  // namespace conv
}  // namespace gpukern
#endif  // GPUKERN_WITH_CUTLASS
