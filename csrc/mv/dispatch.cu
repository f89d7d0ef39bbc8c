// mv on CUDA: algorithm choice from the shape and strides, then one launch on the current stream
// (kernels in mv_kernels.cuh, checks in mv.cpp).
//
// Algorithms (names accepted by torch_ops.force_algorithm("mv", name), returned by
// torch_ops.algorithm("mv", A, x)):
//   rows_vec  rows kernel, 16-byte loads of A: s1 == 1 (rows that are not all 16-byte aligned,
//             odd row strides or storage offsets, take the instantiation that walks each row's
//             aligned span, peel_row_dot; 1000x7777 fp32 ran at 0.58x cuBLAS with the scalar
//             rows kernel)
//   rows      rows kernel, scalar strided loads: any layout
//   cols_vec  cols kernel, 16-byte vectors of V rows: s0 == 1, A aligned, s1 % V == 0
//   cols      cols kernel, a thread per row, scalar loads: any layout
// Automatic choice (a pure function of the shape, dtype and alignment):
//   N <= 16 (any layout)                  cols(_vec): the short row of each thread in registers
//   s0 == 1, s1 != 1, M >= 256            cols(_vec): column-major, threads across rows
//   anything else                         rows(_vec)
// (vec variant whenever it applies). Within the rows kernel: a warp per row when M >= 32 * SMs,
// else a block per row, with N split across blocks only when the rows fill less than half a
// resident wave (1000x7777 fp32 split in 2 ran 3.8 waves of short blocks, each paying the
// split's fence and ticket); within the cols kernel, N is split so that
// row blocks x splits is about one resident wave. Both split paths finish in the last block.
// Every launch uses programmatic dependent launch (device/pdl.cuh): back to back, the next
// kernel's blocks are scheduled while this one drains (8192^2 fp16: 37.2 us a call from a
// stream, 35.8 in a CUDA graph, whose launches have no gap between kernels).
#include <ATen/ATen.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/algo_table.h"
#include "core/checks.h"
#include "core/dispatch.h"
#include "core/launch.cuh"
#include "core/tickets.h"
#include "mv/mv.h"
#include "mv/mv_kernels.cuh"

namespace gpukern {
namespace {

constexpr const char* kOp = "mv";

enum class MvAlgo { kRowsVec, kRows, kColsVec, kCols, kRowsMma };

const std::vector<std::string>& mv_algo_names() {
  static const std::vector<std::string> names = {"rows_vec", "rows", "cols_vec", "cols",
                                                 "rows_mma"};
  return names;
}

// Strides of size-1 dims are arbitrary: make them harmless for the layout tests.
MvShape normalised(MvShape s) {
  if (s.N == 1) s.s1 = 0;
  if (s.M == 1) s.s0 = 0;
  return s;
}

bool mv_algo_applies(MvAlgo a, const MvShape& s) {
  const int64_t V = 16 / s.elem_size;
  switch (a) {
    case MvAlgo::kRowsVec:
      return s.s1 == 1;
    case MvAlgo::kColsVec:
      return s.s0 == 1 && s.a_aligned && s.s1 % V == 0;
    case MvAlgo::kRowsMma:
      return s.elem_size == 2 && s.s1 == 1 && s.a_aligned && s.s0 % V == 0 && s.N % V == 0 &&
             s.xs == 1 && s.x_aligned;
    case MvAlgo::kRows:
    case MvAlgo::kCols:
      return true;
  }
  return false;
}

// Where rows_mma beat rows_vec (fp16 on an H200, forced both ways): many short rows, where
// rows_vec runs a block per row (M < 32 * SMs) and each warp sees only a few vectors. 2048 x
// 1024: 5.4 vs 11.3 us, 4096 x 4096: 13.3 vs 23.9, 1024 x 1024: 4.8 vs 5.9, 8192 x 4096: 21.9
// vs 22.2 (the limit in size). It lost on long rows (N = 16384: 22.9 vs 9.2 at 512 rows, 77.1
// vs 68.1 at 8192) and on large matrices (8192 x 8192: 39.3 vs 37.0, 65536 x 4096 bf16: 135.7
// vs 124.3): rows_vec's warps read 512 contiguous bytes of one row per load, the mma tiles 64
// bytes of each of 8 rows.
bool mma_wins(const MvShape& s) {
  if (s.M * s.N > (int64_t{1} << 25)) return false;
  return (s.N <= 4096 && s.M >= 2048) || (s.N <= 1024 && s.M >= 512);
}

MvAlgo choose_mv_algo_auto(const MvShape& s) {
  const bool cols = s.N <= 16 || (s.s1 != 1 && s.s0 == 1 && s.M >= 256);
  if (cols) return mv_algo_applies(MvAlgo::kColsVec, s) ? MvAlgo::kColsVec : MvAlgo::kCols;
  if (mma_wins(s) && mv_algo_applies(MvAlgo::kRowsMma, s)) return MvAlgo::kRowsMma;
  return mv_algo_applies(MvAlgo::kRowsVec, s) ? MvAlgo::kRowsVec : MvAlgo::kRows;
}

// s is normalised. The automatic choice, or the forced one (core/algo_table.h) when it applies.
MvAlgo choose_mv_algo(const MvShape& s) {
  const std::string forced = forced_algorithm(kOp);
  if (forced.empty()) return choose_mv_algo_auto(s);
  const auto a = static_cast<MvAlgo>(algorithm_index(kOp, forced, mv_algo_names()));
  GK_CHECK(mv_algo_applies(a, s), kOp, "forced algorithm '", forced,
           "' cannot run this shape (M=", s.M, ", N=", s.N, ", strides=(", s.s0, ", ", s.s1,
           "), 16-byte aligned=", s.a_aligned, ")");
  return a;
}

template <typename T>
void launch_mv(const at::Tensor& self, const at::Tensor& vec, const at::Tensor& out,
               cudaStream_t stream, int tbase) {
  constexpr int V = kVec16<T>;
  constexpr int kThreads = mvk::kThreads;
  const int64_t sms = device_props().multiProcessorCount;
  const int64_t target_blocks = sms * (2048 / kThreads);
  const T* A = reinterpret_cast<const T*>(self.data_ptr());
  const T* x = reinterpret_cast<const T*>(vec.data_ptr());
  T* y = reinterpret_cast<T*>(out.data_ptr());
  const MvShape s = normalised(mv_shape(self, vec));
  const MvAlgo algo = choose_mv_algo(s);
  MvParams p;
  p.M = s.M;
  p.N = s.N;
  p.s0 = s.s0;
  p.s1 = s.s1;
  p.xs = s.xs;
  const auto ws_opts = self.options().dtype(at::kFloat);

  if (algo == MvAlgo::kColsVec || algo == MvAlgo::kCols) {
    const bool vec_a = algo == MvAlgo::kColsVec;
    const int64_t rows_per_block = vec_a ? mvk::ColsShape<true, V>::kRowsPerBlock
                                         : mvk::ColsShape<false, V>::kRowsPerBlock;
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
      launch_pdl(mvk::mv_cols_kernel<T, true>, grid, dim3(kThreads), 0, stream, A, x, y, wsp, p,
                 tbase);
    } else {
      launch_pdl(mvk::mv_cols_kernel<T, false>, grid, dim3(kThreads), 0, stream, A, x, y, wsp, p,
                 tbase);
    }
    GK_CHECK_LAUNCH();
    return;
  }

