#pragma once
// CUTLASS 4.2 SM90 implicit-GEMM convolution (fprop), one configuration per instantiation, used
// through CUTLASS's API: conv::collective::CollectiveBuilder (Sm90, kFprop, the non-persistent
// KernelImplicitTmaWarpSpecializedSm90 schedule), an epilogue CollectiveBuilder with the fusion
// op LinCombPerColBiasEltAct (D = act(alpha * acc + bias[o] + beta * C), C the residual, the
// activation chosen at run time: conv/igemm/epilogue.cuh), conv::kernel::ConvUniversal and
// conv::device::ConvUniversalAdapter. Torch-free; included only by igemm_<dtype>.cu, which are
// compiled for sm_90a with -DGPUKERN_WITH_CUTLASS and define NDEBUG first (device asserts make
// ptxas serialise the wgmma instructions, warning C7510).
//
// Contract (checked by can_implement, whose verdict the host side consults before every run):
// - x [N, H, W, C], w [O, R, S, C], y [N, P, Q, O], channels the unit-stride dim, every other
//   stride and the base pointers 16-byte aligned (C and O multiples of 8 for 16-bit types, 4 for
//   fp32); bias: O contiguous elements of the output type, 16-byte aligned, or nullptr.
// - the TMA im2col limits of a 2-D load: paddings in [0, 127], (R - 1) * dil_h and
//   (S - 1) * dil_w below 255 (CUTLASS's can_implement).
// The fused bias is a row broadcast over the GEMM's N (= O) columns; a null bias pointer reads 0.
// The residual C has y's strides. Without one, beta is 0 and C points at y: CUTLASS's epilogue
// then skips C's loads (is_C_load_needed is false for a zero beta) and clears the fragment.
// NchwOut = true swaps the TMA epilogue for conv/igemm/epilogue_nchw.cuh's (y and the residual in
// any [N, O, P, Q] strides, IgemmProblem's y_sn / y_so / y_sh / y_sw; no alignment needed).
#include <cstddef>
#include <cstdint>

#include "conv/igemm/cutlass_host.cuh"  // first: before any CUTLASS header
#include "cutlass/cutlass.h"
#include "cutlass/kernel_hardware_info.hpp"  // before the builders (sm100 headers use it)
#include "cute/tensor.hpp"
#include "cutlass/conv/collective/collective_builder.hpp"
#include "cutlass/conv/convnd_problem_shape.hpp"
#include "cutlass/conv/device/conv_universal_adapter.hpp"
#include "cutlass/conv/kernel/conv_universal.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/operations.hpp"
#include "cutlass/numeric_types.h"
#undef cuTensorMapEncodeTiled  // conv/igemm/cutlass_host.cuh
#undef cuTensorMapEncodeIm2col

#include "conv/igemm/config.h"
#include "conv/igemm/epilogue.cuh"

namespace gpukern {
namespace conv {

// conv/igemm/epilogue_nchw.cuh, included by the translation units that instantiate NchwOut kernels
// only (igemm_nchw_<dtype>.cu), so that a change to it recompiles only those.
template <class Element, int TileM, int TileN>
class NchwStoreEpilogue;

// Element: cutlass::bfloat16_t, cutlass::half_t or float (TF32 math). Tile M x N x K in elements.
// NchwOut: the epilogue writes y of any [N, O, P, Q] strides from the accumulators
// (conv/igemm/epilogue_nchw.cuh: IgemmProblem's y_sn, y_so, y_sh, y_sw) instead of the TMA
// epilogue's NHWC store.
template <class Element, int TileM, int TileN, int TileK, int ClusterM = 1, int ClusterN = 1,
          bool NchwOut = false>
struct IgemmConv {
  using ElementAcc = float;
  using ElementCompute = float;
  // 16-byte TMA accesses: 8 16-bit or 4 fp32 elements.
  static constexpr int kAlign = 128 / cutlass::sizeof_bits<Element>::value;
  using TileShape = cute::Shape<cute::Int<TileM>, cute::Int<TileN>, cute::Shape<cute::Int<TileK>>>;
  // ClusterM x ClusterN CTAs per cluster: the filter tile (B) multicast to the ClusterM CTAs
  // along M, the activation tile (A) to the ClusterN along N.
  using ClusterShape = cute::Shape<cute::Int<ClusterM>, cute::Int<ClusterN>, cute::_1>;

