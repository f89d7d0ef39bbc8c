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

struct Plan {
  conv::NhwcRegShape shape{};  // tiles_w / tiles_h / tiles / reps: set at launch (variant)
  int k = 0, stride = 0;
  size_t smem_bytes = 0;  // the block's taps
};

// The planner (depthwise_nhwc_reg.cu): whether the kernel runs p, and the variant-independent
// part of the plan.
bool plan(const ConvProblem& p, Plan& plan);

// GPUKERN_NHWC_REG_TILE=big / small forces the tile variant (a tuning knob for
// benchmarks/dw_layers.py; anything else: the rule above). Read per call (a getenv is ~0.1 us
// against a launch's 2-3 us) so that one process can time both.
inline int forced_variant() {
  const char* v = std::getenv("GPUKERN_NHWC_REG_TILE");
  if (v == nullptr) return 0;
  if (std::strcmp(v, "big") == 0) return 1;
  if (std::strcmp(v, "small") == 0) return 2;
  return 0;
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
  conv::NhwcRegShape s = plan.shape;
  const int threads = s.tc * s.tp;
  const int device = c10::cuda::current_device();
  const int64_t sms = device_props().multiProcessorCount;
  // Blocks of one pass each, for tiles of the shape set in s.
  auto blocks1 = [&] { return ceil_div(s.tiles, s.tp) * s.c_blocks; };

  set_tiles(p, s, Big::kR, Big::kIW);
  const int64_t big_wave = sms * resident_blocks_per_sm<kBigKernel>(device, threads);
  const int forced = forced_variant();
  const bool big = s.x_vec && (forced == 1 || (forced == 0 && 4 * blocks1() >=
                                                                  kBigMinQuarterWaves * big_wave));
  int64_t wave = big_wave;
  if (!big) {
    set_tiles(p, s, Small::kR, Small::kIW);
    wave = sms * (s.x_vec ? resident_blocks_per_sm<kSmallKernel>(device, threads)
                          : resident_blocks_per_sm<kScalarKernel>(device, threads));
  }
  s.reps = static_cast<int>(std::clamp<int64_t>(blocks1() / (kTargetWaves * wave), 1,
                                                conv::NhwcRegTraits::kMaxReps));
  const dim3 grid =
      checked_grid(kConv2dOp, ceil_div(s.tiles, int64_t{s.tp} * s.reps) * s.c_blocks);
  if (big) {
    kBigKernel<<<grid, threads, plan.smem_bytes, stream>>>(p, s);
  } else if (s.x_vec) {
    kSmallKernel<<<grid, threads, plan.smem_bytes, stream>>>(p, s);
  } else {
    kScalarKernel<<<grid, threads, plan.smem_bytes, stream>>>(p, s);
  }
  GK_CHECK_LAUNCH();
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
