#pragma once
// The 2-D direct algorithms as the choice (conv/dispatch_2d.cu) sees them, host side. For each:
//   <algo>_can_run(p)      whether it can run the problem (its planner accepts it);
//   <algo>_run<T>(p, s)    plan and launch it on stream s (only after can_run said yes),
//                          instantiated for float, __half and __nv_bfloat16 in <algo>.cu.
// Each algorithm's plan struct, planner, launcher and kernel instantiations live in its own .cu
// (the kernel in its .cuh). Also the TMA host helpers that depthwise_large borrows from
// depthwise_tma.cu. Torch-free.
#include <cuda.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "conv/direct/pointwise_nchw.h"
#include "conv/problem.h"

namespace gpukern {

// The name every 2-D message starts with ("gpukern::conv2d: ...").
constexpr const char* kConv2dOp = "conv2d";

bool depthwise_nhwc_can_run(const ConvProblem& p);
template <typename T>
void depthwise_nhwc_run(const ConvProblem& p, cudaStream_t stream);

bool depthwise_nhwc_tile_can_run(const ConvProblem& p);
template <typename T>
void depthwise_nhwc_tile_run(const ConvProblem& p, cudaStream_t stream);

// Register-blocked output tiles (square 3/5/7, stride 1/2): depthwise_nhwc_reg.cu (planner,
// float), depthwise_nhwc_reg_half.cu and _bf16.cu (the 16-bit instances).
bool depthwise_nhwc_reg_can_run(const ConvProblem& p);
template <typename T>
void depthwise_nhwc_reg_run(const ConvProblem& p, cudaStream_t stream);

bool depthwise_strided_can_run(const ConvProblem& p);
template <typename T>
void depthwise_strided_run(const ConvProblem& p, cudaStream_t stream);

bool depthwise_small_can_run(const ConvProblem& p);
template <typename T>
void depthwise_small_run(const ConvProblem& p, cudaStream_t stream);

bool depthwise_plane_can_run(const ConvProblem& p);
template <typename T>
void depthwise_plane_run(const ConvProblem& p, cudaStream_t stream);

bool depthwise_tma_can_run(const ConvProblem& p);
template <typename T>
void depthwise_tma_run(const ConvProblem& p, cudaStream_t stream);

bool depthwise_rows_can_run(const ConvProblem& p);
template <typename T>
void depthwise_rows_run(const ConvProblem& p, cudaStream_t stream);

bool depthwise_large_can_run(const ConvProblem& p);
template <typename T>
void depthwise_large_run(const ConvProblem& p, cudaStream_t stream);

bool depthwise_nchw_can_run(const ConvProblem& p);
template <typename T>
void depthwise_nchw_run(const ConvProblem& p, cudaStream_t stream);

// Dense convolution over 1-4 input channels (image stems): 3/5/7 square filters, stride 1 or 2,
// taps and a window staged in shared memory, kStemPx pixels x 16 output channels a thread, the
// fused epilogue in registers (stem.cuh).
bool stem_direct_can_run(const ConvProblem& p);
template <typename T>
void stem_direct_run(const ConvProblem& p, cudaStream_t stream);

bool general_staged_can_run(const ConvProblem& p);
template <typename T>
void general_staged_run(const ConvProblem& p, cudaStream_t stream);
// general_direct runs every problem.
template <typename T>
void general_direct_run(const ConvProblem& p, cudaStream_t stream);

// ---- TMA host helpers (depthwise_tma.cu), shared with depthwise_large ----

// Whether the device runs TMA kernels: sm_90+, and the extension carries code compiled for it (a
// build for older targets only would run their PTX, whose TMA calls trap). Read once per device.
// With no GPU visible (the algorithm query on a build machine) the answer is for sm_90, the
// build's default target.
bool tma_device();

// Byte strides of the TMA map's dims 1..3 (rows, channels, images) of x viewed from `shift`
// elements before it, or false if the layout cannot be described: each a multiple of 16 below
// 2^40 (a size-1 dim gets the dense value).
bool tma_strides(const ConvProblem& p, int64_t shift, uint64_t (&out)[3]);

// The TMA's 4-D view of x (columns, rows, channels, images; byte strides from tma_strides)
// starting `shift` elements before x, read in box_w x box_h boxes, zeros outside. Raises
// "gpukern::conv2d: ..." when the driver has no encoder or the encoding fails.
CUtensorMap x_tensor_map(const ConvProblem& p, CUtensorMapDataType dtype,
                         const uint64_t (&strides)[3], int64_t shift, int box_w, int box_h);

// Whether depthwise_tma's 64 x 64 (narrow) output tiles cover an output plane exactly.
bool tma_tiles_cover_plane(const ConvProblem& p);

// The tensor map's element type for the kernel's T (float, __half, __nv_bfloat16).
template <typename T>
CUtensorMapDataType tma_dtype() {
  if constexpr (std::is_same_v<T, float>) return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  if constexpr (std::is_same_v<T, __half>) return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
}

// a rounded up to a multiple of m.
inline int64_t round_up(int64_t a, int64_t m) { return (a + m - 1) / m * m; }

}  // namespace gpukern
