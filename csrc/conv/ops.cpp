// The host entries of the convolution ops, CPU and CUDA: conv1d, conv2d, conv1d_fused,
// conv2d_fused (both padding overloads each), convolve, and their algorithm queries. Every call
// flows one way: check and normalise the arguments (conv/args.h, or convolve's own checks below)
// -> one ConvProblem -> the CPU kernel (conv/cpu.h) or the CUDA run of its dimension
// (conv/dispatch.h).
#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "conv/args.h"
#include "conv/cpu.h"
#include "conv/problem.h"
#include "core/checks.h"

#ifdef GPUKERN_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>

#include "conv/dispatch.h"
#include "conv/igemm/igemm.h"
#endif

namespace gpukern {
namespace {

constexpr const char* kNoCuda = "cpu (built without CUDA kernels)";

// The run tail every op shares: the problem over tensors on x's device (the batched input; the
// caller holds the device guard) goes to the CPU kernel or to the CUDA run of its dimension, which
// writes the result to `out` (through p.y, its batched view) or returns it in a tensor of its own
// with p.y's sizes and strides (conv/dispatch.h). Returns the op's result: `out`, or that tensor
// viewed with out's sizes (an unbatched call drops the batch dimension of one).
at::Tensor run_problem(const char* op, const ConvProblem& p, const at::Tensor& x,
                       const at::Tensor& out) {
  if (x.device().is_cpu()) {
    conv_cpu_run(p, x.scalar_type(), op);
    return out;
  }
#ifdef GPUKERN_WITH_CUDA
  const at::Tensor own = p.nsp == 1 ? conv1d_cuda_run(p, x) : conv2d_cuda_run(p, x);
  if (!own.defined()) return out;
  return own.dim() == out.dim() ? own : own.view(out.sizes());
#else
  GK_CHECK(false, op, "gpukern was built without CUDA kernels");
  return out;
#endif
}

// A device guard on t's device when it is a CUDA tensor (none for CPU tensors).
struct ConvDeviceGuard {
#ifdef GPUKERN_WITH_CUDA
  c10::cuda::OptionalCUDAGuard guard;
  explicit ConvDeviceGuard(const at::Tensor& t) {
    if (t.is_cuda()) guard.set_device(t.device());
  }
#else
  explicit ConvDeviceGuard(const at::Tensor&) {}
#endif
};

// ------------------------------------------------------------------------------------------------
// conv1d, conv2d
// ------------------------------------------------------------------------------------------------

// Output allocation (empty: returned at once), the problem over the batched views, the run.
at::Tensor conv_run(const char* op, const ConvArgs& a, const at::Tensor& input,
                    const at::Tensor& weight, const std::optional<at::Tensor>& bias) {
  const ConvDeviceGuard guard(input);
  at::Tensor out = conv_output(a, input, weight);
  if (out.numel() == 0) return out;
  const at::Tensor x = conv_batched_input(a, input);
  const ConvProblem p = make_conv_problem(a, x, weight, bias, conv_batched_output(a, out));
  return run_problem(op, p, x, out);
}

// gpukern::_algorithm_conv{1,2}d: the CUDA algorithm a call with these arguments would run (see
// core/algo_table.h). Only sizes, strides and dtype are read; meta tensors work.
std::string conv_query(const ConvArgs& a, const at::Tensor& input, const at::Tensor& weight) {
#ifdef GPUKERN_WITH_CUDA
  return conv_algorithm_query(a, input, weight, [&](const at::Tensor& x, const at::Tensor& w,
                                                    const at::Tensor& y) {
    const ConvProblem p = make_conv_problem(a, x, w, std::nullopt, y);
    return p.nsp == 1 ? conv1d_cuda_algorithm(p) : conv2d_cuda_algorithm(p);
  });
#else
  (void)a, (void)input, (void)weight;
  return kNoCuda;
#endif
}

// gpukern::_igemm_config_conv2d: the tensor-core path's configuration for a dense conv2d call
// (conv/igemm/igemm.h igemm_config_name; "" when the path cannot take it), whatever the dispatch
// would choose. Meta tensors work.
std::string igemm_config_conv2d(const at::Tensor& input, const at::Tensor& weight,
                                at::IntArrayRef stride, at::IntArrayRef padding,
                                at::IntArrayRef dilation) {
#ifdef GPUKERN_WITH_CUDA
  const ConvArgs a =
      conv_args("conv2d", 2, input, weight, std::nullopt, stride, padding, dilation, 1);
  return conv_algorithm_query(a, input, weight, [&](const at::Tensor& x, const at::Tensor& w,
                                                    const at::Tensor& y) {
    return igemm_config_name(make_conv_problem(a, x, w, std::nullopt, y));
  });
#else
  (void)input, (void)weight, (void)stride, (void)padding, (void)dilation;
  return kNoCuda;
#endif
}

// Both ops' kernels for ConvSchemas (conv/args.h): the op's name and spatial dims, run and query.
template <int kDims_>
struct ConvOp {
  static constexpr const char* kName = kDims_ == 1 ? "conv1d" : "conv2d";
  static constexpr int kDims = kDims_;
  static at::Tensor run(const ConvArgs& a, const at::Tensor& input, const at::Tensor& weight,
                        const std::optional<at::Tensor>& bias) {
    return conv_run(kName, a, input, weight, bias);
  }
  static std::string query(const ConvArgs& a, const at::Tensor& input, const at::Tensor& weight) {
    return conv_query(a, input, weight);
  }
};

using Conv1d = ConvSchemas<ConvOp<1>>;
using Conv2d = ConvSchemas<ConvOp<2>>;

// ------------------------------------------------------------------------------------------------
// conv1d_fused, conv2d_fused: y = act(conv(x, w) + bias [+ residual]), the conv ops' checks plus
// the activation name and the residual's (conv/args.h); then the same run with the epilogue in
// the problem (p.act, p.r): the CPU kernel applies it in its accumulation type, the CUDA runs in
// the algorithm's epilogue or in one elementwise pass after it (conv/epilogue.h).
// ------------------------------------------------------------------------------------------------

at::Tensor conv_fused_run(const char* op, const ConvArgs& a, const at::Tensor& input,
                          const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                          std::string_view activation,
                          const std::optional<at::Tensor>& residual) {
  const int act = conv_activation(op, activation);
  const bool has_residual = residual.has_value() && residual->defined();
  if (has_residual) check_conv_residual(op, a, input, *residual);
  const ConvDeviceGuard guard(input);
  at::Tensor out = conv_output(a, input, weight);
  if (out.numel() == 0) return out;
  const at::Tensor x = conv_batched_input(a, input);
  std::optional<at::Tensor> r;
  if (has_residual) r = conv_batched_output(a, *residual);  // unbatched: viewed batched like y
  const ConvProblem p =
      make_conv_problem(a, x, weight, bias, conv_batched_output(a, out), act, r);
  return run_problem(op, p, x, out);
}

template <int kDims_>
struct ConvFusedOp {
  static constexpr const char* kName = kDims_ == 1 ? "conv1d_fused" : "conv2d_fused";
  static constexpr int kDims = kDims_;
  static at::Tensor run(const ConvArgs& a, const at::Tensor& input, const at::Tensor& weight,
                        const std::optional<at::Tensor>& bias, std::string_view activation,
                        const std::optional<at::Tensor>& residual) {
    return conv_fused_run(kName, a, input, weight, bias, activation, residual);
  }
};

using Conv1dFused = ConvFusedSchemas<ConvFusedOp<1>>;
using Conv2dFused = ConvFusedSchemas<ConvFusedOp<2>>;

// ------------------------------------------------------------------------------------------------
// convolve: true convolution along the last dimension with broadcast leading dimensions
// (torchaudio.functional.convolve's shapes, numpy.convolve's modes), run as conv1d's problem: a
// convolution is a correlation with the reversed filter, so the call becomes one single-channel
// or depthwise 1-D problem and takes the path (rowwise, general, FFT) that conv1d takes for it.
// ------------------------------------------------------------------------------------------------

constexpr const char* kConvolve = "convolve";

// The output of a mode as a window [offset, offset + length) of the full convolution
// full[j] = sum_k x[j - k] h[k], j < N + K - 1. The window depends on min/max of N and K only
// (numpy.convolve swaps its operands when the filter is longer; convolution commutes):
//   full   offset 0,              length N + K - 1
//   same   offset (min - 1) / 2,  length max         (numpy: the longer operand's length)
//   valid  offset min - 1,        length max - min + 1
struct Window {
  int64_t offset;
  int64_t length;
};

Window mode_window(std::string_view mode, int64_t N, int64_t K) {
  const int64_t lo = std::min(N, K), hi = std::max(N, K);
  if (mode == "full") return {0, N + K - 1};
  if (mode == "same") return {(lo - 1) / 2, hi};
  if (mode == "valid") return {lo - 1, hi - lo + 1};
  GK_CHECK(false, kConvolve, "mode must be 'full', 'same' or 'valid', got '", mode, "'");
  return {0, 0};
}

// Dims [begin, end) of a view as one (count, stride) dimension, when their elements are evenly
// spaced (size-1 dims ignored; broadcast dims have stride 0 and collapse with each other).
bool collapse(at::IntArrayRef sizes, at::IntArrayRef strides, size_t begin, size_t end,
              int64_t& count, int64_t& stride) {
  count = 1;
  stride = 0;
  bool any = false;
  int64_t next = 0;  // stride the next outer dim must have: inner stride * inner size
  for (size_t i = end; i-- > begin;) {
    if (sizes[i] == 1) continue;
    if (!any) {
      stride = strides[i];
      any = true;
    } else if (strides[i] != next) {
      return false;
    }
    next = strides[i] * sizes[i];
    count *= sizes[i];
  }
  return true;
}

// The broadcast rows as the problem's two batch levels. A depthwise 1-D problem (C == O ==
// groups) indexes row (n, c) as x[n*x_sn + c*x_sc], h[c*w_so], y[n*y_sn + c*y_so]: the filter
// cannot vary with n. So the leading dims B split at s into an outer group [0, s), along which h
// must be broadcast (stride 0), and an inner group [s, m); each group must collapse to one stride
// in x and the inner one in h too. y is contiguous over B, so any split is fine for y. The
// largest s is taken: fewest filter rows (the FFT path transforms one per channel).
struct RowSplit {
  int64_t n = 1, c = 1;
  int64_t x_sn = 0, x_sc = 0, h_sc = 0;
};

bool split_rows(const at::Tensor& xe, const at::Tensor& he, RowSplit& r) {
  const size_t m = static_cast<size_t>(xe.dim() - 1);
  const at::IntArrayRef sizes = xe.sizes(), xs = xe.strides(), hs = he.strides();
  size_t s_max = 0;  // the outer group ends at the first dim along which h varies
  while (s_max < m && (hs[s_max] == 0 || sizes[s_max] == 1)) ++s_max;
  for (size_t s = s_max + 1; s-- > 0;) {
    int64_t n_x, c_x, c_h;
    if (collapse(sizes, xs, 0, s, n_x, r.x_sn) && collapse(sizes, xs, s, m, c_x, r.x_sc) &&
        collapse(sizes, hs, s, m, c_h, r.h_sc)) {
      r.n = n_x;
      r.c = c_x;
      return true;
    }
  }
  return false;
}

// A checked convolve call: its mode's window, signal and filter lengths, and the output shape
// (the broadcast leading dims, then the window's length).
struct ConvolveCall {
  Window win;
  int64_t N = 0, K = 0;
  std::vector<int64_t> lead;
  std::vector<int64_t> out_shape;
};

ConvolveCall convolve_check(const at::Tensor& x, const at::Tensor& h, std::string_view mode) {
  check_defined(kConvolve, x, "x");
  check_defined(kConvolve, h, "h");
  GK_CHECK(x.dim() >= 1 && h.dim() >= 1, kConvolve,
           "expected x and h with at least 1 dimension, got ", x.dim(), "-D and ", h.dim(),
           "-D");
  check_same_device(kConvolve, x, "x", h, "h");
  check_same_dtype(kConvolve, x, "x", h, "h");
  check_floating(kConvolve, x, "x");
  GK_CHECK(x.device().is_cpu() || x.device().is_cuda() || x.device().is_meta(), kConvolve,
           "unsupported device ", x.device());
  ConvolveCall c;
  c.N = x.size(-1);
  c.K = h.size(-1);
  GK_CHECK(c.N >= 1 && c.K >= 1, kConvolve,
           "x and h must not be empty along the last dimension, got lengths ", c.N, " and ",
           c.K);
  c.win = mode_window(mode, c.N, c.K);

  // Leading dims: aten broadcasting (right-aligned, size-1 dims stretch, either may have fewer).
  const at::IntArrayRef xl = x.sizes().slice(0, x.dim() - 1);
  const at::IntArrayRef hl = h.sizes().slice(0, h.dim() - 1);
  const size_t m = std::max(xl.size(), hl.size());
  c.lead.assign(m, 1);
  for (size_t i = 0; i < m; ++i) {
    const int64_t a = i + xl.size() >= m ? xl[i + xl.size() - m] : 1;
    const int64_t b = i + hl.size() >= m ? hl[i + hl.size() - m] : 1;
    GK_CHECK(a == b || a == 1 || b == 1, kConvolve, "leading dimensions of x ", xl, " and h ",
             hl, " are not broadcastable");
    c.lead[i] = a == 1 ? b : a;
  }
  c.out_shape = c.lead;
  c.out_shape.push_back(c.win.length);
  return c;
}

// The problem of a checked call over the output y. xe and he receive the broadcast views of x and
// h that the problem points into (materialised only when no split of the rows describes them, the
// cheaper operand first); they must outlive the run.
ConvProblem convolve_problem(const ConvolveCall& c, const at::Tensor& x, const at::Tensor& h,
                             const at::Tensor& y, at::Tensor& xe, at::Tensor& he) {
  std::vector<int64_t> xshape = c.lead, hshape = c.lead;
  xshape.push_back(c.N);
  hshape.push_back(c.K);
  xe = x.expand(xshape);
  he = h.expand(hshape);
  RowSplit rows;
  if (!split_rows(xe, he, rows)) {
    const bool x_first = c.N <= c.K;
    at::Tensor& first = x_first ? xe : he;
    at::Tensor& second = x_first ? he : xe;
    const at::Tensor first_view = first;
    first = first.contiguous();
    if (!split_rows(xe, he, rows)) {
      first = first_view;
      second = second.contiguous();
      if (!split_rows(xe, he, rows)) {
        first = first.contiguous();
        TORCH_INTERNAL_ASSERT(split_rows(xe, he, rows));  // both contiguous: one inner group
      }
    }
  }

  // Correlation with the reversed filter: w points at each row's last tap and walks backwards,
  // so output l reads full[l + K - 1 - pad_w] and pad_w = K - 1 - offset selects the window.
  const int64_t h_sk = he.stride(-1);
  ConvProblem p;
  p.nsp = 1;
  p.x = xe.const_data_ptr();
  p.w = static_cast<const char*>(he.const_data_ptr()) + (c.K - 1) * h_sk * he.element_size();
  p.b = nullptr;
  p.y = y.data_ptr();
  p.N = rows.n;
  p.C = p.O = p.groups = rows.c;
  p.c_per_group = p.o_per_group = 1;
  p.W = c.N;
  p.KW = c.K;
  p.OW = c.win.length;
  p.stride_w = 1;
  p.dil_w = 1;
  p.pad_w = c.K - 1 - c.win.offset;
  p.x_sn = rows.x_sn;
  p.x_sc = rows.x_sc;
  p.x_sw = xe.stride(-1);
  p.w_so = rows.h_sc;
  p.w_sc = 0;
  p.w_sw = -h_sk;
  p.y_sn = rows.c * c.win.length;
  p.y_so = c.win.length;
  p.y_sw = 1;
  p.elem_size = xe.element_size();
  return p;
}

at::Tensor convolve(const at::Tensor& x, const at::Tensor& h, c10::string_view mode) {
  const ConvolveCall c = convolve_check(x, h, std::string_view(mode.data(), mode.size()));
  const ConvDeviceGuard guard(x);
  at::Tensor y = at::empty(c.out_shape, x.options());
  if (y.numel() == 0) return y;
  at::Tensor xe, he;
  const ConvProblem p = convolve_problem(c, x, h, y, xe, he);
  return run_problem(kConvolve, p, xe, y);  // y itself: convolve is never raced (p.dtype < 0)
}

// gpukern::_algorithm_convolve: the CUDA algorithm (one of conv1d's) a convolve call with these
// arguments would run; "empty" when the output is. Checks as convolve does; then only sizes,
// strides and dtype are read (meta views), so meta tensors work.
std::string convolve_query(const at::Tensor& x, const at::Tensor& h, c10::string_view mode) {
  const ConvolveCall c = convolve_check(x, h, std::string_view(mode.data(), mode.size()));
#ifdef GPUKERN_WITH_CUDA
  const at::Tensor xm =
      at::empty_strided(x.sizes(), x.strides(), x.options().device(at::kMeta));
  const at::Tensor hm =
      at::empty_strided(h.sizes(), h.strides(), h.options().device(at::kMeta));
  const at::Tensor y = at::empty(c.out_shape, xm.options());
  if (y.numel() == 0) return "empty";
  at::Tensor xe, he;
  return conv1d_cuda_algorithm(convolve_problem(c, xm, hm, y, xe, he));
#else
  (void)c;
  return kNoCuda;
#endif
}

}  // namespace
}  // namespace gpukern

