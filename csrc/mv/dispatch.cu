// mv on CUDA: the algorithm choice (a pure function of the problem: sizes, strides, dtype size and
// alignment) and the launch of each algorithm, one launch on the current stream. Kernels in
// mv/kernels/, checks in mv/ops.cpp, the crossovers behind each rule in docs/performance.md (mv).
//
// Algorithms (names accepted by torch_ops.force_algorithm("mv", name), returned by
// torch_ops.algorithm("mv", A, x)), with what each can run:
//   rows_vec  rows kernel, 16-byte loads of A: s1 == 1 (rows that are not all 16-byte aligned,
//             odd row strides or storage offsets, take the instantiation that walks each row's
//             aligned span, peel_row_dot)
//   rows      rows kernel, scalar strided loads: any layout
//   cols_vec  cols kernel, 16-byte vectors of V rows: s0 == 1, A aligned, s1 % V == 0
//   cols      cols kernel, a thread per row, scalar loads: any layout
//   rows_mma  tensor-core rows kernel: 16-bit types, s1 == 1, A aligned, s0 % V == 0, N % V == 0,
//             x contiguous and aligned (1 to 8 warps a 16-row tile: every warp busy on short rows)
//   rows_short  lane groups across rows, several rows per lane, no barriers: s1 == 1, A
//             aligned, s0 % V == 0, x contiguous and aligned (any N: the lanes step along longer
//             rows)
//   cols_periodic  A.t() of a contiguous [N, M] array with 2 <= M <= 32 rows (s0 == 1,
//             s1 == M, A aligned): the storage read as one flat stream of 16-byte vectors, each
//             lane's elements in fixed rows (device/periodic.cuh)
//   cols_short  lanes along A's storage rows (columns of A), several storage rows per block, N
//             split over a wave with a last-block finish: s0 == 1 or M == 1 (vectors of V or
//             V / 2 rows when A is aligned and s1 is a multiple, else element by element)
//   cublas    torch.mv's own path (at::mv_out: cuBLAS's gemv), the library made for the job, on
//             the regions where the size sweep measured it faster than every kernel here: any
//             layout
// Within the rows kernel: a warp per row when M >= 32 * SMs, else a block per row, with N split
// across blocks only when the rows fill less than half a resident wave; within the cols kernel,
// N is split so that row blocks x splits is about one resident wave. Both split paths finish in
// the last block to arrive. rows_short's lane groups (1..32 lanes a row) are sized from N;
// cols_short's tiles (1..256 lanes a storage row, cols_short_plan) from M, N and the wave, and it
// splits N so that its blocks fill one wave of 2 per SM, finishing in the last block to arrive
// too. Every launch uses programmatic dependent launch (device/pdl.cuh): back to back, the next
// kernel's blocks are scheduled while this one drains.
#include <ATen/ATen.h>

#include <algorithm>
#include <string>
#include <type_traits>

#include "core/algo_table.h"
#include "core/checks.h"
#include "core/dispatch.h"
#include "core/knobs.h"
#include "core/launch.cuh"
#include "core/size_box.h"
#include "core/tickets.h"
#include "mv/dispatch.h"
#include "mv/kernels/mv_cols.cuh"
#include "mv/kernels/mv_periodic.cuh"
#include "mv/kernels/mv_rows.cuh"
#include "mv/kernels/mv_rows_mma.cuh"
#include "mv/problem.h"

