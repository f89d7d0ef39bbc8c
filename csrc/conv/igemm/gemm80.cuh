#pragma once
// fp32 (TF32) 1x1 convolutions over NCHW planes as batched GEMMs on CUTLASS 2.x's SM80-style
// tensor-core kernels (cp.async, mma.sync), with the epilogue as a CUTLASS epilogue visitor tree:
// the GemmForm kNchw problem of conv/igemm/config.h (y[n] (O x HW) = W (O x C) @ x[n] (C x HW),
// bias per row), which the SM90 GEMMs cannot run in TF32.
//
// Why: over NCHW the pixels are the contiguous dim of x, so x is an N-major B operand, and TF32
// wgmma takes K-major operands only. mma.sync reads its fragments from shared memory, where
// either layout serves. cuDNN runs MobileNetV3's fp32 NCHW 1x1 layers on this kind of kernel
// (CUTLASS's s1688gemm_64x64_32x6_nn_align4, profiled with ncu on an H200), then leaves bias,
// residual and activation to separate passes; here they run in the epilogue.
//
// The tree (threadblock/fusion/visitors.hpp): D = store(act(acc + bias[row] [+ residual])), in
// fp32, rounded once at the store. The bias is a column broadcast (null: zeros); the residual an
// auxiliary load with D's strides (a second instantiation: the aux load has no null fallback);
// the activation a run-time ActKind (RuntimeActVisitor below: CUTLASS's VisitorCompute takes no
// arguments).
//
// Tile 64 x 64 (4 warps of 32 x 32), K step 32 or 16 channels, 6 stages, batched over the images
// (grid z), the weight shared (batch stride 0).
// Contract: kAlign elements per copy along K for A (C % kAlign == 0, a_ld too) and along the
// pixels for B, D and the residual (H*W % kAlign == 0, b_ld, b_batch, d_ld, d_batch too); base
// pointers aligned to kAlign elements (the host side checks: gemm_forms.cpp try_gemm80).
#include "conv/igemm/config.h"
#include "cutlass/cutlass.h"
#include "cutlass/gemm/device/gemm_universal.h"
// (the visitor headers after the 2.x GEMM ones: they use names those declare)
#include "cutlass/epilogue/threadblock/fusion/visitors.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/kernel/default_gemm_universal_with_visitor.h"
#include "device/activation.cuh"

namespace gpukern {
namespace conv {

// A visitor-tree node applying the run-time activation (an ActKind) to its one child's fragment.
template <class ElementOutput>
struct RuntimeActVisitor {
  struct Arguments {
    int act = 0;
  };
  using Params = Arguments;
  struct SharedStorage {};

  template <class ProblemShape>
  static constexpr Params to_underlying_arguments(ProblemShape const&, Arguments const& args,
                                                  void*) {
    return args;
  }
  template <class ProblemShape>
  static size_t get_workspace_size(ProblemShape const&, Arguments const&) {
    return 0;
  }

  CUTLASS_HOST_DEVICE RuntimeActVisitor() {}
  CUTLASS_HOST_DEVICE RuntimeActVisitor(Params const& params, SharedStorage const&)
      : params_ptr(&params) {}
  Params const* params_ptr = nullptr;

  struct Callbacks : cutlass::epilogue::threadblock::detail::EmptyCallbacks {
    int act = 0;
    template <class ElementAccumulator, class ElementInput, int FragmentSize>
    CUTLASS_DEVICE cutlass::Array<ElementOutput, FragmentSize> visit(
        int, int, int, int, cutlass::Array<ElementAccumulator, FragmentSize> const&,
        cutlass::Array<ElementInput, FragmentSize> const& in) {
      cutlass::Array<ElementOutput, FragmentSize> out;
      with_activation(act, [&](auto kind) {
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < FragmentSize; ++i) {
          out[i] = static_cast<ElementOutput>(
              activate_k<decltype(kind)::value>(static_cast<float>(in[i])));
        }
      });
      return out;
    }
  };

  template <class ProblemShape>
  CUTLASS_DEVICE auto get_callbacks(cutlass::gemm::GemmCoord, int, ProblemShape) {
    Callbacks c;
    c.act = params_ptr->act;
    return c;
  }
};

// Element: float (TF32 math; the template also takes cutlass::bfloat16_t and cutlass::half_t with
// a 16-wide instruction, not instantiated: on an H200 they lost to the SM90 forms). Residual:
// whether the tree reads one. kTileK: channels per stage.
template <class Element, int kAlign, bool Residual, int kTileK = 32, int kStages = 6>
struct Gemm80Nchw {
  static constexpr bool kFp32 = sizeof(Element) == 4;
  using ThreadblockShape = cutlass::gemm::GemmShape<64, 64, kTileK>;
  using WarpShape = cutlass::gemm::GemmShape<32, 32, kTileK>;
  using InstructionShape = cutlass::gemm::GemmShape<16, 8, kFp32 ? 8 : 16>;

