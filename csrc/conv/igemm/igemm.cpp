// The tensor-core implicit-GEMM path's host side (conv/igemm/igemm.h): the choice of
// configuration and of the form run4 dispatches to (the 1x1 GEMM forms: conv/igemm/
// gemm_forms.cpp; the launch of a kernel entry: conv/igemm/launch.h; the NHWC views and the
// one-time layout conversions: conv/igemm/nhwc.cpp). The kernels are in
// igemm_<dtype>.cu (CUTLASS, sm_90a).
#include "conv/igemm/igemm.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>

#include "core/checks.h"

#if defined(GPUKERN_WITH_CUDA) && defined(GPUKERN_WITH_CUTLASS)
#include <ATen/Context.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "conv/direct/pointwise_nchw.h"
#include "conv/epilogue.h"
#include "conv/igemm/config.h"
#include "conv/igemm/forms.h"
#include "conv/igemm/gemm_forms.h"
#include "conv/igemm/im2col.h"
#include "conv/igemm/launch.h"
#include "conv/igemm/nhwc.h"
#include "conv/layout.h"
#define GPUKERN_IGEMM 1
#endif

namespace gpukern {

#ifdef GPUKERN_IGEMM

namespace {

using conv::IgemmBucket;
using conv::IgemmDtype;
using conv::IgemmKernel;
using conv::IgemmProblem;
using conv::GemmForm;
using namespace igemm_forms;  // NOLINT: the cuBLASLt forms and the helpers they share

constexpr int64_t kMaxTmaStride = 8;  // TMA im2col: element (traversal) strides 1..8

// SMs assumed by a query without a GPU (an H100 SXM).
constexpr int64_t kQuerySmCount = 132;

// nchw_out: the configuration built with the epilogue that writes y of any [N, O, P, Q] strides
// (conv/igemm/epilogue_nchw.cuh), run4's kernel for outputs that are not NHWC-aligned.
const IgemmKernel& kernel_for(IgemmDtype d, IgemmBucket b, bool nchw_out = false) {
  // The tuning experiment (igemm_variants.cu, linked only into a build made with
  // GPUKERN_IGEMM_VARIANTS=1): GPUKERN_IGEMM_VARIANT=<name> replaces the kernel of its dtype.
  if (conv::igemm_variant != nullptr && !nchw_out) {
    if (const char* v = std::getenv("GPUKERN_IGEMM_VARIANT")) {
      if (const IgemmKernel* var = conv::igemm_variant(d, v)) return *var;
    }
  }
  const int i = static_cast<int>(b);  // kLarge, kSmall, kMedium, kNarrow
  static const IgemmKernel* const table[2][3][4] = {
      {{&conv::kIgemmBf16Large, &conv::kIgemmBf16Small, &conv::kIgemmBf16Medium,
        &conv::kIgemmBf16Narrow},
       {&conv::kIgemmF16Large, &conv::kIgemmF16Small, &conv::kIgemmF16Medium,
        &conv::kIgemmF16Narrow},
       {&conv::kIgemmTf32Large, &conv::kIgemmTf32Small, &conv::kIgemmTf32Medium,
        &conv::kIgemmTf32Narrow}},
      {{&conv::kIgemmBf16LargeNchw, &conv::kIgemmBf16SmallNchw, &conv::kIgemmBf16MediumNchw,
        &conv::kIgemmBf16NarrowNchw},
       {&conv::kIgemmF16LargeNchw, &conv::kIgemmF16SmallNchw, &conv::kIgemmF16MediumNchw,
        &conv::kIgemmF16NarrowNchw},
       {&conv::kIgemmTf32LargeNchw, &conv::kIgemmTf32SmallNchw, &conv::kIgemmTf32MediumNchw,
        &conv::kIgemmTf32NarrowNchw}}};
  const int row = d == IgemmDtype::kBf16 ? 0 : d == IgemmDtype::kF16 ? 1 : 2;
  return *table[nchw_out ? 1 : 0][row][i];
}

int64_t sm_count() {
  if (at::cuda::device_count() == 0) return kQuerySmCount;
  return at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
}

// The shape bucket, by the number of output tiles against the SMs:
// - small (64x64 tiles): tiny GEMMs (M = N * OH * OW <= 64, e.g. squeeze-excitation 1x1s over 1x1
//   planes) and grids of at most a quarter of the SMs in the tile the layer would otherwise take;
// - narrow (128x64): O <= 64 (half of a 128-wide N tile would be padding);
// - medium (64x128): grids of at most half of the SMs in 128x128 tiles (its own grid, twice the
//   tiles, still one wave);
// - large (128x128) otherwise.
// Measured on an H200 (benchmarks/igemm_layers.py, batch 16, us, large / small / medium / narrow /
// torch's best), bf16 channels_last unless said:
// - ResNet-50's 3x3 64->64 at 56x56 (O = 64) 27.5 / 23.3 / 39.2 / 17.7 / 22.1, fp32 43.5 / 33.7 /
//   61.7 / 25.9 / 34.9;
// - 3x3 512->512 at 7x7 (28 tiles of 128x128) 26.3 / 13.7 / 15.5 / 16.7 / 16.6, its stride-2 twin
//   26.2 / 14.4 / 15.6 / 16.4 / 16.0;
// - 3x3 256->256 at 14x14 (50 tiles) 15.8 / 16.9 / 10.3 / 12.7 / 14.9, fp32 26.3 / 28.1 / 16.3 /
//   22.6 / 20.3;
// - large ahead from 98 tiles: 3x3 s2 128->128 to 28x28 12.3 / 17.2 / 13.3 / 15.7 / 17.0; 3x3
//   256->256 at 56x56, batch 64, 380 / 735 / 475 / 605 / 453.
// Measured again on an H100 (benchmarks/igemm_variants.py, census timing: graph of 20 calls, L2
// flushed, channels_last, no bias; small / medium / torch, bf16 then fp32): the 28-tile layers
// with O = 512 run faster in 64x128 tiles there: 3x3 512->512 at 7x7 16.9 / 15.1 / 14.3 and
// 31.0 / 26.3 / 20.4 (TF32 medium without its cluster), its stride-2 twin 15.9 / 15.1 / 13.8 and
// 30.6 / 27.3 / 20.0. So grids of at most a quarter of the SMs take medium tiles when O >= 256
// (two or more 128-wide N tiles), small ones below.
// GPUKERN_IGEMM_CONFIG=large|small|medium|narrow in the environment overrides it (benchmarks;
// read on every call).
IgemmBucket bucket_of(const ConvProblem& p) {
  if (const char* env = std::getenv("GPUKERN_IGEMM_CONFIG")) {
    if (std::strcmp(env, "large") == 0) return IgemmBucket::kLarge;
    if (std::strcmp(env, "small") == 0) return IgemmBucket::kSmall;
    if (std::strcmp(env, "medium") == 0) return IgemmBucket::kMedium;
    if (std::strcmp(env, "narrow") == 0) return IgemmBucket::kNarrow;
  }
  const int64_t M = p.N * p.OH * p.OW;
  if (M <= kSmallGemmRows) return IgemmBucket::kSmall;
  const int64_t sms = sm_count();
  const int64_t tiles = ((M + 127) / 128) * ((p.O + 127) / 128);
  if (4 * tiles <= sms) return p.O >= 256 ? IgemmBucket::kMedium : IgemmBucket::kSmall;
  if (p.O <= 64) return IgemmBucket::kNarrow;
  return 2 * tiles <= sms ? IgemmBucket::kMedium : IgemmBucket::kLarge;
}

// The problem's GEMM sizes in int32 and its paddings after the input, with x, w, y as packed
// NHWC / OHWI tensors (the strides the host side produces when the caller's do not fit). An
// input row or column past the last window is trimmed (H, W shrink; the strides keep the
// original extents) so that the padding after it is never negative.
bool make_igemm_problem(const ConvProblem& p, IgemmProblem& ip) {
  const std::array<int64_t, 14> sizes = {p.N,  p.C,  p.H,        p.W,        p.O,
                                         p.KH, p.KW, p.OH,       p.OW,       p.stride_h,
                                         p.stride_w, p.dil_h, p.dil_w, p.pad_h + p.pad_w};
  for (int64_t s : sizes) {
    if (s < 0 || s > kMaxInt) return false;
  }
  // Each tensor under 2^31 elements (the factors are under 2^31: products in double are exact
  // enough to compare).
  auto over = [](double a, double b, double c, double d) { return a * b * c * d > kMaxInt; };
  if (over(p.N, p.C, p.H, p.W) || over(p.N, p.O, p.OH, p.OW) || over(p.O, p.C, p.KH, p.KW)) {
    return false;
  }
  ip.N = static_cast<int>(p.N);
  ip.C = static_cast<int>(p.C);
  ip.O = static_cast<int>(p.O);
  ip.R = static_cast<int>(p.KH);
  ip.S = static_cast<int>(p.KW);
  ip.P = static_cast<int>(p.OH);
  ip.Q = static_cast<int>(p.OW);
  ip.pad_h = static_cast<int>(p.pad_h);
  ip.pad_w = static_cast<int>(p.pad_w);
  ip.stride_h = static_cast<int>(p.stride_h);
  ip.stride_w = static_cast<int>(p.stride_w);
  ip.dil_h = static_cast<int>(p.dil_h);
  ip.dil_w = static_cast<int>(p.dil_w);
  // The extent the output reads: (P - 1) * stride + dil * (R - 1) + 1 = pad_lo + H + pad_hi.
  const int64_t hi_h = (p.OH - 1) * p.stride_h + p.dil_h * (p.KH - 1) + 1 - p.pad_h - p.H;
  const int64_t hi_w = (p.OW - 1) * p.stride_w + p.dil_w * (p.KW - 1) + 1 - p.pad_w - p.W;
  ip.H = static_cast<int>(hi_h < 0 ? p.H + hi_h : p.H);
  ip.W = static_cast<int>(hi_w < 0 ? p.W + hi_w : p.W);
  ip.pad_h_hi = static_cast<int>(hi_h < 0 ? 0 : hi_h);
  ip.pad_w_hi = static_cast<int>(hi_w < 0 ? 0 : hi_w);
  if (ip.H < 1 || ip.W < 1) return false;
  ip.x_sw = p.C;
  ip.x_sh = p.W * p.C;
  ip.x_sn = p.H * p.W * p.C;
  ip.w_ss = p.C;
  ip.w_sr = p.KW * p.C;
  ip.w_so = p.KH * p.KW * p.C;
  ip.y_sw = p.O;
  ip.y_sh = p.OW * p.O;
  ip.y_sn = p.OH * p.OW * p.O;
  return true;
}

// sm_90 exactly: the kernels are sm_90a code. Without a GPU (a meta query) the answer is sm_90's.
bool device_ok() {
  if (at::cuda::device_count() == 0) return true;
  const cudaDeviceProp* prop = at::cuda::getCurrentDeviceProperties();
  return prop->major == 9 && prop->minor == 0;
}

bool dtype_of(const ConvProblem& p, bool tf32_allowed, IgemmDtype& d) {
  if (p.elem_size == 2) {
    d = IgemmDtype::kBf16;  // bf16 and fp16 share every limit (8-element alignment, tiles)
    return true;
  }
  if (p.elem_size == 4 && tf32_allowed) {
    d = IgemmDtype::kTf32;
    return true;
  }
  return false;
}

// Whether run4 takes the 1x1 GEMM form (and igemm_config_name says "gemm_1x1"): pointwise, C
// aligned, more than kSmallGemmRows output pixels (tiny GEMMs, e.g. squeeze-excitation 1x1s over
// 1x1 planes: the conv kernel's 64x64 tile ran them in 4.2 us against the GEMM's 7.9 on an
// H100).
bool takes_gemm_1x1(const ConvProblem& p) {
  return gemm_enabled() && pointwise(p) && p.C % channel_align(p) == 0 &&
         p.N * p.OH * p.OW > kSmallGemmRows;
}

// Bias: O contiguous, 16-byte aligned elements of the dtype.
at::Tensor prepared_bias(const std::optional<at::Tensor>& bias, at::ScalarType dtype) {
  if (!bias.has_value() || !bias->defined()) return {};
  at::Tensor bc = *bias;
  if (bc.scalar_type() != dtype) bc = bc.to(dtype);
  if (bc.stride(0) != 1 || reinterpret_cast<uintptr_t>(bc.const_data_ptr()) % kTmaBytes != 0) {
    bc = bc.clone(at::MemoryFormat::Contiguous);
  }
  return bc;
}

// The cuBLASLt plan of a 1x1 layer over run4's packed NHWC copies of x and y (kRows: the weight
// as A, the pixel rows as B), or none.
std::optional<BlasPlan> nhwc_blas_of(const ConvProblem& p, IgemmDtype d, bool has_bias,
                                     bool has_residual) {
  const std::array<int64_t, 4> xs = {p.C * p.H * p.W, 1, p.W * p.C, p.C};
  const std::array<int64_t, 4> ys = {p.O * p.OH * p.OW, 1, p.OW * p.O, p.O};
  auto plan = blas_gemm_of(p, d, xs, ys, p.C, has_bias, has_residual);
  if (plan && !plan->g.trans_a) plan.reset();
  return plan;
}

// Whether run4 converts a 1x1 layer of these x strides to NHWC for the GEMM (takes_gemm_1x1
// true): x not already NHWC, and the kNchw GEMM (16-bit only) not possible on its planes.
bool converts_1x1(const ConvProblem& p, IgemmDtype d) {
  if (p.x_sc == 1 && p.C > 1) return false;  // channels_last already
  return d == IgemmDtype::kTf32 || (p.H * p.W * p.elem_size) % kTmaBytes != 0;
}

// The way back with the epilogue (conv/epilogue.h conv_epilogue_from_nhwc), for 1x1 layers into
// small planes whose y goes through the channels_last temporary: the GEMM writes conv + bias there
// and one pass writes y = act(temporary [+ residual]), where cuBLASLt's plan took the residual's
// transpose, or an activation pass of its own over the temporary, and then the plain way back
// (conv/layout.h nhwc_copy_to). Taken with a residual or an activation cuBLASLt's epilogue lacks
// (hardswish: MobileNetV3). y and the residual of the same sizes and dtype, each with packed
// planes. GPUKERN_IGEMM_EPILOGUE_BACK=0 in the environment keeps the old way (benchmarks; read per
// call).
bool epilogue_back_enabled() { return env_switch("GPUKERN_IGEMM_EPILOGUE_BACK") != 0; }

bool planes_packed4(const at::Tensor& t) {
  return t.dim() == 4 && (t.size(3) == 1 || t.stride(3) == 1) &&
         (t.size(2) == 1 || t.stride(2) == t.size(3));
}

bool has_tensor(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }

bool epilogue_back_fits(const ConvProblem& p, const std::optional<at::Tensor>& r,
                        const at::Tensor& y4) {
  if (!has_tensor(r) && conv::blas_act_supported(p.act)) return false;  // nothing to gain
  // The pass loads 16-byte vectors of the temporary's pixel rows (O channels).
  if ((p.O * p.elem_size) % 16 != 0 || !planes_packed4(y4) || !epilogue_back_enabled()) {
    return false;
  }
  return !has_tensor(r) || (r->sizes() == y4.sizes() && r->scalar_type() == y4.scalar_type() &&
                            planes_packed4(*r));
}

// y4 = act(yc [+ residual]), yc the packed channels_last temporary holding conv + bias.
void epilogue_back(const ConvProblem& p, const at::Tensor& yc,
                   const std::optional<at::Tensor>& r, const at::Tensor& y4) {
  ConvProblem e = p;
  e.y = y4.data_ptr();
  e.y_sn = y4.stride(0);
  e.y_so = y4.stride(1);
  e.y_sh = y4.stride(2);
  e.y_sw = y4.stride(3);
  e.r = nullptr;
  if (has_tensor(r)) {
    e.r = r->const_data_ptr();
    e.r_sn = r->stride(0);
    e.r_so = r->stride(1);
    e.r_sh = r->stride(2);
    e.r_sw = r->stride(3);
  }
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream(y4.device().index()).stream();
  const void* src = yc.const_data_ptr();
  const int64_t cs = yc.size(1);
  switch (y4.scalar_type()) {
    case at::kFloat: return conv_epilogue_from_nhwc<float>(e, src, cs, stream);
    case at::kHalf: return conv_epilogue_from_nhwc<__half>(e, src, cs, stream);
    case at::kBFloat16: return conv_epilogue_from_nhwc<__nv_bfloat16>(e, src, cs, stream);
    default: TORCH_INTERNAL_ASSERT(false, "gpukern::conv: igemm way back on ", y4.scalar_type());
  }
}

void run4(const ConvProblem& p, const at::Tensor& x4, const at::Tensor& w4,
          const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& residual,
          const at::Tensor& y4) {
  IgemmDtype d{};
  GK_CHECK(x4.scalar_type() == at::kBFloat16 || x4.scalar_type() == at::kHalf ||
               x4.scalar_type() == at::kFloat,
           "conv", "igemm: unsupported dtype ", x4.scalar_type());
  GK_CHECK(dtype_of(p, true, d), "conv",
           "igemm: the problem is outside the path (igemm_can_run is false)");
  if (x4.scalar_type() == at::kHalf) d = IgemmDtype::kF16;
  const int64_t align = channel_align(p);
  const at::Tensor bc = prepared_bias(bias, x4.scalar_type());

  // 1x1, stride 1: a plain GEMM. Over NCHW (16-bit) one GEMM per image with no transpose; over
  // NHWC one GEMM over every pixel. The weight as [O, C] rows.
  // GPUKERN_IGEMM_GEMM=0 in the environment sends them to the conv kernel instead (benchmarks
  // compare the two; read on every call).
  const bool gemm_on = gemm_enabled();
  // fp32 (few input channels) and 16-bit 1x1 over NCHW planes with a bias or an epilogue:
  // mma.sync reads the planes in place with the epilogue inside (conv/direct/pointwise_nchw.cuh,
  // pointwise_nchw16.cuh), where cuBLASLt's
  // batched NCHW GEMM has no per-channel bias (it needs a pass after) and the CUTLASS GEMMs
  // need the planes converted to NHWC (TF32 wgmma takes K-major operands only).
  if (gemm80_preferred(p, d) && try_gemm80(p, x4, w4, bc, residual, y4)) return;
  if ((d == IgemmDtype::kTf32 || p.elem_size == 2) && (p.b != nullptr || p.fused()) &&
      pointwise_nchw_preferred(p)) {
    pointwise_nchw_run(p, at::cuda::getCurrentCUDAStream(x4.device().index()).stream());
    return;
  }
  if (pointwise(p)) {
    // cuBLASLt where blas_gemm_of says so (conv/igemm/blas.h); the weight as [O, C] rows.
    at::Tensor w2 = w4.reshape({p.O, p.C});
    if (p.C > 1 && w2.stride(1) != 1) w2 = w2.contiguous();
    const int64_t w_ld = p.C > 1 ? w2.stride(0) : 1;
    const bool has_res = has_tensor(residual);
    if (const auto plan = blas_gemm_of(p, d, strides4(x4), strides4(y4), w_ld, bc.defined(),
                                       has_res)) {
      const bool rows = plan->g.trans_a;  // kRows: A = the weight, B = the pixel rows
      if (run_blas_plan(p, *plan, rows ? w2.const_data_ptr() : x4.const_data_ptr(),
                        rows ? x4.const_data_ptr() : w2.const_data_ptr(), bc, residual, y4)) {
        return;
      }
    }
  }
  // 1x1 with a stride, no padding (ResNet-50's downsampling shortcuts): the sampled pixels copied
  // once (x[:, :, ::stride_h, ::stride_w] in x's memory format: a quarter of the input at stride
  // 2), then the stride-1 1x1 forms above on the copy.
  if (strided_pointwise(p)) {
    const at::Tensor xs = subsampled(p, x4);
    return run4(subsampled_problem(p, xs), xs, w4, bias, residual, y4);
  }
  // conv1d over NCL: explicit columns and the batched cuBLASLt GEMM (conv/igemm/forms.h).
  if (run_cols_gemm(p, d, x4, w4, bc, residual, y4)) return;
  if (takes_gemm_1x1(p)) {
    at::Tensor w2 = w4.reshape({p.O, p.C});
    if (w2.stride(1) != 1 || w2.stride(0) % align != 0 ||
        reinterpret_cast<uintptr_t>(w2.const_data_ptr()) % kTmaBytes != 0) {
      w2 = w2.clone(at::MemoryFormat::Contiguous);
    }
    if (d != IgemmDtype::kTf32 && !nhwc_strides(x4) &&
        try_gemm(p, d, GemmForm::kNchw, x4, w2, bc, residual, y4)) {
      return;
    }
    const at::Tensor xc = as_nhwc(x4, 1);
    const bool y_direct = nhwc_strides(y4).has_value();
    const at::Tensor yc =
        y_direct ? y4
                 : at::empty(y4.sizes(),
                             y4.options().memory_format(at::MemoryFormat::ChannelsLast));
    // Small planes: the converted pixel rows on cuBLASLt (forms.h nhwc_blas_plane), x converted
    // here or y through the temporary (a strided layer's sampled pixels, gathered to NHWC for an
    // NCHW y: forms.cpp strided_pointwise).
    if ((!nhwc_strides(x4) || !y_direct) && nhwc_blas_plane(p.OH * p.OW)) {
      // Into y through the temporary with a residual or an activation cuBLASLt lacks: the GEMM
      // with the bias only, then one way back with the rest of the epilogue (epilogue_back_fits).
      if (!y_direct && epilogue_back_fits(p, residual, y4)) {
        ConvProblem q = p;
        q.act = 0;
        q.r = nullptr;
        if (const auto plan = nhwc_blas_of(q, d, bc.defined(), false)) {
          if (run_blas_plan(q, *plan, w2.const_data_ptr(), xc.const_data_ptr(), bc,
                            std::nullopt, yc)) {
            epilogue_back(p, yc, residual, y4);
            return;
          }
        }
      }
      if (const auto plan = nhwc_blas_of(p, d, bc.defined(), has_tensor(residual))) {
        if (run_blas_plan(p, *plan, w2.const_data_ptr(), xc.const_data_ptr(), bc, residual,
                          yc)) {
          if (!y_direct) nhwc_copy_to(yc, y4);
          return;
        }
      }
    }
    if (try_gemm(p, d, GemmForm::kNhwc, xc, w2, bc, residual, yc)) {
      if (!y_direct) nhwc_copy_to(yc, y4);
      return;
    }
  }

  // Stems (C not a multiple of the alignment: RGB images, single-channel audio): the patches
  // written once as an [M, Kp] matrix, then the same NHWC GEMM (the implicit GEMM would load
  // one tiny TMA box per tap: conv/igemm/im2col.h).
  if (gemm_on && p.C % align != 0 && p.N * p.OH * p.OW > kSmallGemmRows &&
      run_stem_gemm(p, d, x4, w4, bc, residual, y4)) {
    return;
  }

  // The implicit-GEMM conv kernel over NHWC: activations and filter in place when NHWC-aligned,
  // else converted once (channels zero-padded to the kernels' multiple: C = 3 stems).
  IgemmProblem ip;
  GK_CHECK(make_igemm_problem(p, ip), "conv",
           "igemm: the problem is outside the path (igemm_can_run is false)");
  const IgemmBucket bucket = bucket_of(p);
  // Output: in place when NHWC-aligned (the TMA epilogue); any other layout (NCHW above all)
  // through the kernel whose epilogue writes y's own strides, or a channels_last temporary
  // written back once where that measured faster (forms.h nchw_out_for).
  const bool y_direct = nhwc_strides(y4).has_value();
  const bool nchw_out = !y_direct && nchw_out_for(d, bucket, p.OH * p.OW);
  const IgemmKernel& k = kernel_for(d, bucket, nchw_out);
  const auto [xc, wc] = nhwc_operands(x4, w4, align, align);
  ip.C = static_cast<int>(xc.size(1));
  const auto xs = *nhwc_strides(xc);
  ip.x_sn = xs[0];
  ip.x_sh = xs[1];
  ip.x_sw = xs[2];
  const auto ws = *nhwc_strides(wc);
  ip.w_so = ws[0];
  ip.w_sr = ws[1];
  ip.w_ss = ws[2];
  ip.device = x4.device().index();
  ip.sm_count = at::cuda::getDeviceProperties(ip.device)->multiProcessorCount;
  if (nchw_out) {
    ip.y_sn = y4.stride(0);
    ip.y_so = y4.stride(1);
    ip.y_sh = y4.stride(2);
    ip.y_sw = y4.stride(3);
    const at::Tensor rc = prepared_residual(residual, y4);
    launch(k, ip, verdict(k, ip), buffers(xc, wc, bc, rc, y4, p.act), x4);
    return;
  }
  const at::Tensor yc =
      y_direct ? y4
               : at::empty(y4.sizes(), y4.options().memory_format(at::MemoryFormat::ChannelsLast));
  const auto ys = *nhwc_strides(yc);
  ip.y_sn = ys[0];
  ip.y_sh = ys[1];
  ip.y_sw = ys[2];
  const at::Tensor rc = prepared_residual(residual, yc);
  launch(k, ip, verdict(k, ip), buffers(xc, wc, bc, rc, yc, p.act), x4);
  if (!y_direct) nhwc_copy_to(yc, y4);
}

}  // namespace

bool igemm_built() { return true; }

bool igemm_can_run(const ConvProblem& p, bool tf32_allowed) {
  IgemmProblem ip;
  IgemmDtype d{};
  if (p.groups != 1 || p.N < 1 || !dtype_of(p, tf32_allowed, d)) return false;
  // C may be padded (the conversion zero-fills channels); O may not (y is written in place).
  const int64_t align = channel_align(p);
  if (p.O % align != 0) return false;
  // The TMA's im2col traversal stride is 1..8 (cuTensorMapEncodeIm2col's elementStrides);
  // CUTLASS's can_implement does not check it, and a stride of 13 ran into an illegal
  // instruction on an H100.
  if (p.stride_h > kMaxTmaStride || p.stride_w > kMaxTmaStride) return false;
  if (!make_igemm_problem(p, ip) || !device_ok()) return false;
  ip.C = static_cast<int>(round_up(p.C, align));
  if (static_cast<double>(p.N) * ip.C * p.H * p.W > kMaxInt ||
      static_cast<double>(p.O) * ip.C * p.KH * p.KW > kMaxInt) {
    return false;
  }
  // Strides of a packed NHWC input / OHWI filter with the padded channels (the judge of the
  // TMA's limits; the real strides are only ever larger multiples of 16 bytes).
  ip.x_sw = ip.C;
  ip.x_sh = static_cast<int64_t>(p.W) * ip.C;
  ip.x_sn = static_cast<int64_t>(p.H) * p.W * ip.C;
  ip.w_ss = ip.C;
  ip.w_sr = p.KW * ip.C;
  ip.w_so = p.KH * p.KW * ip.C;
  return verdict(kernel_for(d, bucket_of(p)), ip).ok;
}

bool igemm_can_run(const ConvProblem& p) {
  return igemm_can_run(p, at::globalContext().allowTF32CuDNN());
}

bool igemm_preferred(const ConvProblem& p) {
  if (p.groups != 1 || !igemm_can_run(p)) return false;
  const int64_t align = channel_align(p);
  // Unaligned C below the alignment (stems: RGB images, single-channel audio) runs through an
  // explicit im2col and a GEMM (run4): worth it for filters of 8+ taps.
  return p.C % align == 0 || (p.C < align && p.KH * p.KW >= 8);
}

std::string igemm_config_name(const ConvProblem& p) {
  if (!igemm_can_run(p)) return "";
  const int64_t M = p.N * p.OH * p.OW;
  const bool aligned = p.C % channel_align(p) == 0;
  IgemmDtype d{};
  dtype_of(p, true, d);  // igemm_can_run said yes: a 16-bit dtype, or fp32 with TF32 allowed
  if (blas_gemm_of(p, d, {p.x_sn, p.x_sc, p.x_sh, p.x_sw}, {p.y_sn, p.y_so, p.y_sh, p.y_sw}, p.C,
                   p.b != nullptr, p.r != nullptr)) {
    return "cublas_1x1";
  }
  if (takes_gemm_1x1(p)) {
    const bool y_temp = p.O > 1 && p.y_so != 1;  // run4's channels_last temporary
    return (converts_1x1(p, d) || y_temp) && nhwc_blas_plane(p.OH * p.OW) &&
                   nhwc_blas_of(p, d, p.b != nullptr, p.r != nullptr)
               ? "nhwc+cublas_1x1"
               : "gemm_1x1";
  }
  if (strided_pointwise(p)) {
    // The stride-1 problem over the packed copy subsampled() makes (x's memory format, or NHWC
    // for planes under kBlasMinImagePlane).
    ConvProblem q = p;
    q.H = p.OH;
    q.W = p.OW;
    q.stride_h = q.stride_w = 1;
    q.dil_h = q.dil_w = 1;
    const bool cl = (p.C > 1 && p.x_sc == 1 && (p.x_sw != 1 || p.W == 1)) ||
                    p.OH * p.OW < kBlasMinImagePlane;
    q.x_sw = cl ? p.C : 1;
    q.x_sh = cl ? p.C * q.W : q.W;
    q.x_sc = cl ? 1 : q.H * q.W;
    q.x_sn = p.C * q.H * q.W;
    return "subsample+" + igemm_config_name(q);
  }
  if (cols_gemm_of(p, d, {p.y_sn, p.y_so, p.y_sh, p.y_sw}, true, p.b != nullptr,
                   p.r != nullptr)) {
    return "cols_im2col_cublas";
  }
  if (gemm_enabled() && !aligned && M > kSmallGemmRows && M <= kMaxInt &&
      im2col_fits(p, p.elem_size)) {
    return "stem_im2col_gemm";
  }
  switch (bucket_of(p)) {
    case IgemmBucket::kSmall: return "small_64x64";
    case IgemmBucket::kMedium: return "medium_64x128";
    case IgemmBucket::kNarrow: return "narrow_128x64";
    case IgemmBucket::kLarge: break;
  }
  return "large_128x128";
}

void igemm_run(const ConvProblem& p, const at::Tensor& x, const at::Tensor& w,
               const std::optional<at::Tensor>& bias, const at::Tensor& y,
               const std::optional<at::Tensor>& residual) {
  if (x.dim() == 3) {  // 1-D: [N, C, L] as [N, C, 1, L]
    std::optional<at::Tensor> r4;
    if (has_tensor(residual)) r4 = residual->unsqueeze(2);
    return run4(p, x.unsqueeze(2), w.unsqueeze(2), bias, r4, y.unsqueeze(2));
  }
  run4(p, x, w, bias, residual, y);
}

void igemm_run(const ConvProblem& p, const at::Tensor& x) {
  const at::TensorOptions opts = x.options();
  auto view = [&](const void* data, at::IntArrayRef sizes, at::IntArrayRef strides) {
    return at::from_blob(const_cast<void*>(data), sizes, strides, opts);
  };
  const at::Tensor x4 = view(p.x, {p.N, p.C, p.H, p.W}, {p.x_sn, p.x_sc, p.x_sh, p.x_sw});
  at::Tensor w4 = view(p.w, {p.O, p.C, p.KH, p.KW}, {p.w_so, p.w_sc, p.w_sh, p.w_sw});
  // The caller's weight itself where it is the same view (what cached_nhwc_filter keys on: a
  // from_blob view is a new storage every call).
  if (p.w_tensor != nullptr) {
    const at::Tensor& w = *static_cast<const at::Tensor*>(p.w_tensor);
    at::Tensor wt = w.dim() == 3 ? w.unsqueeze(2) : w;
    bool same = wt.dim() == 4 && wt.scalar_type() == w4.scalar_type() &&
                wt.const_data_ptr() == p.w && wt.device() == x.device();
    for (int d = 0; same && d < 4; ++d) {
      same = wt.size(d) == w4.size(d) && (w4.size(d) == 1 || wt.stride(d) == w4.stride(d));
    }
    if (same) w4 = wt;
  }
  const at::Tensor y4 = view(p.y, {p.N, p.O, p.OH, p.OW}, {p.y_sn, p.y_so, p.y_sh, p.y_sw});
  std::optional<at::Tensor> b, r;
  if (p.b != nullptr) b = view(p.b, {p.O}, {p.b_s});
  if (p.r != nullptr) r = view(p.r, {p.N, p.O, p.OH, p.OW}, {p.r_sn, p.r_so, p.r_sh, p.r_sw});
  run4(p, x4, w4, b, r, y4);
}

#else  // no igemm path in this build

bool igemm_built() { return false; }
bool igemm_can_run(const ConvProblem&, bool) { return false; }
bool igemm_can_run(const ConvProblem&) { return false; }
bool igemm_preferred(const ConvProblem&) { return false; }
std::string igemm_config_name(const ConvProblem&) { return ""; }
void igemm_run(const ConvProblem&, const at::Tensor&, const at::Tensor&,
               const std::optional<at::Tensor>&, const at::Tensor&,
               const std::optional<at::Tensor>&) {
  GK_CHECK(false, "conv", "igemm: this build has no igemm path (needs nvidia-cutlass and "
           "TORCH_CUDA_ARCH_LIST with 9.0a)");
}
void igemm_run(const ConvProblem&, const at::Tensor&) {
  GK_CHECK(false, "conv", "igemm: this build has no igemm path (needs nvidia-cutlass and "
           "TORCH_CUDA_ARCH_LIST with 9.0a)");
}

#endif

}  // namespace gpukern
