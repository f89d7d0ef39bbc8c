#pragma once
// Regions of a two-size shape space (rows x columns, reduced x kept, ...) as data: the measured
// boxes where a dispatch hands a problem to another library (mv/dispatch.cu cublas_wins,
// reduce/dispatch.cu aten_wins). Each box is a list entry with its bounds, so that a sweep's new
// finding is one more line, not one more clause in a boolean expression.
#include <cstdint>
#include <limits>

namespace gpukern {

constexpr int64_t kNoLimit = std::numeric_limits<int64_t>::max();

// a_lo <= a <= a_hi, b_lo <= b <= b_hi and ab_lo <= a * b <= ab_hi (every bound inclusive).
struct SizeBox {
  int64_t a_lo, a_hi, b_lo, b_hi;
  int64_t ab_lo = 0, ab_hi = kNoLimit;
  constexpr bool holds(int64_t a, int64_t b) const {
    return a >= a_lo && a <= a_hi && b >= b_lo && b <= b_hi && a * b >= ab_lo && a * b <= ab_hi;
  }
};

// Whether (a, b) lies in any of the boxes.
template <size_t K>
constexpr bool in_any(const SizeBox (&boxes)[K], int64_t a, int64_t b) {
  for (const SizeBox& box : boxes) {
    if (box.holds(a, b)) return true;
  }
  return false;
}

}  // namespace gpukern
