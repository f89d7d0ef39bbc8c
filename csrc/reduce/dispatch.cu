// Reductions on CUDA: algorithm choice from the normalised layout, then one launch on the current
// stream (see reduce_kernels.cuh for the kernels and reduce.cpp for checks and dtype rules).
//
// Algorithms (names accepted by torch_ops.force_algorithm("reduce", name), returned by
// torch_ops.algorithm("sum"|"mean"|"amax"|"amin", x, dim)), with what each can run:
//   small       one block (32, 256 or 512 threads), no workspace, no ticket: full reductions
//               (n_out == 1) of contiguous data
//   flat        flat kernel: full reductions of contiguous data, blocks split the run, lean
//               parameters; block 0 polls the others' flagged partials (float accumulators, up
//               to 256 blocks) or the last block to take an acquire-release ticket finishes
//   seg_contig  seg kernel, blocks split each contiguous segment (reduced dims one stride-1 run)
//   seg         seg kernel with the general index decode: any layout
//   seg_runs    seg kernel over contiguous runs: the innermost reduced dim has stride 1 (e.g.
//               NCHW over (0, 2, 3): N runs of H*W per channel), 1..8 runs at once per block
//   row         row kernel, 1..32 lanes per contiguous row: reduced dims one stride-1 run
//   col_vec     col kernel with a 16-byte vector of outputs per thread: float types, one kept dim
//               of stride 1, one reduced dim with stride % V == 0, n_out % V == 0, data aligned
//   col         col kernel, threads across outputs: any layout
//   row_vec     row_vec kernel (float types): one kept dim, rows 16-byte aligned whole vectors (data aligned,
//               row stride % V == 0, R % V == 0), R <= 128 * V (<= 4 vectors per lane of a warp)
// Automatic choice (a pure function of the layout, dtype and alignment):
//   n_out == 1, contiguous, use_small()    small (launch-bound; floats up to 8192 vectors, integers
//                                          up to 2048: one block of 32 to 512 threads from the
//                                          dtype's table, red::SmallTableOf. H200 in a CUDA graph,
//                                          fp32: 1K 0.92 us, 4K 0.99, 16K 1.27; bf16 1K 0.90, 4K
//                                          1.00, 64K 1.98; flat 2.06 at fp32 16K)
//   n_out == 1, contiguous                 flat (one block per 4 vectors per thread, at most one
//                                          resident wave; fp32 64K 2.18 us, 1M 2.70 us against
//                                          seg_contig's 2.76 and 3.31: lean parameters and the
//                                          polled finish instead of fences and a ticket)
//   n_out == 1                             seg_runs / seg (one full resident wave of blocks, last
//                                          block to arrive finishes)
//   row_vec applies and n_out >= 2048      row_vec (65536x256: 5 waves of row blocks at 80
//                                          registers reached 47-78% of DRAM bandwidth)
//   contiguous rows, n_out >= 2048 or      row
//     R <= 4 * 1024 * V
//   contiguous rows otherwise              seg_contig (blocks split each long row)
//   innermost reduced dim stride 1, runs   seg_runs (threads along the runs: the col kernel's
//     of >= 32 vectors                     threads across outputs strided H*W apart were 3.6x
//                                          slower than torch on 32x256x56x56 over (0, 2, 3))
//   col_vec applies and n_out >= 32 * V    col_vec
//   n_out >= 32                            col (R split across blocks when outputs are few)
//   otherwise                              seg (blocks split each of the few strided outputs)
// Non-mergeable reduced dims (e.g. dims (0, 2) of a [A, B, C] tensor) take the same kernels
// through the general index decode instead of one stride.
#include <ATen/ATen.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/algo_table.h"
#include "core/checks.h"
#include "core/dispatch.h"
#include "core/launch.cuh"
#include "core/tickets.h"
#include "reduce/reduce.h"
#include "reduce/reduce_kernels.cuh"