  using ThreadMap = cutlass::epilogue::threadblock::OutputTileThreadLayout<
      ThreadblockShape, WarpShape, Element, kAlign, /*EpilogueStages=*/1>;
  using StrideD = cute::Stride<int64_t, cute::_1, int64_t>;  // (row = O, pixel, image)
  using Accum = cutlass::epilogue::threadblock::VisitorAccFetch;
  using Bias = cutlass::epilogue::threadblock::VisitorColBroadcast<
      ThreadMap, Element, cute::Stride<cute::_1, cute::_0, int32_t>>;
  using Add = cutlass::epilogue::threadblock::VisitorCompute<
      cutlass::plus, float, float, cutlass::FloatRoundStyle::round_to_nearest>;
  using WithBias = cutlass::epilogue::threadblock::Sm80EVT<Add, Accum, Bias>;
  using ResidualLoad = cutlass::epilogue::threadblock::VisitorAuxLoad<ThreadMap, Element, StrideD>;
  using WithResidual = cutlass::epilogue::threadblock::Sm80EVT<Add, WithBias, ResidualLoad>;
  using Sum = cute::conditional_t<Residual, WithResidual, WithBias>;
  using Activated = cutlass::epilogue::threadblock::Sm80EVT<RuntimeActVisitor<float>, Sum>;
  using Store = cutlass::epilogue::threadblock::VisitorAuxStore<
      ThreadMap, Element, cutlass::FloatRoundStyle::round_to_nearest, StrideD>;
  using Tree = cutlass::epilogue::threadblock::Sm80EVT<Store, Activated>;

  using Kernel = typename cutlass::gemm::kernel::DefaultGemmWithVisitor<
      Element, cutlass::layout::RowMajor, cutlass::ComplexTransform::kNone, kAlign,  // A: W
      Element, cutlass::layout::RowMajor, cutlass::ComplexTransform::kNone, kAlign,  // B: x[n]
      Element, cutlass::layout::RowMajor, kAlign, float, float,
      cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80, ThreadblockShape, WarpShape,
      InstructionShape, Tree, cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>,
      kStages, cutlass::arch::OpMultiplyAdd, /*EpilogueStages=*/1>::GemmKernel;
  using Op = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

  static typename Op::Arguments arguments(const GemmProblem& p, const IgemmBuffers& b) {
    const StrideD d_stride{p.d_ld, cute::_1{}, p.d_batch};
    typename Bias::Arguments bias{static_cast<Element const*>(b.bias), Element(0),
                                  {cute::_1{}, cute::_0{}, int32_t{0}}};
    typename Sum::Arguments sum;
    if constexpr (Residual) {
      sum = {{{}, bias, {}},
             {static_cast<Element*>(const_cast<void*>(b.residual)), Element(0), d_stride},
             {}};
    } else {
      sum = {{}, bias, {}};
    }
    typename Tree::Arguments tree{{sum, {b.act}}, {static_cast<Element*>(b.y), d_stride}};
    return typename Op::Arguments(
        cutlass::gemm::GemmUniversalMode::kBatched, {p.M, p.N, p.K}, p.L, tree,
        static_cast<Element const*>(b.w), static_cast<Element const*>(b.x), nullptr, nullptr,
        /*batch_stride_A=*/0, p.b_batch, 0, p.d_batch, p.a_ld, p.b_ld, 0, 0);
  }

  static bool can_implement(const GemmProblem& p) {
    if (p.form != GemmForm::kNchw) return false;
    IgemmBuffers b;
    b.x = b.w = b.bias = b.residual = reinterpret_cast<const void*>(uintptr_t{256});
    b.y = reinterpret_cast<void*>(uintptr_t{256});
    return Op::can_implement(arguments(p, b)) == cutlass::Status::kSuccess;
  }

  static size_t workspace_bytes(const GemmProblem& p) {
    return Op::get_workspace_size(arguments(p, IgemmBuffers{}));
  }

  static int run(const GemmProblem& p, const IgemmBuffers& b, void* stream) {
    Op op;
    const auto args = arguments(p, b);
    cutlass::Status s = op.initialize(args, b.workspace, static_cast<cudaStream_t>(stream));
    if (s == cutlass::Status::kSuccess) s = op.run(static_cast<cudaStream_t>(stream));
    return s == cutlass::Status::kSuccess ? 0 : static_cast<int>(s);
  }
};

template <class Gemm>
constexpr GemmKernel gemm80_kernel(const char* name, IgemmDtype dtype) {
  return GemmKernel{name, dtype, GemmForm::kNchw, &Gemm::can_implement, &Gemm::workspace_bytes,
                    &Gemm::run};
}

}  // namespace conv
}  // namespace gpukern
