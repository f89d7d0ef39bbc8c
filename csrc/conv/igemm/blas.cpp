// 1x1 convolutions as cuBLASLt GEMMs (conv/igemm/blas.h): descriptors, the algorithm per problem
// (the heuristic's candidates, timed once; cached per thread), the launch.
#if defined(GPUKERN_WITH_CUDA)
#include "conv/igemm/blas.h"

#include <ATen/Context.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/Sleep.h>
#include <cublasLt.h>

#include <algorithm>
#include <array>
#include <limits>
#include <unordered_map>
#include <vector>

#include "core/checks.h"
#include "core/knobs.h"
#include "core/array_hash.h"
#include "core/timing_events.h"

namespace gpukern {
namespace conv {
namespace {

constexpr int kActNone = 0, kActRelu = 1;  // device/activation.cuh's ActKind values

void check(cublasStatus_t s, const char* what) {
  GK_CHECK(s == CUBLAS_STATUS_SUCCESS, "conv", "cuBLASLt ", what, " failed (status ",
           static_cast<int>(s), ")");
}

// The largest power of two up to 16 dividing the address and every byte step of an operand.
uint32_t alignment(const void* ptr, const BlasOperand& o, int64_t elem) {
  uint64_t bits = reinterpret_cast<uintptr_t>(ptr) | static_cast<uint64_t>(o.ld * elem) |
                  static_cast<uint64_t>(o.batch_stride * elem) | 16u;
  return static_cast<uint32_t>(bits & (~bits + 1));
}

// How many of the heuristic's algorithms a problem's first call times (blas.h: the algorithm).
constexpr int kCandidates = 8;

// Whether the heuristic's candidates are timed (blas.h): GPUKERN_BLAS_TUNE=0 in the environment
// keeps its first choice; so does torch's deterministic mode.
bool tuning_enabled() {
  if (env_switch("GPUKERN_BLAS_TUNE") == 0) return false;
  return !at::globalContext().deterministicAlgorithms();
}

// A cached problem: its descriptors and algorithm (ok false: cuBLASLt offered none). `candidates`
// holds the heuristic's algorithms until a call times them (tuned true afterwards).
struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  std::array<cublasLtMatrixLayout_t, 3> layouts{};  // a, b, d (c uses d's)
  cublasLtMatmulAlgo_t algo{};
  std::vector<cublasLtMatmulAlgo_t> candidates;
  bool ok = false;
  bool tuned = true;

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (op != nullptr) cublasLtMatmulDescDestroy(op);
    for (auto l : layouts) {
      if (l != nullptr) cublasLtMatrixLayoutDestroy(l);
    }
  }
};

using Key = std::array<int64_t, 24>;

cudaDataType_t data_type(int dtype) {
  switch (dtype) {
    case 0: return CUDA_R_16BF;
    case 1: return CUDA_R_16F;
    default: return CUDA_R_32F;
  }
}

int64_t elem_size(int dtype) { return dtype == 2 ? 4 : 2; }

cublasLtEpilogue_t epilogue(const BlasGemm& g) {
  if (g.act == kActRelu) return g.has_bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
  return g.has_bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
}

cublasLtMatrixLayout_t layout(const BlasGemm& g, const BlasOperand& o) {
  cublasLtMatrixLayout_t l = nullptr;
  check(cublasLtMatrixLayoutCreate(&l, data_type(g.dtype), static_cast<uint64_t>(o.rows),
                                   static_cast<uint64_t>(o.cols), o.ld),
        "matrix layout");
  if (g.batch > 1) {
    const int32_t count = static_cast<int32_t>(g.batch);
    check(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                           sizeof(count)),
          "batch count");
    check(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                           &o.batch_stride, sizeof(o.batch_stride)),
          "batch stride");
  }
  return l;
}

