#pragma once
// Division by a run-time constant with a multiply-high and a shift (Granlund-Montgomery): the
// host builds FastDiv(d) once per launch, kernels call div(n) for 0 <= n < 2^31.
#include <cstdint>

namespace gpukern {

struct FastDiv {
  uint32_t d, m, s;
  FastDiv() = default;
  explicit FastDiv(uint32_t divisor) : d(divisor), s(0) {
    while ((uint64_t{1} << s) < d) ++s;
    m = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << s) - d)) / d + 1);
  }
  __device__ __forceinline__ int div(int n) const {
    const uint32_t u = static_cast<uint32_t>(n);
    return static_cast<int>((__umulhi(u, m) + u) >> s);
  }
};

}  // namespace gpukern
