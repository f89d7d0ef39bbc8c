#pragma once
// periodic_reduce_kernel: a contiguous [N, M] array reduced over dim 0 into M <= 32 outputs (a
// short row, e.g. [2^24, 6] or [1536, 4] over dim 0), read as one flat stream of 16-byte vectors
// (device/periodic.cuh; see reduce_common.cuh for the family).
#include "device/periodic.cuh"
#include "reduce/kernels/reduce_common.cuh"

namespace gpukern {
namespace reduce {

// Float types only (float accumulators). ws: gridDim.x * M floats when gridDim.x > 1;
// ticket_index: this launch's counter in g_tickets.
template <typename T, typename Op>
__global__ void __launch_bounds__(periodic::kThreads, 4)
    periodic_reduce_kernel(const T* __restrict__ x, periodic::Params p, ReduceOut out,
                           float* __restrict__ ws, int ticket_index) {
  periodic::body<T, Op, false>(x, x, p, ws, &g_tickets[ticket_index],
                               [&](int m, float v) { store_out<T, float>(out, m, v); });
}

}  // namespace reduce
}  // namespace gpukern