  using Fusion = cutlass::epilogue::fusion::LinCombPerColBiasEltAct<
      RuntimeActivation, Element /*out*/, ElementCompute, Element /*bias*/, Element /*source*/,
      ElementCompute>;

  using TmaEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, ElementAcc, ElementCompute,
      Element, cutlass::layout::TensorNHWC, kAlign,  // C: the residual
      Element, cutlass::layout::TensorNHWC, kAlign,  // D
      cutlass::epilogue::TmaWarpSpecialized, Fusion>::CollectiveOp;
  using NchwEpilogue = cutlass::epilogue::collective::detail::Sm90TmaWarpSpecializedAdapter<
      NchwStoreEpilogue<Element, TileM, TileN>>;
  using CollectiveEpilogue = cute::conditional_t<NchwOut, NchwEpilogue, TmaEpilogue>;

  using CollectiveMainloop = typename cutlass::conv::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, cutlass::conv::Operator::kFprop,
      Element, cutlass::layout::TensorNHWC, kAlign,  // activations
      Element, cutlass::layout::TensorNHWC, kAlign,  // filter (KRSC)
      ElementAcc, TileShape, ClusterShape,
      cutlass::conv::collective::StageCountAutoCarveout<
          NchwOut ? 0 : static_cast<int>(sizeof(typename CollectiveEpilogue::SharedStorage))>,
      cutlass::conv::KernelImplicitTmaWarpSpecializedSm90>::CollectiveOp;

  using ProblemShape =
      cutlass::conv::ConvProblemShape<CollectiveMainloop::DispatchPolicy::ConvOp,
                                      CollectiveMainloop::DispatchPolicy::NumSpatialDimensions>;
  using Kernel =
      cutlass::conv::kernel::ConvUniversal<ProblemShape, CollectiveMainloop, CollectiveEpilogue>;
  using Op = cutlass::conv::device::ConvUniversalAdapter<Kernel>;
  static_assert(ProblemShape::RankS == 2, "the path runs every problem as 2-D (1-D is H = 1)");

  static ProblemShape problem_shape(const IgemmProblem& p) {
    using Ext = typename ProblemShape::TensorExtent;
    using Str = typename ProblemShape::TensorStride;
    using Pad = typename ProblemShape::ShapePadding;
    using Trv = typename ProblemShape::TraversalStride;
    using Dil = typename ProblemShape::ShapeDilation;
    // Activations and filter in CUTLASS's [n, h, w, c] / [k, r, s, c] order; the output's strides
    // (stride_xformed_act) are y's, not packed ones.
    // NchwOut: the epilogue takes y's strides itself; the shape gets packed NHWC ones.
    const int64_t q_s = NchwOut ? p.O : p.y_sw;
    const int64_t p_s = NchwOut ? int64_t{p.Q} * p.O : p.y_sh;
    const int64_t n_s = NchwOut ? int64_t{p.P} * p.Q * p.O : p.y_sn;
    return ProblemShape(cutlass::conv::Mode::kCrossCorrelation, Ext{p.N, p.H, p.W, p.C},
                        Str{p.x_sn, p.x_sh, p.x_sw, 1}, Ext{p.O, p.R, p.S, p.C},
                        Str{p.w_so, p.w_sr, p.w_ss, 1}, Str{n_s, p_s, q_s, 1},
                        Pad{p.pad_h, p.pad_w}, Pad{p.pad_h_hi, p.pad_w_hi},
                        Trv{p.stride_h, p.stride_w}, Dil{p.dil_h, p.dil_w}, /*groups=*/1);
  }

