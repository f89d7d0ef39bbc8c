// Reductions on CUDA: the algorithm choice from the normalised layout, and the launch of each
// algorithm, one launch on the current stream (kernels in reduce/kernels/, checks and dtype rules
// in reduce/ops.cpp).
//
// Algorithms (names accepted by torch_ops.force_algorithm("reduce", name), returned by
// torch_ops.algorithm("sum"|"mean"|"amax"|"amin", x, dim)), with what each can run:
//   small       one block (32 to 512 threads), no workspace, no ticket: full reductions
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
//               (both: as many output lanes as the outputs need, up to 32 with 8 row lanes; a
//               narrow row, e.g. [R, 16] over dim 0, puts the rest of the block on rows, and few
//               reduced rows, e.g. [4, N] over dim 0, take 1-4 row lanes and wider tiles)
//   copy        a reduction over one element per output (dims of size 1, e.g. [N, 1] over dim 1):
//               the cast copy of the kept elements into the output (ATen's copy kernel)
//   periodic    periodic kernel (float types): a contiguous [N, M] array over dim 0 into
//               2 <= M <= 32 outputs (one kept dim of stride 1, one reduced dim of stride M, data
//               16-byte aligned), read as one flat stream of 16-byte vectors, each lane's
//               elements in fixed rows (device/periodic.cuh)
//   row_vec     row_vec kernel (float types): one kept dim, rows 16-byte aligned whole vectors
//               (data aligned, row stride % V == 0, R % V == 0), R <= 128 * V (<= 4 vectors per
//               lane of a warp)
// The automatic choice is a pure function of the layout, dtype and alignment: choose_auto below,
// one rule per line in priority order; the crossovers behind the rules are in
// docs/performance.md (reductions). Non-mergeable reduced dims (e.g. dims (0, 2) of a [A, B, C]
// tensor) take the same kernels through the general index decode instead of one stride.
#include <ATen/ATen.h>

#include <algorithm>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "core/algo_table.h"
#include "core/checks.h"
#include "core/dispatch.h"
#include "core/knobs.h"
#include "core/launch.cuh"
#include "core/size_box.h"
#include "core/tickets.h"
#include "reduce/dispatch.h"
#include "reduce/kernels/reduce_col.cuh"
#include "reduce/kernels/reduce_common.cuh"
#include "reduce/kernels/reduce_flat.cuh"
#include "reduce/kernels/reduce_periodic.cuh"
#include "reduce/kernels/reduce_row.cuh"
#include "reduce/kernels/reduce_seg.cuh"
#include "reduce/kernels/reduce_small.cuh"
#include "reduce/problem.h"

