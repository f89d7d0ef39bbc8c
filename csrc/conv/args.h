#pragma once
// Argument checks and normalisation shared by conv1d and conv2d (CPU and CUDA). The result is a
// plain struct of int64 sizes that the algorithm choice and the kernels' params are built from.
#include <ATen/ATen.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "conv/problem.h"

namespace gpukern {

struct ConvArgs {
  static constexpr int kMaxSpatial = 2;
  int nsp = 1;           // spatial dims: 1 (conv1d) or 2 (conv2d)
  bool batched = true;   // false: the input had no batch dim, the output drops it again
  int64_t N = 1, C = 1, O = 1, groups = 1;
  int64_t in[kMaxSpatial] = {1, 1};      // input spatial sizes (H, W) / (L)
  int64_t k[kMaxSpatial] = {1, 1};       // filter sizes
  int64_t out[kMaxSpatial] = {1, 1};     // output spatial sizes
  int64_t stride[kMaxSpatial] = {1, 1};
  int64_t dilation[kMaxSpatial] = {1, 1};
  int64_t pad_lo[kMaxSpatial] = {0, 0};  // zeros before the input (left / top)
  int64_t pad_hi[kMaxSpatial] = {0, 0};  // zeros after it ('same' puts the odd one here)

  int64_t c_per_group() const { return C / groups; }
  int64_t o_per_group() const { return O / groups; }
  bool depthwise() const { return groups == C && C > 1; }
};

// Explicit integer padding (symmetric), as F.convNd(..., padding=int or tuple).
ConvArgs conv_args(const char* op, int nsp, const at::Tensor& input, const at::Tensor& weight,
                   const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                   at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups);

// String padding "same" / "valid", as F.convNd(..., padding="same").
ConvArgs conv_args(const char* op, int nsp, const at::Tensor& input, const at::Tensor& weight,
                   const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                   std::string_view padding, at::IntArrayRef dilation, int64_t groups);

// The output shape of args: [N, O, out...] (without N when the input was unbatched; [N, 0, out...]
// when the input has zero channels, as aten).
std::vector<int64_t> conv_output_shape(const ConvArgs& args);

// The output tensor for args on input's device and dtype: [N, O, out...] (without N when the input
// was unbatched; [N, 0, out...] when the input has zero channels, as aten). For 2-D with a
// non-empty input, channels_last when the input or the weight is channels_last (torch's rule for
// convolution outputs); an empty input gives a contiguous output, as aten.
at::Tensor conv_output(const ConvArgs& args, const at::Tensor& input, const at::Tensor& weight);

// The problem of normalised args over the batched input x and output y (conv_batched_input /
// conv_batched_output) and the weight; bias may be absent. 1-D calls become H = 1 problems.
ConvProblem make_conv_problem(const ConvArgs& args, const at::Tensor& x, const at::Tensor& weight,
                              const std::optional<at::Tensor>& bias, const at::Tensor& y);

// The fused ops (conv{1,2}d_fused): y = act(conv(x, w) + bias [+ residual]).
// The ActKind code (device/activation.cuh) of an activation name: "none", "relu", "relu6", "silu",
// "gelu", "gelu_tanh", "hardswish", "sigmoid", "hardsigmoid"; another name raises ValueError
// "gpukern::<op>: activation must be one of 'none', ..., got '<name>'".
int conv_activation(const char* op, std::string_view name);
// The residual's checks (RuntimeError, as torch for mixed devices and dtypes): input's device,
// input's dtype, exactly the output's shape (not broadcast, unlike `y + r`); any strides.
void check_conv_residual(const char* op, const ConvArgs& args, const at::Tensor& input,
                         const at::Tensor& residual);
// make_conv_problem plus the epilogue: act (an ActKind code) and the batched view of the residual
// (conv_batched_output's view of a checked residual), absent for none.
ConvProblem make_conv_problem(const ConvArgs& args, const at::Tensor& x, const at::Tensor& weight,
                              const std::optional<at::Tensor>& bias, const at::Tensor& y, int act,
                              const std::optional<at::Tensor>& residual);

// A 4-D (conv2d) / 3-D (conv1d) view of input with the batch dim, whatever the caller passed.
at::Tensor conv_batched_input(const ConvArgs& args, const at::Tensor& input);
// The batched view of an output made by conv_output.
at::Tensor conv_batched_output(const ConvArgs& args, const at::Tensor& output);

// The algorithm query ops (_algorithm_conv1d/2d): meta views of input and weight (only sizes,
// strides and dtype matter, so any device works and nothing is allocated), the output of args,
// then name(batched input, weight, batched output) -> the algorithm's name; "empty" when the
// output is.
template <typename NameFn>
std::string conv_algorithm_query(const ConvArgs& args, const at::Tensor& input,
                                 const at::Tensor& weight, NameFn&& name) {
  const at::Tensor xm = at::empty_strided(input.sizes(), input.strides(),
                                          input.options().device(at::kMeta));
  const at::Tensor wm = at::empty_strided(weight.sizes(), weight.strides(),
                                          weight.options().device(at::kMeta));
  const at::Tensor out = conv_output(args, xm, wm);
  if (out.numel() == 0) return "empty";
  return name(conv_batched_input(args, xm), wm, conv_batched_output(args, out));
}

// Each convolution op has two schemas that differ only in how padding is given: conv{1,2}d (ints)
// and conv{1,2}d.padding ("same" / "valid"); likewise its algorithm query. ConvSchemas<Op> makes
// both kernels from one body. Op: kName and kDims (the op and its spatial dims) and, for what is
// registered, run(args, input, weight, bias) -> Tensor and/or query(args, input, weight) ->
// algorithm name (members are only instantiated where used).
template <typename Op>
struct ConvSchemas {
  static at::Tensor ints(const at::Tensor& input, const at::Tensor& weight,
                         const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                         at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
    return Op::run(conv_args(Op::kName, Op::kDims, input, weight, bias, stride, padding, dilation,
                             groups),
                   input, weight, bias);
  }
  static at::Tensor str(const at::Tensor& input, const at::Tensor& weight,
                        const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                        c10::string_view padding, at::IntArrayRef dilation, int64_t groups) {
    return Op::run(conv_args(Op::kName, Op::kDims, input, weight, bias, stride,
                             std::string_view(padding.data(), padding.size()), dilation, groups),
                   input, weight, bias);
  }
  static std::string query_ints(const at::Tensor& input, const at::Tensor& weight,
                                at::IntArrayRef stride, at::IntArrayRef padding,
                                at::IntArrayRef dilation, int64_t groups) {
    return Op::query(conv_args(Op::kName, Op::kDims, input, weight, std::nullopt, stride, padding,
                               dilation, groups),
                     input, weight);
  }
  static std::string query_str(const at::Tensor& input, const at::Tensor& weight,
                               at::IntArrayRef stride, c10::string_view padding,
                               at::IntArrayRef dilation, int64_t groups) {
    return Op::query(conv_args(Op::kName, Op::kDims, input, weight, std::nullopt, stride,
                               std::string_view(padding.data(), padding.size()), dilation,
                               groups),
                     input, weight);
  }
};

// ConvSchemas for the fused ops (conv{1,2}d_fused and their .padding overloads): the same two
// padding forms with the epilogue's arguments. Op: kName, kDims and run(args, input, weight,
// bias, activation, residual) -> Tensor.
template <typename Op>
struct ConvFusedSchemas {
  static at::Tensor ints(const at::Tensor& input, const at::Tensor& weight,
                         const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                         at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups,
                         c10::string_view activation, const std::optional<at::Tensor>& residual) {
    return Op::run(conv_args(Op::kName, Op::kDims, input, weight, bias, stride, padding, dilation,
                             groups),
                   input, weight, bias, std::string_view(activation.data(), activation.size()),
                   residual);
  }
  static at::Tensor str(const at::Tensor& input, const at::Tensor& weight,
                        const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                        c10::string_view padding, at::IntArrayRef dilation, int64_t groups,
                        c10::string_view activation, const std::optional<at::Tensor>& residual) {
    return Op::run(conv_args(Op::kName, Op::kDims, input, weight, bias, stride,
                             std::string_view(padding.data(), padding.size()), dilation, groups),
                   input, weight, bias, std::string_view(activation.data(), activation.size()),
                   residual);
  }
};

}  // namespace gpukern
