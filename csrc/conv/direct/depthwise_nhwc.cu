// depthwise_nhwc, host side: can_run, plan, launch (the roll kernel's strip height, chosen from
// the device's occupancy) and the kernels' instantiations.
#include <c10/cuda/CUDAFunctions.h>

#include <algorithm>

#include "conv/direct/depthwise_nhwc.cuh"
#include "conv/direct/direct2d.h"
#include "core/launch.cuh"

namespace gpukern {
namespace {

constexpr const char* kOp = kConv2dOp;

// Blocks the runtime-filter kernel aims for (output rows per block grow until about this many):
// a few waves of 132 SMs, each block staging the filter once for its rows.
constexpr int64_t kNhwcTargetBlocks = 2048;
constexpr int64_t kNhwcMaxRows = 16;

struct NhwcPlan {
  conv::NhwcShape shape{};  // work decomposition (the roll kernel's strips: at launch)
  int k = 0;                // 3/5/7: the roll kernel for that square filter; 0: runtime filter
  size_t smem_bytes = 0;    // the block's taps
};

// Whether kV-element vector accesses of a channels_last tensor at `data` (element strides sn,
// sh, sw, sc) are allowed: C a multiple of kV, channels contiguous, pixels, rows and images kV
// elements apart, data aligned to the vector.
bool nhwc_vec(int64_t C, int64_t kV, int64_t elem_size, int64_t N, int64_t sc, int64_t sw,
              int64_t sh, int64_t sn, const void* data) {
  return C % kV == 0 && sc == 1 && sw % kV == 0 && sh % kV == 0 && (N == 1 || sn % kV == 0) &&
         reinterpret_cast<uintptr_t>(data) % static_cast<uintptr_t>(kV * elem_size) == 0;
}

bool plan_nhwc(const ConvProblem& p, NhwcPlan& plan) {
  using Tr = conv::NhwcTraits;
  const int64_t elem_size = p.elem_size;
  // The kernels keep columns / rows in int.
  if (!p.depthwise1() || p.KH * p.KW > Tr::kMaxTaps ||
      std::max({p.H, p.W, p.OH, p.OW + 4, p.pad_h, p.pad_w}) > kMaxIntIndex) {
    return false;
  }
  const bool square = p.KH == p.KW && p.stride_h == 1 && p.stride_w == 1 && p.dil_h == 1 &&
                      p.dil_w == 1 && (p.KH == 3 || p.KH == 5 || p.KH == 7);
  // The roll kernel: 4 channels x items(K) columns per thread, taps staged as float.
  const int64_t V = square ? conv::NhwcRoll::kV : 16 / elem_size;
  const int64_t items = square ? conv::NhwcRoll::items(static_cast<int>(p.KH))
                               : Tr::items_w(static_cast<int>(elem_size));
  conv::NhwcShape& s = plan.shape;
  s.c_vecs = ceil_div(p.C, V);
  int tc = 1;
  while (tc < 32 && tc < s.c_vecs) tc *= 2;
  s.tc = tc;
  s.c_blocks = ceil_div(s.c_vecs, static_cast<int64_t>(tc));
  s.w_groups = ceil_div(p.OW, items);
  // As few column blocks as the thread budget allows, then their width evened out (56 columns =
  // 14 groups: two blocks of 7, not 8 + 6).
  const int64_t max_tw = Tr::kMaxThreads / tc;
  s.w_blocks = ceil_div(s.w_groups, max_tw);
  s.tw = static_cast<int>(ceil_div(s.w_groups, s.w_blocks));
  if (square) {
    s.rows = s.img_chunks = s.row_chunks = 0;  // strips: set at launch (launch_nhwc_roll)
  } else {
    const int64_t row_units = p.N * p.OH;
    const int64_t per_row = s.c_blocks * s.w_blocks;
    s.rows = std::max<int64_t>(
        1, std::min(kNhwcMaxRows, (per_row * row_units) / kNhwcTargetBlocks));
    s.row_chunks = ceil_div(row_units, s.rows);
    s.img_chunks = 0;
  }
  s.x_vec = nhwc_vec(p.C, V, elem_size, p.N, p.x_sc, p.x_sw, p.x_sh, p.x_sn, p.x);
  s.y_vec = nhwc_vec(p.C, V, elem_size, p.N, p.y_so, p.y_sw, p.y_sh, p.y_sn, p.y);
  plan.k = square ? static_cast<int>(p.KH) : 0;
  plan.smem_bytes = static_cast<size_t>(p.KH * p.KW * tc * 16);  // 16 B of taps per lane
  return true;
}

// The roll kernel's strip height, chosen here because it depends on the device: taller strips
// re-read fewer halo rows ((rows + K - 1) / rows input rows per output row), more strips fill
// the waves better. The cost of a height is waves * (rows + K - 1) input-row steps, the waves
// counted from the kernel's resident blocks per SM; the cheapest wins (the shorter on a tie).
template <auto kKernel>
void launch_nhwc_roll(const ConvProblem& p, const NhwcPlan& plan, cudaStream_t stream) {
  conv::NhwcShape s = plan.shape;
  const int threads = s.tc * s.tw;
  const int64_t wave =
      int64_t{device_props().multiProcessorCount} *
      resident_blocks_per_sm<kKernel>(c10::cuda::current_device(), threads);
  const int64_t per_strip = p.N * s.w_blocks * s.c_blocks;  // blocks per strip of every image
  int64_t best = -1;
  for (int64_t rows = std::min<int64_t>(p.OH, conv::NhwcRoll::kMaxRows); rows >= 1; --rows) {
    const int64_t cost = ceil_div(per_strip * ceil_div(p.OH, rows), wave) * (rows + p.KH - 1);
    if (best < 0 || cost <= best) {
      best = cost;
      s.rows = rows;
    }
  }
  s.img_chunks = ceil_div(p.OH, s.rows);
  const dim3 grid = checked_grid(kOp, per_strip * s.img_chunks);
  kKernel<<<grid, threads, plan.smem_bytes, stream>>>(p, s);
  GK_CHECK_LAUNCH();
}

}  // namespace

bool depthwise_nhwc_can_run(const ConvProblem& p) {
  NhwcPlan plan;
  return plan_nhwc(p, plan);
}

template <typename T>
void depthwise_nhwc_run(const ConvProblem& p, cudaStream_t stream) {
  NhwcPlan plan;
  GK_CHECK(plan_nhwc(p, plan), kOp, "internal error: depthwise_nhwc cannot run this shape");
  switch (plan.k) {
    case 3: launch_nhwc_roll<conv::conv2d_depthwise_nhwc_roll_kernel<T, 3>>(p, plan, stream); break;
    case 5: launch_nhwc_roll<conv::conv2d_depthwise_nhwc_roll_kernel<T, 5>>(p, plan, stream); break;
    case 7: launch_nhwc_roll<conv::conv2d_depthwise_nhwc_roll_kernel<T, 7>>(p, plan, stream); break;
    default: {
      const conv::NhwcShape& s = plan.shape;
      const dim3 grid = checked_grid(kOp, s.row_chunks * s.w_blocks * s.c_blocks);
      conv::conv2d_depthwise_nhwc_kernel<T><<<grid, s.tc * s.tw, plan.smem_bytes, stream>>>(p, s);
      GK_CHECK_LAUNCH();
    }
  }
}

// Every dtype x (the runtime-filter kernel, the roll kernel for 3/5/7).
template void depthwise_nhwc_run<float>(const ConvProblem&, cudaStream_t);
template void depthwise_nhwc_run<__half>(const ConvProblem&, cudaStream_t);
template void depthwise_nhwc_run<__nv_bfloat16>(const ConvProblem&, cudaStream_t);

}  // namespace gpukern
