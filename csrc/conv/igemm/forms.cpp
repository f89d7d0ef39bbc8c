// The cuBLASLt forms of the igemm path (conv/igemm/forms.h).
#include "conv/igemm/forms.h"

#if defined(GPUKERN_WITH_CUDA) && defined(GPUKERN_WITH_CUTLASS)
#include <ATen/cuda/CUDAContext.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "conv/epilogue.h"
#include "conv/igemm/im2col.h"
#include "conv/layout.h"

namespace gpukern {
namespace igemm_forms {

// The stride between pixel rows when pixel (n, h, w) of a [N, C, H, W] tensor (sizes, strides
// s = {sn, sc, sh, sw}) sits at row (n * H + h) * W + w with its channels unit-stride (NHWC with
// uniform rows; size-1 dims never stepped), else 0.
int64_t pixel_rows_ld(int64_t N, int64_t C, int64_t H, int64_t W,
                      const std::array<int64_t, 4>& s) {
  if (C > 1 && s[1] != 1) return 0;
  int64_t ld = W > 1 ? s[3] : (H > 1 ? s[2] : (N > 1 ? s[0] : C));
  if (ld < C) return 0;
  if (W > 1 && H > 1 && s[2] != W * ld) return 0;
  if (N > 1 && (H > 1 || W > 1) && s[0] != H * W * ld) return 0;
  return ld;
}

// The channel stride when each channel plane of every image of a [N, C, H, W] tensor is H * W
// contiguous elements (NCHW planes), else 0.
int64_t plane_ld(int64_t C, int64_t H, int64_t W, const std::array<int64_t, 4>& s) {
  if (W > 1 && s[3] != 1) return 0;
  if (H > 1 && s[2] != W) return 0;
  const int64_t ld = C > 1 ? s[1] : H * W;
  return ld >= H * W ? ld : 0;
}



static int blas_dtype(const ConvProblem& p, IgemmDtype d) {
  return d == IgemmDtype::kTf32 ? 2 : (p.elem_size == 2 && d == IgemmDtype::kF16 ? 1 : 0);
}

// 16-bit NCHW blocks with a bias or an activation cuBLASLt lacks: cuBLASLt's batched GEMM and
// the epilogue pass (true) or the CUTLASS NCHW GEMM with the epilogue inside (false). The CUTLASS
// GEMM (one GEMM per image, 128x128 tiles over O x pixels) wastes most of its tile where O or the
// plane is small; the pass costs a read and a write of y (and a read of the residual). Measured
// on an H100 (benchmarks/nchw_fused.py: bf16, batch 16, the 1x1 blocks of ResNet-50 and
// MobileNetV3-Large, census timing; us, CUTLASS / cuBLASLt + pass / torch's unfused sequence):
// the pass wins where O <= 64 (64->64 at 56x56 relu 16.2 / 12.9 / 17.7, 16->16 at 112x112 +
// residual 48.7 / 15.7 / 21.6) or the plane is under 28x28 (256->1024 at 14x14 + residual + relu
// 51.3 / 19.9 / 31.5, 112->672 hardswish 23.0 / 15.2 / 38.7); CUTLASS wins or ties above (64->256
// at 56x56 + residual 36.2 / 38.6, 256->128 at 56x56 19.4 / 21.9, 512->128 at 28x28 10.2 / 11.8;
// 120 outputs at 28x28 8.5 / 7.6 the one loss of the rule). GPUKERN_IGEMM_PASS16=1 / 0 forces it.
static bool pass16(const ConvProblem& p) {
  const int env = env_switch("GPUKERN_IGEMM_PASS16");
  return env >= 0 ? env == 1 : p.O <= 64 || p.OH * p.OW < 784;
}

// Whether a kImages GEMM (NCHW planes; cuBLASLt's bias would be per column there, which its
// epilogue does not have) can take this epilogue: in cuBLASLt's own (no bias, act none / relu),
// or as a pass after a plain GEMM (fp32 always, 16-bit where pass16 says).
static bool images_epilogue_ok(const ConvProblem& p, IgemmDtype d, bool has_bias, bool& pass) {
  pass = false;
  if (!has_bias && conv::blas_act_supported(p.act)) return true;
  pass = d == IgemmDtype::kTf32 || pass16(p);
  return pass;
}

// The kRows form's activation pass (BlasPlan::act_pass) against the CUTLASS NHWC GEMM with the
// activation inside. Measured on an H100 (benchmarks/nchw_fused.py --layout cl: MobileNetV3-Large's
// blocks with hardswish / hardsigmoid, batch 16, census timing; us, CUTLASS / cuBLASLt + pass /
// torch's unfused sequence): the pass wins on 14x14 and 7x7 planes (80->200 hardswish fp32 9.5 /
// 8.3 / 10.2, bf16 6.7 / 6.0 / 10.5; 160->960 at 7x7 fp32 10.0 / 9.0 / 11.9) except the wide fp32
// ones (80->480 at 14x14 9.6 / 11.3, 112->672 13.9 / 15.0), and where O <= 64 (16->16 at 112x112
// fp32 60.6 / 26.0 / 42.2); CUTLASS on 28x28 planes (40->240 fp32 14.2 / 14.9, bf16 10.8 / 15.9)
// and on single-pixel planes (squeeze-excitation 120->480 hardsigmoid fp32 4.1 / 5.7).
// GPUKERN_IGEMM_ROWPASS=1 / 0 forces it.
static bool rows_act_pass(const ConvProblem& p, IgemmDtype d) {
  const int env = env_switch("GPUKERN_IGEMM_ROWPASS");
  if (env >= 0) return env == 1;
  const int64_t hw = p.OH * p.OW;
  if (hw <= 1) return false;
  return p.O <= 64 || (hw <= 196 && (d != IgemmDtype::kTf32 || p.O <= 256 || hw <= 49));
}

// The cuBLASLt GEMM (conv/igemm/blas.h) a 1x1 layer runs as, from its sizes and the strides of x
// and y (x4 / y4: {sn, sc, sh, sw}) and the weight's row stride, or nothing where it runs the
// CUTLASS path instead: pointwise, and
// - a single-pixel plane (squeeze-excitation layers), fp32 without bias: kImages (one GEMV-like
//   GEMM per image: 2.2-5.9 us against 4.2-5.8 as kRows for MobileNetV3's, batch 16, H100);
// - x and y NHWC with uniform rows, an epilogue cuBLASLt has (bias, none / relu, residual):
//   kRows (every dtype; 0.98-1.00x cuDNN on most layers);
// - x and y NCHW planes of at least kBlasMinImagePlane pixels, or smaller planes with a small
//   weight (forms.h blas_images_plane): kImages, with no bias and
//   cuBLASLt's none / relu, or in fp32 any epilogue as a pass after the GEMM (the CUTLASS
//   alternative for fp32 converts x and y to NHWC: 0.32-0.86x torch's conv + bias + act on
//   ResNet-50's fused 1x1 blocks).
std::optional<BlasPlan> blas_gemm_of(const ConvProblem& p, IgemmDtype d,
                                     const std::array<int64_t, 4>& xs,
                                     const std::array<int64_t, 4>& ys, int64_t w_ld,
                                     bool has_bias, bool has_residual) {
  if (!gemm_enabled() || !blas_enabled() || !pointwise(p)) return std::nullopt;
  BlasPlan plan;
  conv::BlasGemm& g = plan.g;
  g.dtype = blas_dtype(p, d);
  g.act = p.act;
  g.has_bias = has_bias;
  g.has_residual = has_residual;
  const int64_t HW = p.H * p.W;
  const int64_t x_rows = pixel_rows_ld(p.N, p.C, p.H, p.W, xs);
  const int64_t y_rows = pixel_rows_ld(p.N, p.O, p.H, p.W, ys);
  const int64_t x_plane = plane_ld(p.C, p.H, p.W, xs);
  const int64_t y_plane = plane_ld(p.O, p.H, p.W, ys);
  const bool rows_fit = x_rows > 0 && y_rows > 0;
  // An activation cuBLASLt lacks: after the GEMM as a pass (rows_act_pass below), else the CUTLASS
  // GEMM with the activation in its epilogue.
  const bool act_pass = rows_fit && !conv::blas_act_supported(p.act) && rows_act_pass(p, d);
  const bool rows_ok = rows_fit && (conv::blas_act_supported(p.act) || act_pass);
  // kImages: the bias would be per column there, which cuBLASLt's epilogue does not have, and
  // cuBLASLt 13 offered no algorithm for the same GEMM in row order (CUBLASLT_ORDER_ROW, where
  // the bias is per row) for fp32 or bf16 on an H100 (benchmarks/blas_paths.py): an NCHW 1x1
  // layer with a bias runs the pass in fp32 and the CUTLASS path in 16-bit types.
  bool pass = false;
  const bool images_ok = x_plane > 0 && y_plane > 0 && images_epilogue_ok(p, d, has_bias, pass);
  const bool images = images_ok && (HW == 1 ? d == IgemmDtype::kTf32 && !has_bias && !pass
                                            : !rows_ok && blas_images_plane(
                                                  HW, p.C, p.O, d == IgemmDtype::kTf32));
  if (!images) {
    if (!rows_ok) return std::nullopt;
    if (act_pass) {
      plan.act_pass = true;
      g.act = 0;
    }
    g.trans_a = true;
    g.a = {p.C, p.O, w_ld, 0};
    g.b = {p.C, p.N * HW, x_rows, 0};
    g.d = {p.O, p.N * HW, y_rows, 0};
    return plan;
  }
  if (pass) {
    plan.epilogue_pass = true;
    g.act = 0;
    g.has_bias = false;
    g.has_residual = false;
  }
  g.trans_a = false;
  g.batch = p.N;
  const int64_t x_batch = p.N > 1 ? xs[0] : p.C * x_plane;
  const int64_t y_batch = p.N > 1 ? ys[0] : p.O * y_plane;
  g.a = {HW, p.C, x_plane, x_batch};
  g.b = {p.C, p.O, w_ld, 0};
  g.d = {HW, p.O, y_plane, y_batch};
  return plan;
}

// A 1x1 layer with a stride and no padding whose stride-1 form over the sampled pixels takes a
// GEMM form (run4: cuBLASLt, or the CUTLASS GEMM when C is aligned and the GEMM is not tiny).
// Only NCHW activations: over channels_last the conv kernel reads the sampled pixels in place and
// the copy lost (0.59x against 0.82x in fp32, H100).
// - Output planes that take the batched cuBLASLt form: an NCHW copy of the sampled pixels; on an
//   H100 (ResNet-50's shortcuts, batch 16) 1.2-2.0x cuDNN, where the conv kernel ran 0.62-0.82x.
// - Smaller output planes (ResNet-50's 1024 -> 2048 into 7x7): the sampled pixels straight to a
//   packed NHWC copy (to_nhwc's gather), then the 7x7 1x1 forms (kSampledNhwcMaxPlane). An NCHW
//   copy then its conversion measured 0.82-0.92x cuDNN on an H100. On an H200, with bias,
//   residual and ReLU (fp32 / bf16, warm L2, benchmarks/profile_pointwise7.py --strided): the
//   whole input converted and the conv kernel 46.1 / 31.2 us, the gather and cuBLASLt 38.7 /
//   25.0, torch's sequence 43.4 / 32.6.
// GPUKERN_IGEMM_SAMPLED=0 in the environment keeps the small planes off this form (benchmarks;
// read on every call).
constexpr int64_t kSampledNhwcMaxPlane = 64;

bool strided_pointwise(const ConvProblem& p) {
  if (!(gemm_enabled() && blas_enabled() && p.KH == 1 && p.KW == 1 && p.pad_h == 0 &&
        p.pad_w == 0 && (p.stride_h > 1 || p.stride_w > 1) && p.C % channel_align(p) == 0 &&
        plane_ld(p.C, p.H, p.W, {p.x_sn, p.x_sc, p.x_sh, p.x_sw}) > 0)) {
    return false;
  }
  const int64_t out_plane = p.OH * p.OW;
  return out_plane >= kBlasMinImagePlane ||
         (out_plane <= kSampledNhwcMaxPlane && env_switch("GPUKERN_IGEMM_SAMPLED") != 0);
}

// x4's sampled pixels x4[:, :, ::stride_h, ::stride_w] ([N, C, OH, OW]) as a new tensor: NCHW
// (x4's format) where the output planes take the batched cuBLASLt form, else packed NHWC
// (strided_pointwise).
at::Tensor subsampled(const ConvProblem& p, const at::Tensor& x4) {
  const at::Tensor v = x4.slice(2, 0, p.H, p.stride_h).slice(3, 0, p.W, p.stride_w);
  if (p.OH * p.OW < kBlasMinImagePlane) return to_nhwc(v, 1);
  return v.contiguous(x4.suggest_memory_format());
}

// p over the sampled pixels: stride 1, H x W = OH x OW, x's pointer and strides xs's.
ConvProblem subsampled_problem(const ConvProblem& p, const at::Tensor& xs) {
  ConvProblem q = p;
  q.H = p.OH;
  q.W = p.OW;
  q.stride_h = q.stride_w = 1;
  q.dil_h = q.dil_w = 1;
  q.x = xs.const_data_ptr();
  q.x_sn = xs.stride(0);
  q.x_sc = xs.stride(1);
  q.x_sh = xs.stride(2);
  q.x_sw = xs.stride(3);
  return q;
}

// The epilogue pass after a plain cuBLASLt GEMM (BlasPlan::epilogue_pass): y =
// act(y + bias + residual) in place, over y4's strides.
static void blas_epilogue_pass(const ConvProblem& p, const at::Tensor& bias,
                               const at::Tensor& residual, const at::Tensor& y4,
                               cudaStream_t stream) {
  ConvProblem q;
  q.N = y4.size(0);
  q.O = y4.size(1);
  q.OH = y4.size(2);
  q.OW = y4.size(3);
  q.y = y4.data_ptr();
  q.y_sn = y4.stride(0);
  q.y_so = y4.stride(1);
  q.y_sh = y4.stride(2);
  q.y_sw = y4.stride(3);
  q.act = p.act;
  if (bias.defined()) {
    q.b = bias.const_data_ptr();
    q.b_s = bias.stride(0);
  }
  if (residual.defined()) {
    q.r = residual.const_data_ptr();
    q.r_sn = residual.stride(0);
    q.r_so = residual.stride(1);
    q.r_sh = residual.stride(2);
    q.r_sw = residual.stride(3);
  }
  switch (y4.scalar_type()) {
    case at::kFloat: q.elem_size = 4; return conv_epilogue_run<float>(q, stream, true);
    case at::kHalf: q.elem_size = 2; return conv_epilogue_run<__half>(q, stream, true);
    case at::kBFloat16: q.elem_size = 2; return conv_epilogue_run<__nv_bfloat16>(q, stream, true);
    default:
      TORCH_INTERNAL_ASSERT(false, "gpukern::conv: igemm epilogue pass on ", y4.scalar_type());
  }
}

// Runs a BlasPlan: the GEMM (with cuBLASLt's epilogue, or plain and then the pass). False when
// cuBLASLt has no algorithm (nothing launched). a / b: the GEMM's A and B operands.
bool run_blas_plan(const ConvProblem& p, const BlasPlan& plan, const void* a, const void* b,
                   const at::Tensor& bias, const std::optional<at::Tensor>& residual,
                   const at::Tensor& y4) {
  const at::Tensor rc = plan.epilogue_pass
                            ? (residual.has_value() && residual->defined() ? *residual
                                                                           : at::Tensor())
                            : prepared_residual(residual, y4);
  conv::BlasPointers ptrs;
  ptrs.a = a;
  ptrs.b = b;
  ptrs.bias = !plan.epilogue_pass && bias.defined() ? bias.const_data_ptr() : nullptr;
  ptrs.residual = !plan.epilogue_pass && rc.defined() ? rc.const_data_ptr() : nullptr;
  ptrs.d = y4.data_ptr();
  conv::BlasGemm g = plan.g;
  g.device = y4.device().index();
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream(g.device).stream();
  if (!conv::blas_gemm_run(g, ptrs, stream)) return false;
  if (plan.epilogue_pass) blas_epilogue_pass(p, bias, rc, y4, stream);
  if (plan.act_pass) blas_epilogue_pass(p, at::Tensor(), at::Tensor(), y4, stream);
  return true;
}

// conv1d over NCL activations with a filter of a few taps per stride step (wav2vec2's feature
// extractor: 512 -> 512 with K = 3 or 2 at stride 2, and its 1 -> 512 K = 10 stride-5 stem):
// the columns written once (im2col_cols: [N, C * K, Lp], K / stride x the input), then one
// cuBLASLt GEMM per image, batched, with no transpose: D_n (L x O) = X_n (L x CK) * W (CK x O),
// y's NCL planes written in place. The CUTLASS conv kernel runs these as H = 1 convolutions over
// NHWC with a conversion each way (0.53-0.80x cuDNN on an H100).
constexpr int64_t kColsMaxExpansion = 4;  // K <= 4 * stride: im2col writes <= 4x the input
constexpr int64_t kColsMaxBytes = int64_t{1} << 31;

// A misaligned y takes the temporary from this many GEMM K (C * KW, padded) up: below it the
// GEMM is bound by its output writes, which the temporary would double (wav2vec2's 1 -> 512
// K = 10 stem: 57 us writing y directly, cuDNN 80).
constexpr int64_t kColsTempMinK = 64;

std::optional<BlasPlan> cols_gemm_of(const ConvProblem& p, IgemmDtype d,
                                     const std::array<int64_t, 4>& ys, bool y_ptr_aligned,
                                     bool has_bias, bool has_residual) {
  if (!gemm_enabled() || !blas_enabled() || p.H != 1 || p.KH != 1 || p.OH != 1 || p.KW < 2 ||
      p.KW > kColsMaxExpansion * p.stride_w || !im2col_cols_fits(p)) {
    return std::nullopt;
  }
  const int64_t K = im2col_cols_k(p);  // C * KW rounded up to 16 bytes (zero rows and taps)
  const int64_t Lp = im2col_cols_ld(p);
  if (static_cast<double>(p.N) * K * Lp * p.elem_size > static_cast<double>(kColsMaxBytes)) {
    return std::nullopt;
  }
  const int64_t y_plane = plane_ld(p.O, p.OH, p.OW, ys);
  bool pass = false;
  if (y_plane == 0 || !images_epilogue_ok(p, d, has_bias, pass)) return std::nullopt;
  const int64_t y_batch = p.N > 1 ? ys[0] : p.O * y_plane;
  const int64_t vec = 16 / p.elem_size;
  const bool temp = (p.OW % vec != 0 || y_plane % vec != 0 || y_batch % vec != 0 ||
                     !y_ptr_aligned) &&
                    K >= kColsTempMinK;
  // The temporary takes the plain product: an epilogue then runs as the pass (fp32) or not here.
  if (temp && !pass && (p.act != 0 || has_residual)) return std::nullopt;
  BlasPlan plan;
  plan.epilogue_pass = pass;
  plan.temp_out = temp;
  conv::BlasGemm& g = plan.g;
  g.dtype = blas_dtype(p, d);
  g.act = pass ? 0 : p.act;
  g.has_bias = false;
  g.has_residual = !pass && has_residual;
  g.trans_a = false;
  g.batch = p.N;
  const int64_t L = p.OW;
  // With the temporary the GEMM runs Lp rows (the columns' zero padding): an M that is not a
  // multiple of 16 bytes got cuBLASLt's sm75 kernels on an H100 (400 us for wav2vec2's
  // 512 -> 512 K = 3 layer, L = 6399, against 61 us for cuDNN's sm90 implicit GEMM).
  const int64_t M = temp ? Lp : L;
  g.a = {M, K, Lp, K * Lp};
  g.b = {K, p.O, K, 0};  // the filter as [O, K] rows (filter_rows)
  g.d = temp ? conv::BlasOperand{M, p.O, Lp, p.O * Lp}
             : conv::BlasOperand{M, p.O, y_plane, y_batch};
  return plan;
}

// Residual: read through the output's layout (the epilogue's C has D's strides): in place when
// its strides are those of d, else copied once into that layout.
at::Tensor prepared_residual(const std::optional<at::Tensor>& residual, const at::Tensor& d) {
  if (!residual.has_value() || !residual->defined()) return {};
  const at::Tensor& r = *residual;
  if (r.strides() == d.strides() &&
      reinterpret_cast<uintptr_t>(r.const_data_ptr()) % kTmaBytes == 0) {
    return r;
  }
  // Into a packed channels_last d from NCHW planes: gpukern's transpose (conv/layout.h), where
  // aten's copy_ took 2.2 us for MobileNetV3's bf16 16x160x7x7 residual on an H200 (the whole
  // fused block 12-14 us).
  if (d.dim() == 4 && d.is_contiguous(at::MemoryFormat::ChannelsLast) &&
      r.scalar_type() == d.scalar_type() && r.is_contiguous()) {
    at::Tensor t = to_nhwc(r, 1);
    if (t.strides() == d.strides()) return t;
  }
  return at::empty_strided(d.sizes(), d.strides(), d.options()).copy_(r);
}

bool run_cols_gemm(const ConvProblem& p, IgemmDtype d, const at::Tensor& x4, const at::Tensor& w4,
                   const at::Tensor& bias, const std::optional<at::Tensor>& residual,
                   const at::Tensor& y4) {
  if (const auto plan = cols_gemm_of(p, d, strides4(y4),
                                     reinterpret_cast<uintptr_t>(y4.data_ptr()) % kTmaBytes == 0,
                                     bias.defined(),
                                     residual.has_value() && residual->defined())) {
    const at::Tensor w2 = filter_rows(w4, 16 / p.elem_size);
    const at::Tensor xcol = im2col_cols(p, x4);
    if (!plan->temp_out) {
      if (run_blas_plan(p, *plan, xcol.const_data_ptr(), w2.const_data_ptr(), bias, residual,
                        y4)) {
        return true;
      }
    } else {
      // The plain product into an aligned temporary, copied into y, then the pass if any.
      BlasPlan gp = *plan;  // g.d: the temporary's planes (cols_gemm_of)
      gp.epilogue_pass = false;
      gp.g.act = 0;
      gp.g.has_residual = false;
      const int64_t Lp = im2col_cols_ld(p);
      const at::Tensor yt = at::empty({p.N, p.O, 1, Lp}, y4.options());
      if (run_blas_plan(p, gp, xcol.const_data_ptr(), w2.const_data_ptr(), at::Tensor(),
                        std::nullopt, yt)) {
        y4.copy_(yt.narrow(3, 0, p.OW));
        if (plan->epilogue_pass) {
          const at::Tensor rc = residual.has_value() && residual->defined() ? *residual
                                                                            : at::Tensor();
          blas_epilogue_pass(p, bias, rc, y4,
                             at::cuda::getCurrentCUDAStream(y4.device().index()).stream());
        }
        return true;
      }
    }
  }
  return false;
}

}  // namespace igemm_forms
}  // namespace gpukern

#endif