namespace gpukern {
namespace {

constexpr const char* kOp = "reduce";

enum class RedAlgo { kSmall, kSegContig, kSeg, kRow, kColVec, kCol, kRowVec, kSegRuns, kFlat };

const std::vector<std::string>& reduce_algo_names() {
  static const std::vector<std::string> names = {"small", "seg_contig", "seg",
                                                 "row",   "col_vec",    "col",
                                                 "row_vec", "seg_runs", "flat"};
  return names;
}

// What the choice reads besides the layout.
struct RedInput {
  bool float_acc;
  int elem_size;
  bool aligned;
};

bool contiguous_run(const ReduceLayout& L) { return L.nr == 1 && L.rstride[0] == 1; }

// The innermost reduced dim is stride 1 with at least 32 16-byte vectors (a warp's worth):
// seg_runs reads it coalesced.
bool long_runs(const ReduceLayout& L, int64_t V) {
  return L.rstride[L.nr - 1] == 1 && L.rsize[L.nr - 1] >= 32 * V;
}

bool reduce_algo_applies(RedAlgo a, const ReduceLayout& L, const RedInput& in) {
  const int64_t V = 16 / in.elem_size;
  switch (a) {
    case RedAlgo::kSmall:  // 32-bit indices
      return L.n_out == 1 && contiguous_run(L) && L.R <= red::kSmallMaxElems;
    case RedAlgo::kFlat:
      return L.n_out == 1 && contiguous_run(L);
    case RedAlgo::kSegContig:
    case RedAlgo::kRow:
      return contiguous_run(L);
    case RedAlgo::kColVec:
      return in.float_acc && L.nk == 1 && L.kstride[0] == 1 && L.nr == 1 &&
             L.rstride[0] % V == 0 && L.n_out % V == 0 && in.aligned;
    case RedAlgo::kRowVec:
      return in.float_acc && contiguous_run(L) && L.nk == 1 && in.aligned && L.kstride[0] % V == 0 &&
             L.R % V == 0 && L.R / V <= int64_t{red::kRowVecUnroll} * kWarpSize;
    case RedAlgo::kSegRuns:
      return L.rstride[L.nr - 1] == 1;
    case RedAlgo::kSeg:
    case RedAlgo::kCol:
      return true;
  }
  return false;
}

// row_vec from this many rows: its grid is one resident wave of 4 * 132 blocks of 8..256 rows.
// Fewer rows than that leave SMs idle either way; row (one block per row group) is kept there.
constexpr int64_t kRowVecMinRows = 2048;

// Full reduction of nvec 16-byte vectors: small (one block) rather than flat, up to two rounds of
// 512 threads x 8 vectors for floats (fp32 32768 elements: small 1.80 us, flat 2.09; bf16 65536:
// 2.12 against 2.19 in a CUDA graph on the H200), one round of 256 x 8 for integers.
bool use_small(int64_t nvec, const RedInput& in) {
  return nvec <= (in.float_acc ? red::kSmallMaxVecs : red::kSmallMaxVecsInt);
}

RedAlgo choose_reduce_algo_auto(const ReduceLayout& L, const RedInput& in) {
  const int64_t V = 16 / in.elem_size;
  const bool contig = contiguous_run(L);
  if (L.n_out == 1) {
    if (contig && use_small(ceil_div(L.R, V), in)) return RedAlgo::kSmall;
    if (contig) return RedAlgo::kFlat;
    return long_runs(L, V) ? RedAlgo::kSegRuns : RedAlgo::kSeg;
  }
  if (contig) {
    const int64_t per_block_min = red::kSegBlockVecs * V;
    if (L.n_out >= kRowVecMinRows && reduce_algo_applies(RedAlgo::kRowVec, L, in)) {
      return RedAlgo::kRowVec;
    }
    if (L.n_out >= kTicketsPerSlot || L.R <= 4 * per_block_min) return RedAlgo::kRow;
    return RedAlgo::kSegContig;
  }
  if (long_runs(L, V)) return RedAlgo::kSegRuns;
  if (reduce_algo_applies(RedAlgo::kColVec, L, in) && L.n_out >= red::kColX * V) {
    return RedAlgo::kColVec;
  }
  return L.n_out >= red::kColX ? RedAlgo::kCol : RedAlgo::kSeg;
}

// The automatic choice, or the forced one (core/algo_table.h) when it can run the layout.
RedAlgo choose_reduce_algo(const ReduceLayout& L, const RedInput& in) {
  const std::string forced = forced_algorithm(kOp);
  if (forced.empty()) return choose_reduce_algo_auto(L, in);
  const auto a = static_cast<RedAlgo>(algorithm_index(kOp, forced, reduce_algo_names()));
  GK_CHECK(reduce_algo_applies(a, L, in), kOp, "forced algorithm '", forced,
           "' cannot run this layout (outputs=", L.n_out, ", reduced elements=", L.R,
           ", reduced dims after merging=", L.nr, ", innermost reduced stride=",
           L.rstride[L.nr - 1], ", float=", in.float_acc, ", 16-byte aligned=", in.aligned, ")");
  return a;
}

// Resident blocks per SM of a reduce kernel (all run red::kThreads threads).
template <auto kKernel>
int64_t blocks_per_sm(int device) {
  return resident_blocks_per_sm<kKernel>(device, red::kThreads);
}

int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return std::max(lo, std::min(v, hi)); }

// The small kernel with the first configuration of Table (from kIdx on) that takes nvec vectors
// in one round, or the last one.
template <typename T, typename Op, typename Table, int kIdx = 0>
void launch_small(int64_t nvec, const T* xp, int n, const red::ReduceOut& o, cudaStream_t stream) {
  constexpr red::SmallConfig c = Table::kC[kIdx];
  if constexpr (kIdx + 1 < red::small_table_size<Table>()) {
    if (nvec > red::small_round_vecs<Table>(kIdx)) {
      launch_small<T, Op, Table, kIdx + 1>(nvec, xp, n, o, stream);
      return;
    }
  }
  launch_pdl(red::small_reduce_kernel<T, Op, c.threads, c.unroll>, dim3(1), dim3(c.threads), 0,
             stream, xp, n, o);
  GK_CHECK_LAUNCH();
}

template <typename T, typename Op>
void launch_reduce(const ReduceLayout& L, const red::ReduceOut& o, const at::Tensor& x,
                   cudaStream_t stream, int tbase) {
  using Acc = typename red::AccOf<T>::type;
  constexpr int kThreads = red::kThreads;
  constexpr int V = kVec16<T>;
  const int64_t sms = device_props().multiProcessorCount;
  const int64_t target_blocks = sms * (2048 / kThreads);  // one full wave of resident blocks
  // Elements per block below which splitting a segment further does not pay: four vectors per
  // thread (a single round trip; more blocks rather than longer rounds for small inputs).
  const int64_t per_block_min = red::kSegBlockVecs * V;
  const T* xp = reinterpret_cast<const T*>(x.data_ptr());
  const auto ws_opts = x.options().dtype(std::is_same<Acc, float>::value ? at::kFloat : at::kLong);
  const int dev = x.get_device();
  const RedAlgo algo =
      choose_reduce_algo(L, RedInput{std::is_same<Acc, float>::value, static_cast<int>(sizeof(T)),
                                     is_aligned16(xp)});

  // bps > 1 needs n_out <= kTicketsPerSlot (one counter per segment, gridDim.y == n_out); a
  // forced seg on more segments runs one block per segment.
  auto launch_seg = [&](int mode, int64_t bps, int runs_lg) {
    bps = L.n_out <= kTicketsPerSlot ? clamp64(bps, 1, 65535) : 1;
    at::Tensor ws;
    Acc* wsp = nullptr;
    if (bps > 1) {
      ws = at::empty({bps * L.n_out}, ws_opts);
      wsp = reinterpret_cast<Acc*>(ws.data_ptr());
    }
    const dim3 grid(static_cast<unsigned>(bps),
                    static_cast<unsigned>(bps > 1 ? L.n_out : std::min<int64_t>(L.n_out, 65535)));
    if (mode == red::kSegContig) {
      launch_pdl(red::seg_reduce_kernel<T, Op, red::kSegContig>, grid, dim3(kThreads), 0, stream,
                 xp, L, o, wsp, tbase, runs_lg);
    } else if (mode == red::kSegRuns) {
      launch_pdl(red::seg_reduce_kernel<T, Op, red::kSegRuns>, grid, dim3(kThreads), 0, stream,
                 xp, L, o, wsp, tbase, runs_lg);
    } else {
      launch_pdl(red::seg_reduce_kernel<T, Op, red::kSegGeneral>, grid, dim3(kThreads), 0, stream,
                 xp, L, o, wsp, tbase, runs_lg);
    }
    GK_CHECK_LAUNCH();
  };

  switch (algo) {
    case RedAlgo::kSmall: {
      const int n = static_cast<int>(L.R);  // <= red::kSmallMaxElems (reduce_algo_applies)
      launch_small<T, Op, red::SmallTableOf<T, Op>>(ceil_div(L.R, int64_t{V}), xp, n, o, stream);
      return;
    }
    case RedAlgo::kFlat: {
      // Blocks: one full resident wave at most, and at most one round of kSegUnroll vectors per
      // thread below that (1M fp32: 256 blocks).
      const int64_t wave = sms * blocks_per_sm<red::flat_reduce_kernel<T, Op>>(dev);
      const int64_t blocks = std::min(wave, ceil_div(L.R, per_block_min));
      at::Tensor ws;
      Acc* wsp = nullptr;
      if (blocks > 1 && !red::flat_polled<Acc>(blocks)) {
        ws = at::empty({blocks}, ws_opts);
        wsp = reinterpret_cast<Acc*>(ws.data_ptr());
      }
      launch_pdl(red::flat_reduce_kernel<T, Op>, dim3(static_cast<unsigned>(blocks)),
                 dim3(kThreads), 0, stream, xp, L.R, o, wsp, tbase / kTicketsPerSlot);
      GK_CHECK_LAUNCH();
      return;
    }
    case RedAlgo::kSegContig:
    case RedAlgo::kSeg: {
      const bool contig = algo == RedAlgo::kSegContig;
      if (L.n_out == 1) {
        // Grid = one full wave of resident blocks (not 8 per SM regardless of registers, which
        // left a partial second wave), each thread with kSegUnroll 16-byte loads in flight.
        const int64_t wave =
            sms * (contig ? blocks_per_sm<red::seg_reduce_kernel<T, Op, red::kSegContig>>(dev)
                          : blocks_per_sm<red::seg_reduce_kernel<T, Op, red::kSegGeneral>>(dev));
        launch_seg(contig ? red::kSegContig : red::kSegGeneral,
                   std::min(wave, ceil_div(L.R, per_block_min)), 0);
      } else if (contig) {
        const int64_t wave = sms * blocks_per_sm<red::seg_reduce_kernel<T, Op, red::kSegContig>>(dev);
        launch_seg(red::kSegContig, std::min(ceil_div(wave, L.n_out), ceil_div(L.R, per_block_min)),
                   0);
      } else {
        launch_seg(red::kSegGeneral, std::min(ceil_div(target_blocks, L.n_out),
                                              ceil_div(L.R, int64_t{kThreads} * 4)),
                   0);
      }
      return;
    }
    case RedAlgo::kSegRuns: {
      // Groups per block: halve the group while a run still fills its kSegUnroll vectors per
      // thread (H*W = 784 fp32: 4 groups of 64 threads), at most 8 groups (warp-sized).
      const int64_t run = L.rsize[L.nr - 1];
      const int64_t nruns = L.R / run;
      int lg = 0;
      while (lg < 3 && run <= (int64_t{kThreads} >> (lg + 1)) * V * red::kSegUnroll) ++lg;
      const int64_t run_slots = ceil_div(nruns, int64_t{1} << lg);  // group-rounds per segment
      // Blocks per segment: about one resident wave in all, each block the same number of
      // group-rounds (e.g. 256 outputs x 32 runs: 4 blocks of 8 runs per output, 1024 blocks).
      const int64_t wave = sms * blocks_per_sm<red::seg_reduce_kernel<T, Op, red::kSegRuns>>(dev);
      int64_t bps = std::min(std::max<int64_t>(wave / L.n_out, 1), run_slots);
      bps = ceil_div(run_slots, ceil_div(run_slots, bps));
      launch_seg(red::kSegRuns, bps, lg);
      return;
    }
    case RedAlgo::kRow: {
      // Lanes per row: about kRowUnroll 16-byte vectors per lane (all in flight at once), at
      // most a warp; short rows pack several rows per warp.
      const int64_t need = ceil_div(L.R, int64_t{red::kRowUnroll} * V);
      int lg = 0;
      while (lg < 5 && (int64_t{1} << lg) < need) ++lg;
      const int64_t rows_per_block = kThreads >> lg;
      const int64_t blocks = std::min(ceil_div(L.n_out, rows_per_block), sms * 64);
      red::row_reduce_kernel<T, Op>
          <<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(xp, L, o, lg);
      GK_CHECK_LAUNCH();
      return;
    }
    case RedAlgo::kRowVec: {
      if constexpr (std::is_same<Acc, float>::value) {
        // Lanes per row: the fewest (power of 2) that hold the row in kRowVecUnroll vectors each.
        // Grid: rounds = rows per group needed with one resident wave; then the fewest blocks
        // that cover the rows in that many rounds, so every group gets the same number of rows
        // (at most the last block's groups run one round short) and no block waits for a wave.
        const int64_t nvec = L.R / V;
        int lg = 0;
        while ((int64_t{red::kRowVecUnroll} << lg) < nvec) ++lg;
        const int64_t rows_per_block = kThreads >> lg;
        const int64_t wave = sms * blocks_per_sm<red::row_vec_reduce_kernel<T, Op>>(dev);
        const int64_t rounds = ceil_div(L.n_out, wave * rows_per_block);
        const int64_t blocks = ceil_div(L.n_out, rounds * rows_per_block);
        launch_pdl(red::row_vec_reduce_kernel<T, Op>, dim3(static_cast<unsigned>(blocks)),
                   dim3(kThreads), 0, stream, xp, L.n_out, L.kstride[0], static_cast<int>(nvec),
                   o, lg);
        GK_CHECK_LAUNCH();
      } else {
        TORCH_INTERNAL_ASSERT(false, "row_vec chosen for an integer reduction");
      }
      return;
    }
    case RedAlgo::kColVec: {
      if constexpr (std::is_same<Acc, float>::value) {
        // One 16-byte vector of outputs per thread. Splits of R make one resident wave (no
        // partial second wave); each keeps a few unrolled rounds.
        const int64_t ntiles = ceil_div(L.n_out, int64_t{red::kColX} * V);
        const int64_t wave = sms * blocks_per_sm<red::col_vec_reduce_kernel<T, Op>>(dev);
        int64_t splits = 1;
        if (ntiles < wave && ntiles <= kTicketsPerSlot) {
          splits = std::min({wave / ntiles,
                             ceil_div(L.R, int64_t{red::kColY} * red::kColVecUnroll * 2),
                             int64_t{64}});
          splits = std::max<int64_t>(splits, 1);
        }
        const int64_t rchunk = ceil_div(L.R, splits);
        splits = ceil_div(L.R, rchunk);
        at::Tensor ws;
        float* wsp = nullptr;
        if (splits > 1) {
          ws = at::empty({splits * L.n_out}, ws_opts);
          wsp = ws.data_ptr<float>();
        }
        const int64_t gx = splits > 1 ? ntiles : std::min(ntiles, sms * 64);
        const dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(splits));
        red::col_vec_reduce_kernel<T, Op><<<grid, dim3(red::kColX, red::kColY), 0, stream>>>(
            xp, L, o, wsp, tbase, rchunk);
        GK_CHECK_LAUNCH();
      } else {
        TORCH_INTERNAL_ASSERT(false, "col_vec chosen for an integer reduction");
      }
      return;
    }
    case RedAlgo::kCol: {
      const int64_t ntiles = ceil_div(L.n_out, red::kColX);
      int64_t splits = 1;
      if (ntiles < target_blocks && ntiles <= kTicketsPerSlot) {
        // Each split keeps at least a few unrolled rounds per thread; at most 64 partials per
        // output keep the finishing block short.
        splits = std::min({ceil_div(target_blocks, ntiles),
                           ceil_div(L.R, int64_t{red::kColY} * red::kColUnroll * 2), int64_t{64}});
        splits = std::max<int64_t>(splits, 1);
      }
      const int64_t rchunk = ceil_div(L.R, splits);
      splits = ceil_div(L.R, rchunk);
      at::Tensor ws;
      Acc* wsp = nullptr;
      if (splits > 1) {
        ws = at::empty({splits * L.n_out}, ws_opts);
        wsp = reinterpret_cast<Acc*>(ws.data_ptr());
      }
      const int64_t gx = splits > 1 ? ntiles : std::min(ntiles, sms * 64);
      const dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(splits));
      red::col_reduce_kernel<T, Op><<<grid, dim3(red::kColX, red::kColY), 0, stream>>>(
          xp, L, o, wsp, tbase, rchunk);
      GK_CHECK_LAUNCH();
      return;
    }
  }
}

}  // namespace

