#pragma once
// The CUDA side of the convolution ops, as the host entries (conv/ops.cpp) see it: for a
// normalised ConvProblem, which algorithm runs (the forced one when set, core/algo_table.h) and
// the run itself, one launch sequence on the current stream of the current device (the caller
// holds the device guard). Defined in conv/dispatch_1d.cu and conv/dispatch_2d.cu, CUDA builds
// only.
#include <string>

#include "conv/problem.h"

namespace at {
class Tensor;
}

namespace gpukern {

// The runs return the result when it is a tensor of their own instead of p.y, with p.y's sizes and
// strides (cuDNN's fused call, conv/vendor.h); else an undefined tensor (the result is in p.y).

// 1-D problems (nsp == 1). x is the batched input (the FFT path takes its dtype and device for
// workspace).
std::string conv1d_cuda_algorithm(const ConvProblem& p);
at::Tensor conv1d_cuda_run(const ConvProblem& p, const at::Tensor& x);

// 2-D problems (nsp == 2). x is the batched input: its dtype tells float16 from bfloat16, which
// the problem's elem_size cannot.
std::string conv2d_cuda_algorithm(const ConvProblem& p);
at::Tensor conv2d_cuda_run(const ConvProblem& p, const at::Tensor& x);

}  // namespace gpukern
