// The one schema block of gpukern. Every op is declared here, once, with aten's argument names
// and defaults; each family registers its CPU and CUDA kernels with TORCH_LIBRARY_IMPL in its
// own files (csrc/<family>/<family>.cpp and <family>_cuda.cu).
#include <Python.h>
#include <torch/library.h>

#include "conv/igemm/igemm.h"
#include "core/algo_table.h"

// GPUKERN_CUDA_ARCHS is the comma-separated list of nvcc codes (sm_90, compute_90) that setup.py
// compiled the kernels for; stringised whole so the commas survive.
#define GK_STRINGIZE2(...) #__VA_ARGS__
#define GK_STRINGIZE(...) GK_STRINGIZE2(__VA_ARGS__)

extern "C" {
// Importing torch_ops._C runs the static registrations above and below; the module itself is
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

TORCH_LIBRARY(gpukern, m) {
  m.def(
      "conv1d(Tensor input, Tensor weight, Tensor? bias=None, SymInt[1] stride=1, "
      "SymInt[1] padding=0, SymInt[1] dilation=1, SymInt groups=1) -> Tensor");
  m.def(
      "conv1d.padding(Tensor input, Tensor weight, Tensor? bias=None, SymInt[1] stride=1, "
      "str padding=\"valid\", SymInt[1] dilation=1, SymInt groups=1) -> Tensor");
  m.def(
      "conv2d(Tensor input, Tensor weight, Tensor? bias=None, SymInt[2] stride=1, "
      "SymInt[2] padding=0, SymInt[2] dilation=1, SymInt groups=1) -> Tensor");
  m.def(
      "conv2d.padding(Tensor input, Tensor weight, Tensor? bias=None, SymInt[2] stride=1, "
      "str padding=\"valid\", SymInt[2] dilation=1, SymInt groups=1) -> Tensor");
  // True convolution (flipped filter) along the last dim, leading dims broadcast, modes as
  // numpy.convolve / torchaudio.functional.convolve: "full", "same", "valid".
  m.def("convolve(Tensor x, Tensor h, str mode=\"full\") -> Tensor");
  m.def("mv(Tensor self, Tensor vec) -> Tensor");
  m.def("sum(Tensor self, *, ScalarType? dtype=None) -> Tensor");
  m.def(
      "sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, "
      "ScalarType? dtype=None) -> Tensor");
  m.def("mean(Tensor self, *, ScalarType? dtype=None) -> Tensor");
  m.def(
      "mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) "
      "-> Tensor");
  m.def("amax(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor");
  m.def("amin(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor");

  // Testing and introspection (core/algo_table.h): force a family's CUDA algorithm by name ("" =
  // automatic), read the setting back, and ask which algorithm a call would run.
  m.def("_set_algorithm(str family, str name) -> ()", &gpukern::set_forced_algorithm);
  m.def("_forced_algorithm(str family) -> str", &gpukern::get_forced_algorithm);
  m.def(
      "_algorithm_conv1d(Tensor input, Tensor weight, SymInt[1] stride=1, SymInt[1] padding=0, "
      "SymInt[1] dilation=1, SymInt groups=1) -> str");
  m.def(
      "_algorithm_conv1d.padding(Tensor input, Tensor weight, SymInt[1] stride=1, "
      "str padding=\"valid\", SymInt[1] dilation=1, SymInt groups=1) -> str");
  m.def(
      "_algorithm_conv2d(Tensor input, Tensor weight, SymInt[2] stride=1, SymInt[2] padding=0, "
      "SymInt[2] dilation=1, SymInt groups=1) -> str");
  m.def(
      "_algorithm_conv2d.padding(Tensor input, Tensor weight, SymInt[2] stride=1, "
      "str padding=\"valid\", SymInt[2] dilation=1, SymInt groups=1) -> str");
  // Whether this build has the tensor-core implicit-GEMM conv path ("igemm", conv/igemm/igemm.h).
  m.def("_has_igemm() -> bool", [] { return gpukern::igemm_built(); });
  m.def("_algorithm_mv(Tensor self, Tensor vec) -> str");
  m.def("_algorithm_reduce(Tensor self, int[1]? dim, str kind=\"sum\") -> str");
}
