#pragma once
// Two CUDA events for the first-call timings (conv/igemm/blas.cpp's cuBLASLt tuning, conv/
// vendor.cpp's race), destroyed however the timing leaves (a failed CUDA check throws).
// CUDA builds only.
#include <c10/cuda/CUDAException.h>
#include <cuda_runtime_api.h>

namespace gpukern {

struct TimingEvents {
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  TimingEvents() {
    cudaError_t err = cudaEventCreate(&start);
    if (err == cudaSuccess) err = cudaEventCreate(&stop);
    if (err != cudaSuccess && start != nullptr) cudaEventDestroy(start);
    C10_CUDA_CHECK(err);
  }
  ~TimingEvents() {
    if (start != nullptr) cudaEventDestroy(start);
    if (stop != nullptr) cudaEventDestroy(stop);
  }
  TimingEvents(const TimingEvents&) = delete;
  TimingEvents& operator=(const TimingEvents&) = delete;
};

}  // namespace gpukern