namespace gpukern {
namespace {

enum class RedAlgo {
  kSmall,
  kSegContig,
  kSeg,
  kRow,
  kColVec,
  kCol,
  kRowVec,
  kSegRuns,
  kFlat,
  kCopy,
  kPeriodic,
  kAten
};

const AlgorithmTable<RedAlgo> kTable("reduce", {{RedAlgo::kSmall, "small"},
                                                {RedAlgo::kSegContig, "seg_contig"},
                                                {RedAlgo::kSeg, "seg"},
                                                {RedAlgo::kRow, "row"},
                                                {RedAlgo::kColVec, "col_vec"},
                                                {RedAlgo::kCol, "col"},
                                                {RedAlgo::kRowVec, "row_vec"},
                                                {RedAlgo::kSegRuns, "seg_runs"},
                                                {RedAlgo::kFlat, "flat"},
                                                {RedAlgo::kCopy, "copy"},
                                                {RedAlgo::kPeriodic, "periodic"},
                                                {RedAlgo::kAten, "aten"}});

// What the choice reads besides the layout. sum_like: a sum or a mean (the aten rules apply to
// those only).
struct RedInput {
  bool float_acc;
  int elem_size;
  bool aligned;
  bool sum_like = false;
};

bool contiguous_run(const ReduceLayout& L) { return L.nr == 1 && L.rstride[0] == 1; }

// The innermost reduced dim is stride 1 with at least 32 16-byte vectors (a warp's worth):
// seg_runs reads it coalesced.
bool long_runs(const ReduceLayout& L, int64_t V) {
  return L.rstride[L.nr - 1] == 1 && L.rsize[L.nr - 1] >= 32 * V;
}

// Whether algorithm a can run the layout.
bool can_run(RedAlgo a, const ReduceLayout& L, const RedInput& in) {
  const int64_t V = 16 / in.elem_size;
  switch (a) {
    case RedAlgo::kSmall:  // 32-bit indices
      return L.n_out == 1 && contiguous_run(L) && L.R <= reduce::kSmallMaxElems;
    case RedAlgo::kFlat:
      return L.n_out == 1 && contiguous_run(L);
    case RedAlgo::kSegContig:
    case RedAlgo::kRow:
      return contiguous_run(L);
    case RedAlgo::kColVec:
      return in.float_acc && L.nk == 1 && L.kstride[0] == 1 && L.nr == 1 && L.rstride[0] % V == 0 &&
             L.n_out % V == 0 && in.aligned;
    case RedAlgo::kRowVec:
      return in.float_acc && contiguous_run(L) && L.nk == 1 && in.aligned &&
             L.kstride[0] % V == 0 && L.R % V == 0 &&
             L.R / V <= int64_t{reduce::kRowVecUnroll} * kWarpSize;
    case RedAlgo::kSegRuns:
      return L.rstride[L.nr - 1] == 1;
    case RedAlgo::kCopy:
      return L.R == 1;
    case RedAlgo::kPeriodic:
      return in.float_acc && in.aligned && L.nk == 1 && L.kstride[0] == 1 && L.nr == 1 &&
             L.n_out >= 2 && L.n_out <= periodic::kMaxPeriod && L.rstride[0] == L.n_out;
    case RedAlgo::kAten:  // torch's own reduction runs every dtype (integer sums into int64)
      return true;
    case RedAlgo::kSeg:
    case RedAlgo::kCol:
      return true;
  }
  return false;
}

// The layouts that run torch's own reduction, blocks of the H100 quick size sweep where every
// kernel here trailed torch (graph-replayed, torch / ours; benchmarks/algos.py forcing each kernel
// on the points, benchmarks/results/h100_algos_s17.txt). Two sets.
//
// 16-bit sums and means (benchmarks/results/h100_sweep.md of the sixteenth session; sum and mean
// read alike), bounded so that no point of a block ran above 1.05x (but for sum [65536, 1536] at
// 2.16x, where mean on the same shape read 0.94x):
//   rows ([n_out, R] over the last dim) of 1536-4095 elements from 4096 rows, and of 4096 from
//     4096 to 6143 rows: 0.79-0.95x ([4096, 4096] 0.79x, [4096, 1536] 0.81x, [6144, 1536]
//     0.82x; [6144, 4096] 1.03x is outside);
//   rows of 65536-98304 elements, 256-1536 rows: 0.67-0.98x ([256, 65536] 0.67x);
//   columns ([R, n_out] over dim 0) of 2-4 rows, 256-393216 outputs: 0.83-0.96x ([4, 16384]
//     0.83x; 2.0-2.1 us up to 6144 outputs); (seventeenth session) of 5-6 rows, 65536 to 2^20
//     outputs (bf16 [6, 2^20] col_vec 6.6 us, torch 6.3);
//   columns of 5-16 rows, 65536-393216 outputs: 0.77-1.01x ([16, 98304] 0.77x);
//   columns of 17-24 rows, 262144-393216 outputs: 0.89-0.94x (24 rows of 65536-98304 ran
//     1.24-1.35x: outside);
//   (seventeenth session) [B, N, D] summed over N (kept dims (B, D), D contiguous), D of 49-96
//     from 128 batches or of 112-127 from 512: bf16 [256, 1000-1024, 64] 16.1-17.1 us against
//     torch's 15.5-16.4, [1024, 1024, 127] 121 against 115 (D = 100 ran 1.03-1.27x: outside).
// Every op and dtype (the seventeenth session's sweep, h100_sweep_vendor1.json, after the set
// above; sum, mean and amax dipped alike):
//   columns of 256-384 rows from 65536 outputs (0.87-0.97x; fp32 [256, 98304] col_vec 37.0 us,
//     torch 35.7), and fp32 256-383 rows of 24576-65535 outputs ([256, 24576] col_vec 6.9,
//     torch 6.3; 384 rows ran 1.15x);
//   columns of 1025-4095 rows into 2-6 outputs: [1536, 4] and [1536, 6] seg 3.0-3.2 us, torch
//     2.7-2.9 (1024 rows ran 1.3x, 4096 1.1x);
//   fp32 rows of 16385-65536 elements, 257-767 rows (past seg_contig's 32 MB of one block a
//     row): [384, 24576] seg_runs 10.8 us, seg_contig 11.3, torch 8.2; [384, 65536] 38.3-38.6
//     against 36.6-36.9 in the sweep after ([256, 24576] 1.23x, [1024, 24576] 1.08x and
//     [384, 98304] 1.05x are outside);
//   fp32 rows of 1536-4095 elements, 4097-16383 rows: [6144, 1536] row 10.3 us, torch 7.8
//     ([4096, 1536] 1.12x, [16384, 1536] 1.03x outside);
//   fp32 sums and means over rows of 4096-8191 elements past 2^26 elements: [65536, 4096]
//     367 us against 352 in two sweeps (0.96x), [24576, 4096] 0.970-0.981x in four
//     ([16384, 4096] 0.99-1.00x is outside).
// And, in the sweep after those (h100_sweep_vendor2.json), 16-bit sums and means over columns
// of 1024-1536 rows into 98304-262143 outputs ([1536, 98304] 119 us against 110 in three
// sweeps; [1024, 262144] 1.02x outside) and of at least 8192 rows and outputs from 2^27
// elements ([16384, 16384] 191.5 against 185 in three sweeps).
// The boxes above as bounds, inclusive: (R reduced, n_out outputs[, R * n_out]) for rows and
// columns, (D kept innermost, B batches) for [B, N, D] over N. "16-bit sums": sum and mean.
constexpr SizeBox kAtenRows16Sums[] = {
    {1536, 4095, 4096, kNoLimit}, {4096, 4096, 4096, 6143}, {65536, 98304, 256, 1536},
};
constexpr SizeBox kAtenRows32[] = {
    {16385, 65536, 257, 767}, {1536, 4095, 4097, 16383},
};
constexpr SizeBox kAtenRows32Sums[] = {  // beside kAtenRows32
    {4096, 8191, 1, kNoLimit, (int64_t{1} << 26) + 1, kNoLimit},
};
constexpr SizeBox kAtenCols16Sums[] = {
    {0, 4, 256, 393216},         {0, 6, 65536, int64_t{1} << 20},
    {0, 16, 65536, 393216},      {0, 24, 262144, 393216},
    {1024, 1536, 98304, 262143}, {8192, kNoLimit, 8192, kNoLimit, int64_t{1} << 27, kNoLimit},
};
constexpr SizeBox kAtenCols[] = {  // every op and dtype
    {256, 384, 65536, kNoLimit}, {1025, 4095, 2, 6},
};
constexpr SizeBox kAtenCols32[] = {  // beside kAtenCols
    {256, 383, 24576, kNoLimit},
};
constexpr SizeBox kAtenBnd16Sums[] = {
    {49, 96, 128, kNoLimit}, {112, 127, 512, kNoLimit},
};

bool aten_wins(const ReduceLayout& L, const RedInput& in) {
  if (!in.float_acc || L.nr != 1) return false;
  const bool half = in.elem_size == 2, sum_like = in.sum_like && half;
  const bool f32 = in.elem_size == 4;
  if (L.nk == 2) {  // [B, N, D] over N
    const int64_t B = L.ksize[0], D = L.ksize[1];
    return sum_like && L.kstride[1] == 1 && L.rstride[0] == D && L.kstride[0] == L.R * D &&
           in_any(kAtenBnd16Sums, D, B);
  }
  if (L.nk != 1) return false;
  const int64_t R = L.R, n = L.n_out;
  if (L.rstride[0] == 1 && L.kstride[0] == R) {  // rows
    return (sum_like && in_any(kAtenRows16Sums, R, n)) || (f32 && in_any(kAtenRows32, R, n)) ||
           (f32 && in.sum_like && in_any(kAtenRows32Sums, R, n));
  }
  if (L.kstride[0] == 1 && L.rstride[0] == n) {  // columns
    return (sum_like && in_any(kAtenCols16Sums, R, n)) || in_any(kAtenCols, R, n) ||
           (f32 && in_any(kAtenCols32, R, n));
  }
  return false;
}

// row_vec from this many rows: its grid is one resident wave of 4 * 132 blocks of 8..256 rows.
// Fewer rows than that leave SMs idle either way; row (one block per row group) is kept there.
constexpr int64_t kRowVecMinRows = 2048;

// row from this many rows whatever their length: a warp per row, 8 per SM of 132 (fewer rows, e.g.
// 16 x 16384 fp32, left most SMs idle: 0.37x torch; seg_contig splits them across blocks).
constexpr int64_t kRowMinRows = 1024;
constexpr int64_t kRowMaxBytes = 32768;  // and rows of at most this many bytes

// seg rather than col up to this many input elements when there are fewer than kColX outputs.
constexpr int64_t kSegMaxSmallCols = int64_t{1} << 18;
// ... and up to this many when there are at most kSegMaxOutputs outputs (H100, bf16 over dim 0:
// [256, 96] seg 1.9 us, col 3.3, col_vec 8.7, torch 3.5; [4, 64] 1.6 / 2.0 / 3.3, torch 2.0;
// benchmarks/algos.py).
constexpr int64_t kSegMaxTinyCols = int64_t{1} << 16;
constexpr int64_t kSegMaxOutputs = 128;
// 16-bit column sums up to this many reduced rows and outputs run col rather than col_vec.
constexpr int64_t kColFewRows = 96;
constexpr int64_t kColFewRowsMaxOutputs = 24576;

// Full reduction of nvec 16-byte vectors: small (one block) rather than flat, up to two rounds of
// 512 threads x 8 vectors for floats, one round of 256 x 8 for integers.
bool use_small(int64_t nvec, const RedInput& in) {
  return nvec <= (in.float_acc ? reduce::kSmallMaxVecs : reduce::kSmallMaxVecsInt);
}

// The automatic choice: one rule per line, in priority order.
RedAlgo choose_auto(const ReduceLayout& L, const RedInput& in) {
  const int64_t V = 16 / in.elem_size;
  const bool contig = contiguous_run(L);
  if (L.n_out == 1) {
    // Short full reduction: one block, launch-bound, no workspace and no ticket.
    if (contig && use_small(ceil_div(L.R, V), in)) return RedAlgo::kSmall;
    // Longer contiguous run: lean parameters and the polled finish instead of fences and a ticket.
    if (contig) return RedAlgo::kFlat;
    // Strided full reduction: one resident wave of blocks, the last to arrive finishes.
    return long_runs(L, V) ? RedAlgo::kSegRuns : RedAlgo::kSeg;
  }
  // One element per output (a reduction over dims of size 1): a cast copy at copy speed.
  if (L.R == 1) return RedAlgo::kCopy;
  if (aten_wins(L, in)) return RedAlgo::kAten;
  // Tiny 16-bit rows shorter than a vector (<= 7 elements), at most 96 of them: seg's block an
  // output. H100, benchmarks/algos.py: bf16 [6, 6] and [16, 6] 1.4 us against row's 2.0-2.1
  // (torch 1.9-2.0).
  if (contig && in.elem_size == 2 && L.R <= 7 && L.n_out <= 96) return RedAlgo::kSeg;
  // A few 16-bit rows of 24-48 KB: seg_runs rather than seg_contig's split rows. H100,
  // benchmarks/algos.py: bf16 [16, 16384] 2.5 us against 3.2 (torch 3.0), [256, 24576] 4.1
  // against 4.6 (torch 4.4; [384, 24576] keeps seg_contig, 4.7 against 6.6).
  if (contig && in.elem_size == 2 &&
      ((L.n_out <= 16 && L.R >= 12288 && L.R < 24576) ||
       (L.n_out >= 192 && L.n_out <= 320 && L.R >= 20480 && L.R <= 28672)))
    return RedAlgo::kSegRuns;
  // Many short aligned rows: one resident wave pipelining whole-vector rows.
  if (contig && L.n_out >= kRowVecMinRows && can_run(RedAlgo::kRowVec, L, in))
    return RedAlgo::kRowVec;
  // Contiguous rows short enough for one round of a warp, or enough of them for a warp each to
  // fill the GPU and at most 32 KB long: a lane group per row. (Longer rows: blocks split them;
  // on an H200 4096 x 65536 bf16 took 150 us with row, 128 with seg_contig; 1024 x 16384 fp32
  // 23.6 and 17.1 us; but 1024 x 16384 bf16 7.2 and 8.2 us.)
  if (contig && (L.R <= kWarpSize * reduce::kRowUnroll * V ||
                 (L.n_out >= kRowMinRows && L.R * in.elem_size <= kRowMaxBytes)))
    return RedAlgo::kRow;
  // Fewer, longer contiguous rows (e.g. 16 x 16384): blocks split each row, so that the rows
  // fill the GPU (a warp per row left 16 x 16384 fp32 on 16 warps, 0.37x torch).
  if (contig) return RedAlgo::kSegContig;
  // A contiguous [N, M] over dim 0 into M <= 6 outputs (rows of 8-24 bytes), 2^24 elements and
  // more: one flat stream of 16-byte vectors. H100, benchmarks/algos.py over dim 0: bf16
  // [2^24, 6] 75 us against col 96 (torch 100), [2^26, 4] 185 against 211 (torch 189); fp32
  // [25165824, 6] 209 against 229 (torch 213). (Below 2^24 col and seg were as fast or faster.)
  if (L.n_out <= 6 && L.R * L.n_out >= (int64_t{1} << 24) && can_run(RedAlgo::kPeriodic, L, in))
    return RedAlgo::kPeriodic;
  // Long stride-1 runs (NCHW over (0, 2, 3)): threads along the runs, not across strided outputs.
  if (long_runs(L, V)) return RedAlgo::kSegRuns;
  // Few outputs in a small problem (e.g. [1536, 4] or [256, 24] over dim 0): blocks split each
  // output; the col kernels' lanes and finishing tree cost more there (1.3-2.9 us against
  // 2.0-4.5 us on an H200).
  if (L.n_out < reduce::kColX && L.R * L.n_out <= kSegMaxSmallCols) return RedAlgo::kSeg;
  // (and up to 256 outputs of at most 6 rows: fp32 [4, 256] seg 1.7 us, col_vec 2.0, torch 1.9)
  if ((L.n_out <= kSegMaxOutputs || (L.R <= 6 && L.n_out <= 256)) &&
      L.R * L.n_out <= kSegMaxTinyCols)
    return RedAlgo::kSeg;
  // Few reduced rows (<= 96) of a 16-bit row of <= 24576 outputs: a thread per output, not
  // col_vec's vector of outputs with the rows split over a workspace. H100, benchmarks/algos.py
  // over the quick sweep's bf16 column sums (2-D, over dim 0): col 1.8-2.5 us where col_vec took
  // 2.6-4.0 (torch 2.0-3.3), e.g. [64, 4096] 2.0 against 3.2, [16, 65536] within noise of
  // col_vec; points below 0.97x torch 70 -> 42 of 278, none new (24 rows ran col_vec 1.9-2.2
  // against col 2.4-3.2, both at or above torch).
  // The same for fp32 at 65-96 rows of up to 6144 outputs: H100, benchmarks/algos.py, fp32
  // [96, 384-6144] col 2.1-2.4 us against col_vec 3.3-3.6 (torch 3.2-3.4; 64 rows ran col_vec at
  // 1.2x torch).
  if (((in.elem_size == 2 && L.R <= kColFewRows && L.n_out <= kColFewRowsMaxOutputs) ||
       (in.elem_size == 4 && L.R > 64 && L.R <= kColFewRows && L.n_out <= 6144)) &&
      can_run(RedAlgo::kColVec, L, in))
    return RedAlgo::kCol;
  // Contiguous outputs, aligned rows: a 16-byte vector of outputs per thread.
  if (can_run(RedAlgo::kColVec, L, in)) return RedAlgo::kColVec;
  // Otherwise threads across outputs (coalesced along a row's outputs), R split across blocks
  // when the outputs are few (narrow rows such as [R, 6] over dim 0 included).
  return RedAlgo::kCol;
}

// The automatic choice, or the forced one (core/algo_table.h) when it can run the layout; raises
// "gpukern::reduce: forced algorithm 'x' cannot run this layout (...)" otherwise.
RedAlgo choose(const ReduceLayout& L, const RedInput& in) {
  const std::optional<RedAlgo> forced = kTable.forced();
  if (!forced) return choose_auto(L, in);
  GK_CHECK(can_run(*forced, L, in), kTable.family(), "forced algorithm '", kTable.name(*forced),
           "' cannot run this layout (outputs=", L.n_out, ", reduced elements=", L.R,
           ", reduced dims after merging=", L.nr,
           ", innermost reduced stride=", L.rstride[L.nr - 1], ", float=", in.float_acc,
           ", 16-byte aligned=", in.aligned, ")");
  return *forced;
}

// Experiment knobs for benchmarks/reduce_knobs.py, off unless GPUKERN_REDUCE_KNOBS=1 was in the
// environment at the first call: then each call reads GPUKERN_REDUCE_<name> (an integer; unset
// or <= 0: the automatic value). BPS: seg_contig's blocks per row (several rows); LGW: the col
// kernels' log2 output lanes a block; SPLITS: the col kernels' splits of R.
int64_t knob(const char* name) {
  static const bool on = knobs_enabled("REDUCE");
  return on ? knob_value("REDUCE", name) : 0;
}

// Resident blocks per SM of a reduce kernel (all run reduce::kThreads threads).
template <auto kKernel>
int64_t blocks_per_sm(int device) {
  return resident_blocks_per_sm<kKernel>(device, reduce::kThreads);
}

int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return std::max(lo, std::min(v, hi)); }

// The small kernel with the first configuration of Table (from kIdx on) that takes nvec vectors
// in one round, or the last one.
template <typename T, typename Op, typename Table, int kIdx = 0>
void launch_small(int64_t nvec, const T* xp, int n, const reduce::ReduceOut& o,
                  cudaStream_t stream) {
  constexpr reduce::SmallConfig c = Table::kC[kIdx];
  if constexpr (kIdx + 1 < reduce::small_table_size<Table>()) {
    if (nvec > reduce::small_round_vecs<Table>(kIdx)) {
      launch_small<T, Op, Table, kIdx + 1>(nvec, xp, n, o, stream);
      return;
    }
  }
  launch_pdl(reduce::small_reduce_kernel<T, Op, c.threads, c.unroll>, dim3(1), dim3(c.threads), 0,
             stream, xp, n, o);
  GK_CHECK_LAUNCH();
}

// col / col_vec. Wide rows with many reduced rows: the fixed 32 x 8 block (col_reduce_kernel,
// col_vec_reduce_kernel). Otherwise col_lanes_reduce_kernel with the block's output lanes W and row
// lanes G from the shape: a narrow row (e.g. [R, 16] fp32 over dim 0, 4 units) gets W = 4 and
// 64 row lanes; few reduced rows (e.g. [4, N] over dim 0) 1-4 row lanes and up to 256 output
// lanes, each thread's rows in one round of loads.
template <typename T, typename Op, bool kVec>
void launch_col(const ReduceLayout& L, const reduce::ReduceOut& o, const T* xp,
                const at::TensorOptions& ws_opts, int64_t sms, int dev, cudaStream_t stream,
                int tbase) {
  using Acc = typename reduce::AccOf<T>::type;
  constexpr int64_t kUnits = kVec ? kVec16<T> : 1;  // outputs per thread
  constexpr int64_t kUnroll = kVec ? reduce::kColVecUnroll : reduce::kColUnroll;
  constexpr int64_t kThreads = reduce::kThreads;
  const int64_t units = ceil_div(L.n_out, kUnits);  // thread-units across one reduced row
  // Row lanes: enough that each keeps kUnroll loads in flight, at most kColY.
  int64_t g_want = 1;
  while (g_want < reduce::kColY && g_want * kUnroll < L.R) g_want *= 2;
  // Up to four rounds of loads: one row lane, no smem combine (bf16 [16, 1M] over dim 0 ran
  // 16.5 us with 4 row lanes and their tree, torch 8.4 us; [4, 4M] with one lane beat torch).
  if (L.R <= 4 * kUnroll) g_want = 1;
  // Output lanes: as many as the row has units, at most kThreads / g_want.
  int lg_w = 0;
  while ((int64_t{1} << lg_w) < units && (int64_t{1} << lg_w) < kThreads / g_want) ++lg_w;
  // Too few tiles to give every SM two blocks even at the most splits (e.g. [1M, 256] bf16 over
  // dim 0: one tile of 256 outputs, 64 blocks, 0.75x torch): narrower tiles, more of them, each
  // output with more finishing lanes.
  auto blocks_at_most = [&](int lg) {
    const int64_t wl = int64_t{1} << lg;
    return ceil_div(units, wl) * reduce::kColMaxSplits *
           std::max<int64_t>(kThreads / (wl * kUnits), 1);
  };
  while (lg_w > 0 && blocks_at_most(lg_w) < 2 * sms && ceil_div(L.R, kUnroll) > 2 * sms) --lg_w;
  // Few reduced rows and too few tiles for the SMs (e.g. [16, 4096] bf16 over dim 0: 2 tiles of
  // 256 x 8 outputs, split in 2 with a workspace, 7.8 us; torch 2.5): narrower tiles, down to a
  // warp, their rows over the freed row lanes (each lane at least two rows), until every SM has
  // a tile (H100, benchmarks/algos.py; the sweep's [16, N] bf16 points went from 0.33-0.41x to
  // 0.9-1.3x; with one row per lane, [4, N] lost: 1.03-1.28x -> 0.78-0.82x).
  while (lg_w > 5 && ceil_div(units, int64_t{1} << lg_w) < sms &&
         (int64_t{kThreads} >> (lg_w - 1)) * 2 <= L.R) {
    --lg_w;
  }
  // Few reduced rows (R <= 96) and at least 4096 units: unsplit (H100,
  // benchmarks/reduce_knobs.py, output lanes x splits forced; the last-block finish cost more
  // than the extra blocks gave: fp32 [96, 24576] 3.3 us against 4.6 split in two (torch 3.9),
  // [96, 16384] 3.0 against 4.0 (3.6); bf16 [96, 65536] 4.4 against 5.5 (4.4), [64, 262144]
  // 10.1 against 17.0). And for R <= 16, fp32 from 24576 units, or 48+ rows from 32768 units,
  // the lanes kernel with the widest tile (up to 256 output lanes) that still makes 128 tiles
  // (256 past 16 rows, 32 up to 4 rows: one round of loads a thread), no more row lanes than
  // rows: fp32 [16, 262144] 4.3 against 7.7 (torch 4.8), [24, 393216] 7.3 against 12.1
  // (7.7), [96, 98304] 7.6 against 10.4 (7.6); bf16
  // [16, 65536] 3.2 against 4.0 (3.0), [4, 262144] 3.2 against 4.0 (3.1), [64, 262144] 8.2
  // against 10.1 (9.2), [4, 65536] 2.6 with 32 tiles against 3.0 with 128 (2.5), [16, 393216]
  // 4.7 against col's 5.8 (4.6: the rule that sent 13-16 rows of 2^17-2^20 bf16 outputs to col
  // is gone). (bf16 [24, 393216] kept the 32 x 8 block: 5.9 against 6.8.)
  const bool few_rows = L.R <= 96 && units >= 4096;
  if (few_rows && (L.R <= 16 || (sizeof(T) == 4 && units >= 24576) ||
                   (L.R >= 48 && units >= 32768))) {
    const int64_t min_tiles = L.R <= 4 ? 32 : (L.R <= 16 ? 128 : 256);
    lg_w = 8;
    while (lg_w > 5 && ceil_div(units, int64_t{1} << lg_w) < min_tiles) --lg_w;
    while ((int64_t{kThreads} >> lg_w) > L.R) ++lg_w;
  }
  if (const int64_t k = knob("LGW"); k > 0 && k <= 8) lg_w = static_cast<int>(k);
  const int64_t w = int64_t{1} << lg_w;
  const int64_t g = kThreads / w;
  // the 32 x 8 block
  const bool fixed = g_want == reduce::kColY && w == reduce::kColX && units >= reduce::kColX;
  const int64_t ntiles = ceil_div(units, fixed ? int64_t{reduce::kColX} : w);
  int64_t wave = sms * (2048 / kThreads);  // col: the block count of a full occupancy
  if (fixed) {
    if constexpr (kVec) wave = sms * blocks_per_sm<reduce::col_vec_reduce_kernel<T, Op>>(dev);
  } else {
    wave = sms * blocks_per_sm<reduce::col_lanes_reduce_kernel<T, Op, kVec>>(dev);
  }
  // Splits of R: the tiles x splits about one resident wave, each split at least two rounds of
  // kUnroll loads per row lane, at most kColMaxSplits partials for each finishing thread (the
  // 32 x 8 blocks finish with one thread per output; the lanes kernel with kThreads / (outputs in
  // a tile) threads per output).
  int64_t splits = 1;
  if (!few_rows && ntiles < wave && ntiles <= kTicketsPerSlot) {
    const int64_t finishers =
        fixed ? 1 : std::max<int64_t>(kThreads / (w * kUnits), 1);
    splits = std::min({fixed && !kVec ? ceil_div(wave, ntiles) : wave / ntiles,
                       ceil_div(L.R, (fixed ? reduce::kColY : g) * kUnroll * 2),
                       reduce::kColMaxSplits * finishers});
    splits = std::max<int64_t>(splits, 1);
  }
  if (const int64_t k = knob("SPLITS"); k > 0 && ntiles <= kTicketsPerSlot) {
    splits = std::min({k, L.R, int64_t{65535}});
  }
  const int64_t rchunk = ceil_div(L.R, splits);
  splits = ceil_div(L.R, rchunk);
  at::Tensor ws;
  Acc* wsp = nullptr;
  if (splits > 1) {
    ws = at::empty({splits * L.n_out}, ws_opts);
    wsp = reinterpret_cast<Acc*>(ws.data_ptr());
  }
  // Unsplit: the fixed kernels one block per tile (up to 64 per SM); the lanes kernel at most two
  // resident waves, each block looping over tiles (its blocks are short: [16, 1M] bf16 over dim 0
  // ran 2048 blocks of one round of loads each).
  const int64_t gx = splits > 1 ? ntiles : std::min(ntiles, fixed ? sms * 64 : 2 * wave);
  const dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(splits));
  if (fixed) {
    const dim3 block(reduce::kColX, reduce::kColY);
    if constexpr (kVec) {
      reduce::col_vec_reduce_kernel<T, Op><<<grid, block, 0, stream>>>(xp, L, o, wsp, tbase, rchunk);
    } else {
      reduce::col_reduce_kernel<T, Op><<<grid, block, 0, stream>>>(xp, L, o, wsp, tbase, rchunk);
    }
  } else {
    reduce::col_lanes_reduce_kernel<T, Op, kVec>
        <<<grid, dim3(static_cast<unsigned>(kThreads)), 0, stream>>>(xp, L, o, wsp, tbase, rchunk,
                                                                      lg_w);
  }
  GK_CHECK_LAUNCH();
}

