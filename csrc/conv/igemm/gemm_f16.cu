// The fp16 1x1-convolution GEMM kernel(s) of the tensor-core path (conv/igemm/config.h, "1x1
// convolutions as plain GEMMs"; conv/igemm/gemm.cuh).
// NDEBUG first: CUTLASS's device asserts make ptxas serialise the wgmma instructions (C7510).
#ifndef NDEBUG
#define NDEBUG
#endif
#ifdef GPUKERN_WITH_CUTLASS
#include "conv/igemm/gemm.cuh"

namespace gpukern {
namespace conv {

// Activations as rows (channels_last x): 128x128 output tiles, K step 64, bias per column, the
// cooperative schedule (both warp groups on one tile): the fastest of six configurations on the
// 1x1 layers with O > 64 and more than 3136 rows (benchmarks/gemm_variants.py, H100; the narrow
// and short shapes take gemm_f16_shapes.cu's).
const GemmKernel kGemmNhwcF16 =
    gemm_kernel<IgemmGemm<cutlass::half_t, GemmForm::kNhwc, 128, 128, 64, CooperativeSchedule>>(
        "gemm_nhwc_f16_coop_128x128x64", IgemmDtype::kF16, GemmForm::kNhwc);
// One GEMM per image over NCHW x (W @ x[n]): 128x128 output tiles, K step 64, bias per row.
const GemmKernel kGemmNchwF16 =
    gemm_kernel<IgemmGemm<cutlass::half_t, GemmForm::kNchw, 128, 128, 64>>(
        "gemm_nchw_f16_128x128x64", IgemmDtype::kF16, GemmForm::kNchw);

}  // namespace conv
}  // namespace gpukern
#endif  // GPUKERN_WITH_CUTLASS
