#pragma once
// The driver's tensor-map encoder (cuTensorMapEncodeTiled) for kernels that load through the
// TMA (device/tma.cuh), found through the runtime's driver entry point so that the extension
// does not link against libcuda. Torch-free; CUDA builds only.
#include <cuda.h>
#include <cudaTypedefs.h>

namespace gpukern {

using TensorMapEncodeTiled = PFN_cuTensorMapEncodeTiled_v12000;

// cuTensorMapEncodeTiled (ABI of CUDA 12.0), looked up once per process; nullptr when the driver
// offers none (the caller raises).
TensorMapEncodeTiled tensor_map_encoder();

}  // namespace gpukern
