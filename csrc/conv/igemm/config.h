#pragma once
// The tensor-core implicit-GEMM path's torch-free interface between the host side (igemm.cpp:
// checks, layouts, the choice of configuration) and the CUTLASS instantiations (igemm_<dtype>.cu,
// compiled for sm_90a with -DGPUKERN_WITH_CUTLASS).
//
// The GEMM of a dense (groups = 1) convolution over NHWC activations, KRSC (OHWI) filters and an
// NHWC output:
//   M = N * OH * OW (output pixels), N = O (output channels), K = C * KH * KW (filter taps x C).
// A is the im2col view of the activations (loaded by TMA in im2col mode, padding zero-filled by the
// TMA), B the filter, D = alpha * acc + bias[o] (fp32 accumulate and epilogue, stored in the
// input's dtype). A 1-D convolution is the H = KH = OH = 1 case of the same 2-D kernel.
#include <cstddef>
#include <cstdint>

namespace gpukern {
namespace conv {

// The element types the path computes in. kTf32: fp32 tensors, TF32 tensor-core math (the TMA
// rounds the fp32 operands to TF32 on the way to shared memory), fp32 accumulate and output.
enum class IgemmDtype { kBf16, kF16, kTf32 };

// One problem in the kernels' terms: sizes, element strides (channels are the contiguous dim of
// x, w and y), paddings before (lo) and after (hi) the input, whose sum with the input extent gives
// exactly the output extent (hi may be smaller than the caller's padding when the last window
// does not reach it; the host side trims the input instead of passing a negative hi).
struct IgemmProblem {
  int N = 1, H = 1, W = 1, C = 1;  // activations [N, H, W, C]
  int O = 1, R = 1, S = 1;         // filter [O, R, S, C]
  int P = 1, Q = 1;                // output [N, P, Q, O]
  int pad_h = 0, pad_w = 0, pad_h_hi = 0, pad_w_hi = 0;
  int stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1;
  int64_t x_sn = 0, x_sh = 0, x_sw = 0;  // x's channel stride is 1
  int64_t w_so = 0, w_sr = 0, w_ss = 0;  // w's channel stride is 1
  int64_t y_sn = 0, y_sh = 0, y_sw = 0;  // y's channel stride is 1 (NHWC kernels)
  int64_t y_so = 1;  // y's channel stride: read only by the NCHW-output kernels (y [N, O, P, Q])
  int device = 0, sm_count = 0;          // for CUTLASS's KernelHardwareInfo
};

// The device pointers of one run. bias: O contiguous elements of the dtype, 16-byte aligned, or
// nullptr (no bias). residual: a tensor with exactly y's sizes and strides (the epilogue reads it
// through y's layout), or nullptr. act: an ActKind (device/activation.cuh), chosen at run time.
// The epilogue computes y = act(alpha * acc + bias + residual) in fp32 and rounds once.
// workspace: workspace_bytes(problem) bytes (nullptr when 0).
struct IgemmBuffers {
  const void* x = nullptr;
  const void* w = nullptr;
  const void* bias = nullptr;
  const void* residual = nullptr;
  void* y = nullptr;
  void* workspace = nullptr;
  float alpha = 1.0f;
  int act = 0;
};

// One compiled kernel (dtype x tile configuration). can_implement: CUTLASS's own verdict on the
// shape (alignment, TMA im2col corner and offset limits); run returns 0 on success, else a
// cutlass::Status value.
struct IgemmKernel {
  const char* name;  // e.g. "bf16_128x128x64"
  IgemmDtype dtype;
  bool (*can_implement)(const IgemmProblem& p);
  size_t (*workspace_bytes)(const IgemmProblem& p);
  int (*run)(const IgemmProblem& p, const IgemmBuffers& b, void* stream);  // stream: cudaStream_t
};

// The configurations, named by the shape bucket they serve (igemm.cpp bucket_of has the rule and
// its measurements): "large", a 128x128 output tile (M x N); "small", 64x64 (tiny GEMMs and
// grids of a quarter of the SMs or fewer in 128x128 tiles); "medium", 64x128 (grids of half
// the SMs or fewer); "narrow", 128x64 (O <= 64). All take a K step of 128 bytes of operand (64
// 16-bit or 32 fp32 elements), cluster 1x1x1 and the non-persistent warp-specialised schedule
// (CUTLASS 4.2 disables the persistent ones for conv). Defined in igemm_<dtype>.cu.
enum class IgemmBucket { kLarge = 0, kSmall = 1, kMedium = 2, kNarrow = 3 };

#ifdef GPUKERN_WITH_CUTLASS
extern const IgemmKernel kIgemmBf16Large, kIgemmBf16Small, kIgemmBf16Medium,
    kIgemmBf16Narrow;  // igemm_bf16.cu
extern const IgemmKernel kIgemmF16Large, kIgemmF16Small, kIgemmF16Medium,
    kIgemmF16Narrow;  // igemm_f16.cu
extern const IgemmKernel kIgemmTf32Large, kIgemmTf32Small, kIgemmTf32Medium,
    kIgemmTf32Narrow;  // igemm_tf32.cu
// The same configurations with the epilogue that writes y of any [N, O, P, Q] strides (NCHW
// outputs without the channels_last temporary and its transpose back: conv/igemm/
// epilogue_nchw.cuh). Defined in igemm_nchw_<dtype>.cu.
extern const IgemmKernel kIgemmBf16LargeNchw, kIgemmBf16SmallNchw, kIgemmBf16MediumNchw,
    kIgemmBf16NarrowNchw;
extern const IgemmKernel kIgemmF16LargeNchw, kIgemmF16SmallNchw, kIgemmF16MediumNchw,
    kIgemmF16NarrowNchw;
extern const IgemmKernel kIgemmTf32LargeNchw, kIgemmTf32SmallNchw, kIgemmTf32MediumNchw,
    kIgemmTf32NarrowNchw;
// The tile / cluster tuning experiment (igemm_variants.cu, benchmarks/igemm_variants.py): the
// variant of dtype d named `name`, or nullptr. A weak symbol: null unless setup.py links
// igemm_variants.cu (GPUKERN_IGEMM_VARIANTS=1 in its environment).
__attribute__((weak)) const IgemmKernel* igemm_variant(IgemmDtype d, const char* name);
#endif

// ---- 1x1 convolutions as plain GEMMs (conv/igemm/gemm_<dtype>.cu) ----------------------------
// A 1x1, stride-1, unpadded convolution is a GEMM with no im2col. Two forms:
// - kNhwc: the activations as rows. D[m, o] = sum_c A[m, c] * B[o, c], m over the N*H*W output
//   pixels (rows a_ld elements apart in x, d_ld apart in y; L = 1), A = x (K = C contiguous),
//   B = the weight [O, C] (rows b_ld apart), D = y; bias per column (o). Every dtype.
// - kNchw: one GEMM per image (L = N). D[l][o, p] = sum_c A[o, c] * B[l][c, p]: A = the weight
//   [O, C] (rows a_ld apart, a_batch = 0), B = x[l] viewed [C, H*W] with the pixels contiguous
//   (rows b_ld apart, images b_batch apart), D = y[l] [O, H*W] (rows d_ld apart, images d_batch
//   apart); bias per row (o). 16-bit dtypes only (TF32 tensor-core math needs K-major operands).
// Pointers and every ld / batch stride 16-byte aligned (checked by the host side).
enum class GemmForm { kNhwc, kNchw };

struct GemmProblem {
  GemmForm form = GemmForm::kNhwc;
  int M = 1, N = 1, K = 1, L = 1;
  int64_t a_ld = 0, a_batch = 0;
  int64_t b_ld = 0, b_batch = 0;
  int64_t d_ld = 0, d_batch = 0;  // the residual (IgemmBuffers::residual) has D's layout
  int device = 0, sm_count = 0;
};

// One compiled GEMM kernel. IgemmBuffers carries the pointers: x -> A for kNhwc / B for kNchw,
// w -> the other operand, y -> D (the same fields as the conv kernels; bias, residual, act and
// alpha as there).
struct GemmKernel {
  const char* name;  // e.g. "gemm_nhwc_bf16_128x128x64"
  IgemmDtype dtype;
  GemmForm form;
  bool (*can_implement)(const GemmProblem& p);
  size_t (*workspace_bytes)(const GemmProblem& p);
  int (*run)(const GemmProblem& p, const IgemmBuffers& b, void* stream);
};

#ifdef GPUKERN_WITH_CUTLASS
// gemm_bf16.cu, gemm_f16.cu, gemm_tf32.cu: the persistent warp-specialised GEMMs.
extern const GemmKernel kGemmNhwcBf16, kGemmNchwBf16;
extern const GemmKernel kGemmNhwcF16, kGemmNchwF16;
// gemm_bf16_shapes.cu, gemm_f16_shapes.cu: the 16-bit NHWC GEMM for O <= 64 (Narrow) and for at
// most kGemmShortRows rows (Short).
extern const GemmKernel kGemmNhwcBf16Narrow, kGemmNhwcBf16Short;
extern const GemmKernel kGemmNhwcF16Narrow, kGemmNhwcF16Short;
constexpr int kGemmNarrowO = 64;
constexpr int kGemmShortRows = 3136;
extern const GemmKernel kGemmNhwcTf32;
// gemm80_tf32.cu: the kNchw form for fp32 (TF32) on CUTLASS 2.x's SM80 kernels
// (conv/igemm/gemm80.cuh: mma.sync, planes of a multiple of 4 pixels), the bias, residual and
// activation in an epilogue visitor tree; K step 32 or 16 (K16); *Res reads a residual.
extern const GemmKernel kGemm80NchwTf32, kGemm80NchwTf32Res;
extern const GemmKernel kGemm80NchwTf32K16, kGemm80NchwTf32K16Res;
constexpr int kGemm80Align = 4;  // elements per copy along K (A) and along the pixels
#ifdef GPUKERN_GEMM_VARIANTS
// gemm_variants_{coop,pingpong}.cu: the tuning experiment's alternatives to kGemmNhwcBf16.
extern const GemmKernel kGemmVarCoop128x128, kGemmVarCoop256x128, kGemmVarCoop128x256;
extern const GemmKernel kGemmVarPing64x128, kGemmVarPing128x64;
#endif
#endif

}  // namespace conv
}  // namespace gpukern
