#pragma once
// One convolution call, normalised: the problem every conv algorithm (CPU and CUDA, 1-D and 2-D)
// reads. A 1-D convolution is the H = 1 case: H = KH = OH = 1, stride_h = dil_h = 1, pad_h = 0,
// and the length, taps and output length sit in W, KW and OW.
//
//   y[n, o, oh, ow] = bias[o] + sum_{c < C/groups, kh, kw} w[o, c, kh, kw] *
//       x[n, g*C/groups + c, oh*stride_h - pad_h + kh*dil_h, ow*stride_w - pad_w + kw*dil_w]
//   with g = o / (O/groups) and x = 0 outside the image (the padding).
//
// Sizes and element strides are int64 (any strides: NCHW, channels_last, sliced views; the data
// pointers already include the storage offsets; products of sizes can pass 2^31). The input and
// the output are always batched here (an unbatched call is viewed with N = 1).
// Torch-free on purpose: kernel headers include it (the builder lives in conv/args.h).
#include <cstdint>

namespace gpukern {

struct ConvProblem {
  int nsp = 2;                         // spatial dims of the call: 1 (conv1d) or 2 (conv2d)
  int64_t N = 1, C = 1, H = 1, W = 1;  // input [N, C, H, W]
  int64_t O = 1, KH = 1, KW = 1;       // weight [O, C / groups, KH, KW]
  int64_t OH = 1, OW = 1;              // output [N, O, OH, OW]
  int64_t groups = 1, c_per_group = 1, o_per_group = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t dil_h = 1, dil_w = 1;
  int64_t pad_h = 0, pad_w = 0;  // zeros before the input (top / left); the bottom / right ones
                                 // follow from the output size
  int64_t x_sn = 0, x_sc = 0, x_sh = 0, x_sw = 0;
  int64_t w_so = 0, w_sc = 0, w_sh = 0, w_sw = 0;
  int64_t b_s = 0;  // bias stride (bias may be a strided 1-D view)
  int64_t y_sn = 0, y_so = 0, y_sh = 0, y_sw = 0;
  int64_t elem_size = 0;  // bytes per element of x, w, b and y (one dtype)
  // The dtype of x, w, b and y as an at::ScalarType value (make_conv_problem), -1 when the problem
  // was built without one (convolve's): the cudnn algorithm (conv/vendor.h) needs it and runs only
  // where it is set.
  int dtype = -1;
  const void* x = nullptr;
  const void* w = nullptr;
  // The caller's weight tensor (an at::Tensor*, alive for the call; set by make_conv_problem),
  // so that a path may remember a converted copy of it across calls (igemm.cpp
  // cached_nhwc_filter); nullptr when the problem was built without one.
  const void* w_tensor = nullptr;
  const void* b = nullptr;  // nullptr: no bias
  void* y = nullptr;
  // The fused epilogue (the conv*_fused ops): y = act(conv + bias + residual). act: an
  // ActKind value (device/activation.cuh; 0 = none); r: the residual, the output's shape and
  // dtype with its own strides, or nullptr. The plain conv ops leave both off.
  int act = 0;
  const void* r = nullptr;
  int64_t r_sn = 0, r_so = 0, r_sh = 0, r_sw = 0;
  // A depthwise filter cut to the taps that can meet the image (conv/args.cpp cut_dead_taps):
  // the rows and columns cut before the first live tap and the filter's full extent (0 when
  // nothing was cut). The library algorithms (conv/vendor.h) run the uncut problem (uncut()):
  // the caller's contiguous weight and padding, as torch's own call does, not a strided view.
  int64_t cut_h0 = 0, cut_w0 = 0, full_kh = 0, full_kw = 0;

  // One input channel and one filter per output channel (depthwise with multiplier 1, or a
  // single-channel signal / image when C == 1).
  bool depthwise1() const { return groups == C && O == C; }
  // Whether the call has an epilogue beyond the bias.
  bool fused() const { return act != 0 || r != nullptr; }
  // The problem as the caller gave it, before any cut of dead taps (w_tensor stays unset).
  ConvProblem uncut() const {
    ConvProblem q = *this;
    if (full_kh == 0) return q;
    if (q.w != nullptr) {
      q.w = static_cast<const char*>(q.w) - (cut_h0 * w_sh + cut_w0 * w_sw) * elem_size;
    }
    q.pad_h += cut_h0;
    q.pad_w += cut_w0;
    q.KH = full_kh;
    q.KW = full_kw;
    q.cut_h0 = q.cut_w0 = q.full_kh = q.full_kw = 0;
    return q;
  }
};

}  // namespace gpukern
