// depthwise_large, host side: can_run, plan, launch and the kernel's instantiations.
#include <algorithm>
#include <type_traits>

#include "conv/direct/depthwise_large.cuh"
#include "conv/direct/direct2d.h"
#include "core/launch.cuh"

namespace gpukern {
namespace {

constexpr const char* kOp = kConv2dOp;

// The kernel's shared budget (floats): a 64 x 64 tile's input and the taps up to 31 x 31 filters
// take ~10.4K; up to ~90 x 90 fits.
constexpr int64_t kLargeMaxSmemFloats = 24 * 1024;

struct LargePlan {
  bool y_vec = false;        // 4-element vector stores allowed
  bool tma = false;          // the TMA stages the tiles (fp32, aligned x, describable strides)
  int o = 0;                 // TMA: box columns before the window (kO: 0..3)
  uint64_t strides[3] = {};  // TMA: the map's byte strides (tma_strides)
  size_t smem_bytes = 0;
};

bool plan_large(const ConvProblem& p, LargePlan& plan) {
  using Tr = conv::LargeTraits;
  const int64_t elem_size = p.elem_size;
  // The kernel keeps rows / columns in int.
  if (!p.depthwise1() || p.stride_h != 1 || p.stride_w != 1 || p.dil_h != 1 || p.dil_w != 1 ||
      p.KH > kLargeMaxSmemFloats || p.KW > kLargeMaxSmemFloats ||
      std::max({p.H, p.W, p.OH, p.OW, p.pad_h, p.pad_w}) > kMaxIntIndex) {
    return false;
  }
  const int64_t rows = Tr::kTileH + p.KH - 1;
  const int64_t taps = p.KH * Tr::tap_pitch(p.KW);
  const int64_t floats = rows * Tr::pitch(p.KW) + taps;
  if (floats > kLargeMaxSmemFloats) return false;
  plan.y_vec = nchw_vec_y(p, Tr::kC, Tr::kC * elem_size);
  plan.smem_bytes = static_cast<size_t>(floats) * sizeof(float);
  // fp32 tiles through the TMA where the map can describe x as it is (16-byte aligned, rows /
  // planes / images 16 bytes apart, unit column stride) and the box fits its limits; the box
  // starts o = -pad_w mod 4 columns before the window, on a 16-byte boundary (tiles start at
  // multiples of 64 columns). A misaligned x (a view) stages element by element.
  const int64_t o = (4 - p.pad_w % 4) % 4;
  const int64_t tma_floats = rows * Tr::tma_pitch(p.KW, o) + taps;
  if (elem_size == 4 && is_aligned16(p.x) && (p.W == 1 || p.x_sw == 1) &&
      std::max(p.C, p.N) <= kMaxIntIndex && rows <= 256 && Tr::tma_pitch(p.KW, o) <= 256 &&
      tma_floats <= kLargeMaxSmemFloats && tma_strides(p, 0, plan.strides) && tma_device()) {
    plan.tma = true;
    plan.o = static_cast<int>(o);
    plan.smem_bytes = Tr::kSlotAlign + static_cast<size_t>(tma_floats) * sizeof(float) +
                      Tr::kBoxBarrierBytes;
  }
  return true;
}

}  // namespace

bool depthwise_large_can_run(const ConvProblem& p) {
  LargePlan plan;
  return plan_large(p, plan);
}

template <typename T>
void depthwise_large_run(const ConvProblem& p, cudaStream_t stream) {
  using Tr = conv::LargeTraits;
  LargePlan plan;
  GK_CHECK(plan_large(p, plan), kOp, "internal error: depthwise_large cannot run this shape");
  // x = output tiles (tile row * tiles_w + tile column), y = planes (grid-stride past kMaxGridY).
  const int64_t tiles_w = ceil_div(p.OW, Tr::kTileW);
  const dim3 grid = checked_grid(kOp, ceil_div(p.OH, Tr::kTileH) * tiles_w,
                                 std::min(p.N * p.C, kMaxGridY));
  auto go = [&](auto kernel, const CUtensorMap& map) {
    allow_dynamic_smem(kernel, plan.smem_bytes);
    kernel<<<grid, Tr::kThreads, plan.smem_bytes, stream>>>(map, p, tiles_w, plan.y_vec);
    GK_CHECK_LAUNCH();
  };
  if constexpr (std::is_same_v<T, float>) {
    if (plan.tma) {
      const int rows = Tr::kTileH + static_cast<int>(p.KH) - 1;
      const int pitch = static_cast<int>(Tr::tma_pitch(p.KW, plan.o));
      const CUtensorMap map = x_tensor_map(p, tma_dtype<T>(), plan.strides, 0, pitch, rows);
      switch (plan.o) {
        case 0: go(conv::conv2d_depthwise_large_kernel<T, 0, true>, map); break;
        case 1: go(conv::conv2d_depthwise_large_kernel<T, 1, true>, map); break;
        case 2: go(conv::conv2d_depthwise_large_kernel<T, 2, true>, map); break;
        default: go(conv::conv2d_depthwise_large_kernel<T, 3, true>, map); break;
      }
      return;
    }
  }
  go(conv::conv2d_depthwise_large_kernel<T, 0, false>, CUtensorMap{});
}

// Every dtype staged element by element (kO = 0), and fp32 through the TMA for kO = 0..3.
template void depthwise_large_run<float>(const ConvProblem&, cudaStream_t);
template void depthwise_large_run<__half>(const ConvProblem&, cudaStream_t);
template void depthwise_large_run<__nv_bfloat16>(const ConvProblem&, cudaStream_t);

}  // namespace gpukern
