#pragma once
// flat_reduce_kernel: longer contiguous full reductions, blocks split the run, a polled or
// ticketed finish (see reduce_common.cuh for the family).
#include <cstdint>
#include <type_traits>

#include "reduce/kernels/reduce_common.cuh"

namespace gpukern {
namespace reduce {

// flat kernel, polled finish: at most this many blocks, one float partial each, per ticket slot.
constexpr int kFlatPollMax = kThreads;
// Whether a flat grid of `blocks` (> 1) blocks finishes by polling (no workspace, no ticket):
// float accumulators and at most kFlatPollMax blocks. The launcher allocates the ticket's
// workspace otherwise.
template <typename Acc, typename I>
__host__ __device__ constexpr bool flat_polled(I blocks) {
  return std::is_same<Acc, float>::value && blocks <= I{kFlatPollMax};
}
// Partial slots of the polled finish: {flag in the high word, float bits in the low word}, one
// 8-byte word per block, so one single-copy-atomic store publishes value and flag together.
// Zeroed at module load; the finishing block zeroes every slot it consumed.
__device__ unsigned long long g_flat_slots[kTicketSlots * kFlatPollMax];

__device__ __forceinline__ void st_relaxed_gpu_u64(unsigned long long* p, unsigned long long v) {
  asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ unsigned long long ld_relaxed_gpu_u64(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

// Full reduction of one contiguous run x[0, n) by a grid of B blocks (the launch-bound middle
// sizes beyond the small kernel's, up to a few M elements, and the bandwidth-bound large ones).
// Thread t of B * kThreads walks the run like the seg kernel (kSegUnroll 16-byte vectors in flight) and the block
// combines its threads. Then one of two finishes, both combining the B partials in index order
// (fixed per (n, B), so reproducible):
//   polled (float accumulators, B <= kFlatPollMax): each block b > 0 publishes its partial with
//     one 8-byte store {1, bits} to its slot (g_flat_slots); block 0 polls the slots (thread i
//     slot i) until each is flagged, zeroes them, and combines. No fence, no atomic: the last
//     partial costs one store reaching L2 plus one poll.
//   ticket (integer accumulators, or more blocks): thread 0 writes the partial to ws[b] and the
//     block takes the ticket (last_block_arrives: acquire-release); the last block to arrive
//     combines, stores and resets the ticket.
// Block 0 waiting on the others cannot deadlock: they never wait on anything, so they finish
// and free their slots whatever the order the GPU schedules them in. Lean parameters (48 bytes
// instead of the seg kernel's ~830-byte ReduceLayout).
template <typename T, typename Op>
__global__ void __launch_bounds__(kThreads)
    flat_reduce_kernel(const T* __restrict__ x, int64_t n, ReduceOut out,
                       typename AccOf<T>::type* __restrict__ ws, int ticket_slot) {
  using Acc = typename AccOf<T>::type;
  __shared__ Acc smem[kThreads / kWarpSize];
  pdl_wait_then_release();
  const Op op{};
  Acc acc = accumulate_contig<kSegUnroll, T, Op, Acc>(
      x, n, static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x,
      static_cast<int64_t>(gridDim.x) * kThreads, Acc(Op::identity()), op);
  acc = block_reduce<kThreads>(acc, op, smem);
  if (gridDim.x == 1) {
    if (threadIdx.x == 0) store_out<T, Acc>(out, 0, acc);
    return;
  }
  if constexpr (std::is_same<Acc, float>::value) {
    if (flat_polled<Acc>(gridDim.x)) {
      unsigned long long* slots = &g_flat_slots[ticket_slot * kFlatPollMax];
      if (blockIdx.x != 0) {
        if (threadIdx.x == 0) {
          st_relaxed_gpu_u64(&slots[blockIdx.x],
                             (1ull << 32) | __float_as_uint(acc));
        }
        return;
      }
      // Block 0: thread 0 holds its own partial (acc, from block_reduce); thread i < B polls
      // slot i.
      float v = threadIdx.x == 0 ? acc : Op::identity();
      if (threadIdx.x > 0 && threadIdx.x < gridDim.x) {
        unsigned long long w;
        do {
          w = ld_relaxed_gpu_u64(&slots[threadIdx.x]);
        } while ((w >> 32) == 0);
        slots[threadIdx.x] = 0ull;
        v = __uint_as_float(static_cast<unsigned>(w));
      }
      v = block_reduce<kThreads>(v, op, smem);
      if (threadIdx.x == 0) store_out<T, Acc>(out, 0, v);
      return;
    }
  }
  // Block-uniform from here on (the returns above are whole blocks): every thread reaches
  // last_block_arrives.
  unsigned int* ticket = &g_tickets[ticket_slot * kTicketsPerSlot];
  if (threadIdx.x == 0) ws[blockIdx.x] = acc;
  if (!last_block_arrives(ticket, gridDim.x)) return;
  Acc v = Acc(Op::identity());
  for (unsigned i = threadIdx.x; i < gridDim.x; i += kThreads) v = op(v, __ldcg(&ws[i]));
  v = block_reduce<kThreads>(v, op, smem);
  if (threadIdx.x == 0) {
    store_out<T, Acc>(out, 0, v);
    ticket_reset(ticket);  // ready for the next launch on this stream
  }
}

}  // namespace reduce
}  // namespace gpukern
