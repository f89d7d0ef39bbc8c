#pragma once
// Layout conversions for the NHWC-only kernels (the tensor-core conv path, conv/igemm): NCHW (or
// any strides) -> packed channels_last with the channels zero-padded to a multiple, and packed
// channels_last -> a tensor of any strides (the reverse, dropping padded channels). They replace
// `empty_nhwc(t).copy_(t)` and `y.copy_(yc)`, whose permuting copies run far below the memory
// bandwidth, with tiled transposes through shared memory (conv/layout.cu).
//
// Torch-aware host API, CUDA tensors only, defined only in CUDA builds (GPUKERN_WITH_CUDA):
// declared in every build so callers compiled for both need no #ifdef around the declaration,
// but a CPU-only build has no definition to link, so calls must sit inside CUDA-only code.
// Both launch on the current CUDA stream of the tensor's device: the caller holds the device
// guard (c10::cuda::CUDAGuard) for that device. float32, float16 and bfloat16; pure copies (bit
// exact, no conversion). The private ops gpukern::_to_nhwc and gpukern::_nhwc_copy_to
// (csrc/bindings.cpp) expose them for tests.
#include <cstdint>

struct CUstream_st;
typedef CUstream_st* cudaStream_t;

namespace at {
class Tensor;
}

namespace gpukern {

// A NEW packed channels_last tensor of sizes [N, Cp, H, W], Cp = C rounded up to a multiple of
// c_multiple (>= 1), from at::empty (the caching allocator: 256-byte aligned), holding t in
// channels 0..C-1 and zeros in C..Cp-1. t: a 4-D CUDA tensor [N, C, H, W] of any strides
// (storage offsets, sliced and transposed views; NCHW with packed H*W planes is the fast path).
// Never returns t itself, even when it is already packed channels_last with C % c_multiple == 0:
// the caller decides whether to call.
at::Tensor to_nhwc(const at::Tensor& t, int64_t c_multiple);

// The same, its kernel launched on `stream` (the result is still allocated on the current stream:
// the caller orders the current stream after `stream` before the result is used or freed).
at::Tensor to_nhwc(const at::Tensor& t, int64_t c_multiple, cudaStream_t stream);

// dst[:, c] = src[:, c] for c < dst.size(1). src: a 4-D CUDA tensor [N, Cs, H, W] with
// Cs >= dst.size(1) (a padded result of to_nhwc, or an NHWC kernel's output), packed
// channels_last for the fast path (other strides take the general path); dst: same N, H, W,
// dtype and device, any strides without internal overlap (NCHW with packed H*W planes is the
// fast path). src and dst must not overlap.
void nhwc_copy_to(const at::Tensor& src, const at::Tensor& dst);

}  // namespace gpukern
