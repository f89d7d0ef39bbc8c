#pragma once
// Host side of the arrival tickets (device/tickets.cuh): which slot of counters a launch on a
// given (device, stream) uses.
#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <utility>

#include "device/tickets.cuh"

namespace gpukern {

// Index of the first counter of this (device, stream)'s slot. One table for the whole extension
// (an inline function's statics are shared across translation units), handed out round-robin
// per device.
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

}  // namespace gpukern
