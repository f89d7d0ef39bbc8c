#pragma once
// conv1d's parameters, shared by the CPU kernel, the CUDA launchers and the CUDA kernels.
// Torch-free on purpose: conv1d_kernels.cuh includes it, and kernel headers include no torch
// headers (the host-side builder below only forward-declares at::Tensor).
#include <cstdint>
#include <string>

namespace at {
class Tensor;
}  // namespace at
namespace c10 {
enum class ScalarType : int8_t;
}  // namespace c10

namespace gpukern {

struct ConvArgs;

// One conv1d call, normalised: y[n, o, l] = bias[o] +
//   sum_{c < C/groups, k < K} w[o, c, k] * x[n, g*C/groups + c, l*stride - pad_lo + k*dilation]
// with g = o / (O/groups) and x = 0 outside [0, L). Sizes and strides are int64 and in elements,
// so any view (non-contiguous, storage offset) can be described; products of them can pass 2^31.
struct Conv1dParams {
  const void* x = nullptr;  // [N, C, L]
  const void* w = nullptr;  // [O, C/groups, K]
  const void* b = nullptr;  // [O], nullptr when there is no bias
  void* y = nullptr;        // [N, O, L_out]

  int64_t N = 0, C = 0, L = 0;
  int64_t O = 0, K = 0, L_out = 0;
  int64_t groups = 1;
  int64_t stride = 1, dilation = 1, pad_lo = 0;

  int64_t x_sn = 0, x_sc = 0, x_sl = 0;
  int64_t w_so = 0, w_sc = 0, w_sk = 0;
  int64_t b_s = 0;
  int64_t y_sn = 0, y_so = 0, y_sl = 0;
  int64_t elem_size = 0;  // bytes per element of x, w, b and y (one dtype); the choice reads it

  int64_t c_per_group() const { return C / groups; }
  int64_t o_per_group() const { return O / groups; }
};

// Host side: the params of normalised args over the batched (3-D) input x3 and output y3 views;
// bias may be nullptr. Defined in conv1d.cpp, used by the CPU and the CUDA host entries.
Conv1dParams conv1d_params(const ConvArgs& args, const at::Tensor& x3, const at::Tensor& weight,
                           const at::Tensor* bias, const at::Tensor& y3);

// Runs conv1d on CUDA for params built over x3 (the batched input view; the FFT path takes its
// dtype and device for workspace), on the current stream of the current device (the caller holds
// the device guard). Defined in conv1d_cuda.cu, in CUDA builds only; used by conv1d and convolve.
void conv1d_cuda_launch(const Conv1dParams& p, const at::Tensor& x3);

// Runs conv1d's CPU kernel for params over CPU tensors of dtype st. Defined in conv1d.cpp.
void conv1d_cpu_launch(const Conv1dParams& p, c10::ScalarType st);

// The name of the CUDA algorithm a call with these params runs (the forced one when set);
// defined in conv1d_cuda.cu, in CUDA builds only.
std::string conv1d_cuda_algorithm(const Conv1dParams& p);

}  // namespace gpukern
