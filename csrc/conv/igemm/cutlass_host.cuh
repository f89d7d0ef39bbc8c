#pragma once
// The host side of one CUTLASS launch, trimmed to what changes from call to call (included by
// kernel.cuh and gemm.cuh before any CUTLASS header; torch-free).
//
// The path is host-bound at batch 1 (benchmarks/host_overhead.py on an H100, us per call against
// torch's F.conv2d: ResNet's 7x7 stem 45 vs 18, a 1x1 256->64 fp32 NCHW 77 vs 24, where the direct
// kernels cost 11-12). Per launch, CUTLASS's adapters (initialize + run) redo two things whose
// answer never changes:
// - each TMA descriptor encode (four per launch: A, B, C, D) looks the driver function up by name
//   (cudaGetDriverEntryPointByVersion in cutlass/cuda_host_adapter.hpp, unless the build links
//   the driver and defines CUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL). The extension does not link
//   libcuda (it must import on machines without a driver), so the direct-call mode is pointed at
//   the functions below, which look each entry point up once and keep it;
// - initialize() sets the kernel's dynamic shared memory limit (cudaFuncSetAttribute) every
//   time. run() below builds the Params itself (Kernel::to_underlying_arguments, what initialize
//   does) and sets the limit once per kernel and device, then launches through the adapter's
//   static run(Params&, stream), CUTLASS's entry for callers that manage their own Params.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <atomic>

namespace gpukern {
namespace conv {

// The driver's entry point of `name` (ABI of CUDA 12.0, what CUTLASS asks for), or nullptr.
inline void* driver_entry_point(const char* name) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
#if CUDART_VERSION >= 12050
  const cudaError_t err = cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault,
                                                           &found);
#else
  const cudaError_t err = cudaGetDriverEntryPoint(name, &fn, cudaEnableDefault, &found);
#endif
  return err == cudaSuccess && found == cudaDriverEntryPointSuccess ? fn : nullptr;
}

// cuTensorMapEncodeTiled / cuTensorMapEncodeIm2col with the lookup done once (a function-local
// static: thread-safe initialisation). A failed lookup answers CUDA_ERROR_UNKNOWN, as CUTLASS's
// wrapper does.
inline CUresult tma_encode_tiled(CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank,
                                 void* base, const cuuint64_t* dims, const cuuint64_t* strides,
                                 const cuuint32_t* box, const cuuint32_t* elem_strides,
                                 CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                                 CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
  static const auto fn = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(
      driver_entry_point("cuTensorMapEncodeTiled"));
  if (fn == nullptr) return CUDA_ERROR_UNKNOWN;
  return fn(map, type, rank, base, dims, strides, box, elem_strides, interleave, swizzle, l2, oob);
}

inline CUresult tma_encode_im2col(CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank,
                                  void* base, const cuuint64_t* dims, const cuuint64_t* strides,
                                  const int* lower, const int* upper, cuuint32_t channels,
                                  cuuint32_t pixels, const cuuint32_t* elem_strides,
                                  CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                                  CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
  static const auto fn = reinterpret_cast<PFN_cuTensorMapEncodeIm2col_v12000>(
      driver_entry_point("cuTensorMapEncodeIm2col"));
  if (fn == nullptr) return CUDA_ERROR_UNKNOWN;
  return fn(map, type, rank, base, dims, strides, lower, upper, channels, pixels, elem_strides,
            interleave, swizzle, l2, oob);
}

}  // namespace conv
}  // namespace gpukern

// CUTLASS's direct-call mode calls `cuTensorMapEncodeTiled(args...)` from its wrapper; the names
// are redirected to the functions above while CUTLASS's headers are read (cuda.h, included above,
// keeps the driver's own declarations; the macros are expanded where CUTLASS defines its wrapper,
// so the header that includes this one #undefs them after its CUTLASS includes).
#ifdef CUTLASS_CUDA_DRIVER_WRAPPER_CALL
#error "conv/igemm/cutlass_host.cuh must come before any CUTLASS header"
#endif
#define CUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL 1
#define cuTensorMapEncodeTiled ::gpukern::conv::tma_encode_tiled
#define cuTensorMapEncodeIm2col ::gpukern::conv::tma_encode_im2col

#include "cutlass/cutlass.h"
#include "cutlass/device_kernel.h"

namespace gpukern {
namespace conv {

// Sets Kernel's dynamic shared memory limit on `device` (the current device) once, as the
// adapters' initialize() does on every call (and with its threshold: at 48 KB and above). Two
// threads may both set it the first time (the same value); a failure is retried on the next call.
template <class Kernel>
bool dynamic_smem_ready(int device) {
  constexpr int bytes = Kernel::SharedStorageSize;
  if constexpr (bytes < (48 << 10)) {
    return true;
  } else {
    constexpr int kDevices = 64;  // devices past this many set it on every call
    static std::atomic<bool> done[kDevices];  // static storage: all false
    const bool tracked = device >= 0 && device < kDevices;
    if (tracked && done[device].load(std::memory_order_acquire)) return true;
    if (cudaFuncSetAttribute(cutlass::device_kernel<Kernel>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) != cudaSuccess) {
      (void)cudaGetLastError();  // clear the error, as the adapters do
      return false;
    }
    if (tracked) done[device].store(true, std::memory_order_release);
    return true;
  }
}

// One launch of adapter Op (GemmUniversalAdapter or ConvUniversalAdapter over Kernel) on the
// current device: what Op::initialize + Op::run do, with the Params built once and the shared
// memory limit set once (above). Returns 0 on success, else a cutlass::Status value.
template <class Op, class Kernel>
int run_cutlass(const typename Op::Arguments& args, void* workspace, int device,
                cudaStream_t stream) {
  cutlass::Status status = Kernel::initialize_workspace(args, workspace, stream);
  if (status != cutlass::Status::kSuccess) return static_cast<int>(status);
  typename Op::Params params = Kernel::to_underlying_arguments(args, workspace);
  if (!dynamic_smem_ready<Kernel>(device)) {
    return static_cast<int>(cutlass::Status::kErrorInternal);
  }
  status = Op::run(params, stream);
  return status == cutlass::Status::kSuccess ? 0 : static_cast<int>(status);
}

}  // namespace conv
}  // namespace gpukern
