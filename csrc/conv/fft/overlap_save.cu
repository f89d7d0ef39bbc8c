// The 1-D FFT path ("fft") on CUDA: overlap-save over power-of-two blocks, float32 cuFFT transforms
// through ATen (plan cache, workspace from the caching allocator, current stream), our own pack,
// product and epilogue kernels (overlap_save.cuh explains the packed-real transforms).
//
// Block length rule (conv1d_fft_block_length): B = the smallest power of two >= 8 (K - 1),
// at most kMaxBlock = 32768, at least the smallest power of two >= 2K (so at least about half of
// every block is valid output even for filters longer than kMaxBlock / 2), at most the smallest
// power of two >= L_out + K - 1 (one block then holds the whole row: short rows waste nothing),
// and at least kMinBlock = 16. Valid outputs per block S = B - K + 1, so the overhead factor
// o = B / S is <= 8/7 whenever 8 (K - 1) <= kMaxBlock (K <= 4097), and 4/3 at K = 8191.
// B / 2 <= 16384 complex points keeps every transform a small batched cuFFT kernel whose
// working set (<= 128 KB) stays on chip, unlike the multi-pass whole-row transforms of 2M-16M
// points that this path replaced.
//
// Memory passes, per output (fp32 in and out; o = B / S): x read 4 (+ the K - 1 overlap, mostly
// L2 hits), pack write 4o, forward c2c read + write 8o, product read + write 8o (filter spectra
// read from L2), inverse c2c read + write 8o, epilogue read 4o, y write 4: 8 + 28o bytes (the
// predicted times of the benchmark cases are in docs/perf_notes/conv1d.md).
#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>

#include <algorithm>
#include <optional>

#include "core/checks.h"
#include "core/dispatch.h"
#include "core/launch.cuh"
#include "conv/fft/overlap_save.cuh"
#include "conv/launch_1d.h"

namespace gpukern {
namespace {

constexpr int64_t kMinBlock = 16;
constexpr int64_t kMaxBlock = 32768;
// Blocks per launch at most; the kernels grid-stride over buffer rows beyond it.
constexpr int64_t kMaxGrid = int64_t{1} << 20;

using Traits = conv::Conv1dFftDefaultTraits;

int64_t pow2_ceil(int64_t n) {
  int64_t b = 1;
  while (b < n) b *= 2;
  return b;
}

// Blocks to aim for per launch (~2 waves of 256-thread blocks on a 132-SM GPU): when there are
// fewer buffer rows than that (a few long signals), gridDim.y splits each row's positions.
constexpr int64_t kTargetBlocks = 2048;

// Grid for `rows` buffer rows of `positions` items each (gridDim.x over rows, gridDim.y within).
dim3 grid_for_rows(int64_t rows, int64_t positions) {
  const int64_t x = std::min(rows, kMaxGrid);
  const int64_t y = std::max<int64_t>(
      1, std::min({ceil_div(kTargetBlocks, x), ceil_div(positions, Traits::kThreads),
                   kMaxGridY}));
  return dim3(static_cast<unsigned>(x), static_cast<unsigned>(y));
}

template <typename T>
void fft_launch(const ConvProblem& p, const at::Tensor& x3, cudaStream_t stream) {
  // Inside a CUDA-graph capture, a transform whose cuFFT plan is not cached yet makes it there,
  // and plan creation makes calls a global-mode capture forbids (measured on an H200: the cold
  // capture failed with CUFFT_INTERNAL_ERROR, as torch.fft.fft itself does; with this thread's
  // capture mode relaxed it captured and replayed correctly). The plan and its workspace live
  // outside the graph and stay cached for the replays.
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  C10_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  std::optional<c10::cuda::CUDAStreamCaptureModeGuard> relaxed;
  if (capture == cudaStreamCaptureStatusActive) relaxed.emplace(cudaStreamCaptureModeRelaxed);

  conv::Conv1dFftGeom g;
  g.B = conv1d_fft_block_length(p.KW, p.OW);
  g.S = g.B - p.KW + 1;
  g.nblk = ceil_div(p.OW, g.S);
  g.xblocks = p.N * p.C * g.nblk;
  g.scale = 1.f / static_cast<float>(4 * g.B);
  TORCH_INTERNAL_ASSERT(g.S >= 1 && g.B % 4 == 0 && g.xblocks >= 1);
  const int64_t M = g.B / 2;
  const int64_t rows = g.xblocks + p.C;

  // Pack: x blocks then the C scaled, reversed filters, one float buffer.
  at::Tensor buf = at::empty({rows, g.B}, x3.options().dtype(at::kFloat));
  conv::conv1d_fft_pack_kernel<T, Traits><<<grid_for_rows(rows, g.B), Traits::kThreads, 0, stream>>>(
      p, g, buf.mutable_data_ptr<float>());
  GK_CHECK_LAUNCH();

  // Forward: every row as M complex points (pairs of reals), one batched unnormalised c2c.
  at::Tensor spec = at::_fft_c2c(at::view_as_complex(buf.view({rows, M, 2})), {1},
                                 /*normalization=none*/ 0, /*forward=*/true);
  buf.reset();  // back to the caching allocator (stream-ordered): the inverse may reuse it
  TORCH_INTERNAL_ASSERT(spec.is_contiguous() && spec.scalar_type() == at::kComplexFloat);
  float2* spec_ptr = reinterpret_cast<float2*>(spec.mutable_data_ptr());

  conv::conv1d_fft_product_kernel<Traits><<<grid_for_rows(g.xblocks, M / 2 + 1), Traits::kThreads, 0, stream>>>(
      g, p.C, spec_ptr);
  GK_CHECK_LAUNCH();

  // Inverse over the x blocks only (a contiguous prefix of the spectra), unnormalised.
  const at::Tensor res = at::_fft_c2c(spec.narrow(0, 0, g.xblocks), {1},
                                      /*normalization=none*/ 0, /*forward=*/false);
  spec.reset();
  TORCH_INTERNAL_ASSERT(res.is_contiguous() && res.scalar_type() == at::kComplexFloat);

  conv::conv1d_fft_epilogue_kernel<T, Traits><<<grid_for_rows(g.xblocks, g.S), Traits::kThreads, 0,
                                           stream>>>(
      p, g, reinterpret_cast<const float*>(res.const_data_ptr()));
  GK_CHECK_LAUNCH();
}

}  // namespace

int64_t conv1d_fft_block_length(int64_t K, int64_t L_out) {
  int64_t B = std::min(pow2_ceil(8 * (K - 1)), kMaxBlock);
  B = std::max(B, pow2_ceil(2 * K));
  B = std::min(B, pow2_ceil(L_out + K - 1));
  return std::max(B, kMinBlock);
}

bool can_run_fft(const ConvProblem& p) {
  return one_row(p) && p.stride_w == 1 && p.dil_w == 1;
}

void launch_fft(const ConvProblem& p, const at::Tensor& x3, cudaStream_t stream) {
  TORCH_INTERNAL_ASSERT(p.c_per_group == 1 && p.o_per_group == 1 && p.stride_w == 1 &&
                        p.dil_w == 1 && p.KW >= 1 && p.OW >= 1);
  GK_DISPATCH_FLOAT_CUDA(x3.scalar_type(), "conv1d", [&] { fft_launch<scalar_t>(p, x3, stream); });
}

}  // namespace gpukern