namespace gpukern {
namespace {

enum class MvAlgo {
  kRowsVec,
  kRows,
  kColsVec,
  kCols,
  kRowsMma,
  kRowsShort,
  kColsShort,
  kColsPeriodic,
  kCublas
};

const AlgorithmTable<MvAlgo> kTable("mv", {{MvAlgo::kRowsVec, "rows_vec"},
                                           {MvAlgo::kRows, "rows"},
                                           {MvAlgo::kColsVec, "cols_vec"},
                                           {MvAlgo::kCols, "cols"},
                                           {MvAlgo::kRowsMma, "rows_mma"},
                                           {MvAlgo::kRowsShort, "rows_short"},
                                           {MvAlgo::kColsShort, "cols_short"},
                                           {MvAlgo::kColsPeriodic, "cols_periodic"},
                                           {MvAlgo::kCublas, "cublas"}});

// Strides of size-1 dims are arbitrary: make them harmless for the layout tests.
MvProblem normalised(MvProblem s) {
  if (s.N == 1) s.s1 = 0;
  if (s.M == 1) s.s0 = 0;
  return s;
}

// Whether algorithm a can run the normalised problem s.
bool can_run(MvAlgo a, const MvProblem& s) {
  const int64_t V = 16 / s.elem_size;
  switch (a) {
    case MvAlgo::kRowsVec:
      return s.s1 == 1;
    case MvAlgo::kColsVec:
      return s.s0 == 1 && s.a_aligned && s.s1 % V == 0;
    case MvAlgo::kRowsMma:
      return s.elem_size == 2 && s.s1 == 1 && s.a_aligned && s.s0 % V == 0 && s.N % V == 0 &&
             s.xs == 1 && s.x_aligned;
    case MvAlgo::kRowsShort:
      return s.s1 == 1 && s.a_aligned && s.s0 % V == 0 && s.xs == 1 && s.x_aligned;
    case MvAlgo::kColsShort:
      return s.s0 == 1 || s.M == 1;  // (one row: s0 normalised to 0, read element by element)
    case MvAlgo::kColsPeriodic:
      return s.s0 == 1 && s.s1 == s.M && s.M >= 2 && s.M <= periodic::kMaxPeriod && s.a_aligned;
    case MvAlgo::kRows:
    case MvAlgo::kCols:
    case MvAlgo::kCublas:
      return true;
  }
  return false;
}

// The shapes where rows_mma beats rows_vec: many short rows, where rows_vec runs a block per row
// (M < 32 * SMs) and each warp sees only a few vectors; not on long rows nor on large matrices,
// where rows_vec's warps read 512 contiguous bytes of one row per load and the mma tiles 64
// bytes of each of 8 rows.
// (The 2^25 cap is lifted for 16384+ rows of up to 1536 columns: H100, benchmarks/algos.py,
// bf16 24576 x 1536 rows_mma 28.4 us against rows_vec 30.7, torch 29.1; 65536 x 1536 74.7
// against 79.8, torch 76.0.)
bool mma_wins(const MvProblem& s) {
  if (s.N <= 1536 && s.M >= 16384) return true;
  if (s.M * s.N > (int64_t{1} << 25)) return false;
  return (s.N <= 4096 && s.M >= 2048) || (s.N <= 1024 && s.M >= 512);
}

// The vector form of a kernel wherever it can run, else its scalar form.
MvAlgo vec_or(MvAlgo vec, MvAlgo scalar, const MvProblem& s) {
  return can_run(vec, s) ? vec : scalar;
}

// The automatic choice: one rule per line, in priority order, each with the H200 measurement
// behind it (forced algorithms, us, torch = torch.mv; "sweep": the size sweep's torch / ours;
// docs/performance.md, mv). Row-major rows are N elements, row_bytes long.
// Column-major 16-bit problems up to this many elements run the rows kernel (choose_auto).
constexpr int64_t kTinyRowsMaxElems = 576;

// The regions that run cuBLAS (torch.mv's path): blocks of the H100 quick size sweep
// (benchmarks/results/h100_sweep.md, graph-replayed, torch / ours) where every kernel here
// trailed. 16-bit:
//   column-major (A.t), M >= 1536 rows, 256-6144 columns: 0.71-0.97x (16384 x 384 0.71x,
//     4096 x 1536 0.76x, 24576 x 256 0.71x), and M >= 384 at 256-384 columns (0.85-0.90x);
//     then (the seventeenth session's sweep, h100_sweep_vendor1.json, and benchmarks/algos.py
//     forcing each kernel: h100_algos_s17.txt) on to 24576 columns from 1536 rows and from 16384
//     columns at 1024-1535 rows (1536 x 16384 cols_short 23.8 us, torch 22.0; 1024 x 98304
//     0.96x);
//   column-major with 2-6 rows, 4096-65536 columns: 0.65-0.95x (4 x 6144 0.65x; 4 x 65536
//     cols_periodic 4.7 us, torch 4.5);
//   column-major with 96-384 rows from 262144 columns (0.78-0.96x), 256-384 rows from 98304
//     (256 x 98304 cols_short 24.3, torch 23.0), 257-384 rows from 65536 (384 x 65536
//     0.83-0.86x);
//   column-major 16385-65535 rows of 65-128 columns: 24576 x 96 cols_vec 4.1, torch 3.3;
//     from 2^22 rows of 17-32 columns: 4194304 x 24 cols_short 0.968-0.984x in four sweeps;
//   row-major from 98304 rows of 96-1536 columns: 0.84-0.96x (393216 x 384 0.84x), the rest
//     of that block 0.98-1.07x; from 2^20 rows of 64-95 columns 0.95-0.97x;
//   row-major 64-95 rows from 262144 columns (64 x 262144 rows_vec 16.5, torch 14.1), 192-256
//     rows from 98304 (256 x 98304 24.2 against 23.2); one row of 49152-98303 (1 x 65536 rows_vec
//     4.1, torch 3.9).
// fp32 (the seventeenth session, same sources):
//   column-major from 4096 rows, 256 or more columns, 2^21-2^26 elements: 0.67-0.97x
//     (24576 x 256 cols_short 6.1, torch 5.4; 4096 x 1536 7.2 against 6.2), and at 4096-6143
//     rows on to 2^27 elements (4096 x 24576 0.969-0.975x in four sweeps, the eighteenth
//     session's h100_sweep_s18.md among them; 6144 x 24576 ran 1.02x); 1536-4095 rows of
//     1025-2047 columns (1536 x 1536 0.73x), 256-384 rows of 1025-2047 columns (0.79-0.85x);
//   column-major with 2-6 rows, 16384-65536 columns (cols_periodic 4.1-4.8, torch 3.9-4.9),
//     2-4 rows of 65537-131071 (4 x 98304 0.968-0.979x in three sweeps; 6 x 98304 ran 1.06x);
//   row-major 64-256 rows from 65536 columns (96 x 65536 rows_vec 11.0, torch 9.6; 64 x 98304
//     10.6 against 8.2), not 64-95 rows below 98304 (64 x 65536 ran 1.45x); 257-1023 rows of
//     1024-1536 columns (384 x 1024 rows 2.5, torch 2.4); 20480-49151 rows of 257-1023 columns
//     (24576 x 384 rows_short 12.7, torch 11.5).
// The boxes above, as (M rows, N columns[, M * N]) bounds, inclusive.
constexpr SizeBox kCublas16ColMajor[] = {
    {1536, kNoLimit, 256, 24576},  {1024, kNoLimit, 16384, kNoLimit},
    {384, kNoLimit, 256, 384},     {2, 6, 4096, 65536},
    {96, 384, 262144, kNoLimit},   {256, 384, 98304, kNoLimit},
    {257, 384, 65536, kNoLimit},   {int64_t{1} << 22, kNoLimit, 17, 32},
    {16385, 65535, 65, 128},
};
constexpr SizeBox kCublas16RowMajor[] = {
    {98304, kNoLimit, 96, 1536},  {int64_t{1} << 20, kNoLimit, 64, 95},
    {64, 95, 262144, kNoLimit},   {192, 256, 98304, kNoLimit},
    {1, 1, 49152, 98303},
};
constexpr SizeBox kCublas32ColMajor[] = {
    {4096, kNoLimit, 256, kNoLimit, (int64_t{1} << 21) + 1, int64_t{1} << 26},
    {4096, 6143, 256, kNoLimit, (int64_t{1} << 21) + 1, int64_t{1} << 27},
    {1536, 4095, 1025, 2047},
    {256, 384, 1025, 2047},
    {2, 6, 16384, 65536},
    {2, 4, 65537, 131071},
};
constexpr SizeBox kCublas32RowMajor[] = {
    {96, 256, 65536, kNoLimit},  {64, 95, 98304, kNoLimit},
    {257, 1023, 1024, 1536},     {20480, 49151, 257, 1023},
};

bool cublas_wins(const MvProblem& s) {
  const bool col_major = s.s0 == 1 && s.M >= 2;
  if (s.elem_size == 2) {
    if (col_major) return in_any(kCublas16ColMajor, s.M, s.N);
    return s.s1 == 1 && in_any(kCublas16RowMajor, s.M, s.N);
  }
  if (s.elem_size != 4) return false;
  if (col_major) return in_any(kCublas32ColMajor, s.M, s.N);
  return s.s1 == 1 && in_any(kCublas32RowMajor, s.M, s.N);
}

MvAlgo choose_auto(const MvProblem& s) {
  const int64_t row_bytes = s.N * s.elem_size;
  const bool f32 = s.elem_size == 4;
  const bool mid16 = s.elem_size == 2 && row_bytes >= 512 && row_bytes <= 1024;  // 16-bit
  auto can = [&](MvAlgo a) { return can_run(a, s); };
  using A = MvAlgo;
  if (cublas_wins(s)) return A::kCublas;
  // bf16 65536 x 256: rows_mma 9.1 vs rows_short 9.8 (torch 12.5); 4096 x 256: 1.7 both.
  // (Shorter 16-bit rows stay on rows_short: rows_mma not measured there.)
  if (mid16 && s.M >= 4096 && s.M * s.N <= (1 << 25) && can(A::kRowsMma)) return A::kRowsMma;
  // fp32 4096 x 256: rows_short 1.8 (torch 6.2); bf16 2^20 x 256: 137.5 vs rows_mma 167.7.
  if (row_bytes <= 1024 && can(A::kRowsShort)) return A::kRowsShort;
  // fp32 4096^2: rows_short 18.5 vs rows_vec 22.0; 8192^2: 64.0 vs 64.9; sweep [4096, 384]: 0.19x;
  // H100 1536 x 1024: 2.9 vs rows_vec 7.7 (torch 6.7; benchmarks/algos.py).
  // Not for 1024-4095 rows of 16-24 KB: the quick sweep's 1024 x 4096 / 6144 fell from 1.08x /
  // 1.12x torch to 0.64x / 0.49x on rows_short (1024-1536 x 384-1536 gained: 0.4-0.9x -> 1.0-1.7x).
  // (1024-1535 rows of 1536 columns run rows_vec: H100, benchmarks/algos.py, fp32 1024 x 1536
  // rows_vec 2.7 us against rows_short 3.7, torch 3.3.)
  if (f32 && row_bytes <= 32768 && s.M >= 1024 &&
      (s.M >= 4096 || row_bytes < 6144 || (row_bytes == 6144 && s.M >= 1536)) &&
      can(A::kRowsShort))
    return A::kRowsShort;
  // fp32 rows of 257-384 columns from 384 rows: H100, benchmarks/algos.py, 384 x 384 rows_short
  // 1.8 us against rows_vec 2.8 (torch 2.6).
  if (f32 && row_bytes <= 1536 && s.M >= 384 && can(A::kRowsShort)) return A::kRowsShort;
  // Small column-major fp32 problems: rows. H100, benchmarks/algos.py (A.t fp32, torch in
  // parentheses): 6 x 4 1.7 us (1.8), 6 x 96 1.5 against cols_short 1.9 (1.8); 6 x 6144 2.9
  // against 5.0 (3.7); 16 x 4096 3.0 against 4.2 (3.9), 16 x 6144 3.6 (4.1), 24 x 1536 2.5
  // against 4.0 (3.8), 96 x 1536 2.9 against 4.1 (3.3). (6 x 16384 ran 4.9 on rows: cublas.)
  if (f32 && s.s0 == 1 && s.M >= 2 &&
      ((s.M <= 6 && s.M * s.N <= kTinyRowsMaxElems) ||
       (s.M >= 5 && s.M <= 6 && s.N >= 6144 && s.N < 16384) ||
       (s.M >= 16 && s.M <= 96 && s.N >= 1536 && s.N <= 6144 && s.M * s.N <= 147456)))
    return A::kRows;
  // Small, short and wide column-major 16-bit problems (M * N <= 2^15, M <= 256, N >= 64): H100,
  // A.t bf16 6 x 1024 rows 1.8 vs cols_short 3.3, 64 x 384 1.8 vs 4.5, 6 x 4096 4.1 vs 7.1,
  // 200 x 160 1.8 vs 2.8 (benchmarks/algos.py; fp32 keeps cols_short). Tall ones lost on rows
  // (quick sweep: A.t bf16 4096 x 4 8.7 us against torch's 1.9, 1536 x 16 4.0 against 2.3).
  if (s.s0 == 1 && s.elem_size == 2 && s.M * s.N <= (1 << 15) && s.M <= 256 && s.N >= 64)
    return A::kRows;
  // ... and up to 2^17 elements from 16 rows, up to 6144 columns: H100, benchmarks/algos.py,
  // A.t bf16 256 x 384 rows 2.3 us against cols_short 4.5 (torch 2.8), 96 x 1024 2.5 against
  // 4.4 (3.5), 64 x 1536 2.8 against 5.3 (4.0), 16 x 6144 4.7 against 6.0 (5.7).
  // (and 96 x 1536: rows 3.1 us against cols_short 4.5, torch 4.2; not 16 x 4097-6144, where
  // the seventeenth session measured rows 6.0 against cols_periodic 4.3, torch 5.8)
  if (s.s0 == 1 && s.elem_size == 2 && s.M >= 16 && s.M <= 256 && s.N >= 64 && s.N <= 6144 &&
      (s.M * s.N <= (1 << 17) || (s.M <= 96 && s.N <= 1536 && s.M * s.N <= 147456)) &&
      !(s.M <= 16 && s.N > 4096))
    return A::kRows;
  // Column-major 16-bit with storage rows of 8 bytes (M = 4: cols_short's 8-byte vectors), N of
  // 24576-393216 or from 6M: cols_periodic. H100, benchmarks/algos.py, A.t bf16 4 x N:
  // 24576 4.7 us against 8.0 (torch 4.1), 98304 4.7 against 5.9 (4.9), 393216 5.8 against
  // 6.1 (6.9), 2^24 64 against 72 (116); cols_short kept 16384 (4.0 against 4.6) and 1M-4M
  // (6.5 against 8.0 at 1M).
  if (s.s0 == 1 && s.elem_size == 2 && s.M == 4 &&
      ((s.N >= 24576 && s.N <= 393216) || s.N >= 6 * (int64_t{1} << 20)) &&
      can(A::kColsPeriodic))
    return A::kColsPeriodic;
  // Tiny column-major 16-bit problems (M * N <= 576, M >= 2): H100, benchmarks/algos.py over the
  // quick sweep's A.t bf16 points: rows 1.2-1.5 us where cols_short took 2.0-5.6 (torch 1.8-2.2),
  // e.g. 4 x 4 1.2 against 5.6, 24 x 24 1.5 against 5.4; points below 0.97x torch 55 -> 47 of
  // 278, none new. (M = 1 keeps its path: 1 x 64 ran 4.5 on rows against 1.3.)
  if (s.s0 == 1 && s.elem_size == 2 && s.M >= 2 && s.M * s.N <= kTinyRowsMaxElems)
    return A::kRows;
  // Column-major with a storage row of M <= 32 elements that cols_short would read element by
  // element (M not a multiple of V / 2: bf16 6, fp32 3), from 24576 elements: the flat stream of
  // cols_periodic. H100, benchmarks/algos.py, A.t bf16 6 x N: N = 6144 4.3 us against cols_short
  // 7.1 (torch 3.7), 2^20 9.2 against 14.7 (torch 13.9), 2^24 94 against 245 (torch 137);
  // 6 x 4096 4.2 against rows 4.2 (and below that rows wins).
  if (s.s0 == 1 && s.M * s.N >= 24576 && s.s1 % (16 / s.elem_size / 2) != 0 &&
      can(A::kColsPeriodic))
    return A::kColsPeriodic;
  // Column-major points of the seventeenth session's sweep where another kernel beat the
  // choice below (H100, benchmarks/algos.py, torch in parentheses): bf16 16 x 6144
  // cols_periodic 4.3 us against rows 6.0 (5.8); bf16 256-1536 rows of 4 columns cols 1.3-1.5
  // against cols_short 1.9-2.0 (1.8-1.9); bf16 1024-1536 x 96 rows 1.9-2.1 against 2.5 (2.4);
  // bf16 256 x 1536 cols_vec 3.8 against cols_short 5.8 (4.4); fp32 98304 x 16 cols 2.8 against
  // 3.3 (3.1). (bf16 4097-8192 rows of 4 columns, 6144 x 4 at 0.967-0.988x on cols_short in
  // four sweeps, are given cols too; not yet measured there.)
  if (s.s0 == 1 && s.elem_size == 2) {
    if (s.M == 16 && s.N > 4096 && s.N <= 8192 && can(A::kColsPeriodic)) return A::kColsPeriodic;
    if (s.N <= 4 && s.M >= 256 && s.M <= 8192 && can(A::kCols)) return A::kCols;
    if (s.N > 64 && s.N <= 128 && s.M >= 384 && s.M <= 1536) return A::kRows;
    if (s.M > 128 && s.M <= 256 && s.N > 1024 && s.N < 2048 && can(A::kColsVec))
      return A::kColsVec;
  }
  if (s.s0 == 1 && f32 && s.N > 8 && s.N <= 16 && s.M >= 81920 && s.M <= 131072 && can(A::kCols))
    return A::kCols;
  // A.t 256 x 256: rows 2.0 vs cols_vec 2.8, cols_short 5.7 (bf16); 2.3 vs 2.5, 3.9 (fp32).
  if (s.s0 == 1 && s.M > 128 && s.M <= 256 && s.N > 16 && s.N <= 256) return A::kRows;
  // A.t fp32 64 x 2^20: cols_short 67.4 (torch 73.5); A.t bf16 2^20 x 16: 14.1 (torch 23.4).
  if (s.s0 == 1 && (s.M <= 256 || s.N <= 16)) return A::kColsShort;
  // Row-major N <= 16 that rows_short cannot run (rows or x misaligned): a thread per row.
  if (s.N <= 16) return vec_or(A::kColsVec, A::kCols, s);
  // Column-major, more than 256 rows, storage rows of whole aligned vectors: cols_short's lanes
  // along the storage rows (no x staging, no barriers per chunk) rather than cols_vec, from 80
  // columns up to 2^21 elements (not 16-bit rows of 256-1536 columns), and for rows of up to 32
  // columns from 2^24 elements. H100, the quick sweep before and after (A.t, both dtypes, time
  // against cols_vec): fp32 1024-4096 x 96-1024 0.57-0.88x, bf16 1536-16384 x 96 0.71-0.83x,
  // 1024 x 1024 0.69x; x 24 from 2^20 rows 0.77-0.89x. Not at 17-64 columns (1.05-2.4x), nor
  // past 2^21 elements (fp32 6144 x 1536 1.56x, bf16 24576+ x 96 1.2-1.75x), nor 16-bit
  // 1024 x 1536 (1.24x).
  if (s.s0 == 1 && s.M > 256 && can(A::kColsVec) &&
      ((s.N >= 80 && s.M * s.N <= (int64_t{1} << 21) &&
        !(s.elem_size == 2 && s.N >= 256 && s.N <= 1536)) ||
       (s.N <= 32 && s.M * s.N >= (int64_t{1} << 24))))
    return A::kColsShort;
  // A.t fp32 8192^2: cols_vec 65.1 (torch 66.2).
  if (s.s1 != 1 && s.s0 == 1) return vec_or(A::kColsVec, A::kCols, s);
  // bf16 4096^2: rows_mma 6.6 (torch 14.7); fp16 2048 x 1024: 5.4 vs rows_vec 11.3 (mma_wins).
  if (mma_wins(s) && can(A::kRowsMma)) return A::kRowsMma;
  // bf16 8192^2: rows_vec 35.7 vs rows_mma 39.1 (torch 35.6); fp32 64 x 2^20: 72.3 (torch 71.8).
  return vec_or(A::kRowsVec, A::kRows, s);
}

// s is normalised. The automatic choice, or the forced one when it can run s (raises
// "gpukern::mv: forced algorithm 'x' cannot run this shape (...)" otherwise).
MvAlgo choose(const MvProblem& s) {
  return kTable.choose<MvAlgo>(
      [&](MvAlgo a, MvAlgo& plan) {
        plan = a;
        return can_run(a, s);
      },
      [&] { return choose_auto(s); },
      [&] {
        return detail::check_msg("M=", s.M, ", N=", s.N, ", strides=(", s.s0, ", ", s.s1,
                                 "), 16-byte aligned=", s.a_aligned);
      });
}

// Experiment knobs for benchmarks/reduce_knobs.py, off unless GPUKERN_MV_KNOBS=1 was in the
// environment at the first call: then each call reads GPUKERN_MV_<name> (an integer; unset or
// <= 0: the automatic value). SPLITS: the rows kernels' splits of N; RPB: their rows a block.
int64_t knob(const char* name) {
  static const bool on = knobs_enabled("MV");
  return on ? knob_value("MV", name) : 0;
}

// cols_short's launch shape (mv_cols_short_kernel): rpt rows of y per lane (a vector of a
// storage row: V when A is aligned and s1 % V == 0, else V / 2 when s1 % (V / 2) == 0 (8-byte
// vectors: 4 bf16 rows, 2 fp32 rows), else 1, element by element), W lanes a storage row,
// row_blocks tiles of W * rpt rows, splits of N.
struct ColsShortPlan {
  int rpt = 1, W = 1;
  int64_t row_blocks = 1, splits = 1;
};

ColsShortPlan cols_short_plan(const MvProblem& s, int64_t sms) {
  constexpr int kThreads = mv::kThreads;
  const int V = static_cast<int>(16 / s.elem_size);
  ColsShortPlan c;
  if (s.M > 1 && s.a_aligned && s.s1 % V == 0) {
    c.rpt = V;
  } else if (s.M > 1 && s.a_aligned && s.s1 % (V / 2) == 0) {
    c.rpt = V / 2;
  }
  // W: the fewest lanes (a power of two, 1..kThreads) that cover M, so a warp's load spans whole
  // storage rows (M > kThreads * rpt: several row blocks).
  int W = 1;
  while (W < kThreads && W * c.rpt < s.M) W *= 2;
  // Blocks: a wave of the 2 per SM that the launch bounds guarantee (KU 16-byte loads in flight
  // per lane cover the memory latency).
  const int64_t target = sms * 2;
  auto row_blocks = [&](int w) { return ceil_div(s.M, int64_t{w} * c.rpt); };
  // Narrower tiles while the row blocks alone leave the wave short (and stay at least 128 bytes
  // wide unless M is smaller): for short rows (N <= 16: 32 row blocks of 2048 bf16 rows at
  // M = 65536, 0.51-0.78x torch at M = 1024..65536) more row blocks with several groups each,
  // each group keeping at least 2 storage rows; for longer rows, tiles that start over 256
  // bytes (M = 256 16-bit: 512 bytes) go down to 128 bytes, so that the split finish reads
  // 66 x 64 partials per row block, not 264 x 256 in one block (17 serial rounds of 16 loads a
  // thread; M = 256 ran at 0.44-0.48x). Tiles of at most 256 bytes keep their width (fp32
  // M <= 64: at the copy bandwidth with 256-byte tiles).
  const int w_min = std::max(1, std::min(W, 128 / (c.rpt * s.elem_size)));
  const bool wide_tile = int64_t{W} * c.rpt * s.elem_size > 256;
  while (W > w_min && row_blocks(W) < target) {
    const bool short_rows = s.N <= 16 && int64_t{kThreads / W} * 2 * 2 <= s.N;  // 2G groups
    if (s.N <= 16 ? !short_rows : !wide_tile) break;
    W /= 2;
  }
  c.W = W;
  c.row_blocks = row_blocks(W);
  // Row blocks x splits ~ one wave; at least two batches of loads per group and split; few
  // splits keep the finish short (it reads splits x M partials).
  if (c.row_blocks < target && c.row_blocks <= kTicketsPerSlot) {
    const int64_t ku = c.rpt * s.elem_size >= 16 ? 16 : 32;  // kShortColUnroll
    const int64_t min_cols = int64_t{kThreads / W} * ku * 2;
    c.splits = std::min({target / c.row_blocks, ceil_div(s.N, min_cols), int64_t{65535}});
    c.splits = std::max<int64_t>(c.splits, 1);
  }
  return c;
}

// The launch of algorithm `algo` for the normalised problem s, on `stream` with ticket slot
// `tbase` (core/tickets.h).
template <typename T>
void launch_mv(const MvProblem& s, MvAlgo algo, const at::Tensor& self, const at::Tensor& vec,
               const at::Tensor& out, cudaStream_t stream, int tbase) {
  constexpr int V = kVec16<T>;
  constexpr int kThreads = mv::kThreads;
  const int64_t sms = device_props().multiProcessorCount;
  const int64_t target_blocks = sms * (2048 / kThreads);
  const T* A = reinterpret_cast<const T*>(self.data_ptr());
  const T* x = reinterpret_cast<const T*>(vec.data_ptr());
  T* y = reinterpret_cast<T*>(out.data_ptr());
  MvParams p;
  p.M = s.M;
  p.N = s.N;
  p.s0 = s.s0;
  p.s1 = s.s1;
  p.xs = s.xs;
  const auto ws_opts = self.options().dtype(at::kFloat);

  if (algo == MvAlgo::kColsVec || algo == MvAlgo::kCols) {
    const bool vec_a = algo == MvAlgo::kColsVec;
    const int64_t rows_per_block = vec_a ? mv::ColsShape<true, V>::kRowsPerBlock
                                         : mv::ColsShape<false, V>::kRowsPerBlock;
    const int64_t nrb = ceil_div(p.M, rows_per_block);
    // One resident wave: __launch_bounds__(kThreads, 4) guarantees 4 blocks per SM.
    const int64_t wave = sms * 4;
    int64_t splits = 1;
    if (nrb < wave && nrb <= kTicketsPerSlot) {
      // Row blocks x splits ~ one wave (rounded, so 64 row blocks on 132 SMs take 8 splits: 512
      // blocks, not 9 and a partial second wave); at least 64 columns per split; at most 64
      // partials per row (the finishing block loads them 16 at a time).
      splits = std::min({(wave + nrb / 2) / nrb, ceil_div(p.N, int64_t{64}), int64_t{64}});
      splits = std::max<int64_t>(splits, 1);
    }
    p.split_len = ceil_div(p.N, splits);
    splits = ceil_div(p.N, p.split_len);
    at::Tensor ws;
    float* wsp = nullptr;
    if (splits > 1) {
      ws = at::empty({splits * p.M}, ws_opts);
      wsp = ws.data_ptr<float>();
    }
    const int64_t gx = splits > 1 ? nrb : std::min(nrb, sms * 64);
    const dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(splits));
    if (vec_a) {
      launch_pdl(mv::mv_cols_kernel<T, true>, grid, dim3(kThreads), 0, stream, A, x, y, wsp, p,
                 tbase);
    } else {
      launch_pdl(mv::mv_cols_kernel<T, false>, grid, dim3(kThreads), 0, stream, A, x, y, wsp, p,
                 tbase);
    }
    GK_CHECK_LAUNCH();
    return;
  }

