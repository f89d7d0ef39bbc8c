#pragma once
// CUTLASS 4.2 SM90 GEMM for 1x1, stride-1, unpadded convolutions (config.h, "1x1 convolutions as
// plain GEMMs"), one configuration per instantiation, used through CUTLASS's API:
// gemm::collective::CollectiveBuilder (Sm90, the persistent KernelTmaWarpSpecializedPingpong
// schedule), an epilogue CollectiveBuilder (TmaWarpSpecialized) with the fusion op
// LinCombPerColBiasEltAct (kNhwc) or LinCombPerRowBiasEltAct (kNchw):
//   D = act(alpha * acc + bias + beta * C), C the residual (beta 1) or none (beta 0),
// gemm::kernel::GemmUniversal and gemm::device::GemmUniversalAdapter. Torch-free; included only by
// gemm_<dtype>.cu, which are compiled for sm_90a with -DGPUKERN_WITH_CUTLASS and define NDEBUG
// first (device asserts make ptxas serialise the wgmma instructions, warning C7510).
//
// Schedule: ping-pong. Its two consumer warp groups each own a whole output tile and take turns on
// the tensor cores, so one warp group's epilogue (residual load, bias, activation, TMA store) runs
// while the other's mainloop does. The 1x1 layers this serves are mostly memory- and
// epilogue-bound (ResNet-50's: K = 64..2048, often a single K step per tile), where the
// cooperative schedule would leave the tensor cores idle for the whole epilogue of every tile
// (only its producer warp prefetches the next tile meanwhile).
//
// Operands (element strides; see config.h for the forms):
// - kNhwc: A = x rows, M x K, K contiguous (RowMajor A, a_ld); B = the weight [O, C], N x K with K
//   contiguous (ColumnMajor K x N B, b_ld); C and D M x N row-major (d_ld). L = 1.
// - kNchw: A = the weight [O, C], M x K row-major (a_ld, a_batch: 0 = one weight for every image);
//   B = x[l] viewed [C, H*W], K x N with N contiguous (RowMajor B, b_ld, b_batch); C and D = y[l]
//   [O, H*W] row-major (d_ld, d_batch). L = the batch.
// Bias: O contiguous elements of the output type (16-byte aligned) or nullptr (reads 0), per GEMM
// column (kNhwc) or per GEMM row (kNchw).
#include <cstddef>
#include <cstdint>
#include <limits>

#include "conv/igemm/cutlass_host.cuh"  // first: before any CUTLASS header
#include "cutlass/cutlass.h"
#include "cutlass/kernel_hardware_info.hpp"  // before the builders (sm100 headers use it)
#include "cute/tensor.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/operations.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/gemm.h"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/numeric_types.h"
#undef cuTensorMapEncodeTiled  // conv/igemm/cutlass_host.cuh
#undef cuTensorMapEncodeIm2col

#include "conv/igemm/config.h"
#include "conv/igemm/epilogue.cuh"

namespace gpukern {
namespace conv {

// Element: cutlass::bfloat16_t, cutlass::half_t or float (TF32 math; kNhwc only: TF32 wgmma reads
// both operands K-major). Tile M x N x K in elements.
// The mainloop / epilogue schedule pair of a GEMM. Ping-pong (the default): two consumer warp
// groups each own a tile, one's epilogue overlapping the other's mainloop. Cooperative: both
// warp groups split one tile (M >= 128 per tile).
struct PingpongSchedule {
  using Kernel = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
  using Epilogue = cutlass::epilogue::TmaWarpSpecialized;
};
struct CooperativeSchedule {
  using Kernel = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
  using Epilogue = cutlass::epilogue::TmaWarpSpecializedCooperative;
};

template <class Element, GemmForm kForm, int TileM, int TileN, int TileK,
          class Schedule = PingpongSchedule>
struct IgemmGemm {
  static_assert(kForm == GemmForm::kNhwc || cutlass::sizeof_bits<Element>::value == 16,
                "kNchw reads B N-major: 16-bit types only (TF32 wgmma needs K-major operands)");

  using ElementAcc = float;
  using ElementCompute = float;
  // 16-byte TMA accesses: 8 16-bit or 4 fp32 elements.
  static constexpr int kAlign = 128 / cutlass::sizeof_bits<Element>::value;
  static constexpr int kElemBytes = cutlass::sizeof_bits<Element>::value / 8;