  static typename Op::Arguments arguments(const IgemmProblem& p, const IgemmBuffers& b) {
    const ProblemShape shape = problem_shape(p);
    cutlass::KernelHardwareInfo hw;
    hw.device_id = p.device;
    hw.sm_count = p.sm_count;
    if constexpr (NchwOut) {
      typename NchwStoreEpilogue<Element, TileM, TileN>::Arguments epi;
      epi.alpha = b.alpha;
      epi.bias = static_cast<const Element*>(b.bias);
      epi.residual = static_cast<const Element*>(b.residual);
      epi.y = static_cast<Element*>(b.y);
      epi.s_n = p.y_sn;
      epi.s_o = p.y_so;
      epi.s_p = p.y_sh;
      epi.s_q = p.y_sw;
      epi.PQ = p.P * p.Q;
      epi.Q = p.Q;
      epi.act = b.act;
      // 16-byte vectors of pixels: packed planes, image and channel strides and both pointers
      // aligned to them.
      constexpr int64_t kVec = 16 / sizeof(Element);
      epi.vec_ok = p.y_sw == 1 && p.y_sh == p.Q && p.y_sn % kVec == 0 && p.y_so % kVec == 0 &&
                   reinterpret_cast<uintptr_t>(b.y) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(b.residual) % 16 == 0;
      return typename Op::Arguments{
          shape, {static_cast<const Element*>(b.x), static_cast<const Element*>(b.w)}, epi, hw};
    } else {
      using StrideD = typename Kernel::StrideD;
      // D's ((Q, P, N), O, batch) strides from the problem's output strides ([n, p, q, k]).
      StrideD stride_d{};
      cute::for_each(cute::make_seq<cute::rank<0>(StrideD{})>{}, [&](auto i) {
        cute::get<0, i>(stride_d) = shape.stride_C[ProblemShape::RankT - 2 - i];
      });
      typename Op::Arguments args{
          shape,
          {static_cast<const Element*>(b.x), static_cast<const Element*>(b.w)},
          {{},
           static_cast<const Element*>(b.residual != nullptr ? b.residual : b.y),
           stride_d,
           static_cast<Element*>(b.y),
           stride_d},
          hw};
      args.epilogue.thread.alpha = b.alpha;
      args.epilogue.thread.beta = b.residual != nullptr ? 1.0f : 0.0f;
      args.epilogue.thread.bias_ptr = static_cast<const Element*>(b.bias);
      args.epilogue.thread.activation.kind = b.act;
      return args;
    }
  }

  // The shape's output extents must be the caller's: the host side derives pad_*_hi from them.
  static bool can_implement(const IgemmProblem& p) {
    const ProblemShape shape = problem_shape(p);
    if (shape.shape_C[0] != p.N || shape.shape_C[1] != p.P || shape.shape_C[2] != p.Q ||
        shape.shape_C[3] != p.O) {
      return false;
    }
    // Aligned dummy pointers: only the shape and strides are judged here.
    IgemmBuffers b;
    b.x = b.w = b.bias = reinterpret_cast<const void*>(uintptr_t{256});
    b.y = reinterpret_cast<void*>(uintptr_t{256});
    return Op::can_implement(arguments(p, b)) == cutlass::Status::kSuccess;
  }

  static size_t workspace_bytes(const IgemmProblem& p) {
    return Op::get_workspace_size(arguments(p, IgemmBuffers{}));
  }

  // Arguments built once; Params and the launch through conv/igemm/cutlass_host.cuh.
  static int run(const IgemmProblem& p, const IgemmBuffers& b, void* stream) {
    return run_cutlass<Op, Kernel>(arguments(p, b), b.workspace, p.device,
                                   static_cast<cudaStream_t>(stream));
  }
};

// The kernel-table entry of one configuration (config.h).
template <class Conv>
constexpr IgemmKernel igemm_kernel(const char* name, IgemmDtype dtype) {
  return IgemmKernel{name, dtype, &Conv::can_implement, &Conv::workspace_bytes, &Conv::run};
}

}  // namespace conv
}  // namespace gpukern
