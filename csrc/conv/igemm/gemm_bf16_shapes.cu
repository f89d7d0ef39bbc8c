// The bf16 1x1-convolution GEMMs for narrow and short layers (conv/igemm/config.h), beside
// gemm_bf16.cu's so that a parallel build compiles them side by side. Measured on an H100
// (benchmarks/gemm_variants.py, bf16, batch 16, channels_last): O <= 64 ran fastest on 128x64
// ping-pong tiles (ResNet-50's 64->64 at 56x56: 7.5 us against 9.8 for 128x128 cooperative and
// 11.0 for 128x128 ping-pong), layers of at most 3136 rows on 64x128 ping-pong tiles
// (2048->512 at 7x7: 8.9 against 13.4).
// NDEBUG first: CUTLASS's device asserts make ptxas serialise the wgmma instructions (C7510).
#ifndef NDEBUG
#define NDEBUG
#endif
#ifdef GPUKERN_WITH_CUTLASS
#include "conv/igemm/gemm.cuh"

namespace gpukern {
namespace conv {

const GemmKernel kGemmNhwcBf16Narrow =
    gemm_kernel<IgemmGemm<cutlass::bfloat16_t, GemmForm::kNhwc, 128, 64, 64, PingpongSchedule>>(
        "gemm_nhwc_bf16_pingpong_128x64x64", IgemmDtype::kBf16, GemmForm::kNhwc);
const GemmKernel kGemmNhwcBf16Short =
    gemm_kernel<IgemmGemm<cutlass::bfloat16_t, GemmForm::kNhwc, 64, 128, 64, PingpongSchedule>>(
        "gemm_nhwc_bf16_pingpong_64x128x64", IgemmDtype::kBf16, GemmForm::kNhwc);

}  // namespace conv
}  // namespace gpukern
#endif  // GPUKERN_WITH_CUTLASS
