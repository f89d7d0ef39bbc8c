// depthwise_nchw, host side: can_run, plan, launch and the kernel's instantiations.
#include <algorithm>

#include "conv/direct/depthwise_nchw.cuh"
#include "conv/direct/direct2d.h"
#include "core/launch.cuh"

namespace gpukern {
namespace {

constexpr const char* kOp = kConv2dOp;

struct NchwPlan {
  int k = 0;  // 3/5/7: that square filter in registers; -1: runtime filter in register chunks
              // (row dilation 1); 0: runtime filter, taps from shared memory
  conv::DepthwiseTile tile{0, 0};  // the staged tile's rows x pitch (floats)
  bool x_vec = false;              // 16-byte staging loads allowed
  size_t smem_bytes = 0;
};

bool plan_nchw(const ConvProblem& p, NchwPlan& plan) {
  if (!p.depthwise1() || p.stride_h != 1 || p.stride_w != 1) return false;
  using Tr = conv::DepthwiseTraits;
  const int64_t V = 16 / p.elem_size;
  const int64_t off = ((-p.pad_w) % V + V) % V;
  const int64_t rows = Tr::kTileH + (p.KH - 1) * p.dil_h;
  const int64_t pitch = round_up(off + Tr::kTileW + (p.KW - 1) * p.dil_w, V);
  const bool square_small = p.KH == p.KW && p.dil_h == 1 && p.dil_w == 1 &&
                            (p.KH == 3 || p.KH == 5 || p.KH == 7);
  const int64_t floats = rows * pitch + (square_small ? 0 : p.KH * p.KW);
  if (rows > Tr::kMaxSmemFloats || pitch > Tr::kMaxSmemFloats || floats > Tr::kMaxSmemFloats) {
    return false;
  }
  plan.k = square_small ? static_cast<int>(p.KH) : (p.dil_h == 1 ? -1 : 0);
  plan.tile = {static_cast<int>(rows), static_cast<int>(pitch)};
  plan.x_vec = nchw_vec_x(p, V);
  plan.smem_bytes = static_cast<size_t>(floats) * sizeof(float);
  return true;
}

}  // namespace

bool depthwise_nchw_can_run(const ConvProblem& p) {
  NchwPlan plan;
  return plan_nchw(p, plan);
}

template <typename T>
void depthwise_nchw_run(const ConvProblem& p, cudaStream_t stream) {
  using Tr = conv::DepthwiseTraits;
  NchwPlan plan;
  GK_CHECK(plan_nchw(p, plan), kOp, "internal error: depthwise_nchw cannot run this shape");
  // x = output tiles (tile row * tiles_w + tile column), y = planes (grid-stride past kMaxGridY).
  const int64_t tiles_w = ceil_div(p.OW, Tr::kTileW);
  const dim3 grid = checked_grid(kOp, ceil_div(p.OH, Tr::kTileH) * tiles_w,
                                 std::min(p.N * p.C, kMaxGridY));
  auto go = [&](auto kernel) {
    allow_dynamic_smem(kernel, plan.smem_bytes);
    kernel<<<grid, Tr::threads(plan.k), plan.smem_bytes, stream>>>(p, plan.tile, tiles_w,
                                                                   plan.x_vec);
    GK_CHECK_LAUNCH();
  };
  switch (plan.k) {
    case 3: go(conv::conv2d_depthwise_nchw_kernel<T, 3>); break;
    case 5: go(conv::conv2d_depthwise_nchw_kernel<T, 5>); break;
    case 7: go(conv::conv2d_depthwise_nchw_kernel<T, 7>); break;
    case -1: go(conv::conv2d_depthwise_nchw_kernel<T, -1>); break;
    default: go(conv::conv2d_depthwise_nchw_kernel<T, 0>); break;
  }
}

// Every dtype x filter 3/5/7 (in registers), -1 (register chunks) and 0 (taps from shared).
template void depthwise_nchw_run<float>(const ConvProblem&, cudaStream_t);
template void depthwise_nchw_run<__half>(const ConvProblem&, cudaStream_t);
template void depthwise_nchw_run<__nv_bfloat16>(const ConvProblem&, cudaStream_t);

}  // namespace gpukern
