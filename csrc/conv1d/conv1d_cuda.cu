// conv1d on CUDA: host entries of both overloads, the algorithm choice and the launchers.
// Kernels live in conv1d_kernels.cuh; argument checks and output sizes in conv/args.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <climits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/algo_table.h"
#include "core/checks.h"
#include "conv/args.h"
#include "core/dispatch.h"
#include "core/launch.cuh"
#include "conv1d/conv1d.h"
#include "conv1d/conv1d_fft.h"
#include "conv1d/conv1d_kernels.cuh"

namespace gpukern {
namespace {

constexpr const char* kOp = "conv1d";

using GeneralOT1 = Conv1dGeneralTraits<128, 4, 1>;
using GeneralOT4 = Conv1dGeneralTraits<128, 4, 4>;
using Rowwise8 = Conv1dRowwiseTraits<128, 8, true>;
using Rowwise8Dilated = Conv1dRowwiseTraits<128, 8, false>;

enum class Conv1dAlgo {
  kRowwise8,
  kRowwise16,
  kRowwise8Dilated,
  kGeneralOT1,
  kGeneralOT4,
  kFft,
  kRowwiseReg,
  kRowwiseMma,
};

// The register-window kernel's filters: one compiled kernel per K (its taps are unrolled).
constexpr int64_t kRegMaxK = 8;

// The tensor-core kernel (fp16/bf16 only): its longest filter (the staged tile stays within
// 48 KB of shared memory).
constexpr int64_t kMmaMaxK = 16384;
// rowwise_mma for 16-bit rows from this many taps (below: rowwise_reg).
constexpr int64_t kMmaMinK = 8;
static_assert(kMmaMinK - 1 <= kRegMaxK, "rowwise_reg covers the 16-bit filters below rowwise_mma");

// FFT path thresholds (see the algorithm choice below and conv1d_fft_cuda.cu).
constexpr int64_t kFftMinTaps = 512;
constexpr int64_t kFftMinMacs = int64_t{1} << 30;

// The algorithm choice, from the shape alone:
//  - Row-wise kernel when every output row reads exactly one input row and one filter row
//    (C == O == groups: single-channel signals, batched or not, and depthwise convolutions), at
//    stride 1, with dilation <= 128 (a tile holds at least one thread per dilation phase) and an
//    output row of at least a quarter of its 1024-output tile (shorter rows would mostly compute
//    padding; the general kernel sizes its tile to the row instead). Within it:
//      fp32, dilation 1, any K: rowwise16, one warp per tile of up to 2048 outputs (16 per lane
//        and segment in 16x16 register blocks, cp.async staging, whole segments stored through
//        shared memory). Measured on an H200 against the streaming short-filter kernel
//        (rowwise_short, removed) and rowwise_reg (us, forced): 1 x 64M K3 133.7 / 139.2 /
//        143.6, K8 134.9 / 142.0 / 142.7, K16 141.3 / 153.4, K28 153.0 / 184.8; depthwise B8
//        C4096 L4096 K4 283.6 / 314.6 / 292.8, K8 287.3 / 338.3 / 293.6, K16 300.8 / 404.3;
//        B16 C768 L2048 K5 52.3 / 59.6 / 59.6, K16 64.1 / 80.7, K31 64.2 / 86.2; the seed's 1 x
//        1,024,000 K16 7.1 / 8.0. Rows of many tiles and rows of one alike.
//      fp16/bf16, dilation 1, K >= kMmaMinK = 8 (up to kMmaMaxK): rowwise_mma, the tensor-core
//        kernel (the filter as a banded matrix, mma.m16n8k16 over the staged input, one warp
//        per tile). Measured on an H200, bf16, forced (us; round 14, against that round's
//        rowwise16 and rowwise_short): depthwise B16 C768 L2048 K31 37.0 vs rowwise16 63.8; B8
//        C4096 L4096 K9 163.0 vs rowwise_short 250.0; B16 C768 L2048 K16 47.6 vs rowwise16
//        102.8; 1 x 64M K16 76.3 vs rowwise16 105.6; B64 L1M K64 116.9 vs 215.1; 1 x 64M K127
//        316.8 vs 364.7; 1 x 1M K511 19.3 (rowwise16 26.8). From the FFT thresholds the FFT
//        path wins (1 x 16M K1024: 254.7 vs 372.6 in round 13's version of this kernel).
//      fp16/bf16, dilation 1, K < kMmaMinK: rowwise_reg, the register-window kernel (no shared
//        memory: a warp's lanes load 32 bytes each and take the taps' halo from the next lanes
//        by shuffles). Against rowwise_mma on B8 C4096 L4096 (bf16 / fp16): K4 162.2 vs 174.9 /
//        161.2 vs 174.4, K5 158.5 vs 173.7 / 158.9 vs 174.0, K6 173.1 vs 173.9 / 167.1 vs
//        174.0, K7 176.1 vs 173.4 / 168.9 vs 173.8, K8 183.0 vs 173.7 / 173.8 vs 173.7 (round
//        14; since then rowwise_reg loads the vectors past a row's end as plain zeros: K4 bf16
//        151.2, fp16 152.2): the crossover lies at K = 7 (bf16) and 8 (fp16), or above. On one
//        64M-sample bf16 row: K3 72.3 us
//        (rowwise_mma 80.2, rowwise_short 99.7), K5 74.9 (79.9, 99.6); 16-bit rowwise16 stages
//        through registers, converting (168 us there). On B16 C768 L2048 K5 bf16 rowwise_mma
//        measured faster (36.0 vs 42.8 us): the rule keeps the crossover of the longer rows.
//      dilation > 1: 8 outputs per thread on one dilation phase, scalar shared reads.
//  - General kernel otherwise (strides > 1, grouped and dense channels, depthwise multipliers,
//    huge dilations, short rows): 4 output channels per block when a group has at least 4 (the
//    staged input tile is reused by 4 filters), else 1.
//  - FFT path (overlap-save, conv1d_fft_cuda.cu) for long filters on long signals: one input row
//    per output row, stride 1, dilation 1, K >= kFftMinTaps = 512 and
//    N*C*L_out*K >= kFftMinMacs = 2^30 multiply-adds. Crossover, per output: the direct rowwise16
//    kernel runs at ~90% of the 51 TFLOP/s fp32 FMA roof, 2K flops, t_direct ~ K * 43.6 ps; the
//    FFT path is memory-bound, ~(8 + 28 o) bytes per output (o = B / (B - K + 1) <= 8/7 up to
//    K = 4097, 4/3 at K = 8191) at ~3.5 TB/s, t_fft ~ 11.4-13 ps, plus a fixed ~20-25 us (three
//    kernels, two cuFFT calls with ATen's host work). Per output the FFT wins from K ~ 300; at
//    K >= 512 it is predicted >= 1.9x faster per output, leaving margin for cuFFT below the
//    bandwidth model. The work floor makes the direct time (N*C*L_out*K * 43.6 ps >= ~47 us at
//    2^30) about twice the fixed cost. Predicted (H200, fp32): c1_k1024_seed direct ~94 us
//    (measured 97.9) vs FFT ~25-45 us; c1_k1024_16M direct 716 (measured) vs FFT ~190-220 us;
//    c1_k8191_1M FFT ~15-35 us; c1_k127_64M stays direct (K < 512: per output 5.5 ps direct vs
//    >= 11 ps FFT); K = 16 (seed) direct.

// Names of the algorithms, in Conv1dAlgo order: what _set_algorithm accepts and _algorithm_conv1d
// returns.
const std::vector<std::string>& conv1d_algo_names() {
  static const std::vector<std::string> names = {"rowwise8",    "rowwise16",   "rowwise8_dilated",
                                                 "general_ot1", "general_ot4", "fft",
                                                 "rowwise_reg", "rowwise_mma"};
  return names;
}

bool one_row(const Conv1dParams& p) { return p.c_per_group() == 1 && p.o_per_group() == 1; }

// Whether an algorithm can run a shape at all (the automatic choice below adds speed rules).
bool conv1d_algo_applies(Conv1dAlgo a, const Conv1dParams& p) {
  switch (a) {
    case Conv1dAlgo::kFft:
    case Conv1dAlgo::kRowwise8:
    case Conv1dAlgo::kRowwise16:
      return one_row(p) && p.stride == 1 && p.dilation == 1;
    case Conv1dAlgo::kRowwise8Dilated:
      return one_row(p) && p.stride == 1 && p.dilation <= Rowwise8Dilated::kMaxDilation;
    case Conv1dAlgo::kRowwiseReg:
      return one_row(p) && p.stride == 1 && p.dilation == 1 && p.K <= kRegMaxK;
    case Conv1dAlgo::kRowwiseMma:
      return one_row(p) && p.stride == 1 && p.dilation == 1 && p.elem_size == 2 &&
             p.K <= kMmaMaxK;
    case Conv1dAlgo::kGeneralOT1:
    case Conv1dAlgo::kGeneralOT4:
      return true;
  }
  return false;
}

Conv1dAlgo choose_conv1d_algo_auto(const Conv1dParams& p) {
  if (one_row(p) && p.stride == 1 && p.dilation == 1 && p.K >= kFftMinTaps &&
      p.N * p.C * p.L_out >= kFftMinMacs / p.K) {
    return Conv1dAlgo::kFft;
  }
  if (one_row(p) && p.stride == 1 && p.dilation <= Rowwise8Dilated::kMaxDilation &&
      p.L_out * 4 >= Rowwise8::kMaxTile) {
    if (p.dilation > 1) return Conv1dAlgo::kRowwise8Dilated;
    if (p.elem_size == 2 && p.K >= kMmaMinK && p.K <= kMmaMaxK) return Conv1dAlgo::kRowwiseMma;
    if (p.elem_size == 2 && p.K < kMmaMinK) return Conv1dAlgo::kRowwiseReg;
    return Conv1dAlgo::kRowwise16;
  }
  return p.o_per_group() >= 4 ? Conv1dAlgo::kGeneralOT4 : Conv1dAlgo::kGeneralOT1;
}

// The automatic choice, or the forced one (core/algo_table.h) when it can run the shape.
Conv1dAlgo choose_conv1d_algo(const Conv1dParams& p) {
  const std::string forced = forced_algorithm(kOp);
  if (forced.empty()) return choose_conv1d_algo_auto(p);
  const auto a = static_cast<Conv1dAlgo>(algorithm_index(kOp, forced, conv1d_algo_names()));
  GK_CHECK(conv1d_algo_applies(a, p), kOp, "forced algorithm '", forced,
           "' cannot run this shape (C=", p.C, ", O=", p.O, ", groups=", p.groups,
           ", stride=", p.stride, ", dilation=", p.dilation, ", K=", p.K,
           ", element size ", p.elem_size, ")");
  return a;
}

int grid_for(int64_t work_items) {
  return static_cast<int>(std::min<int64_t>(work_items, INT_MAX));
}

template <typename T, typename Traits>
void launch_rowwise(const Conv1dParams& p, cudaStream_t stream) {
  constexpr int kR = Traits::kR;
  const int d = Traits::kDil1 ? 1 : static_cast<int>(p.dilation);
  TORCH_INTERNAL_ASSERT(d >= 1 && d <= Traits::kMaxDilation && (d == 1 || !Traits::kDil1));
  const int tile_len = (Traits::kThreads / d) * d * kR;
  int64_t chunk = std::min<int64_t>(ceil_div(p.K, kR) * kR, Traits::kMaxChunk);
  if (!Traits::kDil1) {
    chunk = std::min<int64_t>(chunk, std::max(kR, Traits::kMaxHalo / d / kR * kR));
  }
  const int64_t tiles = ceil_div(p.L_out, tile_len);
  const int64_t staged = ceil_div(tile_len + chunk * d, 32) * 32;  // whole swizzle rows
  const size_t smem = static_cast<size_t>(chunk + staged) * sizeof(float);
  TORCH_INTERNAL_ASSERT(smem <= static_cast<size_t>(Traits::max_smem_bytes()));
  conv1d_rowwise_kernel<T, Traits><<<grid_for(p.N * p.C * tiles), Traits::kThreads, smem,
                                      stream>>>(p, static_cast<int>(chunk), tiles);
  GK_CHECK_LAUNCH();
}

// How many outputs early (< kV) the rowwise kernels' first tile of a row starts, at the row's
// 16-byte aligned output position: the output's misalignment when every row start has the same
// one, else kV - 1 (then some rows get one empty tile, which the kernels skip).
template <typename T>
int64_t rows_start_early(const Conv1dParams& p) {
  constexpr int64_t kV = kVec16<T>;
  if (p.y_sl == 1 && (p.C == 1 || p.y_so % kV == 0) && (p.N == 1 || p.y_sn % kV == 0)) {
    return static_cast<int64_t>((reinterpret_cast<uintptr_t>(p.y) / sizeof(T)) % kV);
  }
  return kV - 1;
}

// Resident blocks per SM of a kernel (at least 1).
template <typename Kernel>
int blocks_per_sm(Kernel kernel, int threads, int smem) {
  int n = 0;
  C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, smem));
  return std::max(n, 1);
}

