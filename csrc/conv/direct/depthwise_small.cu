// depthwise_small, host side: can_run, launch and the kernel's instantiations. The planning
// (tile geometry from the shape alone; units per block from the problem size, the SM count and
// the kernel's resident blocks; the staging vector from the strides and the pointer) is in
// depthwise_small.cuh, torch-free.
#include <algorithm>
#include <cstdlib>
#include <limits>

#include "conv/direct/depthwise_small.cuh"
#include "conv/direct/direct2d.h"
#include "core/launch.cuh"
#include "core/knobs.h"

namespace gpukern {
namespace {

constexpr const char* kOp = kConv2dOp;

// Tuning knobs for benchmarks/dw_nchw_layers.py's before / after, read per call (env_is,
// core/knobs.h): GPUKERN_SMALL_UPB=plain: units per block by the rule alone, without the
// resident-block waves; GPUKERN_SMALL_STAGE=all: the staging walks every staged row of whole
// planes, padding included; GPUKERN_SMALL_ROWS=4 / 7: the strip height (conv::small_rows; 7
// exists for stride 2 with 3x3 and 5x5 filters only).

// Blocks of `threads` threads and `smem` dynamic shared bytes an SM of the current device holds
// at once: registers and threads (the kernel's occupancy, read once per warp count), then the
// shared memory (each block also reserves reservedSharedMemPerBlock).
template <auto kKernel>
int small_resident(int threads, size_t smem) {
  const cudaDeviceProp& prop = device_props();
  const int by_regs = resident_blocks_per_sm<kKernel>(c10::cuda::current_device(), threads);
  const size_t per_block = smem + prop.reservedSharedMemPerBlock;
  const int by_smem = static_cast<int>(prop.sharedMemPerMultiprocessor / per_block);
  return std::max(1, std::min(by_regs, by_smem));
}

// Launches kKernel on the geometry s (small_geometry with the kernel's strip height).
template <auto kKernel>
void launch_small(const ConvProblem& p, conv::SmallShape s, cudaStream_t stream) {
  const int sms = device_props().multiProcessorCount;
  const bool every_row = env_is("GPUKERN_SMALL_STAGE", "all");
  if (env_is("GPUKERN_SMALL_UPB", "plain")) {
    conv::small_launch_shape(p, sms, s, conv::SmallNoOccupancy(), every_row);
  } else {
    conv::small_launch_shape(p, sms, s, small_resident<kKernel>, every_row);
  }
  const int threads = conv::small_threads(s);
  const size_t smem = conv::small_smem_bytes(s, static_cast<int>(p.KH));
  const dim3 grid = checked_grid(kOp, ceil_div(s.units, s.upb));
  launch_pdl(kKernel, grid, dim3(static_cast<unsigned>(threads)), smem, stream, p, s);
}

}  // namespace

bool depthwise_small_can_run(const ConvProblem& p) {
  conv::SmallShape s;
  return conv::small_geometry(p, s);
}

template <typename T>
void depthwise_small_run(const ConvProblem& p, cudaStream_t stream) {
  using conv::conv2d_depthwise_small_kernel;
  constexpr int kLong = conv::SmallTraits::kRowsLong;
  const long long forced = env_is("GPUKERN_SMALL_ROWS", "4")   ? 4
                           : env_is("GPUKERN_SMALL_ROWS", "7") ? 7
                                                               : 0;
  // The geometry once: the long strips' tile may exceed the shared budget where the short
  // ones fit, and then the short ones run.
  conv::SmallShape s;
  const bool lg = conv::small_rows(p, forced) == kLong && conv::small_geometry(p, s, kLong);
  if (!lg) {
    GK_CHECK(conv::small_geometry(p, s), kOp,
             "internal error: depthwise_small cannot run this shape");
  }
  switch (p.KH * 10 + p.stride_h) {
    case 31: return launch_small<conv2d_depthwise_small_kernel<T, 3, 1>>(p, s, stream);
    case 32:
      return lg ? launch_small<conv2d_depthwise_small_kernel<T, 3, 2, kLong>>(p, s, stream)
                : launch_small<conv2d_depthwise_small_kernel<T, 3, 2>>(p, s, stream);
    case 51: return launch_small<conv2d_depthwise_small_kernel<T, 5, 1>>(p, s, stream);
    case 52:
      return lg ? launch_small<conv2d_depthwise_small_kernel<T, 5, 2, kLong>>(p, s, stream)
                : launch_small<conv2d_depthwise_small_kernel<T, 5, 2>>(p, s, stream);
    case 71: return launch_small<conv2d_depthwise_small_kernel<T, 7, 1>>(p, s, stream);
    default: return launch_small<conv2d_depthwise_small_kernel<T, 7, 2>>(p, s, stream);
  }
}

// Every dtype x filter 3/5/7 x stride 1/2: the choice takes every stride-2 shape it can run and
// stride 1 on small planes (filters 3, 5 and 7 all occur there).
template void depthwise_small_run<float>(const ConvProblem&, cudaStream_t);
template void depthwise_small_run<__half>(const ConvProblem&, cudaStream_t);
template void depthwise_small_run<__nv_bfloat16>(const ConvProblem&, cudaStream_t);

}  // namespace gpukern
