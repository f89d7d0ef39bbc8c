#pragma once
// conv2d: the parameters every kernel (CPU and CUDA) reads, and the host entries.
// This header stays torch-free (conv2d_kernels.cuh includes it): at::Tensor and ConvArgs are only
// forward-declared, the definitions live in the host files.
#include <cstdint>
#include <optional>
#include <string>

namespace at {
class Tensor;
}

namespace gpukern {

struct ConvArgs;

// Sizes and element strides in int64 (any strides: NCHW, channels_last, sliced views; the data
// pointers already include the storage offsets). The input/output are always batched here
// (an unbatched call is viewed with N = 1).
struct Conv2dParams {
  int64_t N, C, H, W;        // input [N, C, H, W]
  int64_t O, KH, KW;         // weight [O, C / groups, KH, KW]
  int64_t OH, OW;            // output [N, O, OH, OW]
  int64_t groups, c_per_group, o_per_group;
  int64_t stride_h, stride_w;
  int64_t dil_h, dil_w;
  int64_t pad_h, pad_w;      // zeros before the input (top / left); the bottom/right ones follow
                             // from the output size
  int64_t x_sn, x_sc, x_sh, x_sw;
  int64_t w_so, w_sc, w_sh, w_sw;
  int64_t b_s;               // bias stride (bias may be a strided 1-D view)
  int64_t y_sn, y_so, y_sh, y_sw;
  const void* x;
  const void* w;
  const void* b;             // nullptr: no bias
  void* y;
};

// Fills the params from normalised args and the batched 4-D input/output views.
Conv2dParams make_conv2d_params(const ConvArgs& args, const at::Tensor& input4d,
                                const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                                const at::Tensor& output4d);

// The name of the CUDA algorithm a call with these params and element size runs (the forced one
// when set, core/algo_table.h); defined in conv2d_cuda.cu, in CUDA builds only.
std::string conv2d_cuda_algorithm(const Conv2dParams& p, int64_t elem_size);

}  // namespace gpukern
