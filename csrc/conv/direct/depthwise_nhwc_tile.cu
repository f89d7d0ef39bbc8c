// depthwise_nhwc_tile, host side: can_run, plan, launch and the kernel's instantiations.
#include <algorithm>
#include <limits>

#include "conv/direct/depthwise_nhwc_tile.cuh"
#include "conv/direct/direct2d.h"
#include "core/launch.cuh"

namespace gpukern {
namespace {

constexpr const char* kOp = kConv2dOp;

// Blocks a pass-count of one would exceed this many times before a block takes several passes
// (4 waves of 132 SMs x 2 blocks): the taps are staged once per block, so large layers amortise
// them over passes while small ones keep every SM busy.
constexpr int64_t kTileTargetBlocks = 1056;
constexpr int64_t kTileMaxReps = 8;

struct NhwcTilePlan {
  conv::NhwcTileShape shape{};
  int k = 0, stride = 0;
  size_t smem_bytes = 0;  // the block's taps
};

// Whether V-element vector accesses of a channels_last tensor at `data` (element strides sn, sh,
// sw, sc) are allowed: C a multiple of V, channels contiguous, pixels, rows and images V elements
// apart, data aligned to the 16-byte vector.
bool tile_vec(int64_t C, int64_t V, int64_t N, int64_t sc, int64_t sw, int64_t sh, int64_t sn,
              const void* data) {
  return C % V == 0 && (C == 1 || sc == 1) && sw % V == 0 && sh % V == 0 &&
         (N == 1 || sn % V == 0) && reinterpret_cast<uintptr_t>(data) % 16 == 0;
}

bool plan_nhwc_tile(const ConvProblem& p, NhwcTilePlan& plan) {
  using Tr = conv::NhwcTileTraits;
  const bool k_ok = p.KH == p.KW && (p.KH == 3 || p.KH == 5 || p.KH == 7);
  const int64_t S = p.stride_h;
  if (!p.depthwise1() || !k_ok || p.stride_h != p.stride_w || (S != 1 && S != 2) ||
      p.dil_h != 1 || p.dil_w != 1 || p.OH < 1 || p.OW < 1 ||
      std::max({p.H, p.W, p.OH * S + p.KH, p.OW * S + p.KW + 8, p.pad_h, p.pad_w}) >
          kMaxIntIndex) {
    return false;
  }
  const int64_t V = 16 / p.elem_size;
  const int64_t items = Tr::items(static_cast<int>(p.elem_size));
  const int64_t KK = p.KH * p.KH;
  conv::NhwcTileShape& s = plan.shape;
  s.c_vecs = ceil_div(p.C, V);
  // Lanes over channel vectors: at most a warp, and taps within kMaxTapBytes (16-bit 7x7: 20).
  const int64_t tc_max = std::min<int64_t>(32, Tr::kMaxTapBytes / (KK * V * 4));
  s.c_blocks = static_cast<int>(ceil_div(s.c_vecs, tc_max));
  s.tc = static_cast<int>(ceil_div(s.c_vecs, s.c_blocks));  // evened out: 84 = 3 x 28
  s.tp = Tr::kThreads / s.tc;
  s.w_groups = static_cast<int>(ceil_div(p.OW, items));
  s.groups = p.N * p.OH * s.w_groups;
  if (s.groups + int64_t{kTileMaxReps} * Tr::kThreads > std::numeric_limits<int>::max() ||
      s.c_blocks > 65535) {
    return false;  // pixel groups in int; blockIdx.x % c_blocks in 32 bits
  }
  const int64_t blocks1 = ceil_div(s.groups, s.tp) * s.c_blocks;
  s.reps = static_cast<int>(std::clamp<int64_t>(blocks1 / kTileTargetBlocks, 1, kTileMaxReps));
  s.x_vec = tile_vec(p.C, V, p.N, p.x_sc, p.x_sw, p.x_sh, p.x_sn, p.x);
  s.y_vec = tile_vec(p.C, V, p.N, p.y_so, p.y_sw, p.y_sh, p.y_sn, p.y);
  s.r_vec = p.r != nullptr && tile_vec(p.C, V, p.N, p.r_so, p.r_sw, p.r_sh, p.r_sn, p.r);
  plan.k = static_cast<int>(p.KH);
  plan.stride = static_cast<int>(S);
  plan.smem_bytes = static_cast<size_t>(KK * s.tc * V * 4);
  return true;
}

}  // namespace

bool depthwise_nhwc_tile_can_run(const ConvProblem& p) {
  NhwcTilePlan plan;
  return plan_nhwc_tile(p, plan);
}

template <typename T>
void depthwise_nhwc_tile_run(const ConvProblem& p, cudaStream_t stream) {
  NhwcTilePlan plan;
  GK_CHECK(plan_nhwc_tile(p, plan), kOp,
           "internal error: depthwise_nhwc_tile cannot run this shape");
  const conv::NhwcTileShape& s = plan.shape;
  const int64_t p_blocks = ceil_div(s.groups, int64_t{s.tp} * s.reps);
  const dim3 grid = checked_grid(kOp, p_blocks * s.c_blocks);
  const int threads = s.tc * s.tp;
  auto go = [&](auto kernel) {
    kernel<<<grid, threads, plan.smem_bytes, stream>>>(p, s);
    GK_CHECK_LAUNCH();
  };
  switch (plan.k * 10 + plan.stride) {
    case 31: go(conv::conv2d_depthwise_nhwc_tile_kernel<T, 3, 1>); break;
    case 32: go(conv::conv2d_depthwise_nhwc_tile_kernel<T, 3, 2>); break;
    case 51: go(conv::conv2d_depthwise_nhwc_tile_kernel<T, 5, 1>); break;
    case 52: go(conv::conv2d_depthwise_nhwc_tile_kernel<T, 5, 2>); break;
    case 71: go(conv::conv2d_depthwise_nhwc_tile_kernel<T, 7, 1>); break;
    default: go(conv::conv2d_depthwise_nhwc_tile_kernel<T, 7, 2>); break;
  }
}

// Every dtype x filter 3/5/7 x stride 1/2 (the choice takes stride 2, and stride 1 on small
// planes; forcing runs the rest).
template void depthwise_nhwc_tile_run<float>(const ConvProblem&, cudaStream_t);
template void depthwise_nhwc_tile_run<__half>(const ConvProblem&, cudaStream_t);
template void depthwise_nhwc_tile_run<__nv_bfloat16>(const ConvProblem&, cudaStream_t);

}  // namespace gpukern