void build(Plan& plan, const BlasGemm& g, const std::array<uint32_t, 4>& align,
           cublasLtHandle_t handle, size_t workspace, bool tune) {
  const cublasComputeType_t compute =
      g.dtype == 2 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  check(cublasLtMatmulDescCreate(&plan.op, compute, CUDA_R_32F), "matmul descriptor");
  const cublasOperation_t ta = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = CUBLAS_OP_N;
  check(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)),
        "transa");
  check(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)),
        "transb");
  const cublasLtEpilogue_t epi = epilogue(g);
  check(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi,
                                       sizeof(epi)),
        "epilogue");
  plan.layouts = {layout(g, g.a), layout(g, g.b), layout(g, g.d)};

  cublasLtMatmulPreference_t pref = nullptr;
  check(cublasLtMatmulPreferenceCreate(&pref), "preference");
  const uint64_t ws = workspace;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                       sizeof(ws));
  const cublasLtMatmulPreferenceAttributes_t which[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4; ++i) {
    cublasLtMatmulPreferenceSetAttribute(pref, which[i], &align[i], sizeof(align[i]));
  }
  std::array<cublasLtMatmulHeuristicResult_t, kCandidates> results{};
  int found = 0;
  const int wanted = tune ? kCandidates : 1;
  const cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(
      handle, plan.op, plan.layouts[0], plan.layouts[1], plan.layouts[2], plan.layouts[2], pref,
      wanted, results.data(), &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (s != CUBLAS_STATUS_SUCCESS) return;
  for (int i = 0; i < std::min(found, wanted); ++i) {
    if (results[i].state == CUBLAS_STATUS_SUCCESS) plan.candidates.push_back(results[i].algo);
  }
  plan.ok = !plan.candidates.empty();
  if (plan.ok) plan.algo = plan.candidates.front();
  plan.tuned = plan.candidates.size() < 2;
  if (plan.tuned) plan.candidates.clear();
}

// One launch of the plan's GEMM with `algo`.
cublasStatus_t launch(const Plan& plan, const cublasLtMatmulAlgo_t& algo, const BlasGemm& g,
                      const BlasPointers& p, cublasLtHandle_t handle, void* workspace,
                      size_t workspace_bytes, cudaStream_t stream) {
  const float alpha = 1.0f, beta = g.has_residual ? 1.0f : 0.0f;
  const void* cptr = g.has_residual ? p.residual : p.d;
  return cublasLtMatmul(handle, plan.op, &alpha, p.a, plan.layouts[0], p.b, plan.layouts[1],
                        &beta, cptr, plan.layouts[2], p.d, plan.layouts[2], &algo, workspace,
                        workspace_bytes, stream);
}

// Times each candidate on this call's operands and keeps the fastest as the plan's algorithm:
// kRounds rounds over the candidates (interleaved, so that a clock ramping up or a neighbour's
// load does not favour one), in each a warm-up launch, then kTimedLaunches launches back to back
// between two events; a candidate's time is its best round. The operands stay in L2 where they
// fit, as in a CUDA graph of repeated calls (the project's layer timing) and in a model, where a
// layer reads what the previous one just wrote. A spin kernel first lets the host queue the
// launches ahead of the GPU, so that the events time the kernels, not the host's calls (a 3 us
// GEMM is shorter than one cublasLtMatmul call). Each launch writes d, which the call's own
// launch then overwrites; a candidate cuBLASLt refuses to launch is dropped. Not while `stream`
// captures a CUDA graph (the plan stays untuned and a later call times it), nor when the
// residual is d itself (C would be read after a candidate wrote D).
void tune(Plan& plan, const BlasGemm& g, const BlasPointers& p, cublasLtHandle_t handle,
          void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (g.has_residual && p.residual == p.d) return;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  C10_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  if (status != cudaStreamCaptureStatusNone) return;
  constexpr int kRounds = 3;
  constexpr int kTimedLaunches = 8;
  constexpr int64_t kSpinCycles = 200000;  // ~100 us at an H100's clock: the queue's head start
  const size_t n = plan.candidates.size();
  // A candidate's best time over the rounds; one cuBLASLt refused to launch is dropped.
  std::vector<float> best_ms(n, std::numeric_limits<float>::infinity());
  std::vector<bool> refused(n, false);
  TimingEvents events;
  for (int round = 0; round < kRounds; ++round) {
    for (size_t i = 0; i < n; ++i) {
      if (refused[i]) continue;
      const cublasLtMatmulAlgo_t& algo = plan.candidates[i];
      at::cuda::sleep(kSpinCycles);
      bool ok = launch(plan, algo, g, p, handle, workspace, workspace_bytes, stream) ==
                CUBLAS_STATUS_SUCCESS;
      C10_CUDA_CHECK(cudaEventRecord(events.start, stream));
      for (int r = 0; r < kTimedLaunches && ok; ++r) {
        ok = launch(plan, algo, g, p, handle, workspace, workspace_bytes, stream) ==
             CUBLAS_STATUS_SUCCESS;
      }
      C10_CUDA_CHECK(cudaEventRecord(events.stop, stream));
      C10_CUDA_CHECK(cudaEventSynchronize(events.stop));
      if (!ok) {
        refused[i] = true;
        continue;
      }
      float t = 0.0f;
      C10_CUDA_CHECK(cudaEventElapsedTime(&t, events.start, events.stop));
      best_ms[i] = std::min(best_ms[i], t);
    }
  }
  int best_index = -1;
  for (size_t i = 0; i < n; ++i) {
    if (!refused[i] && (best_index < 0 || best_ms[i] < best_ms[best_index])) {
      best_index = static_cast<int>(i);
    }
  }
  if (best_index >= 0) plan.algo = plan.candidates[best_index];
  plan.candidates.clear();
  plan.tuned = true;
}

}  // namespace

