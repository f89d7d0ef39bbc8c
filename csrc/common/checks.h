#pragma once
// Argument checks for the host entries. Every message starts with the op's name,
// "gpukern::<op>: ...", so a user sees which call went wrong. Kernels assume what these enforce.
#include <ATen/ATen.h>

#define GK_CHECK(cond, op, ...) TORCH_CHECK((cond), "gpukern::", op, ": ", __VA_ARGS__)

namespace gpukern {

inline void check_defined(const char* op, const at::Tensor& t, const char* name) {
  GK_CHECK(t.defined(), op, "expected ", name, " to be a defined tensor");
}

inline void check_same_device(const char* op, const at::Tensor& a, const char* name_a,
                              const at::Tensor& b, const char* name_b) {
  GK_CHECK(a.device() == b.device(), op, "expected ", name_a, " and ", name_b,
           " on the same device, got ", a.device(), " and ", b.device());
}

inline void check_same_dtype(const char* op, const at::Tensor& a, const char* name_a,
                             const at::Tensor& b, const char* name_b) {
  GK_CHECK(a.scalar_type() == b.scalar_type(), op, "expected ", name_a, " and ", name_b,
           " of the same dtype, got ", a.scalar_type(), " and ", b.scalar_type());
}

// Floating dtypes gpukern computes in: float32/float16/bfloat16 everywhere, float64 on CPU only.
inline void check_floating(const char* op, const at::Tensor& t, const char* name) {
  const auto st = t.scalar_type();
  const bool ok = st == at::kFloat || st == at::kHalf || st == at::kBFloat16 ||
                  (st == at::kDouble && t.device().is_cpu());
  GK_CHECK(ok, op, name, " has dtype ", st, " on ", t.device().type(),
           "; supported: float32, float16, bfloat16", t.device().is_cpu() ? ", float64" : "",
           t.device().is_cpu() ? "" : " (float64 runs on CPU only)");
}

inline void check_dim_in(const char* op, const at::Tensor& t, const char* name, int64_t lo,
                         int64_t hi) {
  GK_CHECK(t.dim() >= lo && t.dim() <= hi, op, "expected ", name, " with ",
           lo == hi ? std::to_string(lo) : std::to_string(lo) + " or " + std::to_string(hi),
           " dimensions, got ", t.dim(), " (shape ", t.sizes(), ")");
}

}  // namespace gpukern
