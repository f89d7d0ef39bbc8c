#pragma once
// One place that maps a ScalarType to the C++ type a kernel is instantiated for.
//   GK_DISPATCH_FLOAT_CPU(dtype, "op", [&] { ... scalar_t ... })  float, double, Half, BFloat16
//   GK_DISPATCH_FLOAT_CUDA(dtype, "op", [&] { ... scalar_t ... }) float, __half, __nv_bfloat16
// The CUDA variant names CUDA's own half types (layout-identical to at::Half/at::BFloat16), so
// kernels stay torch-free; cast data pointers with reinterpret_cast<scalar_t*>.
#include <ATen/ATen.h>

#include "core/checks.h"

#define GK_DISPATCH_CASE_(ST, T, ...) \
  case ST: {                          \
    using scalar_t = T;               \
    __VA_ARGS__();                    \
    break;                            \
  }

#define GK_DISPATCH_FLOAT_CPU(DTYPE, OP, ...)                                          \
  [&] {                                                                                \
    switch (DTYPE) {                                                                   \
      GK_DISPATCH_CASE_(at::kFloat, float, __VA_ARGS__)                                \
      GK_DISPATCH_CASE_(at::kDouble, double, __VA_ARGS__)                              \
      GK_DISPATCH_CASE_(at::kHalf, at::Half, __VA_ARGS__)                              \
      GK_DISPATCH_CASE_(at::kBFloat16, at::BFloat16, __VA_ARGS__)                      \
      default:                                                                         \
        TORCH_CHECK(false, "gpukern::", OP, ": unsupported dtype ", DTYPE, " on CPU"); \
    }                                                                                  \
  }()

#ifdef __CUDACC__
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#define GK_DISPATCH_FLOAT_CUDA(DTYPE, OP, ...)                                          \
  [&] {                                                                                 \
    switch (DTYPE) {                                                                    \
      GK_DISPATCH_CASE_(at::kFloat, float, __VA_ARGS__)                                 \
      GK_DISPATCH_CASE_(at::kHalf, __half, __VA_ARGS__)                                 \
      GK_DISPATCH_CASE_(at::kBFloat16, __nv_bfloat16, __VA_ARGS__)                      \
      default:                                                                          \
        TORCH_CHECK(false, "gpukern::", OP, ": unsupported dtype ", DTYPE, " on CUDA"); \
    }                                                                                   \
  }()
#endif

// Accumulator type on the CPU: double for double, float for everything narrower.
namespace gpukern {
template <typename T>
struct CpuAcc {
  using type = float;
};
template <>
struct CpuAcc<double> {
  using type = double;
};
template <typename T>
using cpu_acc_t = typename CpuAcc<T>::type;
}  // namespace gpukern
