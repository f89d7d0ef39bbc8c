#pragma once
// What the conv (kernel.cuh) and GEMM (gemm.cuh) instantiations share around CUTLASS's device
// adapters (ConvUniversalAdapter, GemmUniversalAdapter): the dummy buffers CUTLASS's
// can_implement judges shapes and strides with, and one launch. Torch-free.
#include <cstdint>

#include "cutlass/cutlass.h"

#include "conv/igemm/config.h"

namespace gpukern {
namespace conv {

// Aligned, non-null stand-ins for every pointer: can_implement looks at sizes, strides and
// alignment only, never at the data.
inline IgemmBuffers probe_buffers() {
  IgemmBuffers b;
  b.x = b.w = b.bias = b.residual = reinterpret_cast<const void*>(uintptr_t{256});
  b.y = reinterpret_cast<void*>(uintptr_t{256});
  return b;
}

// initialize (TMA descriptors, workspace) and run on the stream: 0, or the cutlass::Status.
template <class Op>
int run_adapter(const typename Op::Arguments& args, void* workspace, void* stream) {
  Op op;
  const auto s = static_cast<cudaStream_t>(stream);
  cutlass::Status status = op.initialize(args, workspace, s);
  if (status == cutlass::Status::kSuccess) status = op.run(s);
  return status == cutlass::Status::kSuccess ? 0 : static_cast<int>(status);
}

}  // namespace conv
}  // namespace gpukern