// The rowwise_reg algorithm: warps walk segments of consecutive (32 - halo) * kE-output chunks
// of a row; as many blocks as fit at once (or fewer when there are fewer segments).
template <typename T, int kK>
void launch_rowwise_reg_k(const Conv1dParams& p, cudaStream_t stream) {
  using Traits = Conv1dRegTraits<T, kK>;
  constexpr int kWarps = Traits::kThreads / 32;
  TORCH_INTERNAL_ASSERT(one_row(p) && p.stride == 1 && p.dilation == 1 && p.K == kK);
  const int halo = reg_halo_lanes<Traits>(p.K, p.x_sl == 1);
  TORCH_INTERNAL_ASSERT(halo >= 0 && halo <= Traits::kMaxHalo);  // 0: K = 1, strided rows
  const int64_t q = (32 - halo) * Traits::kE;
  const int64_t early = rows_start_early<T>(p);
  const int64_t chunks = ceil_div(p.L_out + early, q);
  static const int per_sm = blocks_per_sm(conv1d_rowwise_reg_kernel<T, Traits>, Traits::kThreads, 0);
  const int64_t warps = int64_t{device_props().multiProcessorCount} * per_sm * kWarps;
  // Segments: about kSegsPerWarp per resident warp, at most kMaxSegChunks chunks each, whole
  // rows when rows are short.
  const int64_t rows = p.N * p.C;
  const int64_t seg_chunks = std::max<int64_t>(
      1, std::min<int64_t>({chunks, Traits::kMaxSegChunks,
                            ceil_div(rows * chunks, Traits::kSegsPerWarp * warps)}));
  const int64_t segs = ceil_div(chunks, seg_chunks);
  const int64_t total = rows * segs;
  GK_CHECK(total <= INT_MAX && chunks <= INT_MAX, kOp, "too many rows for the rowwise_reg kernel (",
           rows, " rows of ", chunks, " chunks)");
  const int64_t grid = std::min<int64_t>(ceil_div(total, kWarps), warps / kWarps);
  conv1d_rowwise_reg_kernel<T, Traits><<<static_cast<int>(grid), Traits::kThreads, 0, stream>>>(
      p, static_cast<uint32_t>(chunks), static_cast<uint32_t>(seg_chunks),
      static_cast<uint32_t>(segs), static_cast<uint32_t>(total), halo);
  GK_CHECK_LAUNCH();
}

