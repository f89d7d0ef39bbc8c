#pragma once
// The fused ops' epilogue as one elementwise pass over the output (conv/epilogue.cu), for the CUDA
// algorithms that have no native epilogue: they compute y = conv(x, w) + bias as for the plain ops,
// then conv_epilogue_run applies y = act(y + r) in place (p.act: an ActKind code of
// device/activation.cuh; p.r: the residual with its own strides, or nullptr).
//
// Precision: the pass reads y after the algorithm has rounded conv + bias to the output dtype, so
// a float16 / bfloat16 result is rounded twice (conv + bias, then act(y + r)) where an algorithm
// with a native epilogue (igemm) rounds once, from its fp32 accumulator. The pass itself computes
// in fp32. float32 loses nothing measurable (one fp32 rounding of conv + bias before the add).
//
// Torch-free, CUDA builds only; the caller (conv/dispatch_1d.cu, conv/dispatch_2d.cu) holds the
// device guard and passes the current stream.
#include <cuda_runtime_api.h>

#include "conv/problem.h"

namespace gpukern {

// y = act(y + r) over p's output [N, O, OH, OW] (y and r read through their strides; r may be
// absent). T: float, __half or __nv_bfloat16 (the output's dtype). An empty output launches
// nothing. Dense y and r of the same layout take a flat, 16-byte vectorised pass; other strides a
// general indexed one (int64 indices either way).
// with_bias: also add p.b (per output channel, stride p.b_s; no-op when p.b is null), for an
// algorithm that computed y = conv(x, w) alone (the igemm path's cuBLASLt forms without a bias
// epilogue): y = act(y + bias + r), the pass running even when p has no act / residual.
template <typename T>
void conv_epilogue_run(const ConvProblem& p, cudaStream_t stream, bool with_bias = false);

// The way back from a channels_last temporary with the epilogue: y = act(src + r) over p's
// output, src packed NHWC [N, OH, OW, Cs >= O] (a GEMM's output with its bias; 16-byte aligned,
// Cs a multiple of 16 bytes: checked), y and r
// (p.r, optional) with packed planes (y_sh = OW, y_sw = 1; the same for r) and any channel and
// image strides. One pass where a transpose back after a GEMM that read a converted residual took
// two (conv/igemm: 1x1 layers over NCHW into small planes).
template <typename T>
void conv_epilogue_from_nhwc(const ConvProblem& p, const void* src, int64_t Cs,
                             cudaStream_t stream);

}  // namespace gpukern
