#pragma once
// The fused epilogue's activation as a CUTLASS compute functor, chosen at run time: the
// ActivationFn of CUTLASS's LinCombPerColBiasEltAct / LinCombPerRowBiasEltAct fusions
// (D = act(alpha * acc + bias + beta * C), C the residual, beta 1 with a residual and 0 without:
// CUTLASS then skips C's loads). Sm90Compute passes a functor's Arguments to it at run time, so one
// instantiation serves every activation (device/activation.cuh lists them). Torch-free.
#include "cutlass/array.h"
#include "cutlass/cutlass.h"

#include "device/activation.cuh"

namespace gpukern {
namespace conv {

// The run-time parameter: an ActKind.
struct ActArguments {
  int kind = 0;
};

template <class T>
struct RuntimeActivation {
  using Arguments = ActArguments;
  CUTLASS_HOST_DEVICE T operator()(T const& v, Arguments const& a) const {
    return T(activate(a.kind, static_cast<float>(v)));
  }
};

// Fragments: one switch on the kind, then the loop specialised for it.
template <class T, int N>
struct RuntimeActivation<cutlass::Array<T, N>> {
  using Arguments = ActArguments;
  CUTLASS_HOST_DEVICE cutlass::Array<T, N> operator()(cutlass::Array<T, N> const& v,
                                                      Arguments const& a) const {
    cutlass::Array<T, N> r;
    with_activation(a.kind, [&](auto k) {
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < N; ++i) {
        r[i] = T(activate_k<decltype(k)::value>(static_cast<float>(v[i])));
      }
    });
    return r;
  }
};

}  // namespace conv
}  // namespace gpukern
