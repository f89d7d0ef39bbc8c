#pragma once
// The activations of the fused conv epilogue (y = act(conv + bias + residual)), chosen at run time
// by an int code, in fp32. Torch-free, host and device: the CUTLASS epilogue functor
// (conv/igemm/epilogue.cuh), the direct kernels' epilogue pass and the CPU path use this one
// definition. Each matches the torch function named beside it (NaN propagates as torch's does).
#include <cmath>
#include <type_traits>

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
  kActHardsigmoid = 8,  // F.hardsigmoid (MobileNetV3's squeeze-excitation scale)
};
constexpr int kActCount = 9;

// One activation, fixed at compile time (kind: an ActKind).
template <int kind>
GK_HD float activate_k(float v) {
  if constexpr (kind == kActRelu) {
    return v < 0.f ? 0.f : v;  // NaN stays NaN, as torch's
  } else if constexpr (kind == kActRelu6) {
    return v < 0.f ? 0.f : (v > 6.f ? 6.f : v);
  } else if constexpr (kind == kActSilu) {
    return v / (1.f + expf(-v));
  } else if constexpr (kind == kActGelu) {
    return 0.5f * v * (1.f + erff(v * 0.70710678118654752f));
  } else if constexpr (kind == kActGeluTanh) {
    const float inner = 0.79788456080286536f * (v + 0.044715f * v * v * v);
    return 0.5f * v * (1.f + tanhf(inner));
  } else if constexpr (kind == kActHardswish) {
    const float t = v + 3.f;
    return v * (t < 0.f ? 0.f : (t > 6.f ? 6.f : t)) * (1.f / 6.f);
  } else if constexpr (kind == kActSigmoid) {
    return 1.f / (1.f + expf(-v));
  } else if constexpr (kind == kActHardsigmoid) {
    const float t = v + 3.f;
    return (t < 0.f ? 0.f : (t > 6.f ? 6.f : t)) * (1.f / 6.f);
  } else {
    return v;
  }
}

// Calls f(std::integral_constant<int, kind>{}) with the run-time kind as a compile-time constant,
// so that a loop inside f is specialised per activation (one switch per fragment, not per element).
template <class F>
GK_HD void with_activation(int kind, F&& f) {
  switch (kind) {
    case kActRelu: f(std::integral_constant<int, kActRelu>{}); return;
    case kActRelu6: f(std::integral_constant<int, kActRelu6>{}); return;
    case kActSilu: f(std::integral_constant<int, kActSilu>{}); return;
    case kActGelu: f(std::integral_constant<int, kActGelu>{}); return;
    case kActGeluTanh: f(std::integral_constant<int, kActGeluTanh>{}); return;
    case kActHardswish: f(std::integral_constant<int, kActHardswish>{}); return;
    case kActSigmoid: f(std::integral_constant<int, kActSigmoid>{}); return;
    case kActHardsigmoid: f(std::integral_constant<int, kActHardsigmoid>{}); return;
    default: f(std::integral_constant<int, kActNone>{}); return;
  }
}

// One activation chosen at run time.
GK_HD float activate(int kind, float v) {
  float r = v;
  with_activation(kind, [&](auto k) { r = activate_k<decltype(k)::value>(v); });
  return r;
}

}  // namespace gpukern

#undef GK_HD
