#pragma once
// Host-side launch helpers, the same for every op (include from .cu files only):
//   CudaLaunchContext ctx(input);  // device guard on the input's device + its current stream
//   kernel<<<grid, block, smem, ctx.stream>>>(...);
//   GK_CHECK_LAUNCH();             // surfaces launch errors at the call that caused them
// allow_dynamic_smem() must precede any launch asking for more than 48 KB of shared memory.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <atomic>

#include "core/checks.h"
#include "device/limits.cuh"

#define GK_CHECK_LAUNCH() C10_CUDA_KERNEL_LAUNCH_CHECK()

namespace gpukern {

struct CudaLaunchContext {
  c10::cuda::CUDAGuard guard;
  cudaStream_t stream;
  explicit CudaLaunchContext(const at::Tensor& t)
      : guard(t.device()), stream(at::cuda::getCurrentCUDAStream(t.device().index()).stream()) {}
};

template <typename Kernel>
inline void allow_dynamic_smem(Kernel kernel, size_t bytes) {
  if (bytes > kDefaultSmemLimit) {
    C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(bytes)));
  }
}

// Properties of the current device, read once per device.
inline const cudaDeviceProp& device_props() { return *at::cuda::getCurrentDeviceProperties(); }

// Launch with programmatic stream serialization (sm_90+): the kernel's blocks may be scheduled
// while the preceding kernel of the stream finishes. Only for kernels that call
// pdl_wait_then_release() (device/pdl.cuh) before touching memory, so ordering is unchanged.
template <typename... KArgs, typename... Args>
void launch_pdl(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem,
                cudaStream_t stream, Args... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = device_props().major >= 9 ? 1 : 0;
  C10_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, static_cast<KArgs>(args)...));
}

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A 1-D or 2-D grid of gx x gy blocks, after checking the hardware's limits: a shape that would
// need more raises "gpukern::<op>: output too large for the grid (...)" instead of launching a
// wrong grid.
inline dim3 checked_grid(const char* op, int64_t gx, int64_t gy = 1) {
  GK_CHECK(gx <= kMaxGridX && gy <= kMaxGridY, op, "output too large for the grid (", gx, " x ",
           gy, " blocks)");
  return dim3(static_cast<unsigned>(gx), static_cast<unsigned>(gy));
}

// Resident blocks per SM of kKernel at `threads` threads and no dynamic shared memory (registers
// and threads decide it), read once per device, kernel and warp count: a grid of sms * this is
// one full wave.
template <auto kKernel>
int resident_blocks_per_sm(int device, int threads) {
  constexpr int kMaxWarps = 32;
  static std::atomic<int> cache[64][kMaxWarps + 1];  // per kernel; 0 = not read yet
  const int warps = std::min(kMaxWarps, (threads + 31) / 32);
  std::atomic<int>& slot = cache[device & 63][warps];
  int n = slot.load(std::memory_order_relaxed);
  if (n == 0) {
    C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &n, reinterpret_cast<const void*>(kKernel), threads, 0));
    n = std::max(n, 1);
    slot.store(n, std::memory_order_relaxed);
  }
  return n;
}

}  // namespace gpukern
