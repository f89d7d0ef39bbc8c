#pragma once
// The tensor-core implicit-GEMM path for dense convolution (conv1d and conv2d, groups = 1), as the
// conv dispatch (conv/dispatch_1d.cu, conv/dispatch_2d.cu) sees it: the algorithm "igemm".
// Torch-aware host side; the kernels are CUTLASS SM90 instantiations (conv/igemm/kernel.cuh).
//
// What it runs: bf16 and fp16 (fp32 accumulate, output in the input's dtype), and fp32 as TF32
// tensor-core math when torch allows TF32 in convolutions (torch.backends.cudnn.allow_tf32, read
// from at::globalContext().allowTF32CuDNN()); with TF32 off there is no true-fp32 tensor-core
// path, so igemm_can_run is false and the direct kernels run. The bias is fused in the epilogue.
//
// Layouts: x and y channels_last (NHWC) run in place; an x of another layout is converted once
// (contiguous(ChannelsLast)) and a y of another layout is written through a channels_last
// temporary copied back, so the output keeps aten's memory format. The weight is made OHWI
// (channels_last) when it is not already. A 1-D problem is the H = 1 case ([N, C, L] as
// [N, C, 1, L]). Workspace comes from the caching allocator; everything runs on the current
// stream of x's device (the caller holds the device guard).
//
// Present only in builds with GPUKERN_WITH_CUTLASS (setup.py: nvidia-cutlass installed and 9.0a
// in TORCH_CUDA_ARCH_LIST); otherwise igemm_built() and igemm_can_run() are false and igemm_run
// raises. The functions are declared in every build so dispatch code needs no #ifdef.
#include <optional>
#include <string>

#include "conv/problem.h"

namespace at {
class Tensor;
}

namespace gpukern {

// Whether this build has the igemm path (the op gpukern::_has_igemm).
bool igemm_built();

// Whether the path can run p: built, a CUDA dtype it computes in (elem_size 2: bf16/fp16; 4: fp32
// with tf32_allowed), dense (groups == 1), O a multiple of 8 (16-bit) or 4 (fp32) (C is
// zero-padded to that multiple when it is not one), sizes
// that index in int32 (each tensor under 2^31 elements), CUTLASS's own limits (TMA im2col:
// paddings <= 127, dilated filter extent < 256 per dim), and the current device an sm_90
// (H100/H200; a query with no GPU answers for sm_90). A pure function of the shape, dtype and
// device: never of the data pointers or strides (an unaligned or non-NHWC tensor is copied).
bool igemm_can_run(const ConvProblem& p, bool tf32_allowed);
// The same with torch's setting for convolutions (at::globalContext().allowTF32CuDNN()).
bool igemm_can_run(const ConvProblem& p);

// The automatic dispatch's rule: dense, igemm_can_run, and C a multiple of the kernels' channel
// alignment or a stem (C below it, 8+ taps), which runs as explicit im2col + GEMM.
bool igemm_preferred(const ConvProblem& p);

// The configuration igemm_run would use for p (conv/igemm/config.h): "gemm_1x1" (1x1 stride-1
// layers with aligned channels as a GEMM), "stem_im2col_gemm" (C below the alignment: the stem's
// explicit im2col + the GEMM), else the conv kernel's bucket, "large_128x128", "small_64x64" or
// "medium_64x128" or "narrow_128x64"; "" when it cannot run.
// GPUKERN_IGEMM_CONFIG=large|small|medium|narrow in the environment forces the bucket
// (benchmarks and tests).
std::string igemm_config_name(const ConvProblem& p);

// Runs y = act(conv(x, w) + bias + residual) (act = p.act; the epilogue in fp32, one rounding)
// for a problem igemm_can_run accepts. x, w, y: the batched input, the weight, the batched output
// of make_conv_problem (p's sizes; any strides; y keeps its memory format); bias: O elements of
// x's dtype or absent; residual: y's sizes and dtype, any strides, or absent.
void igemm_run(const ConvProblem& p, const at::Tensor& x, const at::Tensor& w,
               const std::optional<at::Tensor>& bias, const at::Tensor& y,
               const std::optional<at::Tensor>& residual);

// The same from the problem alone (the dispatch's run entry, which has only p and the batched
// input x): views p's data pointers and strides (bias, residual p.r) as tensors of x's dtype on
// x's device.
void igemm_run(const ConvProblem& p, const at::Tensor& x);

}  // namespace gpukern
