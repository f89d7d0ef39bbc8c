// Autograd-key kernels for every public gpukern op: gpukern is forward only, so a call that would
// need a backward (grad mode on and an input that requires grad) raises a clear error here instead
// of returning a result that silently drops out of the autograd graph; every other call is passed
// on below autograd unchanged. One boxed kernel serves all ops (it only looks at the tensors on
// the stack), so adding an op here is one line. Under torch.inference_mode() the Autograd keys are
// excluded and this kernel is not reached at all; under torch.no_grad() it costs one TLS read and
// one redispatch.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/GradMode.h>
#include <torch/library.h>

#include <string>

#include "core/checks.h"

namespace gpukern {
namespace {

bool needs_grad(const c10::IValue& v) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    return t.defined() && t.requires_grad();
  }
  if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorList().vec()) {
      if (t.defined() && t.requires_grad()) return true;
    }
  }
  return false;
}

void inference_only(const c10::OperatorHandle& op, c10::DispatchKeySet keys,
                    torch::jit::Stack* stack) {
  if (c10::GradMode::is_enabled()) {
    const size_t n = op.schema().arguments().size();
    for (const c10::IValue& v : torch::jit::last(*stack, n)) {
      if (needs_grad(v)) {
        // The op's name without the "gpukern::" namespace, plus its overload if any.
        const auto& name = op.schema().operator_name();
        std::string short_name = name.name.substr(name.name.find("::") + 2);
        if (!name.overload_name.empty()) short_name += "." + name.overload_name;
        GK_CHECK(false, short_name,
                 "gpukern is inference-only (forward only), but an input requires grad with "
                 "grad mode on; call it under torch.inference_mode() or torch.no_grad(), or "
                 "detach the inputs");
      }
    }
  }
  // Below autograd (and ADInplaceOrView, a fallthrough for these functional ops) the outputs are
  // plain tensors: they never require grad, whatever the inputs.
  at::AutoDispatchBelowADInplaceOrView guard;
  op.redispatchBoxed(keys & c10::after_ADInplaceOrView_keyset, stack);
}

}  // namespace
}  // namespace gpukern

TORCH_LIBRARY_IMPL(gpukern, Autograd, m) {
  const char* ops[] = {"conv1d", "conv1d.padding", "conv2d", "conv2d.padding", "convolve",
                       "mv", "sum", "sum.dim_IntList", "mean", "mean.dim", "amax", "amin"};
  for (const char* name : ops) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&gpukern::inference_only>());
  }
}
