// conv2d host side shared by CPU and CUDA (params from the normalised args), the CPU kernel and
// its registration. Argument checks and output sizes come from conv/args.
#include "conv2d/conv2d.h"

#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "core/checks.h"
#include "conv/args.h"
#include "core/dispatch.h"

#ifdef GPUKERN_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>

#include "conv/dispatch.h"
#endif

namespace gpukern {

namespace {

constexpr const char* kOp = "conv2d";

// One (n, o) output plane per task: the plane is accumulated in a contiguous buffer of acc_t
// (bias first, then one input channel and one filter tap at a time over the whole valid output
// range, which keeps the inner loop branch-free), then written through the output's strides.
template <typename scalar_t>
void conv2d_cpu_kernel(const ConvProblem& p) {
  using acc_t = cpu_acc_t<scalar_t>;
  const scalar_t* x = static_cast<const scalar_t*>(p.x);
  const scalar_t* w = static_cast<const scalar_t*>(p.w);
  const scalar_t* b = static_cast<const scalar_t*>(p.b);
  scalar_t* y = static_cast<scalar_t*>(p.y);
  const int64_t plane = p.OH * p.OW;
  // Output index range [lo, hi) whose input index o * s - pad + k * d lies in [0, n).
  auto valid_range = [](int64_t n, int64_t s, int64_t pad, int64_t off, int64_t out,
                        int64_t& lo, int64_t& hi) {
    const int64_t shift = pad - off;  // o * s >= shift  and  o * s <= n - 1 + shift
    lo = shift <= 0 ? 0 : (shift + s - 1) / s;
    const int64_t top = n - 1 + shift;
    hi = top < 0 ? 0 : std::min(out, top / s + 1);
    if (hi < lo) hi = lo;
  };
  at::parallel_for(0, p.N * p.O, 1, [&](int64_t begin, int64_t end) {
    std::vector<acc_t> acc(plane);
    for (int64_t t = begin; t < end; ++t) {
      const int64_t n = t / p.O;
      const int64_t o = t % p.O;
      const int64_t g = o / p.o_per_group;
      const acc_t b0 = b ? static_cast<acc_t>(b[o * p.b_s]) : acc_t(0);
      std::fill(acc.begin(), acc.end(), b0);
      for (int64_t cl = 0; cl < p.c_per_group; ++cl) {
        const int64_t c = g * p.c_per_group + cl;
        const scalar_t* xc = x + n * p.x_sn + c * p.x_sc;
        const scalar_t* wc = w + o * p.w_so + cl * p.w_sc;
        for (int64_t kh = 0; kh < p.KH; ++kh) {
          int64_t oh_lo, oh_hi;
          valid_range(p.H, p.stride_h, p.pad_h, kh * p.dil_h, p.OH, oh_lo, oh_hi);
          for (int64_t kw = 0; kw < p.KW; ++kw) {
            int64_t ow_lo, ow_hi;
            valid_range(p.W, p.stride_w, p.pad_w, kw * p.dil_w, p.OW, ow_lo, ow_hi);
            const acc_t wv = static_cast<acc_t>(wc[kh * p.w_sh + kw * p.w_sw]);
            for (int64_t oh = oh_lo; oh < oh_hi; ++oh) {
              const int64_t ih = oh * p.stride_h - p.pad_h + kh * p.dil_h;
              const scalar_t* xr = xc + ih * p.x_sh;
              acc_t* ar = acc.data() + oh * p.OW;
              for (int64_t ow = ow_lo; ow < ow_hi; ++ow) {
                const int64_t iw = ow * p.stride_w - p.pad_w + kw * p.dil_w;
                ar[ow] += wv * static_cast<acc_t>(xr[iw * p.x_sw]);
              }
            }
          }
        }
      }
      scalar_t* yp = y + n * p.y_sn + o * p.y_so;
      for (int64_t oh = 0; oh < p.OH; ++oh) {
        for (int64_t ow = 0; ow < p.OW; ++ow) {
          yp[oh * p.y_sh + ow * p.y_sw] = static_cast<scalar_t>(acc[oh * p.OW + ow]);
        }
      }
    }
  });
}

at::Tensor conv2d_cpu_run(const ConvArgs& args, const at::Tensor& input, const at::Tensor& weight,
                          const std::optional<at::Tensor>& bias) {
  at::Tensor out = conv_output(args, input, weight);
  if (out.numel() == 0) return out;
  const ConvProblem p = make_conv_problem(args, conv_batched_input(args, input), weight, bias,
                                          conv_batched_output(args, out));
  GK_DISPATCH_FLOAT_CPU(input.scalar_type(), kOp, [&] { conv2d_cpu_kernel<scalar_t>(p); });
  return out;
}

struct Conv2dCpu {
  static constexpr const char* kName = kOp;
  static constexpr int kDims = 2;
  static constexpr auto run = &conv2d_cpu_run;
};

// gpukern::_algorithm_conv2d: the CUDA algorithm a call with these arguments would run (see
// core/algo_table.h). Only sizes, strides and dtype are read; meta tensors work.
std::string conv2d_algorithm_run(const ConvArgs& a, const at::Tensor& input,
                                 const at::Tensor& weight) {
#ifdef GPUKERN_WITH_CUDA
  return conv_algorithm_query(a, input, weight, [&](const at::Tensor& x4, const at::Tensor& w,
                                                    const at::Tensor& y4) {
    return conv2d_cuda_algorithm(make_conv_problem(a, x4, w, std::nullopt, y4));
  });
#else
  (void)a, (void)input, (void)weight;
  return "cpu (built without CUDA kernels)";
#endif
}

struct Conv2dQuery {
  static constexpr const char* kName = kOp;
  static constexpr int kDims = 2;
  static constexpr auto query = &conv2d_algorithm_run;
};

}  // namespace
}  // namespace gpukern

