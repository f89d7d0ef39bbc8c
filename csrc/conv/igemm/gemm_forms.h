#pragma once
// The igemm path's 1x1 convolutions as plain GEMMs on CUTLASS (conv/igemm/gemm_forms.cpp): the
// SM90 GEMMs over NHWC pixel rows or NCHW planes (gemm.cuh), stems through explicit im2col, and
// the fp32 NCHW planes on CUTLASS 2.x's SM80 GEMM with the epilogue in a visitor tree
// (gemm80.cuh). run4 (igemm.cpp) picks among them. Internal to the igemm path: CUDA builds with
// CUTLASS (GPUKERN_WITH_CUTLASS) only.
#include <ATen/ATen.h>

#include <array>
#include <cstdint>
#include <optional>

#include "conv/igemm/config.h"
#include "conv/problem.h"

namespace gpukern {
namespace igemm_forms {

// NHWC rows of one uniform stride: pixel (n, h, w) at row (n * H + h) * W + w.
bool uniform_rows(const std::array<int64_t, 3>& s, int64_t H, int64_t W);

// The 1x1 GEMM of x4 [N, C, H, W] (NHWC with uniform rows, or NCHW-flat for kNchw) into y4, the
// weight w2 as [O, C] rows. Returns false (nothing run) when the operands do not fit the form as
// they are.
bool try_gemm(const ConvProblem& p, conv::IgemmDtype d, conv::GemmForm form, const at::Tensor& x4,
              const at::Tensor& w2, const at::Tensor& bias, const std::optional<at::Tensor>& res,
              const at::Tensor& y4);

// A stem through explicit im2col and the kNhwc GEMM. False when the GEMM cannot take the sizes
// (the caller falls back to the implicit-GEMM conv kernel with padded channels).
bool run_stem_gemm(const ConvProblem& p, conv::IgemmDtype d, const at::Tensor& x4,
                   const at::Tensor& w4, const at::Tensor& bias,
                   const std::optional<at::Tensor>& residual, const at::Tensor& y4);

// Whether run4 sends p to the gemm80 form (fp32 1x1 over NCHW planes with an epilogue; the rule
// and its measurements in gemm_forms.cpp), and the run: false, with nothing launched, where its
// alignment or CUTLASS's checks refuse the operands.
bool gemm80_preferred(const ConvProblem& p, conv::IgemmDtype d);
bool try_gemm80(const ConvProblem& p, const at::Tensor& x4, const at::Tensor& w4,
                const at::Tensor& bias, const std::optional<at::Tensor>& res,
                const at::Tensor& y4);

}  // namespace igemm_forms
}  // namespace gpukern
