#pragma once
// FNV-1a over the values of a fixed-size array of integers: the hash of the per-problem caches'
// keys (conv/igemm/blas.cpp's cuBLASLt plans, conv/vendor.cpp's race verdicts).
#include <array>
#include <cstddef>
#include <cstdint>

namespace gpukern {

struct ArrayHash {
  template <size_t N>
  size_t operator()(const std::array<int64_t, N>& k) const {
    size_t h = 0xcbf29ce484222325ull;
    for (int64_t v : k) h = (h ^ static_cast<size_t>(v)) * 0x100000001b3ull;
    return h;
  }
};

}  // namespace gpukern
