// depthwise_strided, host side: can_run, plan (tile and units per block), launch and the
// kernel's instantiations.
#include <algorithm>
#include <limits>

#include "conv/direct/depthwise_strided.cuh"
#include "conv/direct/direct2d.h"
#include "core/launch.cuh"

namespace gpukern {
namespace {

constexpr const char* kOp = kConv2dOp;

// Blocks below which units per block are halved (about two waves of 132 SMs): small layers
// spread over every SM rather than fill a few blocks.
constexpr int64_t kStridedMinBlocks = 264;

struct StridedPlan {
  conv::StridedShape shape{};
  int k = 0, stride = 0;
  size_t smem_bytes = 0;  // the staged tiles (the descriptors are static)
};

bool plan_strided(const ConvProblem& p, StridedPlan& plan) {
  using Tr = conv::StridedTraits;
  const bool k_ok = p.KH == p.KW && (p.KH == 3 || p.KH == 5 || p.KH == 7);
  const int64_t S = p.stride_h;
  // Columns, rows and in-plane offsets in int; the staging index (upb * tile) stays far below.
  if (!p.depthwise1() || !k_ok || p.stride_h != p.stride_w || (S != 1 && S != 2) ||
      p.dil_h != 1 || p.dil_w != 1 || p.OH < 1 || p.OW < 1 ||
      std::max({p.H, p.W, p.OH * S + p.KH, p.OW * S + p.KW, p.pad_h, p.pad_w}) > kMaxIntIndex ||
      p.C > std::numeric_limits<int>::max()) {
    return false;
  }
  conv::StridedShape& s = plan.shape;
  const int64_t K = p.KH;
  s.tiles_w = static_cast<int>(ceil_div(p.OW, Tr::kMaxTileW));
  s.tile_w = static_cast<int>(ceil_div(p.OW, s.tiles_w));  // even widths: 100 = 50 + 50
  s.in_cols = static_cast<int>((s.tile_w - 1) * S + K);
  s.half = static_cast<int>((s.in_cols + 1) / 2);
  s.pitch = (S == 2 ? 2 * s.half : s.in_cols) | 1;
  // As many strips as the threads allow (whole planes when they fit), within the shared budget.
  const int64_t strips_total = ceil_div(p.OH, Tr::kRows);
  int64_t strips = std::min<int64_t>(strips_total, std::max(1, Tr::kThreads / s.tile_w));
  auto tile_bytes = [&](int64_t st) {
    return ((st * Tr::kRows - 1) * S + K) * s.pitch * int64_t{sizeof(float)};
  };
  while (strips > 1 && tile_bytes(strips) > Tr::kTileBudget) --strips;
  s.tiles_h = static_cast<int>(ceil_div(strips_total, strips));
  s.strips = static_cast<int>(ceil_div(strips_total, s.tiles_h));  // evened out
  s.tile_h = s.strips * Tr::kRows;
  s.in_rows = static_cast<int>((s.tile_h - 1) * S + K);
  s.tile_floats = s.in_rows * s.pitch;
  s.tpu = s.tile_w * s.strips;
  s.units = p.N * p.C * s.tiles_h * s.tiles_w;
  int64_t upb = std::max(1, Tr::kThreads / s.tpu);
  upb = std::min<int64_t>({upb, Tr::kMaxUnits,
                           std::max<int64_t>(1, Tr::kTileBudget / (s.tile_floats * 4))});
  while (upb > 1 && ceil_div(s.units, upb) < kStridedMinBlocks) upb = (upb + 1) / 2;
  s.upb = static_cast<int>(upb);
  s.tile_elems = FastDiv(static_cast<uint32_t>(s.in_rows * s.in_cols));
  s.cols = FastDiv(static_cast<uint32_t>(s.in_cols));
  plan.k = static_cast<int>(K);
  plan.stride = static_cast<int>(S);
  plan.smem_bytes = static_cast<size_t>(s.upb) * s.tile_floats * sizeof(float);
  return tile_bytes(s.strips) <= kDefaultSmemLimit;  // one tile always fits without opt-in
}

}  // namespace

bool depthwise_strided_can_run(const ConvProblem& p) {
  StridedPlan plan;
  return plan_strided(p, plan);
}

template <typename T>
void depthwise_strided_run(const ConvProblem& p, cudaStream_t stream) {
  using Tr = conv::StridedTraits;
  StridedPlan plan;
  GK_CHECK(plan_strided(p, plan), kOp, "internal error: depthwise_strided cannot run this shape");
  const dim3 grid = checked_grid(kOp, ceil_div(plan.shape.units, plan.shape.upb));
  auto go = [&](auto kernel) {
    kernel<<<grid, Tr::kThreads, plan.smem_bytes, stream>>>(p, plan.shape);
    GK_CHECK_LAUNCH();
  };
  const int key = plan.k * 10 + plan.stride;
  switch (key) {
    case 31: go(conv::conv2d_depthwise_strided_kernel<T, 3, 1>); break;
    case 32: go(conv::conv2d_depthwise_strided_kernel<T, 3, 2>); break;
    case 51: go(conv::conv2d_depthwise_strided_kernel<T, 5, 1>); break;
    case 52: go(conv::conv2d_depthwise_strided_kernel<T, 5, 2>); break;
    case 71: go(conv::conv2d_depthwise_strided_kernel<T, 7, 1>); break;
    default: go(conv::conv2d_depthwise_strided_kernel<T, 7, 2>); break;
  }
}

// Every dtype x filter 3/5/7 x stride 1/2 (the choice takes stride 2, and stride 1 on small
// planes; forcing runs the rest).
template void depthwise_strided_run<float>(const ConvProblem&, cudaStream_t);
template void depthwise_strided_run<__half>(const ConvProblem&, cudaStream_t);
template void depthwise_strided_run<__nv_bfloat16>(const ConvProblem&, cudaStream_t);

}  // namespace gpukern
