#pragma once
// The igemm path's GEMM forms on cuBLASLt (conv/igemm/blas.h) and what they share with the rest
// of the path (conv/igemm/igemm.cpp, whose run4 picks them; the measurements behind each rule are
// in conv/igemm/README.md): 1x1 layers as one GEMM over NHWC pixel rows or one per NCHW image,
// 1x1 layers with a stride through a subsampled copy, conv1d over NCL through explicit columns
// (im2col_cols), and the fp32 epilogue pass after a plain GEMM. Internal to the igemm path:
// CUDA builds with CUTLASS (GPUKERN_WITH_CUTLASS) only.
#include <ATen/ATen.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "conv/igemm/blas.h"
#include "conv/igemm/config.h"
#include "conv/problem.h"
#include "core/knobs.h"

namespace gpukern {
namespace igemm_forms {

using conv::IgemmBucket;
using conv::IgemmDtype;

constexpr int64_t kTmaBytes = 16;  // TMA: base addresses and strides in 16-byte units
// GEMMs of at most this many rows (output pixels) run the conv kernel's 64x64 tile instead.
constexpr int64_t kSmallGemmRows = 64;

// The channel multiple of the kernels' 16-byte vectors.
inline int64_t channel_align(const ConvProblem& p) { return kTmaBytes / p.elem_size; }

// The 1x1 forms: stride 1, no padding (a dilation never applies to a single tap).
inline bool pointwise(const ConvProblem& p) {
  return p.KH == 1 && p.KW == 1 && p.stride_h == 1 && p.stride_w == 1 && p.pad_h == 0 &&
         p.pad_w == 0 && p.OH == p.H && p.OW == p.W;
}

// GPUKERN_IGEMM_GEMM=0 in the environment sends 1x1 layers and stems to the conv kernel instead
// of the GEMM forms (benchmarks compare the two; read on every call).
// (env_switch: core/knobs.h, read on every call.)

inline bool gemm_enabled() { return env_switch("GPUKERN_IGEMM_GEMM") != 0; }

// GPUKERN_IGEMM_BLAS=0 in the environment sends 1x1 layers to the CUTLASS GEMMs instead of
// cuBLASLt (benchmarks compare the two; read on every call).
inline bool blas_enabled() { return env_switch("GPUKERN_IGEMM_BLAS") != 0; }

// Whether the implicit GEMM writes an output that is not NHWC-aligned with the NCHW-output epilogue
// (conv/igemm/epilogue_nchw.cuh) rather than through a channels_last temporary and a transpose
// back. On an H100, batch 16, ResNet-50's NCHW 3x3 blocks with bias + ReLU, graph replays, us
// (benchmarks/nchw_igemm.py, h100_nchw_igemm.md; epilogue / temporary + transpose):
// - large and narrow tiles: fp32 128x56 s2 47.7 / 56.5, 128x28 30.0 / 35.8, 64x56 49.2 / 56.6;
//   bf16 27.0 / 35.3, 21.0 / 27.0, 31.8 / 37.6;
// - fp32 medium tiles (64x128 in 1x2 clusters): 256x28 s2 32.4 / 38.5, 256x14 24.8 / 28.1,
//   512x14 s2 47.2 / 47.0, 512x7 41.0 / 39.4;
// - 16-bit medium tiles (64x128): 256x28 s2 28.0 / 25.3, 256x14 24.3 / 21.6, 512x14 s2
//   32.4 / 31.4, 512x7 32.4 / 31.0: the transpose of a 16-bit output costs less than the
//   epilogue's fp32 staging adds, so they keep the temporary.
// Output planes of at most kTempMaxPlane pixels (7x7) keep the temporary in every dtype: a
// 128-pixel tile there spans two to three images, and the epilogue's per-channel vectors of 49
// pixels are unaligned. On an H200 (benchmarks/profile_pointwise7.py --strided, warm L2, fused op
// forced to igemm), ResNet-50's 1024 -> 2048 stride-2 shortcut with bias, residual and ReLU:
// fp32 66.3 us through the epilogue (its kernel 54.2), 49.4 through the temporary; bf16 40.4 /
// 31.6; the H100 numbers above for 512x7 agree (fp32 41.0 / 39.4).
// GPUKERN_IGEMM_NCHW_OUT=1 / 0 in the environment forces one way for every tile (tests,
// benchmarks; read on every call).
constexpr int64_t kTempMaxPlane = 64;

inline bool nchw_out_for(IgemmDtype d, IgemmBucket b, int64_t out_plane) {
  const int env = env_switch("GPUKERN_IGEMM_NCHW_OUT");
  if (env >= 0) return env == 1;
  if (out_plane <= kTempMaxPlane) return false;
  return d == IgemmDtype::kTf32 || b != IgemmBucket::kMedium;
}


// Smallest NCHW plane (H * W) that runs the batched cuBLASLt form (kImages): on an H100, batch 16,
// cuBLAS's batched GEMM ran ResNet-50's and MobileNetV3's 7x7 1x1 layers at 0.32-0.72x cuDNN in
// bf16 (0.48-1.0x in fp32), where the CUTLASS path (NHWC conversion + GEMM) did better; from 14x14
// up it matched cuDNN (benchmarks/pointwise_libs.py).
constexpr int64_t kBlasMinImagePlane = 196;

// Below it, from 7x7 planes up, kImages still runs layers with a small weight (C * O up to
// kBlasSmallPlaneMaxWeight) in fp32, and in 16-bit types where C <= kBlasSmallPlaneMaxC: with
// cuBLASLt's algorithm timed per problem (blas.h), on an H100, batch 16, NCHW, us against the
// CUTLASS path (benchmarks/pointwise_libs.py, h100_pointwise_tuned.md): fp32 160->960 8.2 / 15.4,
// 672->160 15.0 / 19.3, 960->160 19.4 / 22.7, but 512->2048 29.1 / 22.4 and 2048->512 41.3 / 35.2;
// bf16 160->960 7.6 / 13.8, but 672->160 16.1 / 14.5 and 960->160 25.0 / 15.3.
constexpr int64_t kBlasMinSmallPlane = 49;
constexpr int64_t kBlasSmallPlaneMaxWeight = int64_t{1} << 18;
constexpr int64_t kBlasSmallPlaneMaxC = 256;

// Whether an NCHW plane of `hw` pixels takes kImages (above). GPUKERN_BLAS_MIN_PLANE=<pixels> in
// the environment replaces the rule by that one threshold (experiments; read on every call).
inline bool blas_images_plane(int64_t hw, int64_t C, int64_t O, bool fp32) {
  if (const char* env = std::getenv("GPUKERN_BLAS_MIN_PLANE")) return hw >= std::atoll(env);
  if (hw >= kBlasMinImagePlane) return true;
  return hw >= kBlasMinSmallPlane && C * O <= kBlasSmallPlaneMaxWeight &&
         (fp32 || C <= kBlasSmallPlaneMaxC);
}

// NCHW 1x1 layers that run4 converts to NHWC (fp32 under TF32, and 16-bit planes whose rows are
// not 16-byte multiples, e.g. 7x7): on planes of at most kNhwcBlasMaxPlane output pixels the
// converted pixel rows go through cuBLASLt's kRows form (its algorithms timed per problem, split-K
// ones among them) instead of the CUTLASS GEMM, whose 128-row tiles leave most SMs idle there
// (784 rows at batch 16: 7 tiles of rows). On an H100, batch 16, us against the CUTLASS GEMM
// (benchmarks/pointwise_libs.py --variants, h100_pointwise_nhwcblas.md): ResNet-50 2048->512
// 22.3 / 34.7 fp32, 15.7 / 19.2 bf16; 512->2048 20.4 / 21.7 fp32, 15.8 / 18.6 bf16; MobileNetV3
// 672->160 11.9 / 15.6 and 960->160 12.0 / 15.5 bf16. Larger planes: equal at 14x14, 0.90x on
// 112x112 (16->16 bf16). GPUKERN_IGEMM_NHWC_BLAS=1 / 0 in the environment forces it on / off
// (experiments; read on every call).
constexpr int64_t kNhwcBlasMaxPlane = 49;

inline bool nhwc_blas_plane(int64_t ohw) {
  const int env = env_switch("GPUKERN_IGEMM_NHWC_BLAS");
  return env >= 0 ? env == 1 : ohw <= kNhwcBlasMaxPlane;
}

inline std::array<int64_t, 4> strides4(const at::Tensor& t) {
  return {t.stride(0), t.stride(1), t.stride(2), t.stride(3)};
}

// The stride between pixel rows of a [N, C, H, W] tensor's NHWC pixels (uniform rows), else 0.
int64_t pixel_rows_ld(int64_t N, int64_t C, int64_t H, int64_t W,
                      const std::array<int64_t, 4>& s);
// The channel stride when every channel plane is H * W contiguous elements (NCHW planes), else 0.
int64_t plane_ld(int64_t C, int64_t H, int64_t W, const std::array<int64_t, 4>& s);

// Residual: read through the output's layout (the epilogue's C has D's strides): in place when
// its strides are those of d, else copied once into that layout.
at::Tensor prepared_residual(const std::optional<at::Tensor>& residual, const at::Tensor& d);

// A cuBLASLt GEMM of the igemm path, and whether the fused epilogue (bias, activation, residual)
// runs as a separate pass after it (conv_epilogue_run with the bias: fp32 only, where one more
// fp32 rounding of the product costs nothing measurable) instead of in cuBLASLt's epilogue.
struct BlasPlan {
  conv::BlasGemm g;
  bool epilogue_pass = false;
  // The kRows form with an activation cuBLASLt's epilogue lacks (silu, hardswish, ...): the GEMM
  // with its bias and residual epilogue, then a pass applying the activation alone in place.
  bool act_pass = false;
  // The cols form only: y's planes are not 16-byte aligned (an odd conv1d output length), so the
  // GEMM writes an aligned [N, O, Lp] temporary that is copied into y (cuBLASLt ran an unaligned
  // D at a tenth of the aligned speed: wav2vec2's 512 -> 512 layers, L = 6399, on an H100).
  bool temp_out = false;
};

// The cuBLASLt form of a 1x1 stride-1 layer (x4 / y4 strides {sn, sc, sh, sw}, the weight's row
// stride), or nothing where the CUTLASS path runs it.
std::optional<BlasPlan> blas_gemm_of(const ConvProblem& p, IgemmDtype d,
                                     const std::array<int64_t, 4>& xs,
                                     const std::array<int64_t, 4>& ys, int64_t w_ld,
                                     bool has_bias, bool has_residual);

// Runs a BlasPlan with operands a and b into y4 (and the pass if the plan has one); false when
// cuBLASLt has no algorithm (nothing launched). bias: prepared (contiguous, the dtype) or
// undefined.
bool run_blas_plan(const ConvProblem& p, const BlasPlan& plan, const void* a, const void* b,
                   const at::Tensor& bias, const std::optional<at::Tensor>& residual,
                   const at::Tensor& y4);

// 1x1 with a stride over NCHW planes whose output takes the batched form: x4's sampled pixels
// (subsampled, x4's memory format) and the stride-1 problem over them (subsampled_problem).
bool strided_pointwise(const ConvProblem& p);
at::Tensor subsampled(const ConvProblem& p, const at::Tensor& x4);
ConvProblem subsampled_problem(const ConvProblem& p, const at::Tensor& xs);

// The cols form of a conv1d over NCL (y's strides ys, whether y's data is 16-byte aligned), or
// nothing where it does not apply.
std::optional<BlasPlan> cols_gemm_of(const ConvProblem& p, IgemmDtype d,
                                     const std::array<int64_t, 4>& ys, bool y_ptr_aligned,
                                     bool has_bias, bool has_residual);
// Runs p through the cols form when cols_gemm_of takes it (bias: prepared or undefined); false
// when it does not apply or cuBLASLt has no algorithm (the caller runs the CUTLASS path).
bool run_cols_gemm(const ConvProblem& p, IgemmDtype d, const at::Tensor& x4, const at::Tensor& w4,
                   const at::Tensor& bias, const std::optional<at::Tensor>& residual,
                   const at::Tensor& y4);

}  // namespace igemm_forms
}  // namespace gpukern
