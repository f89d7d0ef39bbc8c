// conv2d CUDA host side: argument checks (common/conv_args), the algorithm choice, one launch on
// the current stream, and the CUDA registration of both overloads.
#include <torch/library.h>

#include <algorithm>
#include <string_view>

#include "common/checks.h"
#include "common/conv_args.h"
#include "common/dispatch.h"
#include "common/launch.cuh"
#include "conv2d/conv2d.h"
#include "conv2d/conv2d_kernels.cuh"

namespace gpukern {
namespace {

constexpr const char* kOp = "conv2d";
constexpr int64_t kMaxGridY = 65535;
constexpr int64_t kMaxGridX = 2147483647;

enum class Algo {
  kDepthwiseNchw,  // conv2d_depthwise_nchw_kernel
  kDepthwiseNhwc,  // conv2d_depthwise_nhwc_kernel
  kGeneralStaged,  // conv2d_general_kernel<T, true>
  kGeneralDirect,  // conv2d_general_kernel<T, false>
};

struct Plan {
  Algo algo = Algo::kGeneralDirect;
  int static_k = 0;                  // depthwise NCHW: 3/5/7 = filter in registers, -1 = runtime
                                     // filter in register chunks (row dilation 1), 0 = runtime
  conv2d::DepthwiseTile tile{0, 0};  // depthwise NCHW shared tile
  bool vec_ok = false;               // depthwise NCHW: 16-byte loads allowed
  int rows_per_chunk = 0;            // general staged: filter rows per staged chunk
  int region_cols = 0;               // general staged: staged input columns
  size_t smem_bytes = 0;
};

int64_t round_up(int64_t a, int64_t m) { return ceil_div(a, m) * m; }

// The algorithm for a shape (first match wins):
//  1. depthwise with multiplier 1 (groups == C == O; C == 1 is a single-channel image) whose
//     channels are the contiguous dim (channels_last, C > 1): the NHWC kernel, any stride,
//     dilation and padding;
//  2. depthwise with multiplier 1, stride 1, tile + halo within DepthwiseTraits::kMaxSmemFloats:
//     the NCHW tiled kernel (rows read through their stride, 16-byte loads when rows are
//     contiguous and aligned), filter in registers for square 3/5/7 filters without dilation,
//     else chunks of filter rows in registers when the row dilation is 1, else taps from shared
//     memory;
//  3. everything else: the general tiled kernel, staging input regions and filter rows in shared
//     memory when the region of one filter row fits (GeneralTraits budget), else reading
//     directly from global memory (huge stride or dilation).
Plan choose_algo(const Conv2dParams& p, int64_t elem_size) {
  Plan plan;
  const bool dw1 = p.groups == p.C && p.O == p.C;
  if (dw1 && p.C > 1 && p.x_sc == 1 && p.x_sw != 1) {
    plan.algo = Algo::kDepthwiseNhwc;
    return plan;
  }
  if (dw1 && p.stride_h == 1 && p.stride_w == 1) {
    using Tr = conv2d::DepthwiseTraits;
    const int64_t V = 16 / elem_size;
    const int64_t off = ((-p.pad_w) % V + V) % V;
    const int64_t rows = Tr::kTileH + (p.KH - 1) * p.dil_h;
    const int64_t pitch = round_up(off + Tr::kTileW + (p.KW - 1) * p.dil_w, V);
    const bool square_small = p.KH == p.KW && p.dil_h == 1 && p.dil_w == 1 &&
                              (p.KH == 3 || p.KH == 5 || p.KH == 7);
    const int64_t floats = rows * pitch + (square_small ? 0 : p.KH * p.KW);
    if (rows <= Tr::kMaxSmemFloats && pitch <= Tr::kMaxSmemFloats &&
        floats <= Tr::kMaxSmemFloats) {
      plan.algo = Algo::kDepthwiseNchw;
      plan.static_k = square_small ? static_cast<int>(p.KH) : (p.dil_h == 1 ? -1 : 0);
      plan.tile = {static_cast<int>(rows), static_cast<int>(pitch)};
      plan.vec_ok = p.x_sw == 1 && p.x_sh % V == 0 && (p.N == 1 || p.x_sn % V == 0) &&
                    (p.C == 1 || p.x_sc % V == 0) && is_aligned16(p.x);
      plan.smem_bytes = static_cast<size_t>(floats) * sizeof(float);
      return plan;
    }
  }
  using Tr = conv2d::GeneralTraits;
  const int64_t region_cols = (Tr::kTileW - 1) * p.stride_w + (p.KW - 1) * p.dil_w + 1;
  const int64_t one_row = (Tr::kTileH - 1) * p.stride_h + 1;  // region rows of one filter row
  if (p.KW <= Tr::kMaxTaps && region_cols <= Tr::kMaxRegion &&
      one_row * region_cols <= Tr::kMaxRegion) {
    // Most filter rows R with region rows one_row + (R-1)*dil_h and R*KW taps inside budget.
    const int64_t by_region = (Tr::kMaxRegion / region_cols - one_row) / p.dil_h + 1;
    const int64_t by_taps = Tr::kMaxTaps / p.KW;
    const int64_t R = std::max<int64_t>(1, std::min({p.KH, by_region, by_taps}));
    const int64_t region_rows = one_row + (R - 1) * p.dil_h;
    plan.algo = Algo::kGeneralStaged;
    plan.rows_per_chunk = static_cast<int>(R);
    plan.region_cols = static_cast<int>(region_cols);
    plan.smem_bytes = static_cast<size_t>(R * p.KW + region_rows * region_cols) * sizeof(float);
    return plan;
  }
  plan.algo = Algo::kGeneralDirect;
  return plan;
}

template <typename T>
void launch(const Conv2dParams& p, const Plan& plan, cudaStream_t stream) {
  switch (plan.algo) {
    case Algo::kDepthwiseNhwc: {
      using Tr = conv2d::NhwcTraits;
      const int64_t tiles_w = ceil_div(p.OW, Tr::kTileW);
      const int64_t gx = ceil_div(p.C, Tr::kThreadsC) * tiles_w;
      GK_CHECK(gx <= kMaxGridX, kOp, "output too large for the grid (", gx, " blocks)");
      const dim3 grid(static_cast<unsigned>(gx),
                      static_cast<unsigned>(std::min(p.N * p.OH, kMaxGridY)));
      conv2d::conv2d_depthwise_nhwc_kernel<T><<<grid, Tr::kNThreads, 0, stream>>>(p, tiles_w);
      GK_CHECK_LAUNCH();
      break;
    }
    case Algo::kDepthwiseNchw: {
      using Tr = conv2d::DepthwiseTraits;
      const int64_t tiles_w = ceil_div(p.OW, Tr::kTileW);
      const int64_t gx = ceil_div(p.OH, Tr::kTileH) * tiles_w;
      GK_CHECK(gx <= kMaxGridX, kOp, "output too large for the grid (", gx, " blocks)");
      const dim3 grid(static_cast<unsigned>(gx),
                      static_cast<unsigned>(std::min(p.N * p.C, kMaxGridY)));
      auto go = [&](auto kernel) {
        allow_dynamic_smem(kernel, plan.smem_bytes);
        kernel<<<grid, Tr::threads(plan.static_k), plan.smem_bytes, stream>>>(p, plan.tile,
                                                                               tiles_w,
                                                                               plan.vec_ok);
        GK_CHECK_LAUNCH();
      };
      switch (plan.static_k) {
        case 3: go(conv2d::conv2d_depthwise_nchw_kernel<T, 3>); break;
        case 5: go(conv2d::conv2d_depthwise_nchw_kernel<T, 5>); break;
        case 7: go(conv2d::conv2d_depthwise_nchw_kernel<T, 7>); break;
        case -1: go(conv2d::conv2d_depthwise_nchw_kernel<T, -1>); break;
        default: go(conv2d::conv2d_depthwise_nchw_kernel<T, 0>); break;
      }
      break;
    }
    case Algo::kGeneralStaged:
    case Algo::kGeneralDirect: {
      using Tr = conv2d::GeneralTraits;
      const int64_t tiles_w = ceil_div(p.OW, Tr::kTileW);
      const int64_t gx = ceil_div(p.OH, Tr::kTileH) * tiles_w;
      GK_CHECK(gx <= kMaxGridX, kOp, "output too large for the grid (", gx, " blocks)");
      const dim3 grid(static_cast<unsigned>(gx),
                      static_cast<unsigned>(std::min(p.N * p.O, kMaxGridY)));
      if (plan.algo == Algo::kGeneralStaged) {
        conv2d::conv2d_general_kernel<T, true><<<grid, Tr::kNThreads, plan.smem_bytes, stream>>>(
            p, plan.rows_per_chunk, plan.region_cols, tiles_w);
      } else {
        conv2d::conv2d_general_kernel<T, false><<<grid, Tr::kNThreads, 0, stream>>>(p, 0, 0,
                                                                                   tiles_w);
      }
      GK_CHECK_LAUNCH();
      break;
    }
  }
}

at::Tensor conv2d_cuda_run(const ConvArgs& args, const at::Tensor& input, const at::Tensor& weight,
                           const std::optional<at::Tensor>& bias) {
  GK_CHECK(input.is_cuda(), kOp, "expected a CUDA input, got one on ", input.device());
  at::Tensor out = conv_output(args, input, weight);
  if (out.numel() == 0) return out;
  const Conv2dParams p = make_conv2d_params(args, conv_batched_input(args, input), weight, bias,
                                            conv_batched_output(args, out));
  const Plan plan = choose_algo(p, input.element_size());
  CudaLaunchContext ctx(input);
  GK_DISPATCH_FLOAT_CUDA(input.scalar_type(), kOp, [&] { launch<scalar_t>(p, plan, ctx.stream); });
  return out;
}

at::Tensor conv2d_cuda(const at::Tensor& input, const at::Tensor& weight,
                       const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                       at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
  const ConvArgs args = conv_args(kOp, 2, input, weight, bias, stride, padding, dilation, groups);
  return conv2d_cuda_run(args, input, weight, bias);
}

at::Tensor conv2d_padding_cuda(const at::Tensor& input, const at::Tensor& weight,
                               const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                               c10::string_view padding, at::IntArrayRef dilation,
                               int64_t groups) {
  const ConvArgs args = conv_args(kOp, 2, input, weight, bias, stride,
                                  std::string_view(padding.data(), padding.size()), dilation,
                                  groups);
  return conv2d_cuda_run(args, input, weight, bias);
}

}  // namespace
}  // namespace gpukern

TORCH_LIBRARY_IMPL(gpukern, CUDA, m) {
  m.impl("conv2d", &gpukern::conv2d_cuda);
  m.impl("conv2d.padding", &gpukern::conv2d_padding_cuda);
}