template <typename T, typename Op>
void launch_reduce(const ReduceLayout& L, const reduce::ReduceOut& o, const at::Tensor& x,
                   cudaStream_t stream, int tbase) {
  using Acc = typename reduce::AccOf<T>::type;
  constexpr int kThreads = reduce::kThreads;
  constexpr int V = kVec16<T>;
  const int64_t sms = device_props().multiProcessorCount;
  const int64_t target_blocks = sms * (2048 / kThreads);  // one full wave of resident blocks
  // Elements per block below which splitting a segment further does not pay: four vectors per
  // thread (a single round trip; more blocks rather than longer rounds for small inputs).
  const int64_t per_block_min = reduce::kSegBlockVecs * V;
  const T* xp = reinterpret_cast<const T*>(x.data_ptr());
  const auto ws_opts = x.options().dtype(std::is_same<Acc, float>::value ? at::kFloat : at::kLong);
  const int dev = x.get_device();
  const RedAlgo algo = choose(
      L, RedInput{std::is_same<Acc, float>::value, static_cast<int>(sizeof(T)), is_aligned16(xp)});

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
    if (mode == reduce::kSegContig) {
      launch_pdl(reduce::seg_reduce_kernel<T, Op, reduce::kSegContig>, grid, dim3(kThreads), 0,
                 stream, xp, L, o, wsp, tbase, runs_lg);
    } else if (mode == reduce::kSegRuns) {
      launch_pdl(reduce::seg_reduce_kernel<T, Op, reduce::kSegRuns>, grid, dim3(kThreads), 0,
                 stream, xp, L, o, wsp, tbase, runs_lg);
    } else {
      launch_pdl(reduce::seg_reduce_kernel<T, Op, reduce::kSegGeneral>, grid, dim3(kThreads), 0,
                 stream, xp, L, o, wsp, tbase, runs_lg);
    }
    GK_CHECK_LAUNCH();
  };

  switch (algo) {
    case RedAlgo::kSmall: {
      const int n = static_cast<int>(L.R);  // <= reduce::kSmallMaxElems (reduce_algo_applies)
      launch_small<T, Op, reduce::SmallTableOf<T, Op>>(ceil_div(L.R, int64_t{V}), xp, n, o, stream);
      return;
    }
    case RedAlgo::kFlat: {
      // Blocks: one full resident wave at most, and at most one round of kSegUnroll vectors per
      // thread below that (1M fp32: 256 blocks).
      const int64_t wave = sms * blocks_per_sm<reduce::flat_reduce_kernel<T, Op>>(dev);
      const int64_t blocks = std::min(wave, ceil_div(L.R, per_block_min));
      at::Tensor ws;
      Acc* wsp = nullptr;
      if (blocks > 1 && !reduce::flat_polled<Acc>(blocks)) {
        ws = at::empty({blocks}, ws_opts);
        wsp = reinterpret_cast<Acc*>(ws.data_ptr());
      }
      launch_pdl(reduce::flat_reduce_kernel<T, Op>, dim3(static_cast<unsigned>(blocks)),
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
            sms * (contig
                       ? blocks_per_sm<reduce::seg_reduce_kernel<T, Op, reduce::kSegContig>>(dev)
                       : blocks_per_sm<reduce::seg_reduce_kernel<T, Op, reduce::kSegGeneral>>(dev));
        launch_seg(contig ? reduce::kSegContig : reduce::kSegGeneral,
                   std::min(wave, ceil_div(L.R, per_block_min)), 0);
      } else if (contig) {
        // Blocks per row: one from 24 rows of up to 48 KB (96 KB from 256 rows, 32 MB in all):
        // no workspace and no last-block finish. H100, benchmarks/reduce_knobs.py: bf16
        // [64, 16384] 2.4 us against 3.8 with 4 blocks a row (torch 3.3), [64, 24576] 2.7
        // against 4.0 (3.7), [24, 16384] 2.3 against 3.2 (3.1); fp32 [256, 24576] 4.9 against
        // 6.5 (6.1). Two for rows of 48-512 KB from 96 rows, up to 40 MB in all: fp32 [384,
        // 24576] (37.7 MB) 11.1 against 14.1 with one, [96, 98304] 9.6 against 12.5 with four;
        // bf16 [256, 65536] 10.9 against 13.7 (past 40 MB two lost: the quick sweep's bf16
        // [384, 65536] 21.2 against 18.7, [1024, 65536] 53.1 against 48.4). Otherwise the rows
        // x blocks within one resident wave (no partial second wave), each thread at least two
        // 16-byte vectors.
        const int64_t wave =
            sms * blocks_per_sm<reduce::seg_reduce_kernel<T, Op, reduce::kSegContig>>(dev);
        int64_t bps = std::min(std::max<int64_t>(wave / L.n_out, 1),
                               ceil_div(L.R, int64_t{kThreads} * 2 * V));
        const int64_t row_bytes = L.R * static_cast<int64_t>(sizeof(T));
        if (L.n_out >= 24 && row_bytes <= (L.n_out >= 256 ? 96 : 48) * 1024 &&
            row_bytes * L.n_out <= (32 << 20)) {
          bps = 1;
        } else if (L.n_out >= 96 && row_bytes > 48 * 1024 && row_bytes <= 512 * 1024 &&
                   row_bytes * L.n_out <= (40 << 20)) {
          bps = 2;
        }
        const int64_t k = knob("BPS");
        launch_seg(reduce::kSegContig, k > 0 ? k : bps, 0);
      } else {
        launch_seg(reduce::kSegGeneral,
                   std::min(ceil_div(target_blocks, L.n_out), ceil_div(L.R, int64_t{kThreads} * 4)),
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
      while (lg < 3 && run <= (int64_t{kThreads} >> (lg + 1)) * V * reduce::kSegUnroll) ++lg;
      const int64_t run_slots = ceil_div(nruns, int64_t{1} << lg);  // group-rounds per segment
      // Blocks per segment: about one resident wave in all, each block the same number of
      // group-rounds (e.g. 256 outputs x 32 runs: 4 blocks of 8 runs per output, 1024 blocks).
      const int64_t wave =
          sms * blocks_per_sm<reduce::seg_reduce_kernel<T, Op, reduce::kSegRuns>>(dev);
      int64_t bps = std::min(std::max<int64_t>(wave / L.n_out, 1), run_slots);
      bps = ceil_div(run_slots, ceil_div(run_slots, bps));
      launch_seg(reduce::kSegRuns, bps, lg);
      return;
    }
    case RedAlgo::kRow: {
      // Lanes per row: about kRowUnroll 16-byte vectors per lane (all in flight at once), at
      // most a warp; short rows pack several rows per warp.
      const int64_t need = ceil_div(L.R, int64_t{reduce::kRowUnroll} * V);
      int lg = 0;
      while (lg < 5 && (int64_t{1} << lg) < need) ++lg;
      const int64_t rows_per_block = kThreads >> lg;
      const int64_t blocks = std::min(ceil_div(L.n_out, rows_per_block), sms * 64);
      reduce::row_reduce_kernel<T, Op>
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
        while ((int64_t{reduce::kRowVecUnroll} << lg) < nvec) ++lg;
        const int64_t rows_per_block = kThreads >> lg;
        const int64_t wave = sms * blocks_per_sm<reduce::row_vec_reduce_kernel<T, Op>>(dev);
        const int64_t rounds = ceil_div(L.n_out, wave * rows_per_block);
        const int64_t blocks = ceil_div(L.n_out, rounds * rows_per_block);
        launch_pdl(reduce::row_vec_reduce_kernel<T, Op>, dim3(static_cast<unsigned>(blocks)),
                   dim3(kThreads), 0, stream, xp, L.n_out, L.kstride[0], static_cast<int>(nvec), o,
                   lg);
        GK_CHECK_LAUNCH();
      } else {
        TORCH_INTERNAL_ASSERT(false, "row_vec chosen for an integer reduction");
      }
      return;
    }
    case RedAlgo::kColVec:
    case RedAlgo::kCol: {
      if constexpr (std::is_same<Acc, float>::value) {
        if (algo == RedAlgo::kColVec) {
          launch_col<T, Op, true>(L, o, xp, ws_opts, sms, dev, stream, tbase);
          return;
        }
      } else {
        TORCH_INTERNAL_ASSERT(algo != RedAlgo::kColVec, "col_vec chosen for an integer reduction");
      }
      launch_col<T, Op, false>(L, o, xp, ws_opts, sms, dev, stream, tbase);
      return;
    }
    case RedAlgo::kPeriodic: {
      if constexpr (std::is_same<Acc, float>::value) {
        const periodic::Params p =
            periodic::make_params(L.R * L.n_out, static_cast<int>(L.n_out), V);
        const int64_t blocks = periodic::grid_blocks(
            p, sms * blocks_per_sm<reduce::periodic_reduce_kernel<T, Op>>(dev));
        at::Tensor ws;
        float* wsp = nullptr;
        if (blocks > 1) {
          ws = at::empty({blocks * L.n_out}, ws_opts);
          wsp = ws.data_ptr<float>();
        }
        launch_pdl(reduce::periodic_reduce_kernel<T, Op>, dim3(static_cast<unsigned>(blocks)),
                   dim3(periodic::kThreads), 0, stream, xp, p, o, wsp, tbase);
        GK_CHECK_LAUNCH();
      } else {
        TORCH_INTERNAL_ASSERT(false, "periodic chosen for an integer reduction");
      }
      return;
    }
    case RedAlgo::kCopy:
      TORCH_INTERNAL_ASSERT(false, "copy is run by reduce_cuda_run");
      return;
    case RedAlgo::kAten:
      TORCH_INTERNAL_ASSERT(false, "aten is run by reduce_cuda_run");
      return;
  }
}

}  // namespace

