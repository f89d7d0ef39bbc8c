#pragma once
// Hardware and indexing limits that host planners and kernels' static_asserts share (torch-free).
#include <cstddef>
#include <cstdint>

namespace gpukern {

// Dynamic shared memory a block may use without cudaFuncSetAttribute (allow_dynamic_smem).
constexpr size_t kDefaultSmemLimit = 48 * 1024;

// gridDim.y and gridDim.z are at most 65535; gridDim.x at most 2^31 - 1.
constexpr int64_t kMaxGridY = 65535;
constexpr int64_t kMaxGridX = 2147483647;

// Kernels that keep a column, row or element index in a 32-bit int accept sizes below this (the
// headroom keeps sums of an index and a tile or halo from overflowing).
constexpr int64_t kMaxIntIndex = int64_t{1} << 30;

}  // namespace gpukern