void reduce_cuda(const ReduceLayout& L, ReduceKind kind, ReduceOutKind out_kind,
                 const at::Tensor& x, const at::Tensor& out) {
  CudaLaunchContext ctx(x);
  const int tbase = ticket_slot_base(x.device().index(), ctx.stream);
  red::ReduceOut o;
  o.ptr = out.data_ptr();
  o.kind = out_kind;
  o.has_factor = kind == ReduceKind::kMean;
  o.factor = static_cast<float>(1.0 / static_cast<double>(L.R));
  switch (x.scalar_type()) {
    case at::kBool:
    case at::kByte:
      return launch_reduce<uint8_t, red::SumI64Op>(L, o, x, ctx.stream, tbase);
    case at::kChar:
      return launch_reduce<int8_t, red::SumI64Op>(L, o, x, ctx.stream, tbase);
    case at::kShort:
      return launch_reduce<int16_t, red::SumI64Op>(L, o, x, ctx.stream, tbase);
    case at::kInt:
      return launch_reduce<int32_t, red::SumI64Op>(L, o, x, ctx.stream, tbase);
    case at::kLong:
      return launch_reduce<long long, red::SumI64Op>(L, o, x, ctx.stream, tbase);
    default:
      break;
  }
  GK_DISPATCH_FLOAT_CUDA(x.scalar_type(), "reduce", [&] {
    switch (kind) {
      case ReduceKind::kSum:
      case ReduceKind::kMean:
        launch_reduce<scalar_t, SumOp>(L, o, x, ctx.stream, tbase);
        break;
      case ReduceKind::kMax:
        launch_reduce<scalar_t, MaxOp>(L, o, x, ctx.stream, tbase);
        break;
      case ReduceKind::kMin:
        launch_reduce<scalar_t, MinOp>(L, o, x, ctx.stream, tbase);
        break;
    }
  });
}

std::string reduce_cuda_algorithm(const ReduceLayout& L, bool float_acc, int elem_size,
                                  bool aligned) {
  return reduce_algo_names()[static_cast<int>(
      choose_reduce_algo(L, RedInput{float_acc, elem_size, aligned}))];
}

}  // namespace gpukern
