// conv1d on the CPU: the host entries of both overloads (checks and normalisation through
// conv_args), the params builder shared with the CUDA entry, and a direct-loop kernel.
#include "conv1d/conv1d.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/checks.h"
#include "conv/args.h"
#include "core/dispatch.h"

namespace gpukern {

Conv1dParams conv1d_params(const ConvArgs& a, const at::Tensor& x3, const at::Tensor& weight,
                           const at::Tensor* bias, const at::Tensor& y3) {
  Conv1dParams p;
  p.x = x3.const_data_ptr();
  p.w = weight.const_data_ptr();
  p.b = bias != nullptr ? bias->const_data_ptr() : nullptr;
  p.y = y3.data_ptr();
  p.N = a.N;
  p.C = a.C;
  p.L = a.in[0];
  p.O = a.O;
  p.K = a.k[0];
  p.L_out = a.out[0];
  p.groups = a.groups;
  p.stride = a.stride[0];
  p.dilation = a.dilation[0];
  p.pad_lo = a.pad_lo[0];
  p.x_sn = x3.stride(0);
  p.x_sc = x3.stride(1);
  p.x_sl = x3.stride(2);
  p.w_so = weight.stride(0);
  p.w_sc = weight.stride(1);
  p.w_sk = weight.stride(2);
  p.b_s = bias != nullptr ? bias->stride(0) : 0;
  p.y_sn = y3.stride(0);
  p.y_so = y3.stride(1);
  p.y_sl = y3.stride(2);
  p.elem_size = x3.element_size();
  return p;
}

namespace {

constexpr const char* kOp = "conv1d";

// One (n, o) output row per task item. The row is accumulated tap by tap over the whole output
// length (loop order c, k, l): the innermost loop then walks x and the accumulator row with fixed
// strides and no bounds test, since the valid l range of each tap is computed up front.
template <typename scalar_t>
void conv1d_cpu_kernel(const Conv1dParams& p) {
  using acc_t = cpu_acc_t<scalar_t>;
  const auto* x = static_cast<const scalar_t*>(p.x);
  const auto* w = static_cast<const scalar_t*>(p.w);
  const auto* b = static_cast<const scalar_t*>(p.b);
  auto* y = static_cast<scalar_t*>(p.y);
  const int64_t cpg = p.c_per_group();
  const int64_t opg = p.o_per_group();
  const int64_t s = p.stride;
  // About 32K multiply-adds per task, so small rows are batched and big ones run one per task.
  const int64_t row_work = std::max<int64_t>(1, p.L_out * std::max<int64_t>(cpg, 1) * p.K);
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 15) / row_work);

  at::parallel_for(0, p.N * p.O, grain, [&](int64_t begin, int64_t end) {
    std::vector<acc_t> acc(p.L_out);
    for (int64_t r = begin; r < end; ++r) {
      const int64_t n = r / p.O;
      const int64_t o = r % p.O;
      const int64_t g = o / opg;
      const acc_t init = b != nullptr ? static_cast<acc_t>(b[o * p.b_s]) : acc_t(0);
      std::fill(acc.begin(), acc.end(), init);
      for (int64_t c = 0; c < cpg; ++c) {
        const scalar_t* xrow = x + n * p.x_sn + (g * cpg + c) * p.x_sc;
        const scalar_t* wrow = w + o * p.w_so + c * p.w_sc;
        for (int64_t k = 0; k < p.K; ++k) {
          const acc_t wk = static_cast<acc_t>(wrow[k * p.w_sk]);
          // x index of output l is l*s + off; keep it inside [0, L).
          const int64_t off = k * p.dilation - p.pad_lo;
          const int64_t lo = off >= 0 ? 0 : (-off + s - 1) / s;
          if (p.L - 1 - off < 0) continue;
          const int64_t hi = std::min(p.L_out - 1, (p.L - 1 - off) / s);
          const int64_t xs = s * p.x_sl;
          int64_t xi = (lo * s + off) * p.x_sl;
          for (int64_t l = lo; l <= hi; ++l, xi += xs) {
            acc[l] += wk * static_cast<acc_t>(xrow[xi]);
          }
        }
      }
      scalar_t* yrow = y + n * p.y_sn + o * p.y_so;
      for (int64_t l = 0; l < p.L_out; ++l) yrow[l * p.y_sl] = static_cast<scalar_t>(acc[l]);
    }
  });
}

at::Tensor conv1d_cpu_run(const ConvArgs& a, const at::Tensor& input, const at::Tensor& weight,
                          const std::optional<at::Tensor>& bias) {
  at::Tensor out = conv_output(a, input, weight);
  if (out.numel() == 0) return out;
  const at::Tensor x3 = conv_batched_input(a, input);
  const at::Tensor y3 = conv_batched_output(a, out);
  const at::Tensor* b = bias.has_value() && bias->defined() ? &*bias : nullptr;
  const Conv1dParams p = conv1d_params(a, x3, weight, b, y3);
  GK_DISPATCH_FLOAT_CPU(input.scalar_type(), kOp, [&] { conv1d_cpu_kernel<scalar_t>(p); });
  return out;
}

struct Conv1dCpu {
  static constexpr const char* kName = kOp;
  static constexpr int kDims = 1;
  static constexpr auto run = &conv1d_cpu_run;
};

}  // namespace

void conv1d_cpu_launch(const Conv1dParams& p, c10::ScalarType st) {
  GK_DISPATCH_FLOAT_CPU(st, kOp, [&] { conv1d_cpu_kernel<scalar_t>(p); });
}

namespace {

// gpukern::_algorithm_conv1d: the CUDA algorithm a call with these arguments would run (see
// core/algo_table.h). Only sizes, strides and dtype are read; meta tensors work.
std::string conv1d_algorithm_run(const ConvArgs& a, const at::Tensor& input,
                                 const at::Tensor& weight) {
#ifdef GPUKERN_WITH_CUDA
  return conv_algorithm_query(a, input, weight, [&](const at::Tensor& x3, const at::Tensor& w,
                                                    const at::Tensor& y3) {
    return conv1d_cuda_algorithm(conv1d_params(a, x3, w, nullptr, y3));
  });
#else
  (void)a, (void)input, (void)weight;
  return "cpu (built without CUDA kernels)";
#endif
}

struct Conv1dQuery {
  static constexpr const char* kName = kOp;
  static constexpr int kDims = 1;
  static constexpr auto query = &conv1d_algorithm_run;
};

}  // namespace
}  // namespace gpukern

TORCH_LIBRARY_IMPL(gpukern, CompositeExplicitAutograd, m) {
  m.impl("_algorithm_conv1d", &gpukern::ConvSchemas<gpukern::Conv1dQuery>::query_ints);
  m.impl("_algorithm_conv1d.padding", &gpukern::ConvSchemas<gpukern::Conv1dQuery>::query_str);
}

TORCH_LIBRARY_IMPL(gpukern, CPU, m) {
  m.impl("conv1d", &gpukern::ConvSchemas<gpukern::Conv1dCpu>::ints);
  m.impl("conv1d.padding", &gpukern::ConvSchemas<gpukern::Conv1dCpu>::str);
}
