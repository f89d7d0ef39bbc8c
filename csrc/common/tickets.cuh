#pragma once
// Arrival tickets for kernels that finish in the last block to arrive (reductions, split mv).
// Each family keeps its own `__device__ unsigned int g_tickets[kTicketSlots * kTicketsPerSlot]`:
// static device memory is zeroed when the module loads and the last block puts its counter back
// to 0, so no memset launch is needed per call. Each (device, stream) gets its own slot of
// kTicketsPerSlot counters, so kernels running concurrently on different streams never share a
// counter; kernels on one stream are serialised and may reuse them. More than kTicketSlots
// streams using tickets concurrently on one device would share slots (documented limit).
#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <utility>

namespace gpukern {

constexpr int kTicketSlots = 64;
constexpr int kTicketsPerSlot = 2048;

// Host side: index of the first counter of this (device, stream)'s slot. One table for the whole
// extension (an inline function's statics are shared across translation units), handed out
// round-robin per device.
inline int ticket_slot_base(int device, cudaStream_t stream) {
  static std::mutex mu;
  static std::map<std::pair<int, cudaStream_t>, int> slots;
  static std::map<int, int> next;
  std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_pair(device, stream);
  auto it = slots.find(key);
  if (it == slots.end()) it = slots.emplace(key, next[device]++ % kTicketSlots).first;
  return it->second * kTicketsPerSlot;
}

// Device side: take a ticket with acquire-release semantics at GPU scope. The release orders the
// calling thread's earlier writes (its block's partial) before the increment; the acquire makes
// every partial released by earlier arrivals visible to the caller, and through a following
// __syncthreads to its whole block. Replaces the __threadfence() (fence.sc.gpu) + atomicAdd +
// __threadfence() sequence, whose sequentially consistent fences sit on the critical path of
// launch-bound reductions.
__device__ __forceinline__ unsigned int ticket_arrive_acq_rel(unsigned int* ticket) {
  unsigned int old;
  asm volatile("atom.add.acq_rel.gpu.u32 %0, [%1], 1;" : "=r"(old) : "l"(ticket) : "memory");
  return old;
}

}  // namespace gpukern
