#include "conv/args.h"

#include <algorithm>
#include <string>
#include <vector>

#include "core/algo_table.h"
#include "core/checks.h"
#include "device/activation.cuh"

namespace gpukern {
namespace {

// One entry per spatial dim: a single value applies to every dim, as in torch.
// "stride must have 1 value, got 2" (conv1d), "stride must have 1 or 2 values, got 3" (conv2d).
void expand_list(const char* op, const char* name, at::IntArrayRef values, int nsp,
                 int64_t* dst) {
  GK_CHECK(values.size() == 1 || static_cast<int>(values.size()) == nsp, op, name,
           nsp == 1 ? " must have 1 value, got " : " must have 1 or 2 values, got ",
           values.size());
  for (int i = 0; i < nsp; ++i) dst[i] = values.size() == 1 ? values[0] : values[i];
}

ConvArgs check_tensors(const char* op, int nsp, const at::Tensor& input,
                       const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                       at::IntArrayRef stride, at::IntArrayRef dilation, int64_t groups) {
  ConvArgs a;
  a.nsp = nsp;
  check_defined(op, input, "input");
  check_defined(op, weight, "weight");
  check_dim_in(op, input, "input", nsp + 1, nsp + 2);
  GK_CHECK(weight.dim() == nsp + 2, op, "expected weight with ", nsp + 2,
           " dimensions [out_channels, in_channels / groups, kernel size...], got weight of "
           "shape ", weight.sizes());
  check_same_device(op, input, "input", weight, "weight");
  check_same_dtype(op, input, "input", weight, "weight");
  check_floating(op, input, "input");
  GK_CHECK(groups > 0, op, "groups must be positive, got ", groups);

  a.batched = input.dim() == nsp + 2;
  const int off = a.batched ? 1 : 0;
  a.N = a.batched ? input.size(0) : 1;
  a.C = input.size(off);
  a.O = weight.size(0);
  a.groups = groups;
  for (int i = 0; i < nsp; ++i) {
    a.in[i] = input.size(off + 1 + i);
    a.k[i] = weight.size(2 + i);
    GK_CHECK(a.k[i] > 0, op, "kernel size must be positive, got weight of shape ",
             weight.sizes());
  }
  GK_CHECK(a.C % groups == 0, op, "groups=", groups, " must divide the input channels, got ",
           a.C, " input channels");
  GK_CHECK(a.O % groups == 0, op, "groups=", groups, " must divide the output channels, got ",
           a.O, " output channels (weight of shape ", weight.sizes(), ")");
  // As aten: a weight with no output channels is an error (O % groups == 0 already holds).
  GK_CHECK(a.O >= groups, op, "expected weight with at least groups=", groups,
           " output channels (weight.size(0)), got weight of shape ", weight.sizes());
  GK_CHECK(weight.size(1) * groups == a.C, op, "expected weight.size(1) * groups == ",
           "input channels, got weight of shape ", weight.sizes(), ", groups=", groups,
           " and ", a.C, " input channels");
  if (bias.has_value() && bias->defined()) {
    check_same_device(op, input, "input", *bias, "bias");
    check_same_dtype(op, input, "input", *bias, "bias");
    GK_CHECK(bias->dim() == 1 && bias->size(0) == a.O, op, "expected bias of shape [", a.O,
             "], got bias of shape ", bias->sizes());
  }
  // As aten: an empty input is fine only through a zero batch or zero channels (the output is
  // then empty too); a zero-size spatial dim of a non-empty batch is an error even with padding.
  bool empty_spatial = false;
  for (int i = 0; i < nsp; ++i) empty_spatial = empty_spatial || a.in[i] == 0;
  GK_CHECK(!empty_spatial || a.N == 0 || a.C == 0, op,
           "expected an input with non-zero spatial sizes (only a zero batch or zero channels "
           "may make it empty), got input of shape ", input.sizes());
  expand_list(op, "stride", stride, nsp, a.stride);
  expand_list(op, "dilation", dilation, nsp, a.dilation);
  for (int i = 0; i < nsp; ++i) {
    GK_CHECK(a.stride[i] > 0, op, "stride must be positive, got ", stride);
    GK_CHECK(a.dilation[i] > 0, op, "dilation must be positive, got ", dilation);
  }
  return a;
}

void finish_output_sizes(const char* op, ConvArgs& a) {
  for (int i = 0; i < a.nsp; ++i) {
    const int64_t padded = a.in[i] + a.pad_lo[i] + a.pad_hi[i];
    const int64_t span = a.dilation[i] * (a.k[i] - 1) + 1;
    GK_CHECK(span <= padded, op, "the (dilated) kernel size ", span,
             " is larger than the padded input size ", padded, " in spatial dim ", i,
             "; expected dilation * (kernel size - 1) + 1 <= input size + padding");
    a.out[i] = (padded - span) / a.stride[i] + 1;
  }
}

}  // namespace

ConvArgs conv_args(const char* op, int nsp, const at::Tensor& input, const at::Tensor& weight,
                   const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                   at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
  ConvArgs a = check_tensors(op, nsp, input, weight, bias, stride, dilation, groups);
  expand_list(op, "padding", padding, nsp, a.pad_lo);
  for (int i = 0; i < nsp; ++i) {
    GK_CHECK(a.pad_lo[i] >= 0, op, "padding must be non-negative, got ", padding);
    a.pad_hi[i] = a.pad_lo[i];
  }
  finish_output_sizes(op, a);
  return a;
}

ConvArgs conv_args(const char* op, int nsp, const at::Tensor& input, const at::Tensor& weight,
                   const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                   std::string_view padding, at::IntArrayRef dilation, int64_t groups) {
  ConvArgs a = check_tensors(op, nsp, input, weight, bias, stride, dilation, groups);
  if (padding == "valid") {
    // no padding: pad_lo/pad_hi stay 0
  } else if (padding == "same") {
    for (int i = 0; i < nsp; ++i) {
      GK_CHECK(a.stride[i] == 1, op, "padding='same' is not supported for strided ",
               "convolutions, got stride ", stride);
      const int64_t total = a.dilation[i] * (a.k[i] - 1);
      a.pad_lo[i] = total / 2;
      a.pad_hi[i] = total - a.pad_lo[i];
    }
  } else {
    GK_CHECK(false, op, "padding must be 'same' or 'valid', got '", std::string(padding), "'");
  }
  finish_output_sizes(op, a);
  return a;
}

std::vector<int64_t> conv_output_shape(const ConvArgs& a) {
  std::vector<int64_t> shape;
  if (a.batched) shape.push_back(a.N);
  // As aten: an input with zero channels gives zero output channels (not O channels of bias).
  shape.push_back(a.C == 0 ? 0 : a.O);
  for (int i = 0; i < a.nsp; ++i) shape.push_back(a.out[i]);
  return shape;
}

at::Tensor conv_output(const ConvArgs& a, const at::Tensor& input, const at::Tensor& weight) {
  std::vector<int64_t> shape = conv_output_shape(a);
  // As aten: an empty input (zero batch or channels) gives a contiguous output.
  auto opts = input.options();
  // As aten, which runs an unbatched call on input.unsqueeze(0) and squeezes the result: the
  // rule reads the batched view, and an unbatched channels_last output is the [1, O, OH, OW]
  // channels_last tensor without its batch dim (strides [1, OW * O, O]).
  if (a.nsp == 2 && a.N > 0 && a.C > 0 &&
      (conv_batched_input(a, input).suggest_memory_format() == at::MemoryFormat::ChannelsLast ||
       weight.suggest_memory_format() == at::MemoryFormat::ChannelsLast)) {
    if (!a.batched) shape.insert(shape.begin(), 1);
    at::Tensor out = at::empty(shape, opts.memory_format(at::MemoryFormat::ChannelsLast));
    return a.batched ? out : out.squeeze(0);
  }
  return at::empty(shape, opts);
}

at::Tensor conv_batched_input(const ConvArgs& a, const at::Tensor& input) {
  return a.batched ? input : input.unsqueeze(0);
}

at::Tensor conv_batched_output(const ConvArgs& a, const at::Tensor& output) {
  if (a.batched) return output;
  // The batch dim's stride as a fresh batched output of N = 1 has it (numel), whatever the
  // layout: the kernels see the same problem as for the batched call.
  std::vector<int64_t> sizes{1}, strides{std::max<int64_t>(output.numel(), 1)};
  for (int64_t d = 0; d < output.dim(); ++d) {
    sizes.push_back(output.size(d));
    strides.push_back(output.stride(d));
  }
  return output.as_strided(sizes, strides);
}

namespace {

// The filter taps of one spatial dim that can meet the image, [k0, k1): tap k reads input
// index o * stride - pad + k for outputs o < out, so below pad - (out - 1) * stride and from
// pad + in on it only ever reads the zero padding. Whether cutting the taps outside leaves a
// problem the symmetric formula still gives `out` for (pad - k0 before, the rest implied).
bool live_taps(int64_t in, int64_t k, int64_t out, int64_t stride, int64_t pad, int64_t& k0,
               int64_t& k1) {
  k0 = std::max<int64_t>(0, pad - (out - 1) * stride);
  k1 = std::min<int64_t>(k, pad + in);
  if (k1 <= k0 || (k0 == 0 && k1 == k)) return false;
  const int64_t pad2 = pad - k0, k2 = k1 - k0;
  return (in + 2 * pad2 - k2) / stride + 1 == out;
}

// Depthwise filters wider than the padded plane lets them be (a 'same' 31-tap filter over a
// 4x4 plane: 7 of its 31 rows and columns can meet the image; over a 1x1 plane only the centre
// tap): the problem is cut to the taps that can, a view of the same weights with the padding
// reduced by what was cut on its near side. The output is the same (the cut taps multiplied
// zeros); the algorithms see the smaller filter (benchmarks/dw_sweep.py: at 1x1 to 7x7 planes
// cuDNN's time stayed flat while every kernel here walked all the taps, down to 0.02x).
// Not while an algorithm is forced by name (core/algo_table.h): the tests that force each kernel
// on tiny planes check its own handling of the full filter.
void cut_dead_taps(ConvProblem& p) {
  if (!p.depthwise1() || p.dil_h != 1 || p.dil_w != 1) return;
  if (!forced_algorithm(p.nsp == 1 ? "conv1d" : "conv2d").empty()) return;
  int64_t h0 = 0, h1 = p.KH, w0 = 0, w1 = p.KW;
  const bool cut_h = live_taps(p.H, p.KH, p.OH, p.stride_h, p.pad_h, h0, h1);
  const bool cut_w = live_taps(p.W, p.KW, p.OW, p.stride_w, p.pad_w, w0, w1);
  if (!cut_h && !cut_w) return;
  if (!cut_h) h0 = 0, h1 = p.KH;
  if (!cut_w) w0 = 0, w1 = p.KW;
  if (p.w != nullptr) {  // meta tensors (the algorithm query) have none
    p.w = static_cast<const char*>(p.w) + (h0 * p.w_sh + w0 * p.w_sw) * p.elem_size;
  }
  p.w_tensor = nullptr;  // p.w is no longer the tensor's first element
  p.cut_h0 = h0;
  p.cut_w0 = w0;
  p.full_kh = p.KH;
  p.full_kw = p.KW;
  p.pad_h -= h0;
  p.pad_w -= w0;
  p.KH = h1 - h0;
  p.KW = w1 - w0;
}

}  // namespace

ConvProblem make_conv_problem(const ConvArgs& a, const at::Tensor& x, const at::Tensor& w,
                              const std::optional<at::Tensor>& bias, const at::Tensor& y) {
  ConvProblem p;
  p.nsp = a.nsp;
  p.N = a.N;
  p.C = a.C;
  p.O = a.O;
  p.groups = a.groups;
  p.c_per_group = a.c_per_group();
  p.o_per_group = a.o_per_group();
  // The last spatial dim is W (a 1-D call's length); a 2-D call's first is H.
  const int wd = a.nsp - 1;
  p.W = a.in[wd];
  p.KW = a.k[wd];
  p.OW = a.out[wd];
  p.stride_w = a.stride[wd];
  p.dil_w = a.dilation[wd];
  p.pad_w = a.pad_lo[wd];
  p.x_sn = x.stride(0);
  p.x_sc = x.stride(1);
  p.x_sw = x.stride(x.dim() - 1);
  p.w_tensor = &w;
  p.w_so = w.stride(0);
  p.w_sc = w.stride(1);
  p.w_sw = w.stride(w.dim() - 1);
  p.y_sn = y.stride(0);
  p.y_so = y.stride(1);
  p.y_sw = y.stride(y.dim() - 1);
  if (a.nsp == 2) {
    p.H = a.in[0];
    p.KH = a.k[0];
    p.OH = a.out[0];
    p.stride_h = a.stride[0];
    p.dil_h = a.dilation[0];
    p.pad_h = a.pad_lo[0];
    p.x_sh = x.stride(2);
    p.w_sh = w.stride(2);
    p.y_sh = y.stride(2);
  } else {
    // H = 1: the row strides are never stepped; the row's extent keeps them well defined.
    p.x_sh = x.size(2) * p.x_sw;
    p.w_sh = w.size(2) * p.w_sw;
    p.y_sh = y.size(2) * p.y_sw;
  }
  const bool has_bias = bias.has_value() && bias->defined();
  p.b_s = has_bias ? bias->stride(0) : 0;
  p.elem_size = x.element_size();
  p.dtype = static_cast<int>(x.scalar_type());
  p.x = x.const_data_ptr();
  p.w = w.const_data_ptr();
  p.b = has_bias ? bias->const_data_ptr() : nullptr;
  p.y = y.data_ptr();
  cut_dead_taps(p);
  return p;
}

// The activation names of the fused ops, indexed by ActKind code (device/activation.cuh).
namespace {
constexpr const char* kActNames[kActCount] = {"none",      "relu",      "relu6",
                                              "silu",      "gelu",      "gelu_tanh",
                                              "hardswish", "sigmoid",   "hardsigmoid"};
static_assert(kActNone == 0 && kActRelu == 1 && kActRelu6 == 2 && kActSilu == 3 &&
                  kActGelu == 4 && kActGeluTanh == 5 && kActHardswish == 6 && kActSigmoid == 7 &&
                  kActHardsigmoid == 8,
              "kActNames follows the ActKind codes");
}  // namespace

int conv_activation(const char* op, std::string_view name) {
  for (int k = 0; k < kActCount; ++k) {
    if (name == kActNames[k]) return k;
  }
  std::string valid;
  for (int k = 0; k < kActCount; ++k) {
    valid += (k ? ", '" : "'");
    valid += kActNames[k];
    valid += "'";
  }
  // ValueError, as torch raises for an unknown enum-like string (F.gelu's approximate=).
  TORCH_CHECK_VALUE(false, detail::check_msg("gpukern::", op, ": activation must be one of ",
                                             valid, ", got '", name, "'"));
  return 0;
}

void check_conv_residual(const char* op, const ConvArgs& a, const at::Tensor& input,
                         const at::Tensor& residual) {
  check_same_device(op, input, "input", residual, "residual");
  check_same_dtype(op, input, "input", residual, "residual");
  const std::vector<int64_t> shape = conv_output_shape(a);
  GK_CHECK(residual.sizes() == at::IntArrayRef(shape), op,
           "expected residual of exactly the output's shape ", at::IntArrayRef(shape),
           " (it is not broadcast), got residual of shape ", residual.sizes());
}

ConvProblem make_conv_problem(const ConvArgs& a, const at::Tensor& x, const at::Tensor& w,
                              const std::optional<at::Tensor>& bias, const at::Tensor& y, int act,
                              const std::optional<at::Tensor>& residual) {
  ConvProblem p = make_conv_problem(a, x, w, bias, y);
  p.act = act;
  if (residual.has_value() && residual->defined()) {
    const at::Tensor& r = *residual;  // batched, y's shape
    p.r = r.const_data_ptr();
    p.r_sn = r.stride(0);
    p.r_so = r.stride(1);
    p.r_sw = r.stride(r.dim() - 1);
    // 1-D: H = 1, as y's row stride (never stepped).
    p.r_sh = a.nsp == 2 ? r.stride(2) : r.size(2) * p.r_sw;
  }
  return p;
}

}  // namespace gpukern
