#pragma once
// 1x1 convolutions as cuBLASLt GEMMs: the igemm path's "cublas_1x1" configuration
// (conv/igemm/igemm.cpp run4 picks it; the measurements behind it are in conv/igemm/README.md).
//
// A 1x1, stride-1, unpadded convolution is a GEMM, and on an H100 cuBLAS's kernels (cuBLASLt's
// heuristics, the kernels cuDNN itself runs for these layers) matched cuDNN on ResNet-50's and
// MobileNetV3's 1x1 layers where the CUTLASS GEMMs of conv/igemm/gemm.cuh ran 0.5-0.8x of it
// (benchmarks/pointwise_libs.py). Two formulations, in cuBLAS's column-major terms:
//
// - kRows (NHWC activations): D (O x NHW) = W^T (O x C) * X (C x NHW): A = the weight [O, C]
//   read transposed, B = the pixel rows of x, D = the pixel rows of y. The bias is cuBLASLt's
//   per-row bias (one per output channel).
// - kImages (NCHW activations, a GEMM per image, batched): D_n (HW x O) = X_n (HW x C) * W
//   (C x O): A = image n's channel planes, B = the weight (batch stride 0), D_n = y's planes. No
//   bias here (it would be per column, which cuBLASLt's epilogue does not have; the row-order
//   form with a per-row bias got no algorithm from cuBLASLt 13 on an H100).
//
// The epilogue is cuBLASLt's: y = act(acc + bias + residual) with act none or relu (the residual
// is the GEMM's C with beta 1, in D's layout), in fp32, rounded once. fp32 inputs run as TF32
// (CUBLAS_COMPUTE_32F_FAST_TF32): callers use it only where torch allows TF32 for convolutions.
//
// Algorithm: cuBLASLt's heuristic offers up to 8 candidates per problem; the problem's first call
// outside a CUDA-graph capture times each on its own operands (three interleaved rounds, in each
// a warm-up launch, then 8 launches back to back between two events, queued behind a spin kernel
// so that the host's calls do not pace them; a few milliseconds once per shape, like
// cudnn.benchmark's search but always on) and keeps the fastest. The heuristic's first choice is
// kept with GPUKERN_BLAS_TUNE=0 in the environment and under torch's deterministic mode
// (torch.use_deterministic_algorithms), so that the kernel, hence the rounding, does not depend on
// a timing. A call during a capture runs the heuristic's first choice and leaves the timing to
// the next call outside one.
//
// Host cost: the descriptors and the algorithm are chosen once per problem (sizes, strides,
// dtype, epilogue, operand alignments, device, tuning on or off) and cached per thread; a call
// sets the bias pointer and launches. Handle and workspace are torch's (the current stream's).
// CUDA builds only (the caller holds the device guard).
#include <cuda_runtime_api.h>

#include <cstdint>

namespace gpukern {
namespace conv {

// One operand in cuBLAS's column-major terms: rows x cols, leading dimension, batch stride (all
// in elements).
struct BlasOperand {
  int64_t rows = 0, cols = 0, ld = 0, batch_stride = 0;
};

// op(A) (m x k) * B (k x n) -> D (m x n), `batch` times; C (the residual) has D's layout.
struct BlasGemm {
  int dtype = 0;  // 0 bfloat16, 1 float16, 2 float32 (computed as TF32)
  bool trans_a = false;
  BlasOperand a, b, d;
  int64_t batch = 1;
  int act = 0;  // ActKind (device/activation.cuh): 0 none or 1 relu
  bool has_bias = false, has_residual = false;
  int device = 0;
};

struct BlasPointers {
  const void* a = nullptr;
  const void* b = nullptr;
  const void* bias = nullptr;      // m elements of the dtype, contiguous, or null
  const void* residual = nullptr;  // D's layout, or null
  void* d = nullptr;
};

// Whether cuBLASLt's epilogue computes the ActKind `act` (none and relu).
bool blas_act_supported(int act);

// Runs the GEMM on `stream`; false (nothing launched) when cuBLASLt has no algorithm for it.
// Errors from cuBLASLt raise.
bool blas_gemm_run(const BlasGemm& g, const BlasPointers& p, cudaStream_t stream);

// Creates torch's cuBLASLt handle and workspace for the current device and thread unless `stream`
// is capturing a CUDA graph (cublasCreate inside a capture fails, CUBLAS_STATUS_NOT_INITIALIZED,
// and invalidates the capture). The CUDA conv entry points call it on every call, so that a graph
// captured after any earlier gpukern conv call of the thread on that device finds the handle
// made; once made, one thread-local bit test. (A capture that is the thread's very first gpukern
// conv call and runs a cuBLASLt form still fails, as torch.mm does: warm up before capture.)
void blas_prepare_handle(cudaStream_t stream);

}  // namespace conv
}  // namespace gpukern