void reduce_cuda_run(const ReduceLayout& L, ReduceKind kind, ReduceOutKind out_kind,
                     const at::Tensor& x, const at::Tensor& out) {
  CudaLaunchContext ctx(x);
  const RedInput in{x.is_floating_point(), static_cast<int>(x.element_size()),
                    is_aligned16(x.data_ptr()),
                    kind == ReduceKind::kSum || kind == ReduceKind::kMean};
  const RedAlgo algo = choose(L, in);
  if (algo == RedAlgo::kAten) {
    // torch's reduction of the same elements: the layout's kept dims, then its reduced dims, as
    // one strided view, reduced over the latter into the output (contiguous, kept dims in order).
    std::vector<int64_t> sizes(L.ksize, L.ksize + L.nk);
    std::vector<int64_t> strides(L.kstride, L.kstride + L.nk);
    sizes.insert(sizes.end(), L.rsize, L.rsize + L.nr);
    strides.insert(strides.end(), L.rstride, L.rstride + L.nr);
    const at::Tensor xv = x.as_strided(sizes, strides, x.storage_offset());
    std::vector<int64_t> dims(L.nr);
    for (int d = 0; d < L.nr; ++d) dims[d] = L.nk + d;
    at::Tensor o = out.view(std::vector<int64_t>(L.ksize, L.ksize + L.nk));
    const std::optional<at::ScalarType> dt =
        out_kind == ReduceOutKind::kSame ? std::nullopt
                                         : std::optional<at::ScalarType>(out.scalar_type());
    switch (kind) {
      case ReduceKind::kSum:
        at::sum_out(o, xv, dims, false, dt);
        break;
      case ReduceKind::kMean:
        at::mean_out(o, xv, dims, false, dt);
        break;
      case ReduceKind::kMax:
        at::amax_out(o, xv, dims, false);
        break;
      case ReduceKind::kMin:
        at::amin_out(o, xv, dims, false);
        break;
    }
    return;
  }
  if (algo == RedAlgo::kCopy) {
    // One element per output: the kept elements, cast to the output's dtype (mean's factor is 1).
    const std::vector<int64_t> sizes(L.ksize, L.ksize + L.nk);
    const std::vector<int64_t> strides(L.kstride, L.kstride + L.nk);
    out.view(sizes).copy_(x.as_strided(sizes, strides, x.storage_offset()));
    return;
  }
  const int tbase = ticket_slot_base(x.device().index(), ctx.stream);
  reduce::ReduceOut o;
  o.ptr = out.data_ptr();
  o.aligned = is_aligned16(o.ptr);
  o.kind = out_kind;
  o.has_factor = kind == ReduceKind::kMean;
  o.factor = static_cast<float>(1.0 / static_cast<double>(L.R));
  switch (x.scalar_type()) {
    case at::kBool:
    case at::kByte:
      return launch_reduce<uint8_t, reduce::SumI64Op>(L, o, x, ctx.stream, tbase);
    case at::kChar:
      return launch_reduce<int8_t, reduce::SumI64Op>(L, o, x, ctx.stream, tbase);
    case at::kShort:
      return launch_reduce<int16_t, reduce::SumI64Op>(L, o, x, ctx.stream, tbase);
    case at::kInt:
      return launch_reduce<int32_t, reduce::SumI64Op>(L, o, x, ctx.stream, tbase);
    case at::kLong:
      return launch_reduce<long long, reduce::SumI64Op>(L, o, x, ctx.stream, tbase);
    // Unsigned: summed modulo 2^64 in int64, as torch.sum (which casts them to int64 first).
    case at::kUInt16:
      return launch_reduce<uint16_t, reduce::SumI64Op>(L, o, x, ctx.stream, tbase);
    case at::kUInt32:
      return launch_reduce<uint32_t, reduce::SumI64Op>(L, o, x, ctx.stream, tbase);
    case at::kUInt64:
      return launch_reduce<unsigned long long, reduce::SumI64Op>(L, o, x, ctx.stream, tbase);
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
                                  bool aligned, bool sum_like) {
  return kTable.name(choose(L, RedInput{float_acc, elem_size, aligned, sum_like}));
}

}  // namespace gpukern