  if (algo == MvAlgo::kColsPeriodic) {
    const periodic::Params pp =
        periodic::make_params(p.M * p.N, static_cast<int>(p.M), V, p.xs);
    const int64_t blocks = periodic::grid_blocks(
        pp, sms * resident_blocks_per_sm<mv::mv_periodic_kernel<T>>(self.get_device(), kThreads));
    at::Tensor ws;
    float* wsp = nullptr;
    if (blocks > 1) {
      ws = at::empty({blocks * p.M}, ws_opts);
      wsp = ws.data_ptr<float>();
    }
    launch_pdl(mv::mv_periodic_kernel<T>, dim3(static_cast<unsigned>(blocks)),
               dim3(periodic::kThreads), 0, stream, A, x, y, pp, wsp, tbase);
    GK_CHECK_LAUNCH();
    return;
  }

  if (algo == MvAlgo::kRowsShort) {
    // L lanes a row (a power of two): the smallest that gives each lane at most kShortUnroll of
    // the row's whole vectors, so one step of the k loop covers the row when N * elem <= 1 KB
    // (longer rows: 32 lanes, N / (64 V) steps).
    const int64_t per_lane = ceil_div(p.N / V, int64_t{mv::kShortUnroll});
    int L = 1;
    while (L < kWarpSize && L < per_lane) L *= 2;
    const int64_t rows_per_warp = static_cast<int64_t>(kWarpSize / L) * mv::kShortRows;
    const int64_t blocks = ceil_div(ceil_div(p.M, rows_per_warp), int64_t{mv::kWarps});
    // At most one resident wave (the launch bounds' kShortRowsBlocks per SM); warps stride over
    // the tiles.
    const dim3 grid(static_cast<unsigned>(std::min(blocks, sms * mv::kShortRowsBlocks<T>)));
    auto launch = [&](auto lanes) {
      launch_pdl(mv::mv_rows_short_kernel<T, decltype(lanes)::value>, grid, dim3(kThreads), 0,
                 stream, A, x, y, p);
    };
    switch (L) {
      case 1: launch(std::integral_constant<int, 1>{}); break;
      case 2: launch(std::integral_constant<int, 2>{}); break;
      case 4: launch(std::integral_constant<int, 4>{}); break;
      case 8: launch(std::integral_constant<int, 8>{}); break;
      case 16: launch(std::integral_constant<int, 16>{}); break;
      default: launch(std::integral_constant<int, 32>{}); break;
    }
    GK_CHECK_LAUNCH();
    return;
  }

