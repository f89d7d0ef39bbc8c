// gpukern::convolve: true convolution along the last dimension with broadcast leading
// dimensions (torchaudio.functional.convolve's shapes, numpy.convolve's modes), run by conv1d's
// kernels. Host code only, for both backends: a convolution is a correlation with the reversed
// filter, so the call becomes one Conv1dParams and goes to conv1d_cpu_launch or
// conv1d_cuda_launch, which choose among their paths (rowwise, general, FFT) exactly as conv1d
// does for the equivalent single-channel or depthwise call.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <string_view>
#include <vector>

#include "core/checks.h"
#include "conv1d/conv1d.h"

#ifdef GPUKERN_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#endif

namespace gpukern {
namespace {

constexpr const char* kOp = "convolve";

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
  GK_CHECK(false, kOp, "mode must be 'full', 'same' or 'valid', got '", mode, "'");
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

// The broadcast rows as conv1d's two batch levels. Conv1dParams indexes row (n, c) of a
// depthwise call (C == O == groups) as x[n*x_sn + c*x_sc], h[c*w_so], y[n*y_sn + c*y_so]: the
// filter cannot vary with n. So the leading dims B split at s into an outer group [0, s), along
// which h must be broadcast (stride 0), and an inner group [s, m); each group must collapse to
// one stride in x and the inner one in h too. y is contiguous over B, so any split is fine for
// y. The largest s is taken: fewest filter rows (the FFT path transforms one per channel).
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

at::Tensor convolve(const at::Tensor& x, const at::Tensor& h, c10::string_view mode_sv) {
  const std::string_view mode(mode_sv.data(), mode_sv.size());
  check_defined(kOp, x, "x");
  check_defined(kOp, h, "h");
  GK_CHECK(x.dim() >= 1 && h.dim() >= 1, kOp, "expected x and h with at least 1 dimension, got ",
           x.dim(), "-D and ", h.dim(), "-D");
  check_same_device(kOp, x, "x", h, "h");
  check_same_dtype(kOp, x, "x", h, "h");
  check_floating(kOp, x, "x");
  GK_CHECK(x.device().is_cpu() || x.device().is_cuda(), kOp, "unsupported device ", x.device());
  const int64_t N = x.size(-1), K = h.size(-1);
  GK_CHECK(N >= 1 && K >= 1, kOp, "x and h must not be empty along the last dimension, got ",
           "lengths ", N, " and ", K);
  const Window win = mode_window(mode, N, K);

  // Leading dims: aten broadcasting (right-aligned, size-1 dims stretch, either may have fewer).
  const at::IntArrayRef xl = x.sizes().slice(0, x.dim() - 1);
  const at::IntArrayRef hl = h.sizes().slice(0, h.dim() - 1);
  const size_t m = std::max(xl.size(), hl.size());
  std::vector<int64_t> lead(m, 1);
  for (size_t i = 0; i < m; ++i) {
    const int64_t a = i + xl.size() >= m ? xl[i + xl.size() - m] : 1;
    const int64_t b = i + hl.size() >= m ? hl[i + hl.size() - m] : 1;
    GK_CHECK(a == b || a == 1 || b == 1, kOp, "leading dimensions of x ", xl, " and h ", hl,
             " are not broadcastable");
    lead[i] = a == 1 ? b : a;
  }
  std::vector<int64_t> out_shape = lead;
  out_shape.push_back(win.length);
  at::Tensor y = at::empty(out_shape, x.options());
  if (y.numel() == 0) return y;

  // Views over the broadcast shape (stride 0 along stretched dims); materialised only when no
  // split of the rows describes them, the cheaper operand first.
  std::vector<int64_t> xshape = lead, hshape = lead;
  xshape.push_back(N);
  hshape.push_back(K);
  at::Tensor xe = x.expand(xshape), he = h.expand(hshape);
  RowSplit rows;
  if (!split_rows(xe, he, rows)) {
    const bool x_first = N <= K;
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
  // so output l reads full[l + K - 1 - pad_lo] and pad_lo = K - 1 - offset selects the window.
  const int64_t h_sk = he.stride(-1);
  Conv1dParams p;
  p.x = xe.const_data_ptr();
  p.w = static_cast<const char*>(he.const_data_ptr()) + (K - 1) * h_sk * he.element_size();
  p.b = nullptr;
  p.y = y.data_ptr();
  p.N = rows.n;
  p.C = p.O = p.groups = rows.c;
  p.L = N;
  p.K = K;
  p.L_out = win.length;
  p.stride = 1;
  p.dilation = 1;
  p.pad_lo = K - 1 - win.offset;
  p.x_sn = rows.x_sn;
  p.x_sc = rows.x_sc;
  p.x_sl = xe.stride(-1);
  p.w_so = rows.h_sc;
  p.w_sc = 0;
  p.w_sk = -h_sk;
  p.y_sn = rows.c * win.length;
  p.y_so = win.length;
  p.y_sl = 1;
  p.elem_size = xe.element_size();

  if (x.device().is_cpu()) {
    conv1d_cpu_launch(p, x.scalar_type());
  } else {
#ifdef GPUKERN_WITH_CUDA
    const c10::cuda::CUDAGuard guard(x.device());
    conv1d_cuda_launch(p, xe);
#else
    GK_CHECK(false, kOp, "gpukern was built without CUDA kernels");
#endif
  }
  return y;
}

}  // namespace
}  // namespace gpukern

TORCH_LIBRARY_IMPL(gpukern, CPU, m) { m.impl("convolve", &gpukern::convolve); }

#ifdef GPUKERN_WITH_CUDA
TORCH_LIBRARY_IMPL(gpukern, CUDA, m) { m.impl("convolve", &gpukern::convolve); }
#endif
