// pointwise_nchw for bfloat16 / float16, host side: the plan, the tile, the launch and the
// kernel's instantiations (the kernel: pointwise_nchw16.cuh). Reached through pointwise_nchw.h's
// functions, which send 2-byte problems here.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <ATen/ATen.h>

#include "conv/direct/direct2d.h"
#include "conv/direct/pointwise_nchw.h"
#include "conv/direct/pointwise_nchw16.cuh"
#include "core/knobs.h"
#include "core/launch.cuh"
#include "device/vec.cuh"

namespace gpukern {
namespace {

constexpr const char* kOp = kConv2dOp;

bool plane_contiguous16(int64_t h, int64_t w, int64_t sh, int64_t sw) {
  return (w == 1 || sw == 1) && (h == 1 || sh == w);
}

bool aligned_to(const void* ptr, uintptr_t bytes) {
  return reinterpret_cast<uintptr_t>(ptr) % bytes == 0;
}

// The problems the kernel takes (pointwise_nchw16.cuh's contract) and its copy width.
bool plan16(const ConvProblem& p, conv::PointwisePlan& s, int& copy_bytes) {
  const auto dt = static_cast<at::ScalarType>(p.dtype);
  if (p.elem_size != 2 || (dt != at::kBFloat16 && dt != at::kHalf)) return false;
  if (p.groups != 1 || p.KH != 1 || p.KW != 1 || p.stride_h != 1 || p.stride_w != 1 ||
      p.pad_h != 0 || p.pad_w != 0 || p.OH != p.H || p.OW != p.W) {
    return false;
  }
  if (p.N < 0 || p.C < 8 || p.O < 1 || p.C % 8 != 0) return false;
  const int64_t P = p.H * p.W;
  if (P % 4 != 0 || P >= (int64_t{1} << 31)) return false;
  if (!plane_contiguous16(p.H, p.W, p.x_sh, p.x_sw) ||
      !plane_contiguous16(p.OH, p.OW, p.y_sh, p.y_sw)) {
    return false;
  }
  // W [O][C] rows of 16-byte channel octets.
  if (p.w_sc != 1 || (p.O > 1 && p.w_so % 8 != 0) || !is_aligned16(p.w)) return false;
  // x: 4- or 8-pixel copies that never cross an image.
  auto x_copies = [&](int64_t px) {
    return P % px == 0 && (p.N == 1 || p.x_sn % px == 0) && p.x_sc % px == 0 &&
           aligned_to(p.x, 2 * px);
  };
  if (x_copies(8)) {
    copy_bytes = 16;
  } else if (x_copies(4)) {
    copy_bytes = 8;
  } else {
    return false;
  }
  // y and the residual as pixel pairs.
  auto pairs = [&](const void* ptr, int64_t sn, int64_t so) {
    return (p.N == 1 || sn % 2 == 0) && (p.O == 1 || so % 2 == 0) && aligned_to(ptr, 4);
  };
  if (!pairs(p.y, p.y_sn, p.y_so)) return false;
  if (p.r != nullptr && (!plane_contiguous16(p.OH, p.OW, p.r_sh, p.r_sw) ||
                         !pairs(p.r, p.r_sn, p.r_so))) {
    return false;
  }
  s.P = static_cast<int>(P);
  s.cols = p.N * P;
  if (((p.O + 63) / 64) * ((s.cols + 63) / 64) >= (int64_t{1} << 31)) return false;
  return true;
}

// Tiles (kBM, kBN, kWM, kWN, stages): 64 x 128 in four 32 x 64 warps, or 64 x 64 in four 32 x 32
// warps for grids of under a wave of the larger tile.
struct Tile16 {
  int bm, bn, wm, wn, stages;
};
constexpr Tile16 kTiles16[] = {{64, 128, 32, 64, 4}, {64, 64, 32, 32, 4}};
constexpr int64_t kWave = 132;

void set_tile16(const ConvProblem& p, conv::PointwisePlan& s, int i) {
  s.tile = i;
  s.splits = 1;
  s.m_tiles = static_cast<int>((p.O + kTiles16[i].bm - 1) / kTiles16[i].bm);
  s.blocks = s.m_tiles * ((s.cols + kTiles16[i].bn - 1) / kTiles16[i].bn);
}

// GPUKERN_PW_TILE=1 or 2 forces a tile (with GPUKERN_PW_KNOBS=1 at the first call).
void choose_tile16(const ConvProblem& p, conv::PointwisePlan& s) {
  static const bool knobs = knobs_enabled("PW");
  if (knobs) {
    const long long forced = knob_value("PW", "TILE");
    if (forced >= 1 && forced <= 2) return set_tile16(p, s, static_cast<int>(forced - 1));
  }
  set_tile16(p, s, 0);
  if (s.blocks < kWave) set_tile16(p, s, 1);
}

template <typename T, int kI, int kCopy>
void launch16(const ConvProblem& p, const conv::PointwisePlan& s, cudaStream_t stream) {
  constexpr Tile16 t = kTiles16[kI];
  constexpr size_t smem = conv::pointwise16_smem_bytes<t.bm, t.bn, t.stages>();
  auto kernel =
      conv::conv2d_pointwise_nchw16_kernel<T, t.bm, t.bn, t.wm, t.wn, t.stages, 2, kCopy>;
  allow_dynamic_smem(kernel, smem);
  launch_pdl(kernel, checked_grid(kOp, s.blocks), dim3(t.bm / t.wm * t.bn / t.wn * 32), smem,
             stream, p, s);
}

template <typename T>
void launch16_any(const ConvProblem& p, const conv::PointwisePlan& s, int copy_bytes,
                  cudaStream_t stream) {
  if (s.tile == 0) {
    return copy_bytes == 16 ? launch16<T, 0, 16>(p, s, stream) : launch16<T, 0, 8>(p, s, stream);
  }
  return copy_bytes == 16 ? launch16<T, 1, 16>(p, s, stream) : launch16<T, 1, 8>(p, s, stream);
}

}  // namespace

bool pointwise_nchw16_can_run(const ConvProblem& p) {
  conv::PointwisePlan s;
  int copy_bytes = 0;
  return plan16(p, s, copy_bytes);
}

// Where igemm's 1x1 forms take it for a 16-bit call with a bias or an epilogue: planes of at
// most 14x14 into at most 512 outputs; 28x28 planes from at most 64 channels and 56x56 ones from
// at most 32, without a residual. H100, batch 16, bf16 blocks against igemm's other forms
// (benchmarks/pointwise_nchw.py --dtype bfloat16, h100_pointwise_nchw16.md, us): 1024 -> 256
// 14x14 15.2 against 21.2, 480 -> 112 14x14 7.6 against 10.9, 240 -> 80 5.6 against 8.1, 672 ->
// 112 + residual 11.8 against 12.9, 1024 -> 512 14x14 22.7 against 27.8, 40 -> 240 28x28 10.7
// against 14.2, 24 -> 72 56x56 14.8 against 20.8. It loses into 672 and 1024 outputs (112 -> 672
// 14x14 15.4 against 14.8, 256 -> 1024 + residual 30.2 against 20.0), with more channels or a
// residual on larger planes (512 -> 128 28x28 14.3 against 10.5, 120 -> 40 28x28 + residual 7.8
// against 6.0), and on 56x56 planes and up from 64 channels (64 -> 64 12.6 against 11.2):
// CUTLASS's wgmma kernels outrun mma.sync once the grid is large.
// GPUKERN_PW_OFF=1 (with GPUKERN_PW_KNOBS=1 at the first call) leaves every call to igemm's
// other forms: the benchmark's comparison.
bool pointwise_nchw16_preferred(const ConvProblem& p) {
  static const bool knobs = knobs_enabled("PW");
  if (knobs && knob_value("PW", "OFF") == 1) return false;
  const int64_t P = p.OH * p.OW;
  bool shape_ok = false;
  if (P <= 196) {
    shape_ok = p.O <= 512 && p.C <= 1024;
  } else if (p.r == nullptr && P <= 784) {
    shape_ok = p.C <= 64;
  } else if (p.r == nullptr && P <= 3136) {
    shape_ok = p.C <= 32;
  }
  return shape_ok && pointwise_nchw16_can_run(p);
}

void pointwise_nchw16_run(const ConvProblem& p, cudaStream_t stream) {
  conv::PointwisePlan s;
  int copy_bytes = 0;
  GK_CHECK(plan16(p, s, copy_bytes), kOp, "internal error: pointwise_nchw cannot run this shape");
  choose_tile16(p, s);
  if (s.blocks == 0) return;
  if (static_cast<at::ScalarType>(p.dtype) == at::kBFloat16) {
    launch16_any<__nv_bfloat16>(p, s, copy_bytes, stream);
  } else {
    launch16_any<__half>(p, s, copy_bytes, stream);
  }
}

}  // namespace gpukern
