// depthwise_small, host side: can_run, launch and the kernel's instantiations. The planning
// (tile geometry from the shape alone; units per block from the problem size and the SM count;
// the staging vector from the strides and the pointer) is in depthwise_small.cuh, torch-free.
#include <algorithm>
#include <limits>

#include "conv/direct/depthwise_small.cuh"
#include "conv/direct/direct2d.h"
#include "core/launch.cuh"

namespace gpukern {
namespace {

constexpr const char* kOp = kConv2dOp;

}  // namespace

bool depthwise_small_can_run(const ConvProblem& p) {
  conv::SmallShape s;
  return conv::small_geometry(p, s);
}

template <typename T>
void depthwise_small_run(const ConvProblem& p, cudaStream_t stream) {
  conv::SmallShape s;
  GK_CHECK(conv::small_geometry(p, s), kOp,
           "internal error: depthwise_small cannot run this shape");
  conv::small_launch_shape(p, device_props().multiProcessorCount, s);
  const int threads = conv::small_threads(s);
  const size_t smem = conv::small_smem_bytes(s, static_cast<int>(p.KH));
  const dim3 grid = checked_grid(kOp, ceil_div(s.units, s.upb));
  auto go = [&](auto kernel) {
    launch_pdl(kernel, grid, dim3(static_cast<unsigned>(threads)), smem, stream, p, s);
  };
  switch (p.KH * 10 + p.stride_h) {
    case 31: go(conv::conv2d_depthwise_small_kernel<T, 3, 1>); break;
    case 32: go(conv::conv2d_depthwise_small_kernel<T, 3, 2>); break;
    case 51: go(conv::conv2d_depthwise_small_kernel<T, 5, 1>); break;
    case 52: go(conv::conv2d_depthwise_small_kernel<T, 5, 2>); break;
    case 71: go(conv::conv2d_depthwise_small_kernel<T, 7, 1>); break;
    default: go(conv::conv2d_depthwise_small_kernel<T, 7, 2>); break;
  }
}

// Every dtype x filter 3/5/7 x stride 1/2: the choice takes every stride-2 shape it can run and
// stride 1 on small planes (filters 3, 5 and 7 all occur there).
template void depthwise_small_run<float>(const ConvProblem&, cudaStream_t);
template void depthwise_small_run<__half>(const ConvProblem&, cudaStream_t);
template void depthwise_small_run<__nv_bfloat16>(const ConvProblem&, cudaStream_t);

}  // namespace gpukern
