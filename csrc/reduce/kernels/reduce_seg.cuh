#pragma once
// seg_reduce_kernel: blocks split each of one or a few long segments, the last block to arrive
// finishes (see reduce_common.cuh for the family).
#include <cstdint>
#include <type_traits>

#include "reduce/kernels/reduce_common.cuh"

namespace gpukern {
namespace reduce {

// How the seg kernel walks a segment's reduced elements.
//   kSegGeneral  element r at reduced_offset(r): any layout (a decode per element)
//   kSegContig   one contiguous run of R (16-byte loads after the misaligned head)
//   kSegRuns     the innermost reduced dim is stride 1: the segment is R / run contiguous runs
//                (e.g. NCHW over (0, 2, 3): N runs of H*W). The block's threads form 1 << runs_lg
//                groups; group g of block b takes runs (b << runs_lg) + g, stepping by
//                gridDim.x << runs_lg, each run walked like kSegContig by the group's threads.
constexpr int kSegGeneral = 0;
constexpr int kSegContig = 1;
constexpr int kSegRuns = 2;

// grid.x = blocks per segment (B), grid.y strides over segments (outputs). Block: kThreads
// threads, each accumulating in registers, then block_reduce. B == 1: thread 0 stores the
// segment's result. B > 1 (only when n_out <= kTicketsPerSlot, gridDim.y == n_out): each block
// writes its partial to ws[seg * B + blockIdx.x] and takes a ticket (last_block_arrives); the
// last block of the segment reduces the B partials in a fixed order, stores, and resets the
// counter.
// smem: kThreads / 32 partials for block_reduce (reused across segments; block_reduce ends with a
// barrier, and the barrier at the end of each segment keeps the ticket's flag until all read it).
template <typename T, typename Op, int kMode>
__global__ void __launch_bounds__(kThreads)
    seg_reduce_kernel(const T* __restrict__ x, ReduceLayout L, ReduceOut out,
                      typename AccOf<T>::type* __restrict__ ws, int ticket_base, int runs_lg) {
  using Acc = typename AccOf<T>::type;
  __shared__ Acc smem[kThreads / kWarpSize];
  pdl_wait_then_release();
  const Op op{};
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  const int64_t nthr = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t seg = blockIdx.y; seg < L.n_out; seg += gridDim.y) {
    const T* base = x + offset_of(seg, L.nk, L.ksize, L.kstride);
    Acc acc = Acc(Op::identity());
    if (kMode == kSegContig) {
      acc = accumulate_contig<kSegUnroll, T, Op, Acc>(base, L.R, t, nthr, acc, op);
    } else if (kMode == kSegRuns) {
      const int64_t run = L.rsize[L.nr - 1];
      const int64_t nruns = L.R / run;
      const int gthreads = kThreads >> runs_lg;
      const int64_t step = static_cast<int64_t>(gridDim.x) << runs_lg;
      for (int64_t j = (static_cast<int64_t>(blockIdx.x) << runs_lg) + threadIdx.x / gthreads;
           j < nruns; j += step) {
        const int64_t off = L.nr == 2 ? j * L.rstride[0] : offset_of(j, L.nr - 1, L.rsize, L.rstride);
        acc = accumulate_contig<kSegUnroll, T, Op, Acc>(
            base + off, run, threadIdx.x % gthreads, gthreads, acc, op);
      }
    } else {
      for (int64_t r = t; r < L.R; r += nthr) acc = op(acc, to_acc(base[reduced_offset(L, r)]));
    }
    acc = block_reduce<kThreads>(acc, op, smem);
    if (gridDim.x == 1) {
      if (threadIdx.x == 0) store_out<T, Acc>(out, seg, acc);
      continue;
    }
    unsigned int* ticket = &g_tickets[ticket_base + seg];
    if (threadIdx.x == 0) ws[seg * gridDim.x + blockIdx.x] = acc;
    if (last_block_arrives(ticket, gridDim.x)) {  // block-uniform: every thread reaches it
      Acc v = Acc(Op::identity());
      for (int64_t i = threadIdx.x; i < gridDim.x; i += kThreads) {
        v = op(v, __ldcg(&ws[seg * gridDim.x + i]));
      }
      v = block_reduce<kThreads>(v, op, smem);
      if (threadIdx.x == 0) {
        store_out<T, Acc>(out, seg, v);
        ticket_reset(ticket);  // ready for the next launch on this stream
      }
    }
    __syncthreads();  // the ticket's flag read by all before a later segment rewrites it
  }
}

}  // namespace reduce
}  // namespace gpukern
