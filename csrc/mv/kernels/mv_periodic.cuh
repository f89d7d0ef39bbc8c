#pragma once
// mv_periodic_kernel: y = A @ x for A = At.t() with At [N, M] contiguous and few rows
// (2 <= M <= 32; a storage row of 4-128 bytes, e.g. A.t bf16 6 x 2^24), read as one flat stream
// of 16-byte vectors (device/periodic.cuh; see mv_common.cuh for the family).
#include "device/periodic.cuh"
#include "mv/kernels/mv_common.cuh"

namespace gpukern {
namespace mv {

// 2 blocks an SM (128 registers: a round holds U vectors and their U * V x values) keep 32 KB of
// loads in flight per SM. ws: gridDim.x * M floats when gridDim.x > 1; ticket_index: this launch's counter in g_tickets.
template <typename T>
__global__ void __launch_bounds__(periodic::kThreads, 2)
    mv_periodic_kernel(const T* __restrict__ A, const T* __restrict__ x, T* __restrict__ y,
                       periodic::Params p, float* __restrict__ ws, int ticket_index) {
  periodic::body<T, SumOp, true>(A, x, p, ws, &g_tickets[ticket_index],
                                 [&](int m, float v) { y[m] = from_float<T>(v); });
}

}  // namespace mv
}  // namespace gpukern