  using LayoutA = cutlass::layout::RowMajor;  // K-major A in both forms
  using LayoutB = cute::conditional_t<kForm == GemmForm::kNhwc, cutlass::layout::ColumnMajor,
                                      cutlass::layout::RowMajor>;
  using LayoutCD = cutlass::layout::RowMajor;

  using TileShape = cute::Shape<cute::Int<TileM>, cute::Int<TileN>, cute::Int<TileK>>;
  using ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>;

  // Bias per output channel: a GEMM column for kNhwc, a GEMM row for kNchw.
  using Fusion = cute::conditional_t<
      kForm == GemmForm::kNhwc,
      cutlass::epilogue::fusion::LinCombPerColBiasEltAct<RuntimeActivation, Element /*out*/,
                                                         ElementCompute, Element /*bias*/,
                                                         Element /*source C*/, ElementCompute>,
      cutlass::epilogue::fusion::LinCombPerRowBiasEltAct<RuntimeActivation, Element /*out*/,
                                                         ElementCompute, Element /*bias*/,
                                                         Element /*source C*/, ElementCompute>>;

  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, ElementAcc, ElementCompute,
      Element, LayoutCD, kAlign,  // C: the residual, D's layout
      Element, LayoutCD, kAlign,  // D
      typename Schedule::Epilogue, Fusion>::CollectiveOp;

  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
      Element, LayoutA, kAlign,
      Element, LayoutB, kAlign,
      ElementAcc, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<
          static_cast<int>(sizeof(typename CollectiveEpilogue::SharedStorage))>,
      typename Schedule::Kernel>::CollectiveOp;

  using ProblemShape = cute::Shape<int, int, int, int>;  // M, N, K, L
  using Kernel =
      cutlass::gemm::kernel::GemmUniversal<ProblemShape, CollectiveMainloop, CollectiveEpilogue>;
  using Op = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

  using StrideA = typename Kernel::StrideA;
  using StrideB = typename Kernel::StrideB;
  using StrideC = typename Kernel::StrideC;
  using StrideD = typename Kernel::StrideD;

  // The batch stride an operand's TMA descriptor gets. With one batch (L = 1) the caller's value
  // (usually 0) is never used to address anything; a packed stride (rows * ld, 16-byte aligned
  // with ld) keeps every descriptor stride non-zero. With L > 1 the caller's stride is used as
  // given (kNchw's weight: 0, the same matrix for every image).
  static int64_t batch_stride(const GemmProblem& p, int64_t batch, int64_t rows, int64_t ld) {
    return p.L == 1 ? rows * ld : batch;
  }

  static StrideA stride_a(const GemmProblem& p) {
    // (M, K, L): K unit-stride, rows a_ld apart.
    return StrideA{p.a_ld, cute::Int<1>{}, batch_stride(p, p.a_batch, p.M, p.a_ld)};
  }

  static StrideB stride_b(const GemmProblem& p) {
    if constexpr (kForm == GemmForm::kNhwc) {
      // (N, K, L): K unit-stride, weight rows (output channels) b_ld apart.
      return StrideB{p.b_ld, cute::Int<1>{}, batch_stride(p, p.b_batch, p.N, p.b_ld)};
    } else {
      // (N, K, L): N (pixels) unit-stride, channels b_ld apart, images b_batch apart.
      return StrideB{cute::Int<1>{}, p.b_ld, batch_stride(p, p.b_batch, p.K, p.b_ld)};
    }
  }

  static StrideD stride_d(const GemmProblem& p) {
    // (M, N, L): N unit-stride, rows d_ld apart. C (the residual) has the same strides.
    return StrideD{p.d_ld, cute::Int<1>{}, batch_stride(p, p.d_batch, p.M, p.d_ld)};
  }

  static typename Op::Arguments arguments(const GemmProblem& p, const IgemmBuffers& b) {
    // IgemmBuffers: x is A for kNhwc and B for kNchw, w the other operand.
    const void* a = kForm == GemmForm::kNhwc ? b.x : b.w;
    const void* bb = kForm == GemmForm::kNhwc ? b.w : b.x;
    auto* d = static_cast<Element*>(b.y);
    // No residual: beta 0, and C points at D only to give its TMA descriptor a valid address:
    // with beta == 0 the epilogue skips every C load (is_C_load_needed is false) and clears C's
    // register fragment instead.
    const bool has_residual = b.residual != nullptr;
    const auto* c = has_residual ? static_cast<const Element*>(b.residual) : d;
    const StrideD sd = stride_d(p);
    const StrideC sc = sd;

    cutlass::KernelHardwareInfo hw;
    hw.device_id = p.device;
    hw.sm_count = p.sm_count;
    typename Op::Arguments args{
        p.L == 1 ? cutlass::gemm::GemmUniversalMode::kGemm
                 : cutlass::gemm::GemmUniversalMode::kBatched,
        ProblemShape{p.M, p.N, p.K, p.L},
        {static_cast<const Element*>(a), stride_a(p), static_cast<const Element*>(bb),
         stride_b(p)},
        {{}, c, sc, d, sd},
        hw};
    auto& fusion = args.epilogue.thread;
    fusion.alpha = b.alpha;
    fusion.beta = has_residual ? 1.0f : 0.0f;
    fusion.bias_ptr = static_cast<const Element*>(b.bias);
    fusion.activation.kind = b.act;
    return args;
  }

