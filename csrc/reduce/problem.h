#pragma once
// Reductions (sum, mean, amax, amin): the normalised problem shared by the host entry
// (reduce/ops.cpp, which builds it), the CPU kernel and the CUDA kernels. Torch-free on purpose:
// the kernel headers include it.
#include <cstdint>

#if defined(__CUDACC__)
#define GK_HD __host__ __device__ __forceinline__
#else
#define GK_HD inline
#endif

namespace gpukern {

// Any reduction of a strided tensor, after dropping size-1 dims and merging dims that are
// adjacent in memory:
//   output index o (the output is contiguous, kept dims in their original order)
//     -> input offset  sum_d idx_d(o) * kstride[d]   over the kept dims (innermost last)
//   reduced linear index r in [0, R)
//     -> input offset  sum_d idx_d(r) * rstride[d]   over the reduced dims (sorted by stride,
//                                                     innermost last)
// nr >= 1 always (a reduction over nothing is one reduced dim of size 1, stride 0).
struct ReduceLayout {
  static constexpr int kMaxDims = 25;
  int nk = 0;
  int nr = 0;
  int64_t n_out = 1;
  int64_t R = 1;
  int64_t ksize[kMaxDims];
  int64_t kstride[kMaxDims];
  int64_t rsize[kMaxDims];
  int64_t rstride[kMaxDims];
};

// Offset of linear index idx over n dims (row-major, last dim fastest).
GK_HD int64_t offset_of(int64_t idx, int n, const int64_t* size, const int64_t* stride) {
  int64_t off = 0;
  for (int d = n - 1; d >= 0; --d) {
    const int64_t s = size[d];
    const int64_t q = idx / s;
    off += (idx - q * s) * stride[d];
    idx = q;
  }
  return off;
}

enum class ReduceKind : int { kSum = 0, kMean = 1, kMax = 2, kMin = 3 };

// The op name of a kind, as messages print it ("gpukern::<name>: ...").
inline const char* kind_name(ReduceKind k) {
  switch (k) {
    case ReduceKind::kSum:
      return "sum";
    case ReduceKind::kMean:
      return "mean";
    case ReduceKind::kMax:
      return "amax";
    default:
      return "amin";
  }
}

// How the result is stored: in the kernel's element type, in float32 (half/bfloat16 summed to
// float32 by dtype=), or as int64 (integer sums).
enum class ReduceOutKind : int { kSame = 0, kFloat = 1, kInt64 = 2 };

}  // namespace gpukern
