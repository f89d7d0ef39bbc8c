// depthwise_nhwc_reg, host side: can_run, the planner and the float instances (the launch:
// depthwise_nhwc_reg_run.cuh; the 16-bit instances: depthwise_nhwc_reg_half.cu, _bf16.cu).
#include <algorithm>
#include <cstdlib>
#include <limits>

#include "conv/direct/depthwise_nhwc_reg_run.cuh"

namespace gpukern {
namespace nhwc_reg {
namespace {

constexpr int64_t kIntMax = std::numeric_limits<int>::max();

// Whether 4-element vector accesses (16 bytes fp32, 8 bytes 16-bit) of a channels_last tensor
// at `data` (element strides sn, sh, sw, sc) are allowed: C a multiple of 4, channels
// contiguous, pixels, rows and images 4 elements apart, data aligned to the vector.
bool vec4(int64_t C, int64_t elem_size, int64_t N, int64_t sc, int64_t sw, int64_t sh,
          int64_t sn, const void* data, int64_t V = conv::NhwcRegTraits::kV) {
  return C % V == 0 && sc == 1 && sw % V == 0 && sh % V == 0 && (N == 1 || sn % V == 0) &&
         reinterpret_cast<uintptr_t>(data) % static_cast<uintptr_t>(V * elem_size) == 0;
}

// Whether every element offset inside one image, (H - 1) * |sh| + (W - 1) * |sw| +
// (C - 1) * |sc|, fits the kernel's int32 arithmetic (with room for the sum of two terms).
bool image_span_ok(int64_t C, int64_t H, int64_t W, int64_t sc, int64_t sh, int64_t sw) {
  auto term = [](int64_t size, int64_t stride) {
    return size <= 1 ? 0 : (size - 1) * (stride < 0 ? -stride : stride);
  };
  const int64_t h = term(H, sh), w = term(W, sw), c = term(C, sc);
  return h <= kIntMax && w <= kIntMax && c <= kIntMax && h + w + c < kIntMax;
}

// A stride as the kernel's int32: 0 for a size-1 dim (never stepped).
int int_stride(int64_t size, int64_t stride) {
  return size <= 1 ? 0 : static_cast<int>(stride);
}

}  // namespace

bool plan(const ConvProblem& p, Plan& plan) {
  using Tr = conv::NhwcRegTraits;
  const int64_t K = p.KH, S = p.stride_h;
  if (!p.depthwise1() || p.KH != p.KW || (K != 3 && K != 5 && K != 7) ||
      p.stride_h != p.stride_w || (S != 1 && S != 2) || p.dil_h != 1 || p.dil_w != 1 ||
      p.N < 1 || p.C < 1 || p.OH < 1 || p.OW < 1 || p.pad_h < 0 || p.pad_w < 0) {
    return false;
  }
  // Rows / columns in int: input coordinates up to (OH + 1) * S + K (a tile past the last
  // output row or column) and padding, well inside int.
  if (std::max({p.H, p.W, (p.OH + 2) * S + K, (p.OW + 4) * S + K, p.pad_h, p.pad_w}) >
      kMaxIntIndex) {
    return false;
  }
  // In-image offsets in int32 (image bases stay int64), from non-negative strides (as torch's).
  for (int64_t st : {p.x_sn, p.x_sc, p.x_sh, p.x_sw, p.y_sn, p.y_so, p.y_sh, p.y_sw}) {
    if (st < 0) return false;
  }
  if (p.r != nullptr && std::min({p.r_sn, p.r_so, p.r_sh, p.r_sw}) < 0) return false;
  if (!image_span_ok(p.C, p.H, p.W, p.x_sc, p.x_sh, p.x_sw) ||
      !image_span_ok(p.O, p.OH, p.OW, p.y_so, p.y_sh, p.y_sw) ||
      (p.r != nullptr && !image_span_ok(p.O, p.OH, p.OW, p.r_so, p.r_sh, p.r_sw))) {
    return false;
  }
  conv::NhwcRegShape& s = plan.shape;
  s.c_vecs = ceil_div(p.C, Tr::kV);
  s.c_blocks = static_cast<int>(
      std::min<int64_t>(kIntMax, ceil_div(s.c_vecs, int64_t{Tr::kMaxLanes})));
  s.tc = static_cast<int>(ceil_div(s.c_vecs, s.c_blocks));  // evened out: 24 = 1 x 24, 50 = 2 x 25
  s.tp = Tr::kThreads / s.tc;
  // Tiles in int with room for a block's passes: the small variant (1 x 2) has the most.
  const int64_t most_tiles = p.N * p.OH * ceil_div(p.OW, 2);
  if (most_tiles + int64_t{Tr::kMaxReps} * Tr::kThreads > kIntMax) return false;
  s.x_sh = int_stride(p.H, p.x_sh);
  s.x_sw = int_stride(p.W, p.x_sw);
  s.x_sc = int_stride(p.C, p.x_sc);
  s.y_sh = int_stride(p.OH, p.y_sh);
  s.y_sw = int_stride(p.OW, p.y_sw);
  s.r_sh = p.r != nullptr ? int_stride(p.OH, p.r_sh) : 0;
  s.r_sw = p.r != nullptr ? int_stride(p.OW, p.r_sw) : 0;
  s.x_vec = vec4(p.C, p.elem_size, p.N, p.x_sc, p.x_sw, p.x_sh, p.x_sn, p.x);
  s.y_vec = vec4(p.C, p.elem_size, p.N, p.y_so, p.y_sw, p.y_sh, p.y_sn, p.y);
  s.r_vec = p.r != nullptr && vec4(p.C, p.elem_size, p.N, p.r_so, p.r_sw, p.r_sh, p.r_sn, p.r);
  // 8-element vectors of x (16 bytes at 16-bit): the staged variant's 16-byte copies.
  s.x_vec8 = vec4(p.C, p.elem_size, p.N, p.x_sc, p.x_sw, p.x_sh, p.x_sn, p.x, 2 * Tr::kV);
  s.tiles_w = s.tiles_h = s.tiles = 0;  // set at launch with the tile variant
  s.st_h = s.st_w = 0;                  // the staged variant's patch: set at its launch
  s.reps = 1;
  plan.k = static_cast<int>(K);
  plan.stride = static_cast<int>(S);
  plan.smem_bytes = static_cast<size_t>(K * K * Tr::kMaxLanes * Tr::kV * 4);  // fixed pitch
  return true;
}

}  // namespace nhwc_reg

bool depthwise_nhwc_reg_can_run(const ConvProblem& p) {
  nhwc_reg::Plan plan;
  return nhwc_reg::plan(p, plan);
}

template void depthwise_nhwc_reg_run<float>(const ConvProblem&, cudaStream_t);

}  // namespace gpukern
