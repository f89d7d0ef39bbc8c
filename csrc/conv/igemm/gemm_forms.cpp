// The igemm path's 1x1 GEMM forms (conv/igemm/gemm_forms.h).
#include "conv/igemm/gemm_forms.h"

#if defined(GPUKERN_WITH_CUDA) && defined(GPUKERN_WITH_CUTLASS)
#include <ATen/cuda/CUDAContext.h>

#include <cstdlib>
#include <cstring>

#include "conv/igemm/forms.h"
#include "conv/igemm/im2col.h"
#include "conv/igemm/launch.h"
#include "conv/igemm/nhwc.h"
#include "conv/layout.h"

namespace gpukern {
namespace igemm_forms {
namespace {

using conv::GemmForm;
using conv::GemmKernel;
using conv::IgemmDtype;

// [N, C, H, W] with the pixels of each channel contiguous (H * W flattens), channel and image
// strides 16-byte multiples, base aligned: the kNchw GEMM's B (and D) as they are.
bool nchw_flat(const at::Tensor& t) {
  const int64_t align = kTmaBytes / static_cast<int64_t>(t.element_size());
  const int64_t H = t.size(2), W = t.size(3);
  if (W > 1 && t.stride(3) != 1) return false;
  if (H > 1 && t.stride(2) != W) return false;
  const int64_t sc = t.size(1) == 1 ? H * W : t.stride(1);
  const int64_t sn = t.size(0) == 1 ? t.size(1) * sc : t.stride(0);
  return sc >= H * W && sc % align == 0 && sn % align == 0 &&
         reinterpret_cast<uintptr_t>(t.const_data_ptr()) % kTmaBytes == 0;
}

const GemmKernel& gemm_kernel_for(IgemmDtype d, GemmForm f, int64_t rows, int64_t cols) {
  if (f == GemmForm::kNchw) return d == IgemmDtype::kF16 ? conv::kGemmNchwF16 : conv::kGemmNchwBf16;
#ifdef GPUKERN_GEMM_VARIANTS
  // The tuning experiment (gemm_variants.cu): GPUKERN_GEMM_VARIANT=<name> replaces the bf16 NHWC
  // GEMM.
  if (d == IgemmDtype::kBf16) {
    if (const char* v = std::getenv("GPUKERN_GEMM_VARIANT")) {
      for (const GemmKernel* k : {&conv::kGemmVarCoop128x128, &conv::kGemmVarCoop256x128,
                                  &conv::kGemmVarCoop128x256, &conv::kGemmVarPing64x128,
                                  &conv::kGemmVarPing128x64}) {
        if (std::strcmp(v, k->name) == 0) return *k;
      }
    }
  }
#endif
  // 16-bit NHWC: the tile by shape (conv/igemm/gemm_<dtype>_shapes.cu has the measurements).
  if (d != IgemmDtype::kTf32 && cols <= conv::kGemmNarrowO) {
    return d == IgemmDtype::kF16 ? conv::kGemmNhwcF16Narrow : conv::kGemmNhwcBf16Narrow;
  }
  if (d != IgemmDtype::kTf32 && rows <= conv::kGemmShortRows) {
    return d == IgemmDtype::kF16 ? conv::kGemmNhwcF16Short : conv::kGemmNhwcBf16Short;
  }
  switch (d) {
    case IgemmDtype::kBf16: return conv::kGemmNhwcBf16;
    case IgemmDtype::kF16: return conv::kGemmNhwcF16;
    case IgemmDtype::kTf32: break;
  }
  return conv::kGemmNhwcTf32;
}

// The kNchw GEMM of a 1x1 layer over NCHW planes (x and y each image's pixels contiguous per
// channel): sizes and strides into gp (form, device and SM count left to the caller). False when
// the planes are not contiguous or a size passes int32.
bool nchw_gemm_problem(const ConvProblem& p, const at::Tensor& x4, const at::Tensor& w2,
                       const at::Tensor& y4, GemmProblem& gp) {
  const int64_t HW = p.H * p.W;
  if (!nchw_flat(x4) || !nchw_flat(y4) || HW > kMaxInt || p.N > kMaxInt) return false;
  gp.M = static_cast<int>(p.O);
  gp.N = static_cast<int>(HW);
  gp.K = static_cast<int>(p.C);
  gp.L = static_cast<int>(p.N);
  gp.a_ld = w2.stride(0);
  gp.b_ld = p.C == 1 ? HW : x4.stride(1);
  gp.b_batch = p.N == 1 ? p.C * gp.b_ld : x4.stride(0);
  gp.d_ld = p.O == 1 ? HW : y4.stride(1);
  gp.d_batch = p.N == 1 ? p.O * gp.d_ld : y4.stride(0);
  return true;
}

// fp32 (TF32) 1x1 layers over NCHW planes with a bias or a fused epilogue on CUTLASS 2.x's SM80
// batched GEMM with the epilogue in its visitor tree (conv/igemm/gemm80.cuh; the kNchw form,
// which the SM90 GEMMs cannot run in TF32). Where (H200, batch 16, graph replays, us; fused op,
// gemm80 against the automatic choice without it: pointwise_nchw, the NHWC forms or cuDNN + an
// epilogue pass, whichever the race kept; benchmarks/pointwise_nchw.py, h200_gemm80_a.md):
// planes of at most 14x14 from at least 160 into at most 128 channels (MobileNetV3's
// projections: 240 -> 80 6.3 against 7.1, 200 -> 80 + residual 6.7 against 7.4, 480 -> 112 8.3
// against 10.1, 672 -> 112 + residual 10.7 against 11.8). It loses into more channels (80 -> 480
// 14x14 12.1 against 10.1, 1024 -> 256 20.3 against 15.4) and on larger planes (512 -> 128 28x28
// 22.3 against 20.4, 64 -> 64 56x56 14.1 against 11.2).
// The K step: 32 channels. 16 (GPUKERN_IGEMM_GEMM80_K=16) is slower on those four (6.5, 6.9, 9.2,
// 11.8) but faster on some larger planes, none of them in the rule (ResNet-50's 64 -> 256 56x56
// + residual 48.4 against 54.0 on the forms before, 256 -> 128 56x56 35.2 against 38.9; slower
// on others: 512 -> 256 28x28 34.0 against 23.7, 16 -> 16 112x112 + residual 26.2 against 20.4),
// with no rule in those numbers yet (h200_gemm80_k16.md).
// GPUKERN_IGEMM_GEMM80=1 / 0 in the environment forces it on (where it can run) or off, and
// GPUKERN_IGEMM_GEMM80_K=16 / 32 the kernel's K step (benchmarks, tests; read on every call).
const GemmKernel& gemm80_kernel_for(bool residual) {
  const char* env = std::getenv("GPUKERN_IGEMM_GEMM80_K");
  const int k = env != nullptr ? std::atoi(env) : 0;
  if (k == 16) return residual ? conv::kGemm80NchwTf32K16Res : conv::kGemm80NchwTf32K16;
  return residual ? conv::kGemm80NchwTf32Res : conv::kGemm80NchwTf32;
}

}  // namespace

bool uniform_rows(const std::array<int64_t, 3>& s, int64_t H, int64_t W) {
  return s[1] == W * s[2] && s[0] == H * s[1];
}

bool try_gemm(const ConvProblem& p, IgemmDtype d, GemmForm form, const at::Tensor& x4,
              const at::Tensor& w2, const at::Tensor& bias, const std::optional<at::Tensor>& res,
              const at::Tensor& y4) {
  GemmProblem gp;
  gp.form = form;
  gp.device = x4.device().index();
  gp.sm_count = static_cast<int>(at::cuda::getDeviceProperties(gp.device)->multiProcessorCount);
  const int64_t HW = p.H * p.W;
  if (form == GemmForm::kNhwc) {
    const auto xs = nhwc_strides(x4);
    const auto ys = nhwc_strides(y4);
    if (!xs || !ys || !uniform_rows(*xs, p.H, p.W) || !uniform_rows(*ys, p.H, p.W)) return false;
    if (p.N * HW > kMaxInt) return false;
    gp.M = static_cast<int>(p.N * HW);
    gp.N = static_cast<int>(p.O);
    gp.K = static_cast<int>(p.C);
    gp.a_ld = (*xs)[2];
    gp.b_ld = w2.stride(0);
    gp.d_ld = (*ys)[2];
  } else if (!nchw_gemm_problem(p, x4, w2, y4, gp)) {
    return false;
  }
  const GemmKernel& k = gemm_kernel_for(d, form, gp.M, gp.N);
  const Verdict v = verdict(k, gp);
  if (!v.ok) return false;
  const at::Tensor rc = prepared_residual(res, y4);
  launch(k, gp, v, buffers(x4, w2, bias, rc, y4, p.act), x4);
  return true;
}

bool run_stem_gemm(const ConvProblem& p, IgemmDtype d, const at::Tensor& x4,
                   const at::Tensor& w4, const at::Tensor& bias,
                   const std::optional<at::Tensor>& residual, const at::Tensor& y4) {
  const int64_t align = channel_align(p);
  const int64_t K = p.C * p.KH * p.KW;
  const int64_t Kp = round_up(K, align);
  const int64_t M = p.N * p.OH * p.OW;
  if (M > kMaxInt || !im2col_fits(p, p.elem_size)) return false;
  GemmProblem gp;
  gp.form = GemmForm::kNhwc;
  gp.device = x4.device().index();
  gp.sm_count = static_cast<int>(at::cuda::getDeviceProperties(gp.device)->multiProcessorCount);
  gp.M = static_cast<int>(M);
  gp.N = static_cast<int>(p.O);
  gp.K = static_cast<int>(Kp);
  gp.a_ld = Kp;
  gp.b_ld = Kp;
  gp.d_ld = p.O;  // a packed channels_last output (or temporary)
  const GemmKernel& k = gemm_kernel_for(d, GemmForm::kNhwc, gp.M, gp.N);
  const Verdict v = verdict(k, gp);
  if (!v.ok) return false;
  const at::Tensor a = im2col_rows(p, x4, align);
  // The filter as [O, Kp] rows in the patches' (c, r, s) order, zeros past K.
  const at::Tensor w2 = filter_rows(w4, align);
  const auto ys = nhwc_strides(y4);
  const bool y_direct = ys && (*ys)[2] == p.O && uniform_rows(*ys, p.OH, p.OW);
  const at::Tensor yc =
      y_direct ? y4
               : at::empty(y4.sizes(), y4.options().memory_format(at::MemoryFormat::ChannelsLast));
  const at::Tensor rc = prepared_residual(residual, yc);
  launch(k, gp, v, buffers(a, w2, bias, rc, yc, p.act), x4);
  if (!y_direct) nhwc_copy_to(yc, y4);
  return true;
}

bool gemm80_preferred(const ConvProblem& p, IgemmDtype d) {
  if (d != IgemmDtype::kTf32 || !pointwise(p) || (p.b == nullptr && !p.fused())) return false;
  const int on = env_switch("GPUKERN_IGEMM_GEMM80");
  if (on >= 0) return on == 1;
  return p.H * p.W <= 196 && p.C >= 160 && p.O <= 128;
}

bool try_gemm80(const ConvProblem& p, const at::Tensor& x4, const at::Tensor& w4,
                const at::Tensor& bias, const std::optional<at::Tensor>& res,
                const at::Tensor& y4) {
  const int64_t align = conv::kGemm80Align;
  const int64_t vec_bytes = align * x4.element_size();
  auto aligned = [&](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % vec_bytes == 0; };
  const at::Tensor w2 = w4.reshape({p.O, p.C});
  if (p.C % align != 0 || (p.H * p.W) % align != 0 || w2.stride(1) != 1 ||
      w2.stride(0) % align != 0 || !aligned(w2.const_data_ptr()) ||
      !aligned(x4.const_data_ptr()) || !aligned(y4.const_data_ptr())) {
    return false;
  }
  GemmProblem gp;
  gp.form = GemmForm::kNchw;
  if (!nchw_gemm_problem(p, x4, w2, y4, gp)) return false;
  if (gp.b_ld % align != 0 || gp.b_batch % align != 0 || gp.d_ld % align != 0 ||
      gp.d_batch % align != 0 || gp.L > 65535) {
    return false;
  }
  gp.device = x4.device().index();
  gp.sm_count = static_cast<int>(at::cuda::getDeviceProperties(gp.device)->multiProcessorCount);
  const bool has_res = res.has_value() && res->defined();
  const GemmKernel& k = gemm80_kernel_for(has_res);
  const Verdict v = verdict(k, gp);
  if (!v.ok) return false;
  const at::Tensor rc = prepared_residual(res, y4);  // y's strides, 16-byte aligned
  launch(k, gp, v, buffers(x4, w2, bias, rc, y4, p.act), x4);
  return true;
}

}  // namespace igemm_forms
}  // namespace gpukern

#endif  // GPUKERN_WITH_CUDA && GPUKERN_WITH_CUTLASS
