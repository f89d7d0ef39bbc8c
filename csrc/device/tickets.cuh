#pragma once
// Arrival tickets for kernels that finish in the last block to arrive (reductions, split mv).
// A family keeps its own `__device__ unsigned int g_tickets[kTicketSlots * kTicketsPerSlot]`:
// static device memory is zeroed when the module loads, and the last block puts its counter
// back to 0 (ticket_reset), so no memset launch is needed per call. Each (device, stream) gets
// its own slot of kTicketsPerSlot counters (core/tickets.h hands them out), so kernels running
// concurrently on different streams never share a counter; kernels on one stream are serialised
// and may reuse them. More than kTicketSlots streams using tickets concurrently on one device
// would share slots (documented limit).
#include <cuda_runtime.h>

namespace gpukern {

constexpr int kTicketSlots = 64;
constexpr int kTicketsPerSlot = 2048;

// Take a ticket with acquire-release semantics at GPU scope. The release orders the calling
// thread's earlier writes, and through a preceding __syncthreads its block's, before the
// increment; the acquire makes every partial released by earlier arrivals visible to the caller,
// and through a following __syncthreads to its whole block. Replaces the __threadfence()
// (fence.sc.gpu) + atomicAdd + __threadfence() sequence, whose sequentially consistent fences sit
// on the critical path of launch-bound reductions.
__device__ __forceinline__ unsigned int ticket_arrive_acq_rel(unsigned int* ticket) {
  unsigned int old;
  asm volatile("atom.add.acq_rel.gpu.u32 %0, [%1], 1;" : "=r"(old) : "l"(ticket) : "memory");
  return old;
}

// The last-block step, called by every thread of every block of the grid (block-uniform control
// flow) once the block's partials are in global memory, written by any of its threads. Returns,
// in every thread, whether this block arrived last of `blocks`; in that block every other
// block's partials are then visible (read them with __ldcg, past L1). The last block calls
// ticket_reset when done.
__device__ __forceinline__ bool last_block_arrives(unsigned int* ticket, unsigned int blocks) {
  __shared__ bool s_last;
  __syncthreads();  // the block's partials are written before its first thread releases them
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
    s_last = ticket_arrive_acq_rel(ticket) == blocks - 1;
  }
  __syncthreads();  // s_last, and for the last block the acquired partials, visible to the block
  return s_last;
}

// The last block's thread 0 (any one thread) leaves the counter at 0 for the next launch on the
// stream.
__device__ __forceinline__ void ticket_reset(unsigned int* ticket) { *ticket = 0u; }

}  // namespace gpukern