template <typename T>
void launch_rowwise_reg(const Conv1dParams& p, cudaStream_t stream) {
  static_assert(kRegMaxK == 8, "one case per K below");
  switch (p.K) {
    case 1: return launch_rowwise_reg_k<T, 1>(p, stream);
    case 2: return launch_rowwise_reg_k<T, 2>(p, stream);
    case 3: return launch_rowwise_reg_k<T, 3>(p, stream);
    case 4: return launch_rowwise_reg_k<T, 4>(p, stream);
    case 5: return launch_rowwise_reg_k<T, 5>(p, stream);
    case 6: return launch_rowwise_reg_k<T, 6>(p, stream);
    case 7: return launch_rowwise_reg_k<T, 7>(p, stream);
    case 8: return launch_rowwise_reg_k<T, 8>(p, stream);
    default: TORCH_INTERNAL_ASSERT(false, "rowwise_reg: K = ", p.K);
  }
}

// The rowwise16 algorithm: one warp per tile of up to kMaxSegs 512-output segments (fewer when
// the staged tile would pass a warp's 12 KB, or when rows are too few to give every SM its warps),
// 4 warps a block; taps in chunks of up to kMaxChunk (then one segment a tile).
template <typename T>
void launch_rowwise_warp(const Conv1dParams& p, cudaStream_t stream) {
  using Traits = Conv1dWarpTraits<T>;
  TORCH_INTERNAL_ASSERT(one_row(p) && p.stride == 1 && p.dilation == 1);
  const int64_t kr = ceil_div(p.K, Traits::kR) * Traits::kR;
  const int chunk = static_cast<int>(std::min<int64_t>(kr, Traits::kMaxChunk));
  int segs = 1;
  if (kr <= Traits::kMaxChunk) {
    while (segs < Traits::kMaxSegs && Traits::warp_floats(segs + 1, chunk) <= Traits::kWarpFloats) {
      ++segs;
    }
  }
  const int64_t span = p.L_out + rows_start_early<T>(p);
  const int64_t rows = p.N * p.C;
  // Fewer tiles than one wave of warps: shorter tiles, down to one segment.
  const int64_t wave = static_cast<int64_t>(device_props().multiProcessorCount) *
                       Traits::kMinBlocks * Traits::kWarps;
  while (segs > 1 && rows * ceil_div(span, int64_t{segs} * Traits::kSeg) < wave) --segs;
  const int64_t tiles = ceil_div(span, int64_t{segs} * Traits::kSeg);
  const int64_t total = rows * tiles;
  GK_CHECK(total <= INT_MAX, kOp, "too many rows for the rowwise16 kernel (", rows, " rows of ",
           tiles, " tiles)");
  const int smem =
      Traits::kWarps * Traits::warp_floats(segs, chunk) * static_cast<int>(sizeof(float));
  conv1d_rowwise_warp_kernel<T, Traits>
      <<<static_cast<int>(ceil_div(total, Traits::kWarps)), Traits::kThreads, smem, stream>>>(
          p, segs, chunk, static_cast<uint32_t>(tiles), static_cast<uint32_t>(total));
  GK_CHECK_LAUNCH();
}

