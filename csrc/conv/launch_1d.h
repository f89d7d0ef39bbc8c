#pragma once
// The 1-D algorithms as conv/dispatch_1d.cu sees them: whether each can run a problem at all (the
// choice adds the speed rules) and its launcher. Each algorithm's .cu defines its functions and
// instantiates its launcher for float, __half and __nv_bfloat16. A launcher plans its grid and
// tiles from the problem and launches on `stream`, the current stream of the current device (the
// caller holds the device guard); it assumes what its can_run accepted. CUDA builds only.
//
//   general_ot1/ot4   conv/direct/general1d.cu    any shape
//   rowwise8(_dilated) conv/direct/rowwise.cu     one row, stride 1, dilation <= 128
//   rowwise16         conv/direct/rowwise16.cu    one row, stride 1, dilation 1
//   rowwise_reg       conv/direct/rowwise_reg.cu  one row, stride 1, dilation 1, K <= 8
//   rowwise_mma       conv/direct/rowwise_mma.cu  one row, stride 1, dilation 1, 16-bit, K <= 16384
//   fft               conv/fft/overlap_save.cu    one row, stride 1, dilation 1
//   grouped_reg       conv/direct/grouped1d.cu    several channels a group, stride 1, dilation 1
// ("one row": one input row and one filter row per output row, C/groups == O/groups == 1.)
#include <cuda_runtime_api.h>

#include <algorithm>
#include <climits>
#include <cstdint>

#include "conv/problem.h"

namespace at {
class Tensor;
}

namespace gpukern {

// One input row and one filter row per output row: single-channel signals and depthwise calls.
inline bool one_row(const ConvProblem& p) { return p.c_per_group == 1 && p.o_per_group == 1; }

// Blocks of a grid-stride launch over `work_items` items (the kernel loops over the rest).
inline int grid_for(int64_t work_items) {
  return static_cast<int>(std::min<int64_t>(work_items, INT_MAX));
}

// general_ot1 (kOT = 1) and general_ot4 (kOT = 4 output channels per block).
template <typename T, int kOT>
void launch_general1d(const ConvProblem& p, cudaStream_t stream);

// rowwise8 (kDil1) and rowwise8_dilated.
constexpr int64_t kRowwiseTile = 1024;        // outputs of a rowwise8 tile (kThreads * kR)
constexpr int64_t kRowwiseMaxDilation = 128;  // rowwise8_dilated: one thread per dilation phase
bool can_run_rowwise8(const ConvProblem& p);
bool can_run_rowwise8_dilated(const ConvProblem& p);
template <typename T, bool kDil1>
void launch_rowwise(const ConvProblem& p, cudaStream_t stream);

bool can_run_rowwise16(const ConvProblem& p);
template <typename T>
void launch_rowwise16(const ConvProblem& p, cudaStream_t stream);

constexpr int64_t kRowwiseRegMaxK = 8;  // one compiled kernel per K (its taps are unrolled)
bool can_run_rowwise_reg(const ConvProblem& p);
template <typename T>
void launch_rowwise_reg(const ConvProblem& p, cudaStream_t stream);

constexpr int64_t kRowwiseMmaMaxK = 16384;  // the staged tile stays within 48 KB
bool can_run_rowwise_mma(const ConvProblem& p);
template <typename T>
void launch_rowwise_mma(const ConvProblem& p, cudaStream_t stream);

// grouped_reg: several channels per group (grouped or dense), stride 1, dilation 1; register
// tiles of 8 output channels x 4 outputs a thread (conv/direct/grouped1d.cuh).
bool can_run_grouped_reg(const ConvProblem& p);
template <typename T>
void launch_grouped_reg(const ConvProblem& p, cudaStream_t stream);

// The FFT path (overlap-save through cuFFT). x is the batched input: its dtype picks the kernels'
// element type and its device and options give the workspace.
bool can_run_fft(const ConvProblem& p);
void launch_fft(const ConvProblem& p, const at::Tensor& x, cudaStream_t stream);
// The transform length (in reals) for filter length K and output row length L_out: a power of
// two (the rule is in conv/fft/overlap_save.cu).
int64_t conv1d_fft_block_length(int64_t K, int64_t L_out);

}  // namespace gpukern