  // Our own limits first (CUTLASS does not check these), then CUTLASS's verdict.
  static bool shape_ok(const GemmProblem& p) {
    if (p.form != kForm) return false;
    if (p.M <= 0 || p.N <= 0 || p.K <= 0 || p.L <= 0) return false;
    constexpr int64_t kMaxInt = std::numeric_limits<int32_t>::max();
    // Leading dimensions: 16-byte multiples, at least one row long, and under 2^31 elements.
    const int64_t a_row = p.K;                                     // A is M x K, K contiguous
    const int64_t b_row = kForm == GemmForm::kNhwc ? p.K : p.N;    // N x K or K x N
    const int64_t d_row = p.N;
    const int64_t lds[3] = {p.a_ld, p.b_ld, p.d_ld};
    const int64_t rows[3] = {a_row, b_row, d_row};
    for (int i = 0; i < 3; ++i) {
      if (lds[i] < rows[i] || lds[i] > kMaxInt || lds[i] % kAlign != 0) return false;
    }
    if (p.L > 1) {
      // Batch strides: non-negative 16-byte multiples (A's may be 0: the same weight for every
      // image; the others must not be, or the images would overlap in y).
      const int64_t batches[3] = {p.a_batch, p.b_batch, p.d_batch};
      for (int i = 0; i < 3; ++i) {
        if (batches[i] < 0 || batches[i] % kAlign != 0) return false;
      }
      if (p.d_batch == 0) return false;
    }
    // Every operand's extent (the offset of its last element + 1) under 2^31 elements: the TMA
    // coordinates are 32-bit and the host side checks tensor sizes against the same limit.
    auto extent = [](int64_t rows_, int64_t row_len, int64_t ld, int64_t batch, int64_t L) {
      return (rows_ - 1) * ld + (row_len - 1) + (L - 1) * batch + 1;
    };
    const int64_t a_ext = extent(p.M, p.K, p.a_ld, p.a_batch, p.L);
    const int64_t b_ext = kForm == GemmForm::kNhwc ? extent(p.N, p.K, p.b_ld, p.b_batch, p.L)
                                                   : extent(p.K, p.N, p.b_ld, p.b_batch, p.L);
    const int64_t d_ext = extent(p.M, p.N, p.d_ld, p.d_batch, p.L);
    if (a_ext > kMaxInt || b_ext > kMaxInt || d_ext > kMaxInt) return false;
    return true;
  }

  static bool can_implement(const GemmProblem& p) {
    if (!shape_ok(p)) return false;
    // Aligned dummy pointers: only the shape and strides are judged here.
    IgemmBuffers b;
    b.x = b.w = b.bias = b.residual = reinterpret_cast<const void*>(uintptr_t{256});
    b.y = reinterpret_cast<void*>(uintptr_t{256});
    return Op::can_implement(arguments(p, b)) == cutlass::Status::kSuccess;
  }

  static size_t workspace_bytes(const GemmProblem& p) {
    return Op::get_workspace_size(arguments(p, IgemmBuffers{}));
  }

  // Arguments built once; Params and the launch through conv/igemm/cutlass_host.cuh.
  static int run(const GemmProblem& p, const IgemmBuffers& b, void* stream) {
    return run_cutlass<Op, Kernel>(arguments(p, b), b.workspace, p.device,
                                   static_cast<cudaStream_t>(stream));
  }
};

// The kernel-table entry of one configuration (config.h).
template <class Gemm>
constexpr GemmKernel gemm_kernel(const char* name, IgemmDtype dtype, GemmForm form) {
  return GemmKernel{name, dtype, form, &Gemm::can_implement, &Gemm::workspace_bytes, &Gemm::run};
}

}  // namespace conv
}  // namespace gpukern
