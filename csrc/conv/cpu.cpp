// The CPU kernel of conv1d, conv2d, convolve and the fused ops: one direct loop nest over a
// ConvProblem (a 1-D problem is the H = 1 case, its loops over kh and oh run once); the fused ops'
// epilogue (p.act, p.r) is applied to the accumulator before the one rounding to the output dtype.
#include "conv/cpu.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/dispatch.h"
#include "device/activation.cuh"

namespace gpukern {
namespace {

// Output index range [lo, hi) whose input index o * s - pad + off lies in [0, n).
void valid_range(int64_t n, int64_t s, int64_t pad, int64_t off, int64_t out, int64_t& lo,
                 int64_t& hi) {
  const int64_t shift = pad - off;  // o * s >= shift  and  o * s <= n - 1 + shift
  lo = shift <= 0 ? 0 : (shift + s - 1) / s;
  const int64_t top = n - 1 + shift;
  hi = top < 0 ? 0 : std::min(out, top / s + 1);
  if (hi < lo) hi = lo;
}

// The fused ops' activations in the CPU's accumulation type: float through the one shared
// definition (device/activation.cuh), double with the same formulas in double (the float64 path
// is the reference-grade one; its result is rounded once, to double).
template <int kind>
float cpu_activate(float v) {
  return activate_k<kind>(v);
}
template <int kind>
double cpu_activate(double v) {
  if constexpr (kind == kActRelu) {
    return v < 0.0 ? 0.0 : v;  // NaN stays NaN, as torch's
  } else if constexpr (kind == kActRelu6) {
    return v < 0.0 ? 0.0 : (v > 6.0 ? 6.0 : v);
  } else if constexpr (kind == kActSilu) {
    return v / (1.0 + std::exp(-v));
  } else if constexpr (kind == kActGelu) {
    return 0.5 * v * (1.0 + std::erf(v * 0.70710678118654752440));
  } else if constexpr (kind == kActGeluTanh) {
    const double inner = 0.79788456080286535588 * (v + 0.044715 * v * v * v);
    return 0.5 * v * (1.0 + std::tanh(inner));
  } else if constexpr (kind == kActHardswish) {
    const double t = v + 3.0;
    return v * (t < 0.0 ? 0.0 : (t > 6.0 ? 6.0 : t)) / 6.0;
  } else if constexpr (kind == kActSigmoid) {
    return 1.0 / (1.0 + std::exp(-v));
  } else if constexpr (kind == kActHardsigmoid) {
    const double t = v + 3.0;
    return (t < 0.0 ? 0.0 : (t > 6.0 ? 6.0 : t)) / 6.0;
  } else {
    return v;
  }
}

// One (n, o) output plane per task item: the plane is accumulated in a contiguous buffer of acc_t
// (bias first, then one input channel and one filter tap at a time over the whole valid output
// range, which keeps the inner loop branch-free and its strides fixed), then written through the
// output's strides. Every output sums bias, then its taps in (c, kh, kw) order.
template <typename scalar_t>
void conv_cpu_kernel(const ConvProblem& p) {
  using acc_t = cpu_acc_t<scalar_t>;
  const auto* x = static_cast<const scalar_t*>(p.x);
  const auto* w = static_cast<const scalar_t*>(p.w);
  const auto* b = static_cast<const scalar_t*>(p.b);
  auto* y = static_cast<scalar_t*>(p.y);
  const auto* r = static_cast<const scalar_t*>(p.r);  // the fused ops' residual, or nullptr
  const bool fused = p.fused();
  const int64_t plane = p.OH * p.OW;
  // About 32K multiply-adds per task, so small planes are batched and big ones run one per task.
  const int64_t plane_work =
      std::max<int64_t>(1, plane * std::max<int64_t>(p.c_per_group, 1) * p.KH * p.KW);
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 15) / plane_work);

  at::parallel_for(0, p.N * p.O, grain, [&](int64_t begin, int64_t end) {
    std::vector<acc_t> acc(plane);
    for (int64_t t = begin; t < end; ++t) {
      const int64_t n = t / p.O;
      const int64_t o = t % p.O;
      const int64_t g = o / p.o_per_group;
      const acc_t b0 = b != nullptr ? static_cast<acc_t>(b[o * p.b_s]) : acc_t(0);
      std::fill(acc.begin(), acc.end(), b0);
      for (int64_t cl = 0; cl < p.c_per_group; ++cl) {
        const scalar_t* xc = x + n * p.x_sn + (g * p.c_per_group + cl) * p.x_sc;
        const scalar_t* wc = w + o * p.w_so + cl * p.w_sc;
        for (int64_t kh = 0; kh < p.KH; ++kh) {
          int64_t oh_lo, oh_hi;
          valid_range(p.H, p.stride_h, p.pad_h, kh * p.dil_h, p.OH, oh_lo, oh_hi);
          for (int64_t kw = 0; kw < p.KW; ++kw) {
            int64_t ow_lo, ow_hi;
            valid_range(p.W, p.stride_w, p.pad_w, kw * p.dil_w, p.OW, ow_lo, ow_hi);
            const acc_t wv = static_cast<acc_t>(wc[kh * p.w_sh + kw * p.w_sw]);
            const int64_t xs = p.stride_w * p.x_sw;
            for (int64_t oh = oh_lo; oh < oh_hi; ++oh) {
              const int64_t ih = oh * p.stride_h - p.pad_h + kh * p.dil_h;
              const scalar_t* xr = xc + ih * p.x_sh;
              acc_t* ar = acc.data() + oh * p.OW;
              int64_t xi = (ow_lo * p.stride_w - p.pad_w + kw * p.dil_w) * p.x_sw;
              for (int64_t ow = ow_lo; ow < ow_hi; ++ow, xi += xs) {
                ar[ow] += wv * static_cast<acc_t>(xr[xi]);
              }
            }
          }
        }
      }
      scalar_t* yp = y + n * p.y_sn + o * p.y_so;
      if (!fused) {
        for (int64_t oh = 0; oh < p.OH; ++oh) {
          for (int64_t ow = 0; ow < p.OW; ++ow) {
            yp[oh * p.y_sh + ow * p.y_sw] = static_cast<scalar_t>(acc[oh * p.OW + ow]);
          }
        }
        continue;
      }
      // The fused ops' epilogue on the accumulator: y = act(acc + residual), rounded once.
      const scalar_t* rp = r != nullptr ? r + n * p.r_sn + o * p.r_so : nullptr;
      with_activation(p.act, [&](auto kind) {
        constexpr int k = decltype(kind)::value;
        for (int64_t oh = 0; oh < p.OH; ++oh) {
          for (int64_t ow = 0; ow < p.OW; ++ow) {
            acc_t v = acc[oh * p.OW + ow];
            if (rp != nullptr) v += static_cast<acc_t>(rp[oh * p.r_sh + ow * p.r_sw]);
            yp[oh * p.y_sh + ow * p.y_sw] = static_cast<scalar_t>(cpu_activate<k>(v));
          }
        }
      });
    }
  });
}

}  // namespace

void conv_cpu_run(const ConvProblem& p, c10::ScalarType st, const char* op) {
  GK_DISPATCH_FLOAT_CPU(st, op, [&] { conv_cpu_kernel<scalar_t>(p); });
}

}  // namespace gpukern
