#pragma once
// The activations of the fused conv epilogue (y = act(conv + bias + residual)), chosen at run time
// by an int code, in fp32. Torch-free, host and device: the CUTLASS epilogue functor
// (conv/igemm/epilogue.cuh), the direct kernels' epilogue pass and the CPU path use this one
// definition. Each matches the torch function named beside it (NaN propagates as torch's does).
#include <cmath>

#if defined(__CUDACC__)
#define GK_HD __host__ __device__ __forceinline__
#else
#define GK_HD inline
#endif

namespace gpukern {

enum ActKind : int {
  kActNone = 0,       // identity
  kActRelu = 1,       // F.relu
  kActRelu6 = 2,      // F.relu6 (hardtanh(0, 6))
  kActSilu = 3,       // F.silu
  kActGelu = 4,       // F.gelu (approximate="none", erf)
  kActGeluTanh = 5,   // F.gelu(approximate="tanh")
  kActHardswish = 6,  // F.hardswish
  kActSigmoid = 7,    // torch.sigmoid
};
constexpr int kActCount = 8;

GK_HD float activate(int kind, float v) {
  switch (kind) {
    case kActRelu: return v < 0.f ? 0.f : v;  // NaN stays NaN
    case kActRelu6: return v < 0.f ? 0.f : (v > 6.f ? 6.f : v);
    case kActSilu: return v / (1.f + expf(-v));
    case kActGelu: return 0.5f * v * (1.f + erff(v * 0.70710678118654752f));
    case kActGeluTanh: {
      const float inner = 0.79788456080286536f * (v + 0.044715f * v * v * v);
      return 0.5f * v * (1.f + tanhf(inner));
    }
    case kActHardswish: {
      const float t = v + 3.f;
      return v * (t < 0.f ? 0.f : (t > 6.f ? 6.f : t)) * (1.f / 6.f);
    }
    case kActSigmoid: return 1.f / (1.f + expf(-v));
    default: return v;
  }
}

}  // namespace gpukern

#undef GK_HD
