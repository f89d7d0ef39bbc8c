#pragma once
// Programmatic dependent launch, device side (sm_90; the host side is launch_pdl in
// core/launch.cuh). A kernel launched with launch_pdl calls pdl_wait_then_release() before it
// touches global memory:
// first it waits until the preceding kernel of the stream has completed and flushed its memory,
// then it allows the next kernel's blocks to be scheduled: they run their own wait, so they
// still start reading only after this grid has completed. The next kernel is launched only once
// every block of this grid has executed the release, i.e. after the last block of this grid has
// started, so its blocks take slots this grid no longer needs and never displace ours. Back to
// back launches (a CUDA graph, or a stream the host keeps ahead of) then hide the next launch's
// latency and the gap between kernels behind this kernel. Without the launch attribute both
// instructions are no-ops.
namespace gpukern {

__device__ __forceinline__ void pdl_wait_then_release() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

}  // namespace gpukern
