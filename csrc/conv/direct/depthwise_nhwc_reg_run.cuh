#pragma once
// depthwise_nhwc_reg, host side shared by its three translation units (depthwise_nhwc_reg.cu:
// the planner, can_run and the float instances; depthwise_nhwc_reg_half.cu / _bf16.cu: the
// 16-bit instances, split so that each TU compiles in well under a minute): the plan, the tile
// variant and pass count chosen from the device's SM count and occupancy, the launch.
#include <c10/cuda/CUDAFunctions.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "conv/direct/depthwise_nhwc_reg.cuh"
#include "conv/direct/direct2d.h"
#include "core/launch.cuh"

namespace gpukern {
namespace nhwc_reg {

// The choice between the big and the small tile (conv::NhwcRegTile): big tiles (2 x 4 or 2 x 2
// outputs: fewer loads, conversions and tap reads per output; per thread and tile, from the
// SASS, about 4 * R * IW * K * K FMAs + 14 instructions per input pixel) unless their blocks
// fill less than a quarter of one wave of the GPU (SMs x resident blocks of the big kernel, 2 at
// 128 registers); then small tiles (1 x 2), 3-4x the threads to hide load latency with, at
// 1.5-2x the instructions per output. Measured (benchmarks/dw_layers.py, H200, batch 16, every
// layer of the census): big tiles were faster than small ones on all 32 layers and dtypes, down
// to grids of a third of a wave (768ch 7x7 7x7 bf16: 15.0 us against 27.4; 200ch 14x14 3x3
// fp32: 5.1 against 6.7); a first guess of one full wave sent those to the small tile.
constexpr int64_t kBigMinQuarterWaves = 1;
// Passes per block: a block stages its taps once and then takes `reps` passes of tiles; the
// passes grow once the one-pass grid exceeds this many waves (taps amortised on large layers,
// every SM busy on small ones).
constexpr int64_t kTargetWaves = 4;
// The lean instances (16-bit 3x3 stride 2 only): conv::NhwcRegTraits::kLeanMinBlocks = 3 blocks
// of 256 threads per SM (__launch_bounds__: <= 80 registers; ptxas, sm_90a: 80 and an 8-byte
// spill), 1 x 2 ("lean")
// or 2 x 2 ("lean2") tiles, the input rows requested before the taps are staged. Stride 2 reads
// 5 pixels a row for 2 outputs, so the big 2 x 2 tile (128 registers: 2 blocks an SM) is long
// per thread and short of threads; with 1.5x the resident threads these led on both of
// MobileNetV3's strided 3x3 layers (H100, benchmarks/dw_layers.py, channels_last bf16, batch 16,
// us; torch's best in brackets): 240ch 28x28 lean 4.3, lean2 4.4, big 5.1 (7.2); 64ch 112x112
// lean 12.5, lean2 10.6, big 13.3 (10.9). Not built elsewhere: they ran no faster than the big
// tile at fp32 or stride 1 (200ch 14x14 3x3 fp32: lean (1 x 1) 5.5, lean2 4.3, big 4.3; bf16:
// 4.9 / 5.0 / 4.9; 672ch 14x14 3x3 bf16: 8.4 / 7.4 / 7.6; fp32 5x5 stride 1, lean2 against big:
// 120ch 28x28 13.7 against 12.0, 960ch 7x7 11.5 against 6.1). The rule: lean while its
// one-pass grid fits one wave (every thread resident: one round of loads), else lean2 (half the
// threads, 4 input pixels a row for 4 outputs).

struct Plan {
  conv::NhwcRegShape shape{};  // tiles_w / tiles_h / tiles / reps: set at launch (variant)
  int k = 0, stride = 0;
  size_t smem_bytes = 0;  // the block's taps
};

// The planner (depthwise_nhwc_reg.cu): whether the kernel runs p, and the variant-independent
// part of the plan.
bool plan(const ConvProblem& p, Plan& plan);

// GPUKERN_NHWC_REG_TILE=big / small / stage / lean / lean2 forces the tile variant (a tuning
// knob for benchmarks/dw_layers.py; anything else: the rule above). Read per call (a getenv is
// ~0.1 us against a launch's 2-3 us) so that one process can time each. `stage` (the
// shared-memory staged kernel, conv::conv2d_depthwise_nhwc_stage_kernel) exists for 16-bit 7x7
// stride 1 with vector input only, `lean` / `lean2` (the lean instances) for 16-bit 3x3 stride 2
// with vector input only; elsewhere they mean the rule above.
inline int forced_variant() {
  const char* v = std::getenv("GPUKERN_NHWC_REG_TILE");
  if (v == nullptr) return 0;
  if (std::strcmp(v, "big") == 0) return 1;
  if (std::strcmp(v, "small") == 0) return 2;
  if (std::strcmp(v, "stage") == 0) return 3;
  if (std::strcmp(v, "lean") == 0) return 4;
  if (std::strcmp(v, "lean2") == 0) return 5;
  return 0;
}

// The staged variant's tile (conv::conv2d_depthwise_nhwc_stage_kernel): 3 x 4 outputs, the
// largest without spills in 128 registers (sm_90a ptxas: 4 x 4 and 2 x 8 spilled 90-130 bytes,
// 2 x 6 20 bytes).
constexpr int kStageR = 3, kStageIW = 4;

// Launches the staged kernel: picks the block's patch (st_h x st_w tiles) from the modelled
// block time (from the SASS: a 3 x 4 tile's ~3200 instructions per thread, and per staged row
// ~10 plus ~15-20 per copy the thread makes) times the blocks per resident slot (at least 1: a
// grid under one wave takes one block's time).
template <typename T, int kK>
void launch_stage(const ConvProblem& p, const Plan& plan, cudaStream_t stream) {
  constexpr auto kKernel = conv::conv2d_depthwise_nhwc_stage_kernel<T, kK, kStageR, kStageIW>;
  conv::NhwcRegShape s = plan.shape;
  const int threads = s.tc * s.tp;
  const int device = c10::cuda::current_device();
  const cudaDeviceProp& props = device_props();
  const int64_t sms = props.multiProcessorCount;
  // Taps [tap][32 lanes x 4 channels] as float, pixels [32 lanes] of 4 elements (fixed pitches).
  const int64_t taps = int64_t{kK} * kK * conv::NhwcRegTraits::kMaxLanes * 4 * 4;
  const int64_t pixel_bytes = int64_t{conv::NhwcRegTraits::kMaxLanes} * 4 * sizeof(T);
  const int64_t smem_sm = static_cast<int64_t>(props.sharedMemPerMultiprocessor);
  const int64_t smem_max = static_cast<int64_t>(props.sharedMemPerBlockOptin);
  const int64_t reg_blocks = resident_blocks_per_sm<kKernel>(device, threads);
  const int64_t th = ceil_div(p.OH, int64_t{kStageR}), tw = ceil_div(p.OW, int64_t{kStageIW});
  // A thread copies a pair of lanes of a pixel (the kernel's staging): ~2 tp copy slots a row,
  // ~15 instructions a 16-byte copy (x_vec8), ~20 for two 8-byte ones.
  const int64_t copy_slots = int64_t{threads} / ((s.tc + 1) / 2);
  const double copy_cost = s.x_vec8 ? 15.0 : 20.0;
  double best = -1.0;
  int64_t best_bytes = 0, best_resident = 1;
  for (int sh = 1; sh <= s.tp && sh <= th; ++sh) {
    for (int sw = 1; sh * sw <= s.tp && sw <= tw; ++sw) {
      const int64_t ir = int64_t{sh} * kStageR + kK - 1, ic = int64_t{sw} * kStageIW + kK - 1;
      const int64_t bytes = taps + ir * ic * pixel_bytes;
      if (bytes > smem_max) continue;
      // 1 KB of shared memory per block is reserved by the runtime.
      const int64_t resident = std::min(reg_blocks, smem_sm / (bytes + 1024));
      if (resident < 1) continue;
      const int64_t patches = p.N * ceil_div(th, int64_t{sh}) * ceil_div(tw, int64_t{sw});
      const double blocks = static_cast<double>(patches * s.c_blocks);
      const double copies = static_cast<double>(ceil_div(ic, copy_slots));  // per row
      const double block_time = 3200.0 + static_cast<double>(ir) * (10.0 + copy_cost * copies);
      const double waves = static_cast<double>(sms * resident);
      const double cost = std::max(blocks / waves, 1.0) * block_time;
      if (best < 0 || cost < best) {
        best = cost;
        s.st_h = sh;
        s.st_w = sw;
        best_bytes = bytes;
        best_resident = resident;
      }
    }
  }
  GK_CHECK(best >= 0, kConv2dOp, "internal error: depthwise_nhwc_reg stage: no patch fits");
  s.tiles_h = static_cast<int>(ceil_div(th, int64_t{s.st_h}));
  s.tiles_w = static_cast<int>(ceil_div(tw, int64_t{s.st_w}));
  s.tiles = static_cast<int>(p.N * s.tiles_h * s.tiles_w);
  const int64_t blocks1 = int64_t{s.tiles} * s.c_blocks;
  s.reps = static_cast<int>(std::clamp<int64_t>(
      blocks1 / (kTargetWaves * sms * best_resident), 1, conv::NhwcRegTraits::kMaxReps));
  allow_dynamic_smem(kKernel, static_cast<size_t>(best_bytes));
  const dim3 grid = checked_grid(kConv2dOp, ceil_div(s.tiles, s.reps) * s.c_blocks);
  launch_pdl(kKernel, grid, dim3(threads), static_cast<size_t>(best_bytes), stream, p, s);
  GK_CHECK_LAUNCH();
}

// Sets the tile counts of shape s for tiles of r x iw outputs.
inline void set_tiles(const ConvProblem& p, conv::NhwcRegShape& s, int r, int iw) {
  s.tiles_w = static_cast<int>(ceil_div(p.OW, iw));
  s.tiles_h = static_cast<int>(ceil_div(p.OH, r));
  s.tiles = static_cast<int>(p.N * s.tiles_h * s.tiles_w);  // checked by the planner
}

template <typename T, int kK, int kS>
void launch(const ConvProblem& p, const Plan& plan, cudaStream_t stream) {
  using Big = conv::NhwcRegTile<kK, kS, true, sizeof(T)>;
  using Small = conv::NhwcRegTile<kK, kS, false, sizeof(T)>;
  constexpr auto kBigKernel =
      conv::conv2d_depthwise_nhwc_reg_kernel<T, kK, kS, Big::kR, Big::kIW, true>;
  constexpr auto kSmallKernel =
      conv::conv2d_depthwise_nhwc_reg_kernel<T, kK, kS, Small::kR, Small::kIW, true>;
  // Input without 4-element vector access (C not a multiple of 4, channel slices, unaligned
  // storage): scalar loads, small tiles only (one instance instead of two).
  constexpr auto kScalarKernel =
      conv::conv2d_depthwise_nhwc_reg_kernel<T, kK, kS, Small::kR, Small::kIW, false>;
  int forced = forced_variant();
  if constexpr (sizeof(T) == 2 && kK == 7 && kS == 1) {
    // The staged kernel only when forced: since the taps are staged as 16-byte vectors the big
    // tile leads on every ConvNeXt plane (H100, dw_layers, bf16, batch 16: 96ch 56x56 31.2 us
    // against the staged kernel's 39.6, 192ch 28x28 20.8 against 22.2, 384ch 14x14 11.7 against
    // 16.3, 768ch 7x7 7.8 against 15.4); before it the staged one led from 28x28 up.
    const bool stage = forced == 3;
    if (stage && plan.shape.x_vec) return launch_stage<T, kK>(p, plan, stream);
  }
  if (forced == 3) forced = 0;  // no staged instance here: the rule
  conv::NhwcRegShape s = plan.shape;
  const int threads = s.tc * s.tp;
  const int device = c10::cuda::current_device();
  const int64_t sms = device_props().multiProcessorCount;
  // Blocks of one pass each, for tiles of the shape set in s.
  auto blocks1 = [&] { return ceil_div(s.tiles, s.tp) * s.c_blocks; };
  // Launches `kernel` on the tiles set in s, `wave` its blocks resident on the GPU at once: the
  // passes per block (kTargetWaves), then the grid.
  auto launch_tiles = [&](auto kernel, int64_t wave) {
    s.reps = static_cast<int>(std::clamp<int64_t>(blocks1() / (kTargetWaves * wave), 1,
                                                  conv::NhwcRegTraits::kMaxReps));
    const dim3 grid =
        checked_grid(kConv2dOp, ceil_div(s.tiles, int64_t{s.tp} * s.reps) * s.c_blocks);
    launch_pdl(kernel, grid, dim3(threads), static_cast<size_t>(plan.smem_bytes), stream, p, s);
    GK_CHECK_LAUNCH();
  };
  if constexpr (sizeof(T) == 2 && kK == 3 && kS == 2) {
    if (s.x_vec && (forced == 0 || forced >= 4)) {  // the lean instances
      constexpr int kL = conv::NhwcRegTraits::kLeanMinBlocks;
      constexpr auto kLean = conv::conv2d_depthwise_nhwc_reg_kernel<T, kK, kS, 1, 2, true, kL>;
      constexpr auto kLean2 = conv::conv2d_depthwise_nhwc_reg_kernel<T, kK, kS, 2, 2, true, kL>;
      set_tiles(p, s, 1, 2);
      int64_t wave = sms * resident_blocks_per_sm<kLean>(device, threads);
      const bool two = forced == 5 || (forced == 0 && blocks1() > wave);
      if (two) {
        set_tiles(p, s, 2, 2);
        wave = sms * resident_blocks_per_sm<kLean2>(device, threads);
      }
      return launch_tiles(two ? kLean2 : kLean, wave);
    }
  }
  if (forced > 3) forced = 0;

  set_tiles(p, s, Big::kR, Big::kIW);
  const int64_t big_wave = sms * resident_blocks_per_sm<kBigKernel>(device, threads);
  const bool big = s.x_vec && (forced == 1 || (forced == 0 && 4 * blocks1() >=
                                                                  kBigMinQuarterWaves * big_wave));
  int64_t wave = big_wave;
  if (!big) {
    set_tiles(p, s, Small::kR, Small::kIW);
    wave = sms * (s.x_vec ? resident_blocks_per_sm<kSmallKernel>(device, threads)
                          : resident_blocks_per_sm<kScalarKernel>(device, threads));
  }
  launch_tiles(big ? kBigKernel : (s.x_vec ? kSmallKernel : kScalarKernel), wave);
}

}  // namespace nhwc_reg

template <typename T>
void depthwise_nhwc_reg_run(const ConvProblem& p, cudaStream_t stream) {
  nhwc_reg::Plan plan;
  GK_CHECK(nhwc_reg::plan(p, plan), kConv2dOp,
           "internal error: depthwise_nhwc_reg cannot run this shape");
  switch (plan.k * 10 + plan.stride) {
    case 31: return nhwc_reg::launch<T, 3, 1>(p, plan, stream);
    case 32: return nhwc_reg::launch<T, 3, 2>(p, plan, stream);
    case 51: return nhwc_reg::launch<T, 5, 1>(p, plan, stream);
    case 52: return nhwc_reg::launch<T, 5, 2>(p, plan, stream);
    case 71: return nhwc_reg::launch<T, 7, 1>(p, plan, stream);
    default: return nhwc_reg::launch<T, 7, 2>(p, plan, stream);
  }
}

}  // namespace gpukern
