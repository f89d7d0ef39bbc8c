// The 1-D algorithm choice and the run switch (conv/dispatch.h): conv1d, and convolve through it.
// The rules read the problem alone, one per line in priority order; the measurements behind each
// crossover are in docs/perf_notes/conv1d.md. Forcing by name goes through the AlgorithmTable
// (core/algo_table.h) under the family "conv1d".
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>

#include <string>

#include "conv/dispatch.h"
#include "conv/epilogue.h"
#include "conv/igemm/blas.h"
#include "conv/igemm/igemm.h"
#include "conv/launch_1d.h"
#include "conv/vendor.h"
#include "core/algo_table.h"
#include "core/checks.h"
#include "core/dispatch.h"

namespace gpukern {
namespace {

// Values 0..n-1 in the order of the table's names below.
enum class Conv1dAlgo {
  kRowwise8,
  kRowwise16,
  kRowwise8Dilated,
  kGeneralOT1,
  kGeneralOT4,
  kFft,
  kRowwiseReg,
  kRowwiseMma,
  kIgemm,
  kGroupedReg,
  kCudnn,
};

// What torch_ops.force_algorithm("conv1d", name) accepts and _algorithm_conv1d returns.
const AlgorithmTable<Conv1dAlgo>& algo_table() {
  static const AlgorithmTable<Conv1dAlgo> table(
      "conv1d", {{Conv1dAlgo::kRowwise8, "rowwise8"},
                 {Conv1dAlgo::kRowwise16, "rowwise16"},
                 {Conv1dAlgo::kRowwise8Dilated, "rowwise8_dilated"},
                 {Conv1dAlgo::kGeneralOT1, "general_ot1"},
                 {Conv1dAlgo::kGeneralOT4, "general_ot4"},
                 {Conv1dAlgo::kFft, "fft"},
                 {Conv1dAlgo::kRowwiseReg, "rowwise_reg"},
                 {Conv1dAlgo::kRowwiseMma, "rowwise_mma"},
                 {Conv1dAlgo::kIgemm, "igemm"},
                 {Conv1dAlgo::kGroupedReg, "grouped_reg"},
                 {Conv1dAlgo::kCudnn, "cudnn"}});
  return table;
}

// Crossovers of the automatic choice.
constexpr int64_t kFftMinTaps = 512;                 // FFT from this many taps ...
constexpr int64_t kFftMinMacs = int64_t{1} << 30;    // ... and this many multiply-adds
constexpr int64_t kMmaMinK = 8;                      // 16-bit rows: rowwise_mma from this K
constexpr int64_t kGroupedMinK = 16;                 // grouped_reg from this K
static_assert(kMmaMinK - 1 <= kRowwiseRegMaxK,
              "rowwise_reg covers the 16-bit filters below rowwise_mma");

// Whether an algorithm can run the problem at all (forcing checks this; the choice adds speed).
bool can_run(Conv1dAlgo a, const ConvProblem& p) {
  switch (a) {
    case Conv1dAlgo::kFft: return can_run_fft(p);
    case Conv1dAlgo::kRowwise8: return can_run_rowwise8(p);
    case Conv1dAlgo::kRowwise16: return can_run_rowwise16(p);
    case Conv1dAlgo::kRowwise8Dilated: return can_run_rowwise8_dilated(p);
    case Conv1dAlgo::kRowwiseReg: return can_run_rowwise_reg(p);
    case Conv1dAlgo::kRowwiseMma: return can_run_rowwise_mma(p);
    case Conv1dAlgo::kIgemm: return igemm_can_run(p);  // dense, sm_90, aligned channels
    case Conv1dAlgo::kGroupedReg: return can_run_grouped_reg(p);
    case Conv1dAlgo::kCudnn: return cudnn_conv_can_run(p);  // conv/vendor.h
    case Conv1dAlgo::kGeneralOT1:
    case Conv1dAlgo::kGeneralOT4: return true;
  }
  return false;
}

// The automatic choice. "Long rows": at least a quarter of a 1024-output row-wise tile (shorter
// rows would mostly compute padding; the general kernel sizes its tile to the row instead).
Conv1dAlgo choose_auto(const ConvProblem& p) {
  using A = Conv1dAlgo;
  const bool long_rows = p.OW * 4 >= kRowwiseTile;
  const bool half = p.elem_size == 2;
  const int64_t outputs = p.N * p.C * p.OW;
  // Long filters on long signals: O(N log N) beats the FMA-bound direct kernels.
  if (can_run_fft(p) && p.KW >= kFftMinTaps && outputs >= kFftMinMacs / p.KW) return A::kFft;
  // Dilated rows: one dilation phase per thread group, scalar shared reads.
  if (can_run_rowwise8_dilated(p) && p.dil_w > 1 && long_rows) return A::kRowwise8Dilated;
  // 16-bit rows, K >= 8: the filter as a banded matrix on the tensor cores.
  if (can_run_rowwise_mma(p) && p.KW >= kMmaMinK && long_rows) return A::kRowwiseMma;
  // 16-bit rows, K < 8: registers and shuffles, no shared memory.
  if (can_run_rowwise_reg(p) && half && p.KW < kMmaMinK && long_rows) return A::kRowwiseReg;
  // Other rows (fp32, any K): 16x16 register blocks, one warp per tile; also an fp32 row too
  // short for the rule above when it is one of at most 4 rows (H100 size sweep, [1, 1, N] with
  // K = 16, padding 15, graph-replayed: general_ot1 3.05 us at N = 1-16 against cuDNN's 2.93-2.98,
  // rowwise16 2.4-2.5 us at N = 256-65536).
  if (can_run_rowwise16(p) && (long_rows || (!half && p.N * p.C <= 4))) return A::kRowwise16;
  // Dense channels (groups = 1, aligned O, sm_90; aligned C or a stem): the tensor cores.
  if (igemm_preferred(p)) return A::kIgemm;
  // Several channels a group, stride 1, filters of 16+ taps (wav2vec2's positional conv: 768 ->
  // 768, K = 128, 16 groups): register tiles of 8 channels x 4 outputs. Not yet measured on a
  // GPU (general_ot4 ran that layer at 0.54x cuDNN in fp32).
  if (p.c_per_group >= 8 && p.o_per_group >= 8 && p.KW >= kGroupedMinK &&
      can_run_grouped_reg(p)) {
    return A::kGroupedReg;
  }
  // Everything else; 4 output channels a block reuse each staged input tile when a group has 4.
  if (p.o_per_group >= 4) return A::kGeneralOT4;
  return A::kGeneralOT1;
}

// The automatic choice, or the forced algorithm when it can run the problem.
Conv1dAlgo choose(const ConvProblem& p) {
  return algo_table().choose<Conv1dAlgo>(
      [&](Conv1dAlgo a, Conv1dAlgo& plan) {
        plan = a;
        return can_run(a, p);
      },
      [&] { return choose_auto(p); },
      [&] {
        return detail::check_msg("C=", p.C, ", O=", p.O, ", groups=", p.groups,
                                 ", stride=", p.stride_w, ", dilation=", p.dil_w, ", K=", p.KW,
                                 ", element size ", p.elem_size);
      });
}

// Whether an algorithm applies the fused ops' epilogue (p.act, p.r) itself, in its accumulator;
// the others compute conv + bias and conv1d_cuda_run adds the elementwise pass
// (conv_epilogue_run). A kernel that gains a native epilogue joins here.
bool algorithm_fuses_epilogue(Conv1dAlgo a) {
  switch (a) {
    case Conv1dAlgo::kIgemm: return true;  // CUTLASS epilogue (conv/igemm/epilogue.cuh)
    case Conv1dAlgo::kGroupedReg: return true;  // act(acc + bias + residual) in registers
    default: return false;
  }
}

template <typename T>
void run(Conv1dAlgo algo, const ConvProblem& p, const at::Tensor& x, cudaStream_t stream) {
  switch (algo) {
    case Conv1dAlgo::kFft: return launch_fft(p, x, stream);
    case Conv1dAlgo::kRowwiseReg: return launch_rowwise_reg<T>(p, stream);
    case Conv1dAlgo::kRowwiseMma: return launch_rowwise_mma<T>(p, stream);
    case Conv1dAlgo::kIgemm:  // run before the dtype dispatch (run_call)
    case Conv1dAlgo::kCudnn: return;
    case Conv1dAlgo::kRowwise8: return launch_rowwise<T, true>(p, stream);
    case Conv1dAlgo::kRowwise16: return launch_rowwise16<T>(p, stream);
    case Conv1dAlgo::kRowwise8Dilated: return launch_rowwise<T, false>(p, stream);
    case Conv1dAlgo::kGeneralOT4: return launch_general1d<T, 4>(p, stream);
    case Conv1dAlgo::kGroupedReg: return launch_grouped_reg<T>(p, stream);
    case Conv1dAlgo::kGeneralOT1: return launch_general1d<T, 1>(p, stream);
  }
}

// One whole call by algorithm a on `stream`: the convolution with its bias, then, after an
// algorithm without a native epilogue, one elementwise pass (conv/epilogue.h; one more rounding of
// y than a native epilogue): y = act(y + r) for the fused ops, and for cuDNN, which computes the
// convolution alone, y = act(y + bias + r) whenever there is a bias.
// cudnn_search: cuDNN's algorithm search (conv/vendor.h), for the race and the calls it hands
// over.
void run_call(Conv1dAlgo a, const ConvProblem& p, const at::Tensor& x, cudaStream_t stream,
              bool cudnn_search = false) {
  if (a == Conv1dAlgo::kIgemm) {
    igemm_run(p, x);  // its own dtype switch and layouts
  } else if (a == Conv1dAlgo::kCudnn) {
    cudnn_conv_run(p, cudnn_search);
  } else {
    GK_DISPATCH_FLOAT_CUDA(x.scalar_type(), "conv1d", [&] { run<scalar_t>(a, p, x, stream); });
  }
  const bool with_bias = a == Conv1dAlgo::kCudnn;
  if ((p.fused() || (with_bias && p.b != nullptr)) && !algorithm_fuses_epilogue(a)) {
    GK_DISPATCH_FLOAT_CUDA(x.scalar_type(), "conv1d",
                           [&] { conv_epilogue_run<scalar_t>(p, stream, with_bias); });
  }
}

// Whether the automatic choice a may be raced against cuDNN (conv/vendor.h).
bool raceable(Conv1dAlgo a, const ConvProblem& p) {
  return a != Conv1dAlgo::kCudnn && conv_race_enabled() && !algo_table().forced() &&
         cudnn_conv_can_run(p);
}

}  // namespace

std::string conv1d_cuda_algorithm(const ConvProblem& p) {
  const Conv1dAlgo a = choose(p);
  // A 1-D problem's library sides are cuDNN's convolution, searched or not (conv/vendor.h).
  if (raceable(a, p) &&
      conv_race_verdict_query(p).value_or(ConvVendor::kGpukern) != ConvVendor::kGpukern) {
    return algo_table().name(Conv1dAlgo::kCudnn);
  }
  return algo_table().name(a);
}

at::Tensor conv1d_cuda_run(const ConvProblem& p, const at::Tensor& x) {
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  if (igemm_built()) conv::blas_prepare_handle(stream);  // before any capture needs it
  const Conv1dAlgo algo = choose(p);
  return conv_run_raced(p, raceable(algo, p), stream, [&](ConvVendor v) {
    if (v == ConvVendor::kGpukern) {
      run_call(algo, p, x, stream);
    } else {
      // cuDNN's convolution, searched or by its heuristic (the 1-D call's library sides)
      run_call(Conv1dAlgo::kCudnn, p, x, stream, v == ConvVendor::kCudnn);
    }
  });
}

}  // namespace gpukern
