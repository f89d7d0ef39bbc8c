#pragma once
// mv kernels (torch-free): what every mv kernel shares. y[i] = sum_j A[i, j] * x[j], accumulated
// in float32. One header per kernel family:
//   mv_rows.cuh      mv_rows_kernel: row-major A (s1 == 1) or general strides, warps along a row
//                    (coalesced along j), 16-byte loads when the layout allows, warp shuffles.
//                    mv_rows_short_kernel: short aligned rows, a lane group per row, several rows
//                    per lane, no shared memory.
//   mv_rows_mma.cuh  mv_rows_mma_kernel: 16-bit row-major A with aligned whole-vector rows, the
//                    products and their float32 sums on the tensor cores (no per-element
//                    conversions).
//   mv_cols.cuh      mv_cols_kernel: column-major A (s0 == 1, A.t() of a contiguous matrix, read
//                    in place) and very short rows: threads across rows (coalesced along i), the x
//                    chunk staged in shared memory. mv_cols_short_kernel: column-major A with few
//                    rows or short rows, lane groups along A's contiguous storage rows, x read
//                    directly, N split across a wave.
// Every kernel is launched with programmatic dependent launch (device/pdl.cuh).
// The rows and cols kernels can split N across gridDim.y when there are too few rows to fill the
// GPU: the splits write float32 partials to a workspace and the last block of a row group to
// arrive (device/tickets.cuh) adds them in split order, so the result is deterministic and no
// float atomics touch y.
#include <cstdint>
#include <type_traits>

#include "device/block_reduce.cuh"
#include "device/pdl.cuh"
#include "device/tickets.cuh"
#include "device/vec.cuh"
#include "mv/problem.h"

namespace gpukern {
namespace mv {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kWarpSize;
constexpr int kRowUnroll = 4;   // rows kernel: 16-byte vectors in flight per lane
constexpr int kColChunk = 4 * kThreads;  // cols kernel: x elements staged per round
constexpr int kColUnroll = 8;  // cols kernel: 16-byte loads of A in flight per thread

// Arrival counters for the last-block finish (scheme and slots: device/tickets.cuh).
__device__ unsigned int g_tickets[kTicketSlots * kTicketsPerSlot];

}  // namespace mv
}  // namespace gpukern
