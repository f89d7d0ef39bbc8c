#pragma once
// Host-side launch helpers, the same for every op (include from *_cuda.cu only):
//   CudaLaunchContext ctx(input);  // device guard on the input's device + its current stream
//   kernel<<<grid, block, smem, ctx.stream>>>(...);
//   GK_CHECK_LAUNCH();             // surfaces launch errors at the call that caused them
// allow_dynamic_smem() must precede any launch asking for more than 48 KB of shared memory.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#define GK_CHECK_LAUNCH() C10_CUDA_KERNEL_LAUNCH_CHECK()

namespace gpukern {

struct CudaLaunchContext {
  c10::cuda::CUDAGuard guard;
  cudaStream_t stream;
  explicit CudaLaunchContext(const at::Tensor& t)
      : guard(t.device()), stream(at::cuda::getCurrentCUDAStream(t.device().index()).stream()) {}
};

constexpr size_t kDefaultSmemLimit = 48 * 1024;

template <typename Kernel>
inline void allow_dynamic_smem(Kernel kernel, size_t bytes) {
  if (bytes > kDefaultSmemLimit) {
    C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(bytes)));
  }
}

// Properties of the current device, read once per device.
inline const cudaDeviceProp& device_props() { return *at::cuda::getCurrentDeviceProperties(); }

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace gpukern