// The rowwise_mma algorithm: one warp per tile of up to 2048 outputs (the tiles of a row evened
// out to whole 128-output mma tiles), as many warps a block as their staged tiles fit in 48 KB
// (up to 4), k steps by K.
template <typename T, int kKS>
void launch_rowwise_mma_ks(const Conv1dParams& p, cudaStream_t stream) {
  using Traits = Conv1dMmaTraits<T, kKS>;
  TORCH_INTERNAL_ASSERT(one_row(p) && p.stride == 1 && p.dilation == 1 && p.K <= kMmaMaxK);
  const int64_t span = p.L_out + rows_start_early<T>(p);
  const int64_t rows = p.N * p.C;
  int64_t tiles = ceil_div(span, Traits::kMaxOb * Traits::kBlock);
  // Fewer tiles than one wave of warps (a single row of 1M samples is 512 tiles of 2048): tiles
  // down to kMinOb mma tiles, so that every SM gets its warps.
  const int64_t wave = static_cast<int64_t>(device_props().multiProcessorCount) *
                       Traits::kMinBlocks * Traits::kMaxWarps;
  if (rows * tiles < wave) {
    tiles = std::max(tiles, std::min(ceil_div(span, Traits::kMinOb * Traits::kBlock),
                                     ceil_div(wave, rows)));
  }
  const int64_t nob = ceil_div(ceil_div(span, tiles), Traits::kBlock);
  const int64_t npass = p.K <= Traits::kPassTaps ? 1 : ceil_div(p.K, Traits::kPassStride);
  const int64_t total = rows * tiles;
  GK_CHECK(total <= INT_MAX, kOp, "too many rows for the rowwise_mma kernel (", p.N * p.C,
           " rows of ", tiles, " tiles)");
  const int64_t stage =
      Traits::staged(static_cast<int>(nob), static_cast<int>((npass - 1) * Traits::kPassStride));
  const int64_t stage_bytes = stage * static_cast<int64_t>(sizeof(T));
  TORCH_INTERNAL_ASSERT(nob <= Traits::kMaxOb && stage_bytes <= Traits::kSmemBudget);
  const int64_t warps = std::max<int64_t>(
      1, std::min<int64_t>({Traits::kMaxWarps, Traits::kSmemBudget / stage_bytes, total}));
  conv1d_rowwise_mma_kernel<T, Traits>
      <<<static_cast<int>(ceil_div(total, warps)), static_cast<int>(32 * warps),
         static_cast<size_t>(warps * stage_bytes), stream>>>(
          p, static_cast<int>(nob), static_cast<int>(npass), static_cast<uint32_t>(tiles),
          static_cast<uint32_t>(total), static_cast<int>(stage));
  GK_CHECK_LAUNCH();
}

