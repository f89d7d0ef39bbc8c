// The one schema block of gpukern: every op is declared here, once, with aten's argument names
// and defaults, and the public ones get the autograd guard below. Each family registers its CPU
// and CUDA kernels (and its algorithm queries) with TORCH_LIBRARY_IMPL in its ops file
// (csrc/conv/ops.cpp, and mv's and reduce's).
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <Python.h>
#include <c10/core/GradMode.h>
#include <torch/library.h>

#include <string>

#include "conv/igemm/igemm.h"
#include "core/algo_table.h"
#include "core/checks.h"

#ifdef GPUKERN_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>

#include "conv/layout.h"
#endif

// GPUKERN_CUDA_ARCHS is the comma-separated list of nvcc codes (sm_90, compute_90) that setup.py
// compiled the kernels for; stringised whole so the commas survive.
#define GK_STRINGIZE2(...) #__VA_ARGS__
#define GK_STRINGIZE(...) GK_STRINGIZE2(__VA_ARGS__)

extern "C" {
// Importing torch_ops._C runs the static registrations of this library; the module itself is
// empty but for WITH_CUDA (the ops are reached through torch.ops.gpukern).
// WITH_CUDA tells Python whether this build compiled the CUDA kernels, CUDA_ARCHS for which
// architectures ("sm_90,compute_90"; "" in a CPU-only build).
PyObject* PyInit__C(void) {
  static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, nullptr};
  PyObject* module = PyModule_Create(&module_def);
#ifdef GPUKERN_WITH_CUDA
  PyModule_AddObject(module, "WITH_CUDA", Py_NewRef(Py_True));
#else
  PyModule_AddObject(module, "WITH_CUDA", Py_NewRef(Py_False));
#endif
#ifdef GPUKERN_CUDA_ARCHS
  PyModule_AddObject(module, "CUDA_ARCHS", PyUnicode_FromString(GK_STRINGIZE(GPUKERN_CUDA_ARCHS)));
#else
  PyModule_AddObject(module, "CUDA_ARCHS", PyUnicode_FromString(""));
#endif
  return module;
}
}

namespace gpukern {
namespace {

// The public ops, the list written once: declared by TORCH_LIBRARY below and guarded by the
// Autograd kernel. Each schema is aten's (names, defaults, list arguments) for its op.
const char* const kPublicOps[] = {
    // conv1d, integer padding: aten::conv1d (stride, padding, dilation are lists).
    "conv1d(Tensor input, Tensor weight, Tensor? bias=None, SymInt[1] stride=1, "
    "SymInt[1] padding=0, SymInt[1] dilation=1, SymInt groups=1) -> Tensor",
    // conv1d, padding "same" / "valid": aten::conv1d.padding.
    "conv1d.padding(Tensor input, Tensor weight, Tensor? bias=None, SymInt[1] stride=1, "
    "str padding=\"valid\", SymInt[1] dilation=1, SymInt groups=1) -> Tensor",
    // conv2d, integer padding: aten::conv2d.
    "conv2d(Tensor input, Tensor weight, Tensor? bias=None, SymInt[2] stride=1, "
    "SymInt[2] padding=0, SymInt[2] dilation=1, SymInt groups=1) -> Tensor",
    // conv2d, padding "same" / "valid": aten::conv2d.padding.
    "conv2d.padding(Tensor input, Tensor weight, Tensor? bias=None, SymInt[2] stride=1, "
    "str padding=\"valid\", SymInt[2] dilation=1, SymInt groups=1) -> Tensor",
    // Fused conv1d: y = act(conv1d(...) + bias [+ residual]); activation "none", "relu",
    // "relu6", "silu", "gelu", "gelu_tanh", "hardswish", "sigmoid", "hardsigmoid"; residual of
    // exactly the
    // output's shape (any strides), or None.
    "conv1d_fused(Tensor input, Tensor weight, Tensor? bias=None, SymInt[1] stride=1, "
    "SymInt[1] padding=0, SymInt[1] dilation=1, SymInt groups=1, str activation=\"none\", "
    "Tensor? residual=None) -> Tensor",
    // The same, padding "same" / "valid".
    "conv1d_fused.padding(Tensor input, Tensor weight, Tensor? bias=None, SymInt[1] stride=1, "
    "str padding=\"valid\", SymInt[1] dilation=1, SymInt groups=1, "
    "str activation=\"none\", Tensor? residual=None) -> Tensor",
    // Fused conv2d: y = act(conv2d(...) + bias [+ residual]), as conv1d_fused.
    "conv2d_fused(Tensor input, Tensor weight, Tensor? bias=None, SymInt[2] stride=1, "
    "SymInt[2] padding=0, SymInt[2] dilation=1, SymInt groups=1, str activation=\"none\", "
    "Tensor? residual=None) -> Tensor",
    // The same, padding "same" / "valid".
    "conv2d_fused.padding(Tensor input, Tensor weight, Tensor? bias=None, SymInt[2] stride=1, "
    "str padding=\"valid\", SymInt[2] dilation=1, SymInt groups=1, "
    "str activation=\"none\", Tensor? residual=None) -> Tensor",
    // True convolution (flipped filter) along the last dim, leading dims broadcast, modes as
    // numpy.convolve / torchaudio.functional.convolve: "full", "same", "valid".
    "convolve(Tensor x, Tensor h, str mode=\"full\") -> Tensor",
    // Matrix-vector product: aten::mv.
    "mv(Tensor self, Tensor vec) -> Tensor",
    // Sum of all elements: aten::sum.
    "sum(Tensor self, *, ScalarType? dtype=None) -> Tensor",
    // Sum over dims: aten::sum.dim_IntList.
    "sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, "
    "ScalarType? dtype=None) -> Tensor",
    // Mean of all elements: aten::mean.
    "mean(Tensor self, *, ScalarType? dtype=None) -> Tensor",
    // Mean over dims: aten::mean.dim.
    "mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) "
    "-> Tensor",
    // Maximum over dims: aten::amax.
    "amax(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor",
    // Minimum over dims: aten::amin.
    "amin(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor",
};

// "name.overload" of a schema string (what m.impl takes).
std::string op_name(const char* schema) {
  const std::string s(schema);
  return s.substr(0, s.find('('));
}

// ------------------------------------------------------------------------------------------------
// The autograd guard
// ------------------------------------------------------------------------------------------------
// gpukern is forward only: a public op called with grad mode on and an input that requires grad
// raises a clear error here instead of returning a result that silently drops out of the autograd
// graph; every other call is passed on below autograd unchanged. One boxed kernel serves all ops
// (it only looks at the tensors on the stack). Under torch.inference_mode() the Autograd keys are
// excluded and this kernel is not reached at all; under torch.no_grad() it costs one TLS read and
// one redispatch.

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

#ifdef GPUKERN_WITH_CUDA
// The layout conversions (conv/layout.h) as private test ops, on the tensor's device.
at::Tensor to_nhwc_op(const at::Tensor& x, int64_t c_multiple) {
  c10::cuda::CUDAGuard guard(x.device());
  return to_nhwc(x, c_multiple);
}

void nhwc_copy_to_op(const at::Tensor& src, const at::Tensor& dst) {
  // The dispatcher picked CUDA because one of them is on a CUDA device (nhwc_copy_to rejects
  // the other being elsewhere).
  c10::cuda::CUDAGuard guard(dst.is_cuda() ? dst.device() : src.device());
  nhwc_copy_to(src, dst);
}
#endif

}  // namespace
}  // namespace gpukern

