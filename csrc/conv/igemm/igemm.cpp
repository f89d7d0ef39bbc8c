// The tensor-core implicit-GEMM path's host side (conv/igemm/igemm.h): the choice of
// configuration, the NHWC views and the one-time layout conversions, the launch on the current
// stream. The kernels are in igemm_<dtype>.cu (CUTLASS, sm_90a).
#include "conv/igemm/igemm.h"

#include <ATen/ATen.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "core/checks.h"

#if defined(GPUKERN_WITH_CUDA) && defined(GPUKERN_WITH_CUTLASS)
#include <ATen/Context.h>
#include <ATen/cuda/CUDAContext.h>

#include "conv/igemm/config.h"
#define GPUKERN_IGEMM 1
#endif

namespace gpukern {

#ifdef GPUKERN_IGEMM

namespace {

using conv::IgemmBucket;
using conv::IgemmBuffers;
using conv::IgemmDtype;
using conv::IgemmKernel;
using conv::IgemmProblem;

constexpr int64_t kMaxInt = std::numeric_limits<int32_t>::max();
constexpr int64_t kTmaBytes = 16;  // TMA: base addresses and strides in 16-byte units

// SMs assumed by a query without a GPU (an H100 SXM).
constexpr int64_t kQuerySmCount = 132;

const IgemmKernel& kernel_for(IgemmDtype d, IgemmBucket b) {
  const bool small = b == IgemmBucket::kSmall;
  switch (d) {
    case IgemmDtype::kBf16: return small ? conv::kIgemmBf16Small : conv::kIgemmBf16Large;
    case IgemmDtype::kF16: return small ? conv::kIgemmF16Small : conv::kIgemmF16Large;
    case IgemmDtype::kTf32: break;
  }
  return small ? conv::kIgemmTf32Small : conv::kIgemmTf32Large;
}

int64_t sm_count() {
  if (at::cuda::device_count() == 0) return kQuerySmCount;
  return at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
}

// The shape bucket: small (64x64 tiles) when 128x128 tiles would not fill one wave of the GPU or
// O <= 64 would leave half of each 128-wide N tile empty; large otherwise. A first rule from
// tile arithmetic, not yet from measurements (benchmarks/igemm_layers.py times both). The
// environment variable GPUKERN_IGEMM_CONFIG=large|small overrides it (for benchmarks; read on
// every call).
IgemmBucket bucket_of(const ConvProblem& p) {
  if (const char* env = std::getenv("GPUKERN_IGEMM_CONFIG")) {
    if (std::strcmp(env, "large") == 0) return IgemmBucket::kLarge;
    if (std::strcmp(env, "small") == 0) return IgemmBucket::kSmall;
  }
  const int64_t m_tiles = (p.N * p.OH * p.OW + 127) / 128;
  const int64_t n_tiles = (p.O + 127) / 128;
  if (p.O <= 64 || m_tiles * n_tiles < sm_count()) return IgemmBucket::kSmall;
  return IgemmBucket::kLarge;
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

// The (sn, sh, sw) strides of a [N, C, H, W] view t when it can be read or written in place as
// NHWC (channels unit-stride, the other strides and the base 16-byte aligned, each stride at
// least the packed one, as CUTLASS's ConvProblemShape assumes); a size-1 dim's stride, never
// stepped, is replaced by the packed one. Empty when t must be copied.
std::optional<std::array<int64_t, 3>> nhwc_strides(const at::Tensor& t) {
  const int64_t align = kTmaBytes / static_cast<int64_t>(t.element_size());
  if (t.stride(1) != 1 || reinterpret_cast<uintptr_t>(t.const_data_ptr()) % kTmaBytes != 0) {
    return std::nullopt;
  }
  const int64_t sw = t.size(3) == 1 ? t.size(1) : t.stride(3);
  const int64_t sh = t.size(2) == 1 ? t.size(3) * sw : t.stride(2);
  const int64_t sn = t.size(0) == 1 ? t.size(2) * sh : t.stride(0);
  if (sw % align != 0 || sh % align != 0 || sn % align != 0) return std::nullopt;
  if (sw < t.size(1) || sh < t.size(3) * sw || sn < t.size(2) * sh) return std::nullopt;
  return std::array<int64_t, 3>{sn, sh, sw};
}

// A fresh packed channels_last tensor (from the caching allocator: aligned) like t.
at::Tensor empty_nhwc(const at::Tensor& t) {
  return at::empty(t.sizes(), t.options().memory_format(at::MemoryFormat::ChannelsLast));
}

// t itself when NHWC-usable, else one copy (not t.contiguous(ChannelsLast), which returns a
// channels_last view as it is even when its base is not 16-byte aligned).
at::Tensor as_nhwc(const at::Tensor& t) { return nhwc_strides(t) ? t : empty_nhwc(t).copy_(t); }

void run4(const ConvProblem& p, const at::Tensor& x4, const at::Tensor& w4,
          const std::optional<at::Tensor>& bias, const at::Tensor& y4) {
  IgemmProblem ip;
  IgemmDtype d{};
  GK_CHECK(x4.scalar_type() == at::kBFloat16 || x4.scalar_type() == at::kHalf ||
               x4.scalar_type() == at::kFloat,
           "conv", "igemm: unsupported dtype ", x4.scalar_type());
  GK_CHECK(make_igemm_problem(p, ip) && dtype_of(p, true, d), "conv",
           "igemm: the problem is outside the path (igemm_can_run is false)");
  if (x4.scalar_type() == at::kHalf) d = IgemmDtype::kF16;
  const IgemmKernel& k = kernel_for(d, bucket_of(p));

  // Activations: in place when NHWC-aligned, else converted once.
  const at::Tensor xc = as_nhwc(x4);
  const auto xs = *nhwc_strides(xc);
  ip.x_sn = xs[0];
  ip.x_sh = xs[1];
  ip.x_sw = xs[2];
  // Filter: OHWI (w[o, c, r, s] with c unit-stride).
  const at::Tensor wc = as_nhwc(w4);
  const auto ws = *nhwc_strides(wc);
  ip.w_so = ws[0];
  ip.w_sr = ws[1];
  ip.w_ss = ws[2];
  // Output: in place when NHWC-aligned, else a channels_last temporary copied back.
  const bool y_direct = nhwc_strides(y4).has_value();
  const at::Tensor yc = y_direct ? y4 : empty_nhwc(y4);
  const auto ys = *nhwc_strides(yc);
  ip.y_sn = ys[0];
  ip.y_sh = ys[1];
  ip.y_sw = ys[2];

  // Bias: O contiguous, 16-byte aligned elements of the dtype.
  at::Tensor bc;
  if (bias.has_value() && bias->defined()) {
    bc = *bias;
    if (bc.scalar_type() != x4.scalar_type()) bc = bc.to(x4.scalar_type());
    if (bc.stride(0) != 1 || reinterpret_cast<uintptr_t>(bc.const_data_ptr()) % kTmaBytes != 0) {
      bc = bc.clone(at::MemoryFormat::Contiguous);
    }
  }

  const int device = x4.device().index();
  ip.device = device;
  ip.sm_count = at::cuda::getDeviceProperties(device)->multiProcessorCount;
  GK_CHECK(k.can_implement(ip), "conv", "igemm: CUTLASS cannot implement this problem (",
           k.name, ")");
  IgemmBuffers b;
  b.x = xc.const_data_ptr();
  b.w = wc.const_data_ptr();
  b.bias = bc.defined() ? bc.const_data_ptr() : nullptr;
  b.y = yc.data_ptr();
  at::Tensor workspace;
  if (const size_t bytes = k.workspace_bytes(ip)) {
    workspace = at::empty({static_cast<int64_t>(bytes)}, x4.options().dtype(at::kByte));
    b.workspace = workspace.data_ptr();
  }
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream(device).stream();
  const int status = k.run(ip, b, stream);
  GK_CHECK(status == 0, "conv", "igemm: kernel ", k.name, " failed (cutlass::Status ", status,
           ")");
  if (!y_direct) y4.copy_(yc);
}

}  // namespace

bool igemm_built() { return true; }

bool igemm_can_run(const ConvProblem& p, bool tf32_allowed) {
  IgemmProblem ip;
  IgemmDtype d{};
  if (p.groups != 1 || p.N < 1 || !dtype_of(p, tf32_allowed, d)) return false;
  const int64_t align = kTmaBytes / p.elem_size;
  if (p.C % align != 0 || p.O % align != 0) return false;
  if (!make_igemm_problem(p, ip) || !device_ok()) return false;
  return kernel_for(d, bucket_of(p)).can_implement(ip);
}

bool igemm_can_run(const ConvProblem& p) {
  return igemm_can_run(p, at::globalContext().allowTF32CuDNN());
}

std::string igemm_config_name(const ConvProblem& p) {
  if (!igemm_can_run(p)) return "";
  return bucket_of(p) == IgemmBucket::kSmall ? "small_64x64" : "large_128x128";
}

void igemm_run(const ConvProblem& p, const at::Tensor& x, const at::Tensor& w,
               const std::optional<at::Tensor>& bias, const at::Tensor& y) {
  if (x.dim() == 3) {  // 1-D: [N, C, L] as [N, C, 1, L]
    return run4(p, x.unsqueeze(2), w.unsqueeze(2), bias, y.unsqueeze(2));
  }
  run4(p, x, w, bias, y);
}

void igemm_run(const ConvProblem& p, const at::Tensor& x) {
  const at::TensorOptions opts = x.options();
  auto view = [&](const void* data, at::IntArrayRef sizes, at::IntArrayRef strides) {
    return at::from_blob(const_cast<void*>(data), sizes, strides, opts);
  };
  const at::Tensor x4 = view(p.x, {p.N, p.C, p.H, p.W}, {p.x_sn, p.x_sc, p.x_sh, p.x_sw});
  const at::Tensor w4 = view(p.w, {p.O, p.C, p.KH, p.KW}, {p.w_so, p.w_sc, p.w_sh, p.w_sw});
  const at::Tensor y4 = view(p.y, {p.N, p.O, p.OH, p.OW}, {p.y_sn, p.y_so, p.y_sh, p.y_sw});
  std::optional<at::Tensor> b;
  if (p.b != nullptr) b = view(p.b, {p.O}, {p.b_s});
  run4(p, x4, w4, b, y4);
}

#else  // no igemm path in this build

bool igemm_built() { return false; }
bool igemm_can_run(const ConvProblem&, bool) { return false; }
bool igemm_can_run(const ConvProblem&) { return false; }
std::string igemm_config_name(const ConvProblem&) { return ""; }
void igemm_run(const ConvProblem&, const at::Tensor&, const at::Tensor&,
               const std::optional<at::Tensor>&, const at::Tensor&) {
  GK_CHECK(false, "conv", "igemm: this build has no igemm path (needs nvidia-cutlass and "
           "TORCH_CUDA_ARCH_LIST with 9.0a)");
}
void igemm_run(const ConvProblem&, const at::Tensor&) {
  GK_CHECK(false, "conv", "igemm: this build has no igemm path (needs nvidia-cutlass and "
           "TORCH_CUDA_ARCH_LIST with 9.0a)");
}

#endif

}  // namespace gpukern
