// The reductions' host entries: argument checks, torch.sum's dtype rules, the layout
// normalisation (ReduceLayout, reduce/problem.h) -> CPU kernel (reduce/cpu.cpp) or CUDA run
// (reduce/dispatch.cu), the algorithm query, and the registration of both backends.
//
// dtype handling (torch.sum semantics: `dtype` casts the input first):
//   - in-kernel, no copy: out dtype == input dtype, or float16/bfloat16 input summed to float32
//     (that widening is exact, so it equals casting first);
//   - otherwise the input is cast with .to(dtype) before the reduction (narrowing float casts,
//     integer <-> float, float64 targets on CPU); integer results are accumulated in int64 and
//     cast to a narrower integer/bool `dtype` afterwards (identical modulo 2^k arithmetic).
#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/checks.h"
#include "reduce/cpu.h"
#include "reduce/dispatch.h"
#include "reduce/problem.h"

namespace gpukern {
namespace {

bool is_int_like(at::ScalarType t) { return at::isIntegralType(t, /*includeBool=*/true); }

// d wrapped into [0, max(ndim, 1)); out of range: IndexError, as torch.
int64_t wrap_dim(const char* op, int64_t ndim, int64_t d) {
  const int64_t lo = ndim == 0 ? -1 : -ndim;
  const int64_t hi = ndim == 0 ? 0 : ndim - 1;
  if (C10_UNLIKELY(d < lo || d > hi)) {
    TORCH_CHECK_INDEX(false, detail::check_msg("gpukern::", op, ": dimension ", d,
                                               " out of range (expected to be in range of [", lo,
                                               ", ", hi, "])"));
  }
  return d < 0 ? d + std::max<int64_t>(ndim, 1) : d;
}

// Which dims are reduced; wraps negative dims, rejects out-of-range dims (IndexError, as torch)
// and repeated ones (RuntimeError, as torch).
std::vector<bool> reduced_mask(const char* op, int64_t ndim, at::OptionalIntArrayRef dims) {
  std::vector<bool> mask(static_cast<size_t>(std::max<int64_t>(ndim, 1)), false);
  if (!dims.has_value() || dims->empty()) {
    std::fill(mask.begin(), mask.end(), true);
    return mask;
  }
  for (int64_t d : *dims) {
    const int64_t w = wrap_dim(op, ndim, d);
    GK_CHECK(!mask[w], op, "dim ", w, " appears multiple times in the list of dims");
    mask[w] = true;
  }
  return mask;
}

std::vector<int64_t> output_shape(const at::Tensor& x, const std::vector<bool>& mask,
                                  bool keepdim) {
  std::vector<int64_t> shape;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (!mask[d]) {
      shape.push_back(x.size(d));
    } else if (keepdim) {
      shape.push_back(1);
    }
  }
  return shape;
}

// Drops size-1 dims and merges dims adjacent in memory (see ReduceLayout).
ReduceLayout make_layout(const char* op, const at::Tensor& x, const std::vector<bool>& mask) {
  ReduceLayout L;
  std::vector<std::pair<int64_t, int64_t>> kept, red;  // (size, stride)
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (x.size(d) == 1) continue;
    (mask[d] ? red : kept).emplace_back(x.size(d), x.stride(d));
  }
  std::vector<std::pair<int64_t, int64_t>> k2;
  for (auto& s : kept) {
    if (!k2.empty() && k2.back().second == s.first * s.second) {
      k2.back() = {k2.back().first * s.first, s.second};
    } else {
      k2.push_back(s);
    }
  }
  // The order of reduced dims is free: sort them outermost-first by stride, then merge.
  std::stable_sort(red.begin(), red.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::vector<std::pair<int64_t, int64_t>> r2;
  for (auto& s : red) {
    if (!r2.empty() && r2.back().second == s.first * s.second) {
      r2.back() = {r2.back().first * s.first, s.second};
    } else {
      r2.push_back(s);
    }
  }
  if (r2.empty()) r2.emplace_back(1, 0);
  GK_CHECK(static_cast<int>(k2.size()) <= ReduceLayout::kMaxDims &&
               static_cast<int>(r2.size()) <= ReduceLayout::kMaxDims,
           op, "too many non-mergeable dims (at most ", ReduceLayout::kMaxDims, ")");
  L.nk = static_cast<int>(k2.size());
  L.nr = static_cast<int>(r2.size());
  L.n_out = 1;
  L.R = 1;
  for (int i = 0; i < L.nk; ++i) {
    L.ksize[i] = k2[i].first;
    L.kstride[i] = k2[i].second;
    L.n_out *= k2[i].first;
  }
  for (int i = 0; i < L.nr; ++i) {
    L.rsize[i] = r2[i].first;
    L.rstride[i] = r2[i].second;
    L.R *= r2[i].first;
  }
  return L;
}

void check_float_dtype_on(const char* op, at::ScalarType t, const at::Device& dev,
                          const char* what) {
  const bool ok = t == at::kFloat || t == at::kHalf || t == at::kBFloat16 ||
                  (t == at::kDouble && dev.is_cpu());
  GK_CHECK(ok, op, what, " dtype ", t, " is not supported on ", dev.type(),
           "; supported: float32, float16, bfloat16", dev.is_cpu() ? ", float64" : "",
           dev.is_cpu() ? "" : " (float64 runs on CPU only)");
}

// The host entry of every reduction: checks and torch.sum's dtype rules -> layout -> CPU kernel
// or CUDA run.
at::Tensor reduce_entry(ReduceKind kind, const at::Tensor& self, at::OptionalIntArrayRef dims,
                        bool keepdim, std::optional<at::ScalarType> dtype) {
  const char* op = kind_name(kind);
  check_defined(op, self, "self");
  const auto dev = self.device();
  GK_CHECK(dev.is_cpu() || dev.is_cuda(), op, "unsupported device ", dev);
  const auto in_t = self.scalar_type();
  GK_CHECK(!at::isComplexType(in_t), op, "complex inputs are not supported");

  // Result dtype, and the dtype the kernel reads (the input is cast first where needed).
  at::ScalarType out_t;
  if (kind == ReduceKind::kSum) {
    out_t = dtype.has_value() ? *dtype : (is_int_like(in_t) ? at::kLong : in_t);
    GK_CHECK(!at::isComplexType(out_t), op, "complex dtype is not supported");
    // torch.sum has no unsigned 16/32/64-bit result (NotImplementedError); such inputs sum to
    // int64.
    TORCH_CHECK_NOT_IMPLEMENTED(
        out_t != at::kUInt16 && out_t != at::kUInt32 && out_t != at::kUInt64,
        detail::check_msg("gpukern::", op, ": dtype=", c10::toString(out_t),
                          " is not supported as the result dtype; unsigned inputs sum to int64"));
  } else if (kind == ReduceKind::kMean) {
    if (dtype.has_value()) {
      GK_CHECK(at::isFloatingType(*dtype), op, "dtype must be a floating point dtype, got ",
               *dtype);
    } else {
      GK_CHECK(at::isFloatingType(in_t), op,
               "expected a floating point input (or pass a floating dtype=), got ", in_t);
    }
    out_t = dtype.has_value() ? *dtype : in_t;
  } else {
    GK_CHECK(at::isFloatingType(in_t), op, "expected a floating point input, got ", in_t);
    out_t = in_t;
  }

  at::Tensor x = self;
  ReduceOutKind out_kind = ReduceOutKind::kSame;
  at::ScalarType result_t = out_t;  // dtype of the tensor the kernel writes
  if (is_int_like(out_t)) {
    if (out_t != at::kLong || !is_int_like(in_t)) x = self.to(out_t);
    result_t = at::kLong;
    out_kind = ReduceOutKind::kInt64;
  } else {
    check_float_dtype_on(op, out_t, dev, "result");
    const bool widen = out_t == at::kFloat && (in_t == at::kHalf || in_t == at::kBFloat16);
    if (widen) {
      out_kind = ReduceOutKind::kFloat;
    } else if (out_t != in_t) {
      x = self.to(out_t);
    }
    check_float_dtype_on(op, x.scalar_type(), dev, "input");
  }

  // amax/amin of an empty input, as torch (zero_numel_check_dims, before the repeated-dims
  // check): no dims given is a RuntimeError; else each given dim in turn, out of range or of
  // size 0, an IndexError.
  const bool all = !dims.has_value() || dims->empty();
  if ((kind == ReduceKind::kMax || kind == ReduceKind::kMin) && x.numel() == 0) {
    GK_CHECK(!all, op,
             "expected reduction dim to have non-zero size: the input has numel() == 0; "
             "specify the reduction dim with the 'dim' argument");
    for (int64_t d : *dims) {
      const int64_t w = wrap_dim(op, x.dim(), d);
      if (C10_UNLIKELY(x.size(w) == 0)) {
        TORCH_CHECK_INDEX(false, detail::check_msg("gpukern::", op, ": expected reduction dim ",
                                                   w, " to have non-zero size"));
      }
    }
  }
  const auto mask = reduced_mask(op, x.dim(), dims);

  at::Tensor out = at::empty(output_shape(x, mask, keepdim), x.options().dtype(result_t));
  if (out.numel() > 0) {
    const ReduceLayout L = make_layout(op, x, mask);
    if (x.numel() == 0) {
      // Empty reduction: sum is 0, mean is 0/0 = NaN (amax/amin raised above).
      out.fill_(kind == ReduceKind::kMean ? std::numeric_limits<double>::quiet_NaN() : 0.0);
    } else if (dev.is_cpu()) {
      reduce_cpu(L, kind, x, out);
    } else {
#if defined(GPUKERN_WITH_CUDA)
      reduce_cuda_run(L, kind, out_kind, x, out);
#else
      GK_CHECK(false, op, "gpukern was built without CUDA kernels");
#endif
    }
  }
  (void)out_kind;
  if (result_t != out_t) out = out.to(out_t);
  return out;
}

at::Tensor sum_all(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  return reduce_entry(ReduceKind::kSum, self, std::nullopt, false, dtype);
}
at::Tensor sum_dim(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                   std::optional<at::ScalarType> dtype) {
  return reduce_entry(ReduceKind::kSum, self, dim, keepdim, dtype);
}
at::Tensor mean_all(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  return reduce_entry(ReduceKind::kMean, self, std::nullopt, false, dtype);
}
at::Tensor mean_dim(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                    std::optional<at::ScalarType> dtype) {
  return reduce_entry(ReduceKind::kMean, self, dim, keepdim, dtype);
}
at::Tensor amax(const at::Tensor& self, at::IntArrayRef dim, bool keepdim) {
  return reduce_entry(ReduceKind::kMax, self, dim, keepdim, std::nullopt);
}
at::Tensor amin(const at::Tensor& self, at::IntArrayRef dim, bool keepdim) {
  return reduce_entry(ReduceKind::kMin, self, dim, keepdim, std::nullopt);
}

#if defined(GPUKERN_WITH_CUDA)
// Whether t's data starts on a 16-byte boundary; meta tensors have no address, so their storage
// is taken as aligned (as fresh allocations are) and only the offset counts.
bool starts_aligned16(const at::Tensor& t) {
  if (t.is_meta()) return (t.storage_offset() * t.element_size()) % 16 == 0;
  return (reinterpret_cast<uintptr_t>(t.const_data_ptr()) & 15u) == 0;
}
#endif

// gpukern::_algorithm_reduce(self, dim, kind): the CUDA algorithm torch_ops.<kind>(self, dim)
// (no dtype argument) would run; kind is sum, mean, amax or amin. Only sizes, strides, dtype and
// alignment are read; meta tensors work.
std::string reduce_algorithm(const at::Tensor& self, at::OptionalIntArrayRef dim,
                             c10::string_view kind_sv) {
  const std::string_view kind(kind_sv.data(), kind_sv.size());
  const char* op = "_algorithm_reduce";
  GK_CHECK(kind == "sum" || kind == "mean" || kind == "amax" || kind == "amin", op,
           "unknown kind '", std::string(kind), "'; expected sum, mean, amax or amin");
  check_defined(op, self, "self");
  const auto t = self.scalar_type();
  GK_CHECK(!at::isComplexType(t), op, "complex inputs are not supported");
  const bool int_in = is_int_like(t);
  GK_CHECK(kind == "sum" || !int_in, op, std::string(kind),
           " expects a floating point input, got ", t);
  GK_CHECK(t != at::kDouble, op, "float64 runs on CPU only (no CUDA algorithm)");
  const auto mask = reduced_mask(op, self.dim(), dim);
  int64_t n_out = 1;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (!mask[d]) n_out *= self.size(d);
  }
#if defined(GPUKERN_WITH_CUDA)
  if (self.numel() == 0 || n_out == 0) return "empty";
  const ReduceLayout L = make_layout(op, self, mask);
  return reduce_cuda_algorithm(L, !int_in, static_cast<int>(self.element_size()),
                               starts_aligned16(self), kind == "sum" || kind == "mean");
#else
  (void)n_out;
  return "cpu (built without CUDA kernels)";
#endif
}

}  // namespace
}  // namespace gpukern

TORCH_LIBRARY_IMPL(gpukern, CompositeExplicitAutograd, m) {
  m.impl("_algorithm_reduce", &gpukern::reduce_algorithm);
}

namespace {
// One host entry per op serves both backends (reduce_entry picks the CPU kernel or the CUDA run).
void register_reductions(torch::Library& m) {
  m.impl("sum", &gpukern::sum_all);
  m.impl("sum.dim_IntList", &gpukern::sum_dim);
  m.impl("mean", &gpukern::mean_all);
  m.impl("mean.dim", &gpukern::mean_dim);
  m.impl("amax", &gpukern::amax);
  m.impl("amin", &gpukern::amin);
}
}  // namespace

TORCH_LIBRARY_IMPL(gpukern, CPU, m) { register_reductions(m); }

#if defined(GPUKERN_WITH_CUDA)
TORCH_LIBRARY_IMPL(gpukern, CUDA, m) { register_reductions(m); }
#endif