template <typename T>
void launch_rowwise_mma(const Conv1dParams& p, cudaStream_t stream) {
  if constexpr (sizeof(T) == 2) {
    if (p.K <= Conv1dMmaTraits<T, 2>::kPassTaps) return launch_rowwise_mma_ks<T, 2>(p, stream);
    if (p.K <= Conv1dMmaTraits<T, 3>::kPassTaps) return launch_rowwise_mma_ks<T, 3>(p, stream);
    if (p.K <= Conv1dMmaTraits<T, 4>::kPassTaps) return launch_rowwise_mma_ks<T, 4>(p, stream);
    return launch_rowwise_mma_ks<T, 8>(p, stream);
  } else {
    TORCH_INTERNAL_ASSERT(false, "rowwise_mma: 16-bit types only");
  }
}

template <typename T, typename Traits>
void launch_general(const Conv1dParams& p, cudaStream_t stream) {
  constexpr int64_t kHalf = Traits::kSmemX / 2;
  int64_t tile = std::min<int64_t>(Traits::kTile, p.L_out);
  // Long strides: shorten the tile so its stride part takes at most half the staged input.
  if ((tile - 1) * p.stride > kHalf - 1) tile = (kHalf - 1) / p.stride + 1;
  const int64_t room = Traits::kSmemX - (tile - 1) * p.stride - 1;  // >= kHalf
  int64_t chunk = std::min<int64_t>(p.K, room / p.dilation + 1);
  chunk = std::min<int64_t>(chunk, Traits::kSmemW / Traits::kOT);
  Conv1dGeneralPlan plan;
  plan.tile = static_cast<int>(tile);
  plan.chunk = static_cast<int>(chunk);
  plan.span = static_cast<int>((tile - 1) * p.stride + (chunk - 1) * p.dilation + 1);
  int64_t staged = 1;
  if (chunk == p.K) {
    staged = std::min<int64_t>({p.c_per_group(), Traits::kSmemX / plan.span,
                                Traits::kSmemW / (Traits::kOT * chunk),
                                Traits::kMaxStagedChannels});
    staged = std::max<int64_t>(staged, 1);
  }
  plan.staged = static_cast<int>(staged);
  plan.tiles = ceil_div(p.L_out, tile);
  plan.oblocks = ceil_div(p.o_per_group(), Traits::kOT);
  const size_t smem =
      static_cast<size_t>(staged * plan.span + staged * Traits::kOT * chunk) * sizeof(float);
  TORCH_INTERNAL_ASSERT(plan.span <= Traits::kSmemX && staged * plan.span <= Traits::kSmemX &&
                        staged * Traits::kOT * chunk <= Traits::kSmemW);
  const int64_t items = p.N * p.groups * plan.tiles * plan.oblocks;
  conv1d_general_kernel<T, Traits><<<grid_for(items), Traits::kThreads, smem, stream>>>(p, plan);
  GK_CHECK_LAUNCH();
}