  if (algo == MvAlgo::kRowsMma) {
    if constexpr (sizeof(T) == 2) {
      const int64_t tiles = ceil_div(p.M, int64_t{16});
      const int64_t gx = std::min(tiles, sms * 4);  // one resident wave, tiles in a loop
      launch_pdl(mvk::mv_rows_mma_kernel<T>, dim3(static_cast<unsigned>(gx)), dim3(kThreads), 0,
                 stream, A, x, y, p);
      GK_CHECK_LAUNCH();
    } else {
      TORCH_INTERNAL_ASSERT(false, "rows_mma chosen for a 32-bit type");
    }
    return;
  }
  const bool vec_a = algo == MvAlgo::kRowsVec;
  const bool peel = !(s.a_aligned && s.s0 % V == 0);  // rows_vec on rows not all aligned
  const bool x_vec = p.xs == 1 && s.x_aligned;
  // A warp per row once rows alone give about 32 warps per SM; otherwise a block per row.
  int rpb = p.M >= sms * 32 ? mvk::kWarps : 1;
  int64_t groups = ceil_div(p.M, rpb);
  int64_t splits = 1;
  const int64_t align = static_cast<int64_t>(kWarpSize) * V;  // keeps split starts vector-aligned
  // One resident wave of the rows kernel: __launch_bounds__(kThreads, 4) gives 4 blocks per SM.
  const int64_t wave = sms * 4;
  const int64_t min_cols = static_cast<int64_t>(mvk::kThreads) * V * 2;
  if (rpb == 1 && groups < target_blocks && 2 * groups < wave) {
    splits = std::min({ceil_div(target_blocks, groups), ceil_div(p.N, min_cols), int64_t{65535}});
    splits = std::max<int64_t>(splits, 1);
  } else if (rpb == 1 && p.M >= wave && p.M < 2 * wave) {
    // One to two waves of one-row blocks: the second wave ran partly empty (1000 rows: 1.9
    // waves, 17.2 us). Instead 2, 4 or 8 rows a block and the split of N that fill one wave
    // best (ties: fewer splits): measured on an H200 with 7777 columns, 1000 rows -> 2 rows a
    // block, 16.7 us; 700 rows -> 8 rows a block in 6 splits, 13.3 us (16.7 with one row).
    int64_t best = 0;
    for (int r = 2; r <= mvk::kWarps; r *= 2) {
      const int64_t gr = ceil_div(p.M, int64_t{r});
      const int64_t sp = std::max<int64_t>(1, std::min(wave / gr, ceil_div(p.N, min_cols)));
      if (gr * sp > best) best = gr * sp, rpb = r, splits = sp;
    }
    groups = ceil_div(p.M, int64_t{rpb});
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
  auto kernel = vec_a ? (peel ? mvk::mv_rows_kernel<T, true, true>
                               : mvk::mv_rows_kernel<T, true, false>)
                      : mvk::mv_rows_kernel<T, false, false>;
  launch_pdl(kernel, grid, dim3(kThreads), 0, stream, A, x, y, wsp, p, rpb, x_vec, tbase);
  GK_CHECK_LAUNCH();
}

}  // namespace

void mv_cuda(const at::Tensor& self, const at::Tensor& vec, const at::Tensor& out) {
  CudaLaunchContext ctx(self);
  const int tbase = ticket_slot_base(self.device().index(), ctx.stream);
  GK_DISPATCH_FLOAT_CUDA(self.scalar_type(), "mv",
                         [&] { launch_mv<scalar_t>(self, vec, out, ctx.stream, tbase); });
}

std::string mv_cuda_algorithm(const MvShape& shape) {
  return mv_algo_names()[static_cast<int>(choose_mv_algo(normalised(shape)))];
}

}  // namespace gpukern