namespace gpukern {
namespace {

// The conv ops' kernels, the same entry points for both backends (each dispatches on the device).
void impl_conv_ops(torch::Library& m) {
  m.impl("conv1d", &Conv1d::ints);
  m.impl("conv1d.padding", &Conv1d::str);
  m.impl("conv2d", &Conv2d::ints);
  m.impl("conv2d.padding", &Conv2d::str);
  m.impl("conv1d_fused", &Conv1dFused::ints);
  m.impl("conv1d_fused.padding", &Conv1dFused::str);
  m.impl("conv2d_fused", &Conv2dFused::ints);
  m.impl("conv2d_fused.padding", &Conv2dFused::str);
  m.impl("convolve", &convolve);
}

}  // namespace
}  // namespace gpukern

TORCH_LIBRARY_IMPL(gpukern, CPU, m) { gpukern::impl_conv_ops(m); }

#ifdef GPUKERN_WITH_CUDA
TORCH_LIBRARY_IMPL(gpukern, CUDA, m) { gpukern::impl_conv_ops(m); }
#endif

TORCH_LIBRARY_IMPL(gpukern, CompositeExplicitAutograd, m) {
  m.impl("_algorithm_conv1d", &gpukern::Conv1d::query_ints);
  m.impl("_algorithm_conv1d.padding", &gpukern::Conv1d::query_str);
  m.impl("_algorithm_conv2d", &gpukern::Conv2d::query_ints);
  m.impl("_algorithm_conv2d.padding", &gpukern::Conv2d::query_str);
  m.impl("_algorithm_convolve", &gpukern::convolve_query);
  m.impl("_igemm_config_conv2d", &gpukern::igemm_config_conv2d);
}
