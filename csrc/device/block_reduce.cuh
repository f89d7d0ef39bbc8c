#pragma once
// Layered reductions, each layer knowing only the one below:
//   thread (registers) -> warp_reduce (shuffles) -> block_reduce (one shared-memory step).
// Ops are functors with `float operator()(float, float)` and `static float identity()`.
#include <cfloat>
#include <cmath>

namespace gpukern {

constexpr int kWarpSize = 32;

struct SumOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
  __device__ __forceinline__ static float identity() { return 0.f; }
};
// max/min propagate NaN like torch.amax/amin: a NaN anywhere makes the result NaN. On sm_80+
// one max.NaN / min.NaN instruction (FMNMX.NAN; the result is the canonical NaN) replaces the
// compare-compare-select chain, which cost three dependent instructions per element and made
// amax ~4% slower than sum on 65536x256 bf16 rows. Older archs keep the select form.
struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    float d;
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b));
    return d;
#else
    return (a != a || a > b) ? a : b;
#endif
  }
  __device__ __forceinline__ static float identity() { return -INFINITY; }
};
struct MinOp {
  __device__ __forceinline__ float operator()(float a, float b) const {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    float d;
    asm("min.NaN.f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b));
    return d;
#else
    return (a != a || a < b) ? a : b;
#endif
  }
  __device__ __forceinline__ static float identity() { return INFINITY; }
};

// The smallest power of two >= n (n >= 1).
__host__ __device__ constexpr int pow2_at_least(int n) {
  return n <= 1 ? 1 : 2 * pow2_at_least((n + 1) / 2);
}

// Warp step. Contract: all 32 lanes participate; the result is valid in every lane
// (butterfly), combined in a fixed order, so it is bitwise reproducible.
template <typename Op, typename T>
__device__ __forceinline__ T warp_reduce(T v, Op op) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset >>= 1) {
    v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  return v;
}

// Block step. Contract: all kNThreads threads of the block call it with their partial; smem holds
// at least kNThreads / 32 values of T; the result is valid in thread 0 only. Ends with a barrier
// so the caller may reuse smem right after.
template <int kNThreads, typename Op, typename T>
__device__ __forceinline__ T block_reduce(T v, Op op, T* smem) {
  static_assert(kNThreads % kWarpSize == 0 && kNThreads <= 1024, "block of whole warps");
  constexpr int kWarps = kNThreads / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  v = warp_reduce(v, op);
  if (kWarps == 1) return v;
  if (lane == 0) smem[warp] = v;
  __syncthreads();  // every warp's partial is in smem
  if (warp == 0) {
    // Only lanes < kWarps hold partials: the butterfly's levels above the next power of two
    // would only combine identities (op(v, identity) == v up to the sign of a zero sum), so they
    // are skipped: 3 shuffles instead of 5 for 8 warps.
    v = lane < kWarps ? smem[lane] : T(Op::identity());
    constexpr int kSpan = pow2_at_least(kWarps);
#pragma unroll
    for (int offset = kSpan / 2; offset > 0; offset >>= 1) {
      v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
    }
  }
  __syncthreads();  // smem free for reuse
  return v;
}

}  // namespace gpukern
