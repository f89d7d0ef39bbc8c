// The driver's tensor-map encoder, looked up once (see tensor_map.h).
#ifdef GPUKERN_WITH_CUDA
#include "core/tensor_map.h"

#include <cuda_runtime.h>

namespace gpukern {

TensorMapEncodeTiled tensor_map_encoder() {
  static const TensorMapEncodeTiled fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault,
                                         &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      return TensorMapEncodeTiled{nullptr};
    }
    return reinterpret_cast<TensorMapEncodeTiled>(f);
  }();
  return fn;
}

}  // namespace gpukern
#endif  // GPUKERN_WITH_CUDA