  if (algo == MvAlgo::kColsShort) {
    const ColsShortPlan plan = cols_short_plan(s, sms);
    p.split_len = ceil_div(p.N, plan.splits);
    const int64_t splits = ceil_div(p.N, p.split_len);
    at::Tensor ws;
    float* wsp = nullptr;
    if (splits > 1) {
      ws = at::empty({splits * p.M}, ws_opts);
      wsp = ws.data_ptr<float>();
    }
    const int64_t gx = splits > 1 ? plan.row_blocks : std::min(plan.row_blocks, sms * 2);
    const dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(splits));
    auto launch = [&](auto rpt, auto lanes) {
      launch_pdl(mv::mv_cols_short_kernel<T, decltype(rpt)::value, decltype(lanes)::value>,
                 grid, dim3(kThreads), 0, stream, A, x, y, wsp, p, tbase);
    };
    auto launch_w = [&](auto rpt) {
      switch (plan.W) {
        case 1: launch(rpt, std::integral_constant<int, 1>{}); break;
        case 2: launch(rpt, std::integral_constant<int, 2>{}); break;
        case 4: launch(rpt, std::integral_constant<int, 4>{}); break;
        case 8: launch(rpt, std::integral_constant<int, 8>{}); break;
        case 16: launch(rpt, std::integral_constant<int, 16>{}); break;
        case 32: launch(rpt, std::integral_constant<int, 32>{}); break;
        case 64: launch(rpt, std::integral_constant<int, 64>{}); break;
        case 128: launch(rpt, std::integral_constant<int, 128>{}); break;
        default: launch(rpt, std::integral_constant<int, kThreads>{}); break;
      }
    };
    if (plan.rpt == V) {
      launch_w(std::integral_constant<int, V>{});
    } else if (plan.rpt == V / 2) {
      launch_w(std::integral_constant<int, V / 2>{});
    } else {
      launch_w(std::integral_constant<int, 1>{});
    }
    GK_CHECK_LAUNCH();
    return;
  }

