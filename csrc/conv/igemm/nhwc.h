#pragma once
// The igemm path's NHWC views of [N, C, H, W] tensors and its one-time conversions to NHWC
// (conv/igemm/nhwc.cpp): whether a tensor can be read in place as NHWC, the conversion when it
// cannot, and the converted filters remembered per weight tensor. Internal to the igemm path:
// CUDA builds with CUTLASS (GPUKERN_WITH_CUTLASS) only.
#include <ATen/ATen.h>

#include <array>
#include <cstdint>
#include <optional>
#include <utility>

namespace gpukern {
namespace igemm_forms {

// The (sn, sh, sw) strides of a [N, C, H, W] view t when it can be read or written in place as
// NHWC (channels unit-stride, the other strides and the base 16-byte aligned, each stride at
// least the packed one, as CUTLASS's ConvProblemShape assumes); a size-1 dim's stride, never
// stepped, is replaced by the packed one. Empty when t must be copied.
std::optional<std::array<int64_t, 3>> nhwc_strides(const at::Tensor& t);

// v rounded up to a multiple of m (the kernels' channel multiple: 16 bytes of channels).
inline int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// t itself when NHWC-usable with C channels a multiple of c_multiple, else one conversion into a
// packed channels_last tensor with the channels zero-padded to a multiple of c_multiple.
at::Tensor as_nhwc(const at::Tensor& t, int64_t c_multiple);

// Whether as_nhwc(t, c_multiple) is t itself (no conversion).
bool nhwc_in_place(const at::Tensor& t, int64_t c_multiple);

// as_nhwc of a filter, the converted copy remembered per filter tensor (nhwc.cpp says when a
// copy is reused and when it is not).
at::Tensor cached_nhwc_filter(const at::Tensor& w, int64_t c_multiple);

// (as_nhwc(x, x_multiple), cached_nhwc_filter(w, w_multiple)). Where both convert (an NCHW input
// and a filter with no cached copy: every call inside a CUDA-graph capture), the filter's
// conversion runs on a side stream from the pool, concurrently with the input's, joined back to
// the current stream before this returns (in a capture, a fork and a join of the graph). On an
// H100 the filter's conversion alone took 2.9-4.0 us for ResNet-50's 128 -> 128 and 256 -> 256
// 3x3 filters in graph replays, beside 6.6-22.9 us for the inputs.
std::pair<at::Tensor, at::Tensor> nhwc_operands(const at::Tensor& x, const at::Tensor& w,
                                                int64_t x_multiple, int64_t w_multiple);

}  // namespace igemm_forms
}  // namespace gpukern
