#pragma once
// Argument checks for the host entries. Every message starts with the op's name,
// "gpukern::<op>: ...", so a user sees which call went wrong. Kernels assume what these enforce.
//
// GK_CHECK builds its message with check_msg() below, not with std::ostream, for numbers and
// int lists: on the GPU machine (g++ 13 headers, a newer libstdc++ at run time) the ostream
// integer insertion that c10::str instantiates inside this extension crashed the process while
// formatting an error. Strings, dtypes and devices go through c10::str, whose inserters live in
// libstdc++/libc10 themselves.
#include <ATen/ATen.h>

#include <string>
#include <type_traits>

namespace gpukern {
namespace detail {

inline void append(std::string& s, const char* v) { s += v; }
inline void append(std::string& s, const std::string& v) { s += v; }
inline void append(std::string& s, bool v) { s += v ? "true" : "false"; }
template <typename T, std::enable_if_t<std::is_integral_v<T>, int> = 0>
void append(std::string& s, T v) {
  s += std::to_string(v);
}
template <typename T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
void append(std::string& s, T v) {
  s += std::to_string(v);
}
inline void append(std::string& s, c10::ArrayRef<int64_t> v) {
  s += "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(v[i]);
  }
  s += "]";
}
inline void append(std::string& s, at::ScalarType v) { s += c10::toString(v); }
inline void append(std::string& s, c10::DeviceType v) { s += c10::DeviceTypeName(v, true); }
inline void append(std::string& s, const c10::Device& v) { s += v.str(); }
inline void append(std::string& s, std::string_view v) { s.append(v.data(), v.size()); }

template <typename... Args>
std::string check_msg(const Args&... args) {
  std::string s;
  (append(s, args), ...);
  return s;
}

}  // namespace detail
}  // namespace gpukern

#define GK_CHECK(cond, op, ...)                                                   \
  do {                                                                            \
    if (C10_UNLIKELY(!(cond))) {                                                  \
      TORCH_CHECK(false, ::gpukern::detail::check_msg("gpukern::", op, ": ",      \
                                                      __VA_ARGS__));              \
    }                                                                             \
  } while (0)

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