bool blas_act_supported(int act) { return act == kActNone || act == kActRelu; }

void blas_prepare_handle(cudaStream_t stream) {
  thread_local uint64_t ready = 0;  // a bit per device index below 64
  const int device = c10::cuda::current_device();
  const uint64_t bit = device < 64 ? uint64_t{1} << device : 0;
  if ((ready & bit) != 0) return;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  C10_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  if (status != cudaStreamCaptureStatusNone) return;
  at::cuda::getCurrentCUDABlasLtHandle();
  at::cuda::getCUDABlasLtWorkspace();
  ready |= bit;
}

bool blas_gemm_run(const BlasGemm& g, const BlasPointers& p, cudaStream_t stream) {
  if (!blas_act_supported(g.act)) return false;
  const int64_t es = elem_size(g.dtype);
  const BlasOperand& c = g.d;
  const std::array<uint32_t, 4> align = {
      alignment(p.a, g.a, es), alignment(p.b, g.b, es),
      alignment(g.has_residual ? p.residual : p.d, c, es), alignment(p.d, g.d, es)};
  if (g.has_bias && reinterpret_cast<uintptr_t>(p.bias) % 16 != 0) return false;
  const Key key = {g.dtype,        g.trans_a,         g.a.rows,  g.a.cols,     g.a.ld,
                   g.a.batch_stride, g.b.rows,        g.b.cols,  g.b.ld,       g.b.batch_stride,
                   g.d.rows,       g.d.cols,          g.d.ld,    g.d.batch_stride, g.batch,
                   g.act,          g.has_bias,        g.has_residual, g.device, align[0],
                   align[1],       align[2],          align[3],  tuning_enabled()};
  // Per thread: a call sets the bias pointer on its plan's descriptor, so plans are not shared.
  // Bounded: a workload of many shapes starts over every kMaxPlans problems.
  constexpr size_t kMaxPlans = 1024;
  thread_local std::unordered_map<Key, Plan, ArrayHash> plans;
  cublasLtHandle_t handle = at::cuda::getCurrentCUDABlasLtHandle();
  void* workspace = at::cuda::getCUDABlasLtWorkspace();
  const size_t workspace_bytes = at::cuda::getCUDABlasLtWorkspaceSize();
  auto it = plans.find(key);
  if (it == plans.end()) {
    if (plans.size() >= kMaxPlans) plans.clear();
    it = plans.try_emplace(key).first;
    build(it->second, g, align, handle, workspace_bytes, key[23] != 0);
  }
  Plan& plan = it->second;
  if (!plan.ok) return false;
  if (g.has_bias) {
    check(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p.bias,
                                         sizeof(p.bias)),
          "bias pointer");
  }
  if (!plan.tuned) tune(plan, g, p, handle, workspace, workspace_bytes, stream);
  check(launch(plan, plan.algo, g, p, handle, workspace, workspace_bytes, stream), "matmul");
  return true;
}

}  // namespace conv
}  // namespace gpukern

#endif  // GPUKERN_WITH_CUDA
