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

namespace gpukern {

Conv2dParams make_conv2d_params(const ConvArgs& a, const at::Tensor& x, const at::Tensor& w,
                                const std::optional<at::Tensor>& bias, const at::Tensor& y) {
  Conv2dParams p;
  p.N = a.N;
  p.C = a.C;
  p.H = a.in[0];
  p.W = a.in[1];
  p.O = a.O;
  p.KH = a.k[0];
  p.KW = a.k[1];
  p.OH = a.out[0];
  p.OW = a.out[1];
  p.groups = a.groups;
  p.c_per_group = a.c_per_group();
  p.o_per_group = a.o_per_group();
  p.stride_h = a.stride[0];
  p.stride_w = a.stride[1];
  p.dil_h = a.dilation[0];
  p.dil_w = a.dilation[1];
  p.pad_h = a.pad_lo[0];
  p.pad_w = a.pad_lo[1];
  p.x_sn = x.stride(0);
  p.x_sc = x.stride(1);
  p.x_sh = x.stride(2);
  p.x_sw = x.stride(3);
  p.w_so = w.stride(0);
  p.w_sc = w.stride(1);
  p.w_sh = w.stride(2);
  p.w_sw = w.stride(3);
  p.y_sn = y.stride(0);
  p.y_so = y.stride(1);
  p.y_sh = y.stride(2);
  p.y_sw = y.stride(3);
  p.x = x.const_data_ptr();
  p.w = w.const_data_ptr();
  const bool has_bias = bias.has_value() && bias->defined();
  p.b = has_bias ? bias->const_data_ptr() : nullptr;
  p.b_s = has_bias ? bias->stride(0) : 0;
  p.y = y.data_ptr();
  return p;
}

namespace {

constexpr const char* kOp = "conv2d";

// One (n, o) output plane per task: the plane is accumulated in a contiguous buffer of acc_t
// (bias first, then one input channel and one filter tap at a time over the whole valid output
// range, which keeps the inner loop branch-free), then written through the output's strides.
template <typename scalar_t>
void conv2d_cpu_kernel(const Conv2dParams& p) {
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
  const Conv2dParams p = make_conv2d_params(args, conv_batched_input(args, input), weight, bias,
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
    return conv2d_cuda_algorithm(make_conv2d_params(a, x4, w, std::nullopt, y4),
                                 input.element_size());
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

TORCH_LIBRARY_IMPL(gpukern, CPU, m) {
  m.impl("conv2d", &gpukern::ConvSchemas<gpukern::Conv2dCpu>::ints);
  m.impl("conv2d.padding", &gpukern::ConvSchemas<gpukern::Conv2dCpu>::str);
}