TORCH_LIBRARY_IMPL(gpukern, CompositeExplicitAutograd, m) {
  m.impl("_algorithm_conv2d", &gpukern::ConvSchemas<gpukern::Conv2dQuery>::query_ints);
  m.impl("_algorithm_conv2d.padding", &gpukern::ConvSchemas<gpukern::Conv2dQuery>::query_str);
}

#ifdef GPUKERN_WITH_CUDA
// The CUDA entry, here until conv/ops.cpp takes it over.
namespace gpukern {

// conv/dispatch_2d.cu (conv/dispatch.h declares a form without the input, which cannot tell
// float16 from bfloat16).
void conv2d_cuda_run(const ConvProblem& p, const at::Tensor& x);

namespace {

at::Tensor conv2d_cuda_entry(const ConvArgs& args, const at::Tensor& input,
                             const at::Tensor& weight, const std::optional<at::Tensor>& bias) {
  GK_CHECK(input.is_cuda(), kOp, "expected a CUDA input, got one on ", input.device());
  at::Tensor out = conv_output(args, input, weight);
  if (out.numel() == 0) return out;
  const at::Tensor x = conv_batched_input(args, input);
  const ConvProblem p = make_conv_problem(args, x, weight, bias, conv_batched_output(args, out));
  const c10::cuda::CUDAGuard guard(input.device());
  conv2d_cuda_run(p, x);
  return out;
}

struct Conv2dCuda {
  static constexpr const char* kName = kOp;
  static constexpr int kDims = 2;
  static constexpr auto run = &conv2d_cuda_entry;
};

}  // namespace
}  // namespace gpukern

TORCH_LIBRARY_IMPL(gpukern, CUDA, m) {
  m.impl("conv2d", &gpukern::ConvSchemas<gpukern::Conv2dCuda>::ints);
  m.impl("conv2d.padding", &gpukern::ConvSchemas<gpukern::Conv2dCuda>::str);
}
#endif

TORCH_LIBRARY_IMPL(gpukern, CPU, m) {
  m.impl("conv2d", &gpukern::ConvSchemas<gpukern::Conv2dCpu>::ints);
  m.impl("conv2d.padding", &gpukern::ConvSchemas<gpukern::Conv2dCpu>::str);
}
