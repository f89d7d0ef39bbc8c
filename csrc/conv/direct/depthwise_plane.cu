// depthwise_plane, host side: can_run, plan, launch and the kernel's instantiations.
#include <limits>

#include "conv/direct/depthwise_plane.cuh"
#include "conv/direct/direct2d.h"
#include "core/launch.cuh"

namespace gpukern {
namespace {

constexpr const char* kOp = kConv2dOp;

struct PlanePlan {
  conv::PlaneShape shape{};  // work decomposition
  size_t smem_bytes = 0;     // header, zero row and the block's warp slots
};

// Planes whole in shared memory, one warp each: depthwise with multiplier 1, stride 1, dilation
// 1, 3x3 'same' filter, W a multiple of 4 up to 128 and a plane of at most kMaxPlaneBytes, on
// sm_90+ (bulk copies). Any strides: planes whose rows are not contiguous (or not 16-byte
// aligned) are staged element by element.
bool plan_plane(const ConvProblem& p, PlanePlan& plan) {
  using Tr = conv::PlaneTraits;
  const int64_t elem_size = p.elem_size;
  const int64_t plane_bytes = p.H * p.W * elem_size;
  if (!p.depthwise1() || p.stride_h != 1 || p.stride_w != 1 || p.dil_h != 1 || p.dil_w != 1 ||
      p.KH != 3 || p.KW != 3 || p.pad_h != 1 || p.pad_w != 1 || p.W % Tr::kCols != 0 ||
      p.W > Tr::kMaxW || plane_bytes > Tr::kMaxPlaneBytes ||
      p.N * p.C > std::numeric_limits<int>::max() - Tr::kWarps || !tma_device()) {
    return false;
  }
  conv::PlaneShape& s = plan.shape;
  s.planes = static_cast<int>(p.N * p.C);
  s.channels = FastDiv(static_cast<uint32_t>(p.C));
  s.lanes_w = static_cast<int>(p.W / Tr::kCols);
  s.bands = 32 / s.lanes_w;
  s.band_rows = static_cast<int>(ceil_div(p.H, s.bands));
  s.plane_bytes = static_cast<int>(plane_bytes);
  s.mma = elem_size == 2 && p.W % 8 == 0 && (p.W * elem_size / 16) % 2 == 1;
  s.slot_bytes = static_cast<int>(
      round_up((p.H + (s.mma ? 1 : 0)) * p.W * elem_size, Tr::kSlotAlign));  // + a spare row
  s.bulk = p.x_sw == 1 && (p.x_sh == p.W || p.H == 1) && plane_bytes % 16 == 0;  // W >= 4
  s.y_vec = nchw_vec_y(p, 4);
  s.y_rows16 = p.y_sw == 1 && (p.y_sh * elem_size) % 16 == 0;
  plan.smem_bytes = Tr::kSlotsOffset + static_cast<size_t>(Tr::kWarps) * s.slot_bytes;
  return true;
}

}  // namespace

bool depthwise_plane_can_run(const ConvProblem& p) {
  PlanePlan plan;
  return plan_plane(p, plan);
}

template <typename T>
void depthwise_plane_run(const ConvProblem& p, cudaStream_t stream) {
  using Tr = conv::PlaneTraits;
  PlanePlan plan;
  GK_CHECK(plan_plane(p, plan), kOp, "internal error: depthwise_plane cannot run this shape");
  constexpr auto kernel = conv::conv2d_depthwise_plane_kernel<T, 3>;
  const int64_t blocks = ceil_div(int64_t{plan.shape.planes}, Tr::kWarps);
  allow_dynamic_smem(kernel, plan.smem_bytes);
  launch_pdl(kernel, dim3(static_cast<unsigned>(blocks)), dim3(Tr::kThreads), plan.smem_bytes,
             stream, p, plan.shape);
  GK_CHECK_LAUNCH();
}

// 3x3 only (5x5 and 7x7 are not built: the TMA kernel is faster there).
template void depthwise_plane_run<float>(const ConvProblem&, cudaStream_t);
template void depthwise_plane_run<__half>(const ConvProblem&, cudaStream_t);
template void depthwise_plane_run<__nv_bfloat16>(const ConvProblem&, cudaStream_t);

}  // namespace gpukern