template <typename T>
void launch_conv1d(const Conv1dParams& p, const at::Tensor& x3, cudaStream_t stream) {
  switch (choose_conv1d_algo(p)) {
    case Conv1dAlgo::kFft:
      return conv1d_fft_launch(p, x3, stream);
    case Conv1dAlgo::kRowwiseReg:
      return launch_rowwise_reg<T>(p, stream);
    case Conv1dAlgo::kRowwiseMma:
      return launch_rowwise_mma<T>(p, stream);
    case Conv1dAlgo::kRowwise8:
      return launch_rowwise<T, Rowwise8>(p, stream);
    case Conv1dAlgo::kRowwise16:
      return launch_rowwise_warp<T>(p, stream);
    case Conv1dAlgo::kRowwise8Dilated:
      return launch_rowwise<T, Rowwise8Dilated>(p, stream);
    case Conv1dAlgo::kGeneralOT4:
      return launch_general<T, GeneralOT4>(p, stream);
    case Conv1dAlgo::kGeneralOT1:
      return launch_general<T, GeneralOT1>(p, stream);
  }
}

at::Tensor conv1d_cuda_run(const ConvArgs& a, const at::Tensor& input, const at::Tensor& weight,
                           const std::optional<at::Tensor>& bias) {
  CudaLaunchContext ctx(input);
  at::Tensor out = conv_output(a, input, weight);
  if (out.numel() == 0) return out;
  const at::Tensor x3 = conv_batched_input(a, input);
  const at::Tensor y3 = conv_batched_output(a, out);
  const at::Tensor* b = bias.has_value() && bias->defined() ? &*bias : nullptr;
  const Conv1dParams p = conv1d_params(a, x3, weight, b, y3);
  GK_DISPATCH_FLOAT_CUDA(input.scalar_type(), kOp,
                         [&] { launch_conv1d<scalar_t>(p, x3, ctx.stream); });
  return out;
}

struct Conv1dCuda {
  static constexpr const char* kName = kOp;
  static constexpr int kDims = 1;
  static constexpr auto run = &conv1d_cuda_run;
};

}  // namespace

void conv1d_cuda_launch(const Conv1dParams& p, const at::Tensor& x3) {
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  GK_DISPATCH_FLOAT_CUDA(x3.scalar_type(), kOp, [&] { launch_conv1d<scalar_t>(p, x3, stream); });
}

std::string conv1d_cuda_algorithm(const Conv1dParams& p) {
  return conv1d_algo_names()[static_cast<int>(choose_conv1d_algo(p))];
}

}  // namespace gpukern

TORCH_LIBRARY_IMPL(gpukern, CUDA, m) {
  m.impl("conv1d", &gpukern::ConvSchemas<gpukern::Conv1dCuda>::ints);
  m.impl("conv1d.padding", &gpukern::ConvSchemas<gpukern::Conv1dCuda>::str);
}