  if (algo == MvAlgo::kRowsMma) {
    if constexpr (sizeof(T) == 2) {
      // wpt warps a 16-row tile: the fewest (a power of two, 2 to 8) that cover the row's
      // 128-column steps, so short rows put every warp to work (256 columns: 2 a tile, 4 tiles
      // a block).
      const int64_t nsteps = ceil_div(p.N, int64_t{mv::kMmaStep});
      int wpt = 2;  // (1 spilled 12 bytes at the 64-register cap)
      while (wpt < mv::kWarps && wpt < nsteps) wpt *= 2;
      const int64_t tiles = ceil_div(p.M, int64_t{16});
      const int64_t groups = ceil_div(tiles, int64_t{mv::kWarps / wpt});
      const int64_t gx = std::min(groups, sms * 4);  // one resident wave, tiles in a loop
      auto launch = [&](auto w) {
        launch_pdl(mv::mv_rows_mma_kernel<T, decltype(w)::value>,
                   dim3(static_cast<unsigned>(gx)), dim3(kThreads), 0, stream, A, x, y, p);
      };
      switch (wpt) {
        case 2: launch(std::integral_constant<int, 2>{}); break;
        case 4: launch(std::integral_constant<int, 4>{}); break;
        default: launch(std::integral_constant<int, mv::kWarps>{}); break;
      }
      GK_CHECK_LAUNCH();
    } else {
      TORCH_INTERNAL_ASSERT(false, "rows_mma chosen for a 32-bit type");
    }
    return;
  }
  const bool vec_a = algo == MvAlgo::kRowsVec;
  const bool peel = !(s.a_aligned && s.s0 % V == 0);  // rows_vec on rows not all aligned
  const bool x_vec = p.xs == 1 && s.x_aligned;
  // A warp per row once rows alone give about 32 warps per SM, or from 1024 rows of at most
  // 16 KB; otherwise a block per row. (H100, benchmarks/reduce_knobs.py: fp32 1536 x 4096 5.6 us
  // with a warp a row against 8.3 with a block, torch 5.6; bf16 1536 x 1536 3.1 against 6.5,
  // torch 4.4.)
  const int64_t row_bytes = p.N * static_cast<int64_t>(sizeof(T));
  int rpb = p.M >= sms * 32 || (p.M >= 1024 && row_bytes <= 16384) ? mv::kWarps : 1;
  int64_t groups = ceil_div(p.M, rpb);
  int64_t splits = 1;
  const int64_t align = static_cast<int64_t>(kWarpSize) * V;  // keeps split starts vector-aligned
  // One resident wave of the rows kernel: __launch_bounds__(kThreads, 4) gives 4 blocks per SM.
  const int64_t wave = sms * 4;
  const int64_t min_cols = static_cast<int64_t>(mv::kThreads) * V * 2;
  if (rpb == 1 && groups < target_blocks && 2 * groups < wave && p.M * row_bytes <= (32 << 20)) {
    // Few rows, up to 32 MB (L2-sized): splits of at least 64 KB, about two blocks an SM in
    // all; the finish of many small splits cost more than their blocks gave. H100,
    // benchmarks/reduce_knobs.py: fp32 96 x 16384 unsplit 3.2 us against 11.6 in 8 splits
    // (torch 4.9), 256 x 16384 4.5 against 10.8 (7.7), 4 x 393216 in 32 splits 4.1 against
    // 7.6 in 192 (5.6), 24 x 65536 in 4 4.3 against 7.1 (5.3); bf16 256 x 24576 unsplit 3.9
    // against 10.7 (7.7), 64 x 98304 in 4 5.3 against 9.4 (8.6).
    splits = std::min({ceil_div(2 * sms, groups), ceil_div(row_bytes, int64_t{65536}),
                       int64_t{65535}});
    splits = std::max<int64_t>(splits, 1);
  } else if (rpb == 1 && groups < target_blocks && 2 * groups < wave) {
    splits = std::min({ceil_div(target_blocks, groups), ceil_div(p.N, min_cols), int64_t{65535}});
    splits = std::max<int64_t>(splits, 1);
  } else if (rpb == 1 && p.M >= wave && p.M < 2 * wave) {
    // One to two waves of one-row blocks would leave the second wave partly empty. Instead 2, 4
    // or 8 rows a block and the split of N that fill one wave best (ties: fewer splits).
    int64_t best = 0;
    for (int r = 2; r <= mv::kWarps; r *= 2) {
      const int64_t gr = ceil_div(p.M, int64_t{r});
      const int64_t sp = std::max<int64_t>(1, std::min(wave / gr, ceil_div(p.N, min_cols)));
      if (gr * sp > best) best = gr * sp, rpb = r, splits = sp;
    }
    groups = ceil_div(p.M, int64_t{rpb});
  }
  if (const int64_t k = knob("RPB"); k == 1 || k == 2 || k == 4 || k == 8) {
    rpb = static_cast<int>(k);
    groups = ceil_div(p.M, int64_t{rpb});
  }
  if (const int64_t k = knob("SPLITS"); k > 0 && groups <= kTicketsPerSlot) {
    splits = std::min(k, int64_t{65535});
  }
  p.split_len = ceil_div(ceil_div(p.N, splits), align) * align;
  splits = ceil_div(p.N, p.split_len);
  at::Tensor ws;
  float* wsp = nullptr;
  if (splits > 1) {
    TORCH_INTERNAL_ASSERT(groups <= kTicketsPerSlot);
    ws = at::empty({splits * p.M}, ws_opts);
    wsp = ws.data_ptr<float>();
  }
  const int64_t gx = splits > 1 ? groups : std::min(groups, sms * 64);
  const dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(splits));
  auto kernel = vec_a ? (peel ? mv::mv_rows_kernel<T, true, true>
                               : mv::mv_rows_kernel<T, true, false>)
                      : mv::mv_rows_kernel<T, false, false>;
  launch_pdl(kernel, grid, dim3(kThreads), 0, stream, A, x, y, wsp, p, rpb, x_vec, tbase);
  GK_CHECK_LAUNCH();
}


}  // namespace

void mv_cuda_run(const MvProblem& p, const at::Tensor& self, const at::Tensor& vec,
                 const at::Tensor& out) {
  CudaLaunchContext ctx(self);
  const int tbase = ticket_slot_base(self.device().index(), ctx.stream);
  const MvProblem s = normalised(p);
  const MvAlgo algo = choose(s);
  if (algo == MvAlgo::kCublas) {
    // torch.mv's own path into our output (same stream, capture-safe as torch.mv is).
    at::Tensor y = out;
    at::mv_out(y, self, vec);
    return;
  }
  GK_DISPATCH_FLOAT_CUDA(self.scalar_type(), "mv", [&] {
    launch_mv<scalar_t>(s, algo, self, vec, out, ctx.stream, tbase);
  });
}

std::string mv_cuda_algorithm(const MvProblem& p) { return kTable.name(choose(normalised(p))); }

}  // namespace gpukern
