// Tuning experiment only (built when GPUKERN_GEMM_VARIANTS=1 is set for setup.py): alternative
// tile / schedule configurations of the bf16 NHWC 1x1 GEMM, selected at run time by
// GPUKERN_GEMM_VARIANT=<name> (conv/igemm/igemm.cpp) so that benchmarks/gemm_variants.py can time
// them on the real 1x1 layers against the default (gemm_bf16.cu) in one run. Not in the default
// build: each configuration costs ~35 s and ~3.5 GB to compile (split over two files so that a
// parallel build compiles them side by side).
#ifndef NDEBUG
#define NDEBUG
#endif
#if defined(GPUKERN_WITH_CUTLASS) && defined(GPUKERN_GEMM_VARIANTS)
#include "conv/igemm/gemm.cuh"

namespace gpukern {
namespace conv {

const GemmKernel kGemmVarPing64x128 =
    gemm_kernel<IgemmGemm<cutlass::bfloat16_t, GemmForm::kNhwc, 64, 128, 64, PingpongSchedule>>(
        "pingpong_64x128x64", IgemmDtype::kBf16, GemmForm::kNhwc);
const GemmKernel kGemmVarPing128x64 =
    gemm_kernel<IgemmGemm<cutlass::bfloat16_t, GemmForm::kNhwc, 128, 64, 64, PingpongSchedule>>(
        "pingpong_128x64x64", IgemmDtype::kBf16, GemmForm::kNhwc);

}  // namespace conv
}  // namespace gpukern
#endif
