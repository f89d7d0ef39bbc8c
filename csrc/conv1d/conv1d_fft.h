#pragma once
// conv1d's FFT path (overlap-save through cuFFT), host side. Defined in conv1d_fft_cuda.cu, in
// CUDA builds only; conv1d_cuda.cu calls it for the 'fft' algorithm.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "conv1d/conv1d.h"

namespace gpukern {

// The transform length (in reals) the FFT path uses for filter length K and output row length
// L_out: a power of two, rule documented in conv1d_fft_cuda.cu.
int64_t conv1d_fft_block_length(int64_t K, int64_t L_out);

// Runs the FFT path for params over the batched input x3 (its device and options give the
// workspace), on stream (the current stream of the current device: cuFFT's ATen calls use the
// current stream). Requires one input row per output row (C/groups == O/groups == 1), stride 1,
// dilation 1 (the caller's algorithm check); any dtype of GK_DISPATCH_FLOAT_CUDA.
void conv1d_fft_launch(const Conv1dParams& p, const at::Tensor& x3, cudaStream_t stream);

}  // namespace gpukern
