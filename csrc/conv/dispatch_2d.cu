// conv2d on CUDA: which direct algorithm runs a problem (the rules below, or the forced one) and
// the run itself. Each algorithm's planner, launcher and instantiations live in
// conv/direct/<algo>.cu; the measurements behind each rule in docs/performance.md.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>

#include <string>
#include <type_traits>

#include "conv/direct/direct2d.h"
#include "conv/dispatch.h"
#include "conv/epilogue.h"
#include "conv/igemm/blas.h"
#include "conv/igemm/igemm.h"
#include "conv/vendor.h"
#include "core/algo_table.h"
#include "core/checks.h"
#include "core/dispatch.h"

namespace gpukern {

namespace {

constexpr const char* kOp = kConv2dOp;

enum class Algo {
  kDepthwiseNhwc,
  kDepthwiseRows,
  kDepthwiseTma,
  kDepthwisePlane,
  kDepthwiseLarge,
  kDepthwiseNchw,
  kDepthwiseNhwcTile,
  kDepthwiseStrided,
  kDepthwiseNhwcReg,
  kDepthwiseSmall,
  kGeneralStaged,
  kGeneralDirect,
  kIgemm,
  kStemDirect,
  kPointwiseNchw,
  kCudnn,
  kAtenDepthwise,
};

// Names in Algo order: what _set_algorithm("conv2d", ...) accepts and _algorithm_conv2d returns.
const AlgorithmTable<Algo> kTable("conv2d", {
                                               {Algo::kDepthwiseNhwc, "depthwise_nhwc"},
                                               {Algo::kDepthwiseRows, "depthwise_rows"},
                                               {Algo::kDepthwiseTma, "depthwise_tma"},
                                               {Algo::kDepthwisePlane, "depthwise_plane"},
                                               {Algo::kDepthwiseLarge, "depthwise_large"},
                                               {Algo::kDepthwiseNchw, "depthwise_nchw"},
                                               {Algo::kDepthwiseNhwcTile, "depthwise_nhwc_tile"},
                                               {Algo::kDepthwiseStrided, "depthwise_strided"},
                                               {Algo::kDepthwiseNhwcReg, "depthwise_nhwc_reg"},
                                               {Algo::kDepthwiseSmall, "depthwise_small"},
                                               {Algo::kGeneralStaged, "general_staged"},
                                               {Algo::kGeneralDirect, "general_direct"},
                                               {Algo::kIgemm, "igemm"},
                                               {Algo::kStemDirect, "stem_direct"},
                                               {Algo::kPointwiseNchw, "pointwise_nchw"},
                                               {Algo::kCudnn, "cudnn"},
                                               {Algo::kAtenDepthwise, "aten_depthwise"},
                                           });

// fp32 filters from this many taps on (beyond 7x7) take depthwise_large.
constexpr int64_t kLargeMinTaps = 50;

// Output planes up to this many pixels count as small for the stride-1 depthwise rules below
// (14x14 and 7x7 in the real networks): the rows kernel lost 2x to cuDNN at 14x14, where its
// 128-column strips and per-warp rows leave most lanes idle; at 28x28 it stays ahead of the staged
// kernel (H100 census, below).
constexpr int64_t kSmallPlaneNchw = 16 * 16;
constexpr int64_t kSmallPlaneNhwc = 16 * 16;

// Whether algorithm a can run the shape.
bool can_run(Algo a, const ConvProblem& p) {
  switch (a) {
    case Algo::kDepthwiseNhwc: return depthwise_nhwc_can_run(p);  // any strides
    case Algo::kDepthwiseNhwcTile: return depthwise_nhwc_tile_can_run(p);
    case Algo::kDepthwiseNhwcReg: return depthwise_nhwc_reg_can_run(p);
    case Algo::kDepthwiseStrided: return depthwise_strided_can_run(p);
    case Algo::kDepthwiseSmall: return depthwise_small_can_run(p);
    case Algo::kDepthwiseRows: return depthwise_rows_can_run(p);
    case Algo::kDepthwiseTma: return depthwise_tma_can_run(p);
    case Algo::kDepthwisePlane: return depthwise_plane_can_run(p);
    case Algo::kDepthwiseLarge: return depthwise_large_can_run(p);
    case Algo::kDepthwiseNchw: return depthwise_nchw_can_run(p);
    case Algo::kGeneralStaged: return general_staged_can_run(p);
    case Algo::kGeneralDirect: return true;
    case Algo::kIgemm: return igemm_can_run(p);  // dense, sm_90, aligned channels
    case Algo::kStemDirect: return stem_direct_can_run(p);
    // fp32 on the TF32 tensor cores, only as F.conv2d would; bfloat16 and float16. Never the
    // automatic choice by itself: igemm's 1x1 forms run it (conv/igemm/igemm.cpp run4), as it
    // depends on the bias.
    case Algo::kPointwiseNchw:
      return (p.elem_size == 2 || at::globalContext().allowTF32CuDNN()) &&
             pointwise_nchw_can_run(p);
    case Algo::kCudnn: return cudnn_conv_can_run(p);  // conv/vendor.h
    case Algo::kAtenDepthwise: return aten_depthwise_can_run(p);  // conv/vendor.h
  }
  return false;
}

// Depthwise with multiplier 1 over a channels_last input (C > 1: channels the contiguous dim).
bool nhwc_depthwise(const ConvProblem& p) {
  return p.depthwise1() && p.C > 1 && p.x_sc == 1 && p.x_sw != 1;
}

// The automatic choice: first match wins. A pure function of the shape, strides and dtype, and
// of the device's architecture only for the TMA kernels (sm_90+; the query without a GPU answers
// for sm_90). Never of the data pointers: alignment only switches vector accesses on or off
// inside a kernel, or moves the TMA map's base.
Algo choose_auto(const ConvProblem& p) {
  // Channels_last depthwise, square 3/5/7, stride 1 or 2, dilation 1 (ConvNeXt, MobileNet):
  // register-blocked output tiles, each input pixel loaded once per tile, the fused epilogue in
  // registers (issue #32). Not yet measured on a GPU: first for every shape it takes, until the
  // H100 table of benchmarks/dw_layers.py says where depthwise_nhwc / depthwise_nhwc_tile stay
  // ahead.
  if (nhwc_depthwise(p) && depthwise_nhwc_reg_can_run(p)) return Algo::kDepthwiseNhwcReg;
  // Channels_last depthwise 3/5/7 with stride 2, or fp32 stride 1 on small planes: pixel groups
  // of every image and row spread over the blocks, each input pixel loaded once per filter row
  // (depthwise_nhwc took 3x cuDNN's time at 14x14 stride 2: too few blocks, one load per tap).
  // 16-bit stride-1 small planes stay on depthwise_nhwc: H100 census, 16x480x14x14 3x3 bf16
  // 14.0 us here against 9.4 us there, 16x384x14x14 7x7 31.0 against 26.
  if (nhwc_depthwise(p) &&
      (p.stride_h == 2 || (p.elem_size == 4 && p.OH * p.OW <= kSmallPlaneNhwc)) &&
      depthwise_nhwc_tile_can_run(p)) {
    return Algo::kDepthwiseNhwcTile;
  }
  // Channels_last depthwise: threads own 16-byte channel vectors, the input read in place.
  if (nhwc_depthwise(p) && depthwise_nhwc_can_run(p)) return Algo::kDepthwiseNhwc;
  // NCHW depthwise 3/5/7 with stride 2 (output rows up to 256 columns): bands of whole-width
  // rows (whole small planes), several a block, staged with vector loads (depthwise_small;
  // issue #32: depthwise_strided trailed cuDNN 0.5-0.9x on MobileNetV3's stride-2 layers). Wider
  // outputs: depthwise_strided's column tiles (general_staged ran 1.5-15x slower than cuDNN).
  if (p.stride_h == 2 && depthwise_small_can_run(p)) return Algo::kDepthwiseSmall;
  if (p.stride_h == 2 && depthwise_strided_can_run(p)) return Algo::kDepthwiseStrided;
  // Small 3x3 'same' planes that 64x64 tiles do not cover exactly: one warp stages a whole plane.
  if (!tma_tiles_cover_plane(p) && depthwise_plane_can_run(p)) return Algo::kDepthwisePlane;
  // Square 3/5/7, stride 1, sm_90+, rows 16 bytes apart: persistent tiles fed by the TMA.
  if (depthwise_tma_can_run(p)) return Algo::kDepthwiseTma;
  // Small stride-1 planes the kernels above do not take (14x14, 7x7, odd widths): whole planes
  // staged, many a block (H100 census with depthwise_strided: 16x200x14x14 3x3 bf16 8.5 us
  // against depthwise_rows' 15.4; at 28x28 5x5 rows stays ahead, 14.6 against 18.7, and the
  // stride-1 28x28 layers already beat cuDNN 1.7x and more: the threshold stays at 16x16 until
  // depthwise_small is measured there). depthwise_small first, depthwise_strided for the
  // shapes it refuses (a filter footprint past its shared budget).
  if (p.OH * p.OW <= kSmallPlaneNchw && depthwise_small_can_run(p)) return Algo::kDepthwiseSmall;
  if (p.OH * p.OW <= kSmallPlaneNchw && depthwise_strided_can_run(p)) {
    return Algo::kDepthwiseStrided;
  }
  // 3x3 / 5x5 the TMA cannot describe: row strips streamed by warps (its 7x7 spills registers).
  if ((p.KH != 7 || p.KW != 7) && depthwise_rows_can_run(p)) return Algo::kDepthwiseRows;
  // fp32 beyond 7x7: taps in 4x4 register chunks (16-bit staging converts element by element).
  if (p.elem_size == 4 && p.KH * p.KW >= kLargeMinTaps && depthwise_large_can_run(p)) {
    return Algo::kDepthwiseLarge;
  }
  // Other stride-1 depthwise (larger or dilated filters, other paddings): a 64x64 tile + halo.
  if (depthwise_nchw_can_run(p)) return Algo::kDepthwiseNchw;
  // Image stems (1-4 input channels, 3x3 / 5x5 / 7x7, stride 1 or 2, up to 64 output channels):
  // direct, taps and window staged once a tile. H100, batch 16, 224x224 (benchmarks/
  // stem_layers.py, fp32 / bf16, NCHW and channels_last): MobileNetV3's 3 -> 16 3x3 s2 ran
  // 20-28 us against igemm's 42-75 and cuDNN's 27-32; 3 -> 32 3x3 s2 31-40 us against igemm's
  // 42-84; 3 -> 64 3x3 s1 over NCHW 128 / 131 us against igemm's 366 / 226. The 7x7 s2 layers
  // (ResNet: igemm 89-192 us against 172-201 here) and channels_last 3 -> 64 3x3 s1 (126-220
  // against 137-225) stay on igemm.
  if (!p.depthwise1() && stem_direct_can_run(p) &&
      (p.O <= 32 || (p.KH == 3 && p.stride_h == 1 && p.x_sw == 1) || !igemm_preferred(p))) {
    return Algo::kStemDirect;
  }
  // Dense channels (groups = 1, aligned O, sm_90; aligned C or a stem): the tensor cores.
  if (igemm_preferred(p)) return Algo::kIgemm;
  // Grouped / dense channels, strides, multipliers: one filter row's input region staged.
  if (general_staged_can_run(p)) return Algo::kGeneralStaged;
  // Everything else (huge stride or dilation): direct reads.
  return Algo::kGeneralDirect;
}

// The automatic choice, or the forced one (core/algo_table.h) when it can run the shape.
Algo choose(const ConvProblem& p) {
  return kTable.choose<Algo>(
      [&](Algo a, Algo& chosen) {
        chosen = a;
        return can_run(a, p);
      },
      [&] { return choose_auto(p); },
      [&] {
        return detail::check_msg("C=", p.C, ", O=", p.O, ", groups=", p.groups, ", kernel=", p.KH,
                                 "x", p.KW, ", stride=", p.stride_h, "x", p.stride_w,
                                 ", dilation=", p.dil_h, "x", p.dil_w, ", padding=", p.pad_h,
                                 "x", p.pad_w);
      });
}

// Whether an algorithm applies the fused ops' epilogue (p.act, p.r) itself, in its accumulator;
// the others compute conv + bias and conv2d_cuda_run adds the elementwise pass
// (conv_epilogue_run). A direct kernel that gains a native epilogue joins here.
bool algorithm_fuses_epilogue(Algo a) {
  switch (a) {
    case Algo::kIgemm: return true;  // CUTLASS epilogue (conv/igemm/epilogue.cuh)
    case Algo::kDepthwiseStrided:     // act(acc + bias + residual) in registers
    case Algo::kDepthwiseNhwcTile:
    case Algo::kDepthwiseSmall:
    case Algo::kDepthwiseNhwcReg:
    case Algo::kPointwiseNchw:
    case Algo::kStemDirect: return true;
    default: return false;
  }
}

template <typename T>
void run(Algo a, const ConvProblem& p, cudaStream_t stream) {
  switch (a) {
    case Algo::kDepthwiseNhwc: return depthwise_nhwc_run<T>(p, stream);
    case Algo::kDepthwiseNhwcTile: return depthwise_nhwc_tile_run<T>(p, stream);
    case Algo::kDepthwiseNhwcReg: return depthwise_nhwc_reg_run<T>(p, stream);
    case Algo::kDepthwiseStrided: return depthwise_strided_run<T>(p, stream);
    case Algo::kDepthwiseSmall: return depthwise_small_run<T>(p, stream);
    case Algo::kDepthwiseRows: return depthwise_rows_run<T>(p, stream);
    case Algo::kDepthwiseTma: return depthwise_tma_run<T>(p, stream);
    case Algo::kDepthwisePlane: return depthwise_plane_run<T>(p, stream);
    case Algo::kDepthwiseLarge: return depthwise_large_run<T>(p, stream);
    case Algo::kDepthwiseNchw: return depthwise_nchw_run<T>(p, stream);
    case Algo::kGeneralStaged: return general_staged_run<T>(p, stream);
    case Algo::kGeneralDirect: return general_direct_run<T>(p, stream);
    case Algo::kStemDirect: return stem_direct_run<T>(p, stream);
    case Algo::kPointwiseNchw: return pointwise_nchw_run(p, stream);
    case Algo::kIgemm:  // run before the dtype dispatch (run_call)
    case Algo::kCudnn:
    case Algo::kAtenDepthwise: return;
  }
}

// One whole call by algorithm a on `stream`: the convolution with its bias, then, after an
// algorithm without a native epilogue, one elementwise pass (conv/epilogue.h; one more rounding of
// y than a native epilogue): y = act(y + r) for the fused ops, and for the library algorithms
// (cuDNN, ATen's depthwise kernel), which compute the convolution alone, y = act(y + bias + r)
// whenever there is a bias.
// side: the race's side that runs the cudnn algorithm (conv/vendor.h): kCudnn with cuDNN's
// algorithm search (the race and the calls it hands over), kCudnnNhwc through channels_last
// copies, anything else (a forced "cudnn", kCudnnHeuristic) as torch's flags say.
void run_call(Algo a, const ConvProblem& p, const at::Tensor& x, cudaStream_t stream,
              ConvVendor side = ConvVendor::kGpukern) {
  bool epilogue_done = algorithm_fuses_epilogue(a);
  if (a == Algo::kIgemm) {
    igemm_run(p, x);  // its own dtype switch, layouts and workspace
  } else if (a == Algo::kCudnn && side == ConvVendor::kCudnnNhwc) {
    epilogue_done = cudnn_nhwc_run(p);
  } else if (a == Algo::kCudnn) {
    cudnn_conv_run(p, side == ConvVendor::kCudnn);
  } else if (a == Algo::kAtenDepthwise) {
    aten_depthwise_run(p);
  } else {
    GK_DISPATCH_FLOAT_CUDA(x.scalar_type(), kOp, [&] { run<scalar_t>(a, p, stream); });
  }
  const bool with_bias = a == Algo::kCudnn || a == Algo::kAtenDepthwise;
  if ((p.fused() || (with_bias && p.b != nullptr)) && !epilogue_done) {
    GK_DISPATCH_FLOAT_CUDA(x.scalar_type(), kOp,
                           [&] { conv_epilogue_run<scalar_t>(p, stream, with_bias); });
  }
}

// Whether the automatic choice a may be raced against the libraries (conv/vendor.h).
bool raceable(Algo a, const ConvProblem& p) {
  return a != Algo::kCudnn && a != Algo::kAtenDepthwise && conv_race_enabled() &&
         !kTable.forced() && conv_race_has_side(p);
}

// The algorithm a race verdict names.
Algo algo_of(ConvVendor v, Algo ours) {
  switch (v) {
    case ConvVendor::kCudnn:
    case ConvVendor::kCudnnHeuristic:
    case ConvVendor::kCudnnNhwc:
    case ConvVendor::kCudnnFused: return Algo::kCudnn;
    case ConvVendor::kAtenDepthwise: return Algo::kAtenDepthwise;
    case ConvVendor::kGpukern: return ours;
  }
  return ours;
}

}  // namespace

std::string conv2d_cuda_algorithm(const ConvProblem& p) {
  const Algo a = choose(p);
  if (!raceable(a, p)) return kTable.name(a);
  return kTable.name(algo_of(conv_race_verdict_query(p).value_or(ConvVendor::kGpukern), a));
}

at::Tensor conv2d_cuda_run(const ConvProblem& p, const at::Tensor& x) {
  const Algo a = choose(p);
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream(x.device().index()).stream();
  if (igemm_built()) conv::blas_prepare_handle(stream);  // before any capture needs it
  return conv_run_raced(p, raceable(a, p), stream, [&](ConvVendor v) {
    run_call(algo_of(v, a), p, x, stream, v);
  });
}

}  // namespace gpukern
