#pragma once
// The igemm path's launch of one CUTLASS kernel entry (conv/igemm/config.h IgemmKernel or
// GemmKernel): the device pointers of a run, CUTLASS's verdict on a problem remembered per
// (kernel, problem), and the launch with its workspace on the current stream. Shared by the
// implicit-GEMM conv kernel (igemm.cpp) and the 1x1 GEMM forms (gemm_forms.cpp). Internal to the
// igemm path: CUDA builds with CUTLASS (GPUKERN_WITH_CUTLASS) only.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>

#include <array>
#include <cstdint>
#include <limits>
#include <mutex>
#include <unordered_map>

#include "conv/igemm/config.h"
#include "core/checks.h"

namespace gpukern {
namespace igemm_forms {

using conv::GemmProblem;
using conv::IgemmBuffers;
using conv::IgemmProblem;

constexpr int64_t kMaxInt = std::numeric_limits<int32_t>::max();

// The pointers of one run: x, w, bias and residual (undefined: null), y; act an ActKind.
inline IgemmBuffers buffers(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias,
                     const at::Tensor& residual, const at::Tensor& y, int act) {
  IgemmBuffers b;
  b.x = x.const_data_ptr();
  b.w = w.const_data_ptr();
  b.bias = bias.defined() ? bias.const_data_ptr() : nullptr;
  b.residual = residual.defined() ? residual.const_data_ptr() : nullptr;
  b.y = y.data_ptr();
  b.act = act;
  return b;
}

// CUTLASS's verdict on one problem for one kernel entry (IgemmKernel or GemmKernel), and the
// workspace its run needs (when it can run).
struct Verdict {
  bool ok = false;
  size_t workspace = 0;
};

// Every field of a problem (sizes, strides, device, SM count): the verdict's key.
inline std::array<int64_t, 29> problem_fields(const IgemmProblem& p) {
  return {p.N,        p.H,        p.W,        p.C,        p.O,     p.R,        p.S,
          p.P,        p.Q,        p.pad_h,    p.pad_w,    p.pad_h_hi, p.pad_w_hi, p.stride_h,
          p.stride_w, p.dil_h,    p.dil_w,    p.x_sn,     p.x_sh,  p.x_sw,     p.w_so,
          p.w_sr,     p.w_ss,     p.y_sn,     p.y_sh,     p.y_sw,  p.y_so,     p.device,
          p.sm_count};
}
inline std::array<int64_t, 13> problem_fields(const GemmProblem& p) {
  return {static_cast<int64_t>(p.form), p.M, p.N, p.K, p.L, p.a_ld, p.a_batch, p.b_ld,
          p.b_batch, p.d_ld, p.d_batch, p.device, p.sm_count};
}

// k.can_implement(p) and k.workspace_bytes(p), remembered per (kernel, problem): each builds
// CUTLASS's Arguments and runs its checks, and a call asked up to three times (the dispatch's
// igemm_can_run, the 1x1 / stem GEMM's test, the launch), every call, though the answer depends
// on nothing else (dummy pointers: the host side checks the real ones' alignment itself). Part
// of the CUTLASS path's host time at batch 1 (45 us per call for ResNet's stem against torch's
// 18 on an H100). Sizes and strides only, never data pointers; bounded (a workload of many
// shapes, e.g. audio of every length, starts over every kMaxVerdicts problems); thread-safe.
template <class Kernel, class Problem>
Verdict verdict(const Kernel& k, const Problem& p) {
  constexpr size_t kMaxVerdicts = 4096;
  using Fields = decltype(problem_fields(p));
  struct Key {
    const Kernel* kernel;
    Fields fields;
    bool operator==(const Key& o) const { return kernel == o.kernel && fields == o.fields; }
  };
  struct KeyHash {
    size_t operator()(const Key& key) const {
      size_t h = std::hash<const void*>{}(key.kernel);
      for (int64_t f : key.fields) h = (h ^ std::hash<int64_t>{}(f)) * 0x100000001b3ull;
      return h;
    }
  };
  static std::mutex mu;
  static std::unordered_map<Key, Verdict, KeyHash> cache;
  const Key key{&k, problem_fields(p)};
  {
    const std::lock_guard<std::mutex> lock(mu);
    const auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  Verdict v;
  v.ok = k.can_implement(p);
  if (v.ok) v.workspace = k.workspace_bytes(p);
  const std::lock_guard<std::mutex> lock(mu);
  if (cache.size() >= kMaxVerdicts) cache.clear();
  cache.emplace(key, v);
  return v;
}

// Runs one kernel entry (IgemmKernel or GemmKernel) with its workspace from the caching
// allocator, on the current stream; v: verdict(k, ip).
template <class Kernel, class Problem>
void launch(const Kernel& k, const Problem& ip, const Verdict& v, IgemmBuffers b,
            const at::Tensor& like) {
  GK_CHECK(v.ok, "conv", "igemm: CUTLASS cannot implement this problem (", k.name, ")");
  at::Tensor workspace;
  if (v.workspace != 0) {
    workspace =
        at::empty({static_cast<int64_t>(v.workspace)}, like.options().dtype(at::kByte));
    b.workspace = workspace.data_ptr();
  }
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream(like.device().index()).stream();
  const int status = k.run(ip, b, stream);
  GK_CHECK(status == 0, "conv", "igemm: kernel ", k.name, " failed (cutlass::Status ", status,
           ")");
}


}  // namespace igemm_forms
}  // namespace gpukern
