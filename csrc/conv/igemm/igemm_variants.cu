// The tile / cluster tuning experiment of the implicit-GEMM conv kernel (built only with
// GPUKERN_IGEMM_VARIANTS=1 in the environment of setup.py; benchmarks/igemm_variants.py times
// them through GPUKERN_IGEMM_VARIANT=<name>). Not used by the dispatch.
#ifndef NDEBUG
#define NDEBUG
#endif
#ifdef GPUKERN_WITH_CUTLASS
#include <cstring>

#include "conv/igemm/kernel.cuh"

namespace gpukern {
namespace conv {
namespace {

const IgemmKernel kBf16_256x64 =
    igemm_kernel<IgemmConv<cutlass::bfloat16_t, 256, 64, 64>>("bf16_256x64x64", IgemmDtype::kBf16);
const IgemmKernel kBf16_128x64_c21 = igemm_kernel<IgemmConv<cutlass::bfloat16_t, 128, 64, 64, 2, 1>>(
    "bf16_128x64x64_c2x1", IgemmDtype::kBf16);
const IgemmKernel kBf16_64x64_c12 = igemm_kernel<IgemmConv<cutlass::bfloat16_t, 64, 64, 64, 1, 2>>(
    "bf16_64x64x64_c1x2", IgemmDtype::kBf16);
const IgemmKernel kTf32_64x64_c12 =
    igemm_kernel<IgemmConv<float, 64, 64, 32, 1, 2>>("tf32_64x64x32_c1x2", IgemmDtype::kTf32);
const IgemmKernel kTf32_64x64_c21 =
    igemm_kernel<IgemmConv<float, 64, 64, 32, 2, 1>>("tf32_64x64x32_c2x1", IgemmDtype::kTf32);
const IgemmKernel kTf32_64x128_c12 =
    igemm_kernel<IgemmConv<float, 64, 128, 32, 1, 2>>("tf32_64x128x32_c1x2", IgemmDtype::kTf32);
const IgemmKernel kTf32_128x64_c21 =
    igemm_kernel<IgemmConv<float, 128, 64, 32, 2, 1>>("tf32_128x64x32_c2x1", IgemmDtype::kTf32);
const IgemmKernel kTf32_256x64 =
    igemm_kernel<IgemmConv<float, 256, 64, 32>>("tf32_256x64x32", IgemmDtype::kTf32);

const IgemmKernel* const kVariants[] = {&kBf16_256x64,     &kBf16_128x64_c21, &kBf16_64x64_c12,
                                        &kTf32_64x64_c12,  &kTf32_64x64_c21,  &kTf32_64x128_c12,
                                        &kTf32_128x64_c21, &kTf32_256x64};

}  // namespace

const IgemmKernel* igemm_variant(IgemmDtype d, const char* name) {
  for (const IgemmKernel* k : kVariants) {
    if (k->dtype == d && std::strcmp(k->name, name) == 0) return k;
  }
  return nullptr;
}

}  // namespace conv
}  // namespace gpukern
#endif