TORCH_LIBRARY(gpukern, m) {
  for (const char* schema : gpukern::kPublicOps) m.def(schema);

  // Testing and introspection (core/algo_table.h).
  // Force a family's CUDA algorithm by name ("" = automatic).
  m.def("_set_algorithm(str family, str name) -> ()", &gpukern::set_forced_algorithm);
  // Read the forced algorithm of a family back ("" = automatic).
  m.def("_forced_algorithm(str family) -> str", &gpukern::get_forced_algorithm);
  // The conv1d algorithm a call with these arguments would run (meta tensors work).
  m.def(
      "_algorithm_conv1d(Tensor input, Tensor weight, SymInt[1] stride=1, SymInt[1] padding=0, "
      "SymInt[1] dilation=1, SymInt groups=1) -> str");
  // The same, for padding "same" / "valid".
  m.def(
      "_algorithm_conv1d.padding(Tensor input, Tensor weight, SymInt[1] stride=1, "
      "str padding=\"valid\", SymInt[1] dilation=1, SymInt groups=1) -> str");
  // The conv2d algorithm a call with these arguments would run.
  m.def(
      "_algorithm_conv2d(Tensor input, Tensor weight, SymInt[2] stride=1, SymInt[2] padding=0, "
      "SymInt[2] dilation=1, SymInt groups=1) -> str");
  // The same, for padding "same" / "valid".
  m.def(
      "_algorithm_conv2d.padding(Tensor input, Tensor weight, SymInt[2] stride=1, "
      "str padding=\"valid\", SymInt[2] dilation=1, SymInt groups=1) -> str");
  // Whether this build has the tensor-core implicit-GEMM conv path ("igemm", conv/igemm/igemm.h).
  m.def("_has_igemm() -> bool", [] { return gpukern::igemm_built(); });
  // The tensor-core path's configuration for a dense conv2d call (conv/igemm/igemm.h
  // igemm_config_name; "" when the path cannot take it).
  m.def(
      "_igemm_config_conv2d(Tensor input, Tensor weight, SymInt[2] stride=1, SymInt[2] padding=0, "
      "SymInt[2] dilation=1) -> str");
  // NCHW (any strides) -> a new packed channels_last tensor, channels zero-padded to a multiple
  // of c_multiple (conv/layout.h to_nhwc; CUDA builds and tensors only).
  m.def("_to_nhwc(Tensor x, int c_multiple) -> Tensor");
  // dst[:, c] = src[:, c] for dst's channels, src packed channels_last, possibly padded
  // (conv/layout.h nhwc_copy_to; CUDA builds and tensors only).
  m.def("_nhwc_copy_to(Tensor src, Tensor(a!) dst) -> ()");
  // The conv1d algorithm a convolve call runs ("empty" for an empty output).
  m.def("_algorithm_convolve(Tensor x, Tensor h, str mode=\"full\") -> str");
  // The mv algorithm a call would run.
  m.def("_algorithm_mv(Tensor self, Tensor vec) -> str");
  // The reduction algorithm a sum/mean/amax/amin ("kind") over dim would run.
  m.def("_algorithm_reduce(Tensor self, int[1]? dim, str kind=\"sum\") -> str");
}

#ifdef GPUKERN_WITH_CUDA
TORCH_LIBRARY_IMPL(gpukern, CUDA, m) {
  m.impl("_to_nhwc", &gpukern::to_nhwc_op);
  m.impl("_nhwc_copy_to", &gpukern::nhwc_copy_to_op);
}
#endif

// The autograd guard on every public op.
TORCH_LIBRARY_IMPL(gpukern, Autograd, m) {
  for (const char* schema : gpukern::kPublicOps) {
    m.impl(gpukern::op_name(schema).c_str(),
           torch::CppFunction::makeFromBoxedFunction<&gpukern::inference_only>());
  }
}
