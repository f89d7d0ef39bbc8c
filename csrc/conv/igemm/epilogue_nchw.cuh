#pragma once
// A CUTLASS SM90 collective epilogue that writes the implicit GEMM's D straight into an output of
// any [N, O, P, Q] strides (NCHW above all), with the fused bias, residual and activation:
//   y[n, o, p, q] = act(alpha * acc[m, o] + bias[o] + residual[n, o, p, q]),  m = (n * P + p) * Q + q,
// in fp32, rounded once. It replaces the TMA epilogue (which stores [m, o] tiles into an NHWC
// tensor) where the caller's output is not channels_last: the NHWC path wrote a channels_last
// temporary and transposed it back in a second pass over the output.
//
// It follows CUTLASS's collective-epilogue interface (the members DefaultEpilogue has; wrapped in
// Sm90TmaWarpSpecializedAdapter, which supplies the TMA-pipeline no-ops), so conv::kernel::
// ConvUniversal runs it after the mainloop. Two steps through shared memory (the kernel is
// non-persistent: its SharedStorage is a union of the mainloop's buffers and this epilogue's, so
// the tile costs no extra shared memory):
// 1. each consumer thread writes its accumulators (alpha applied) into a [TileN][TileM + 4] fp32
//    tile, channel rows of pixels (unrolled: the accumulators are registers; the pitch makes the
//    wgmma fragment's 8 pixels x 4 channels per store conflict-free);
// 2. after a named barrier, a rolled loop over 16-byte vectors of one channel's consecutive pixels
//    (4 fp32 or 8 16-bit): bias, residual, activation, one rounding, one 16-byte store where the
//    vector lies in one image's packed plane and is aligned, element by element otherwise.
// The store of a register fragment straight to NCHW addresses instead (one 4-byte store per
// element, the whole epilogue unrolled) ran 1.5-3x slower than the NHWC kernel plus a transpose
// pass on an H100 (the unrolled code of 128 elements per thread, times the activations).
// Bias, the residual and y need no alignment (the vector path checks). Torch-free.
#include <cstdint>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/fast_math.h"
#include "cutlass/numeric_conversion.h"

#include "device/activation.cuh"

namespace gpukern {
namespace conv {

template <class Element, int TileM, int TileN>
class NchwStoreEpilogue {
 public:
  // The members CUTLASS's kernel and adapters name (DefaultEpilogue's set).
  using EpilogueSchedule = cutlass::gemm::EpilogueDefault;
  using DispatchPolicy = EpilogueSchedule;
  using ElementAccumulator = float;
  using ElementCompute = float;
  using ElementScalar = float;
  using ElementOutput = Element;
  using ElementC = Element;
  using ElementD = Element;
  // Unused by this epilogue (the strides are Arguments' fields); rank-3 for CUTLASS's checks.
  using StrideC = cute::Stride<int64_t, int64_t, int64_t>;
  using StrideD = StrideC;
  using GmemTiledCopyC = void;
  using GmemTiledCopyD = void;
  struct ThreadEpilogueOp {};

  // Pixels per 16-byte vector, and the staging tile's pitch in floats (a multiple of 4 for
  // 16-byte shared loads; 2 * pitch = 8 mod 32 banks: a fragment store is conflict-free).
  static constexpr int kVec = 16 / static_cast<int>(sizeof(Element));
  static constexpr int kPitch = TileM + 4;
  static_assert(TileM % kVec == 0, "a tile row holds whole vectors");

  struct SharedStorage {
    alignas(16) float tile[TileN * kPitch];
    float bias[TileN];
  };
  using TensorStorage = SharedStorage;

  // y and the residual share the strides (n, o, p, q); bias: O elements, or nullptr; residual:
  // nullptr for none. P * Q and Q as the GEMM's M decomposes (m = (n * P + p) * Q + q). vec_ok:
  // the planes are packed (s_q 1, s_p Q), s_n and s_o are multiples of kVec, y and the residual
  // 16-byte aligned (the host side judges).
  struct Arguments {
    float alpha = 1.0f;
    const Element* bias = nullptr;
    const Element* residual = nullptr;
    Element* y = nullptr;
    int64_t s_n = 0, s_o = 0, s_p = 0, s_q = 0;
    int PQ = 1, Q = 1;
    int act = 0;
    bool vec_ok = false;
  };

  struct Params {
    float alpha;
    const Element* bias;
    const Element* residual;
    Element* y;
    int64_t s_n, s_o, s_p, s_q;
    int PQ;
    cutlass::FastDivmod div_pq, div_q;
    int act;
    bool vec_ok;
  };

  template <class ProblemShape>
  static Params to_underlying_arguments(ProblemShape const&, Arguments const& a, void*) {
    return Params{a.alpha, a.bias, a.residual, a.y, a.s_n, a.s_o, a.s_p, a.s_q, a.PQ,
                  cutlass::FastDivmod(a.PQ), cutlass::FastDivmod(a.Q), a.act, a.vec_ok};
  }

  template <class ProblemShape>
  static size_t get_workspace_size(ProblemShape const&, Arguments const&) {
    return 0;
  }

  template <class ProblemShape>
  static cutlass::Status initialize_workspace(ProblemShape const&, Arguments const&, void*,
                                              cudaStream_t,
                                              cutlass::CudaHostAdapter* = nullptr) {
    return cutlass::Status::kSuccess;
  }

  template <class ProblemShape>
  static bool can_implement(ProblemShape const&, Arguments const& a) {
    return a.PQ >= 1 && a.Q >= 1 && a.PQ % a.Q == 0;
  }

  // The adapter passes the shared storage to operator() (its last argument), not here.
  CUTLASS_HOST_DEVICE
  NchwStoreEpilogue(Params const& params, SharedStorage const& = SharedStorage())
      : params_(params) {}

  CUTLASS_DEVICE bool is_source_needed() { return params_.residual != nullptr; }

  template <class ProblemShapeMNKL, class BlockShapeMNK, class BlockCoordMNKL, class FrgEngine,
            class FrgLayout, class TiledMma, class ResidueMNK>
  CUTLASS_DEVICE void operator()(ProblemShapeMNKL problem_shape_mnkl, BlockShapeMNK blk_shape_mnk,
                                 BlockCoordMNKL blk_coord_mnkl,
                                 cute::Tensor<FrgEngine, FrgLayout> const& accumulators,
                                 TiledMma tiled_mma, ResidueMNK, int thread_idx,
                                 char* shared) {
    using namespace cute;
    float* tile_ = reinterpret_cast<SharedStorage*>(shared)->tile;
    static_assert(is_static<FrgLayout>::value, "the accumulator layout must be static");
    static_assert(size<0>(BlockShapeMNK{}) == TileM && size<1>(BlockShapeMNK{}) == TileN,
                  "the epilogue's tile is the kernel's");
    constexpr int kThreads = size(TiledMma{});
    const Params& p = params_;

    // 1. The accumulators into the staging tile at their (pixel, channel) in the CTA tile.
    Tensor local = make_identity_tensor(make_shape(Int<TileM>{}, Int<TileN>{}));
    Tensor thr_local = tiled_mma.get_thread_slice(thread_idx).partition_C(local);
    CUTE_STATIC_ASSERT_V(size(thr_local) == size(accumulators));
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(accumulators); ++i) {
      const int ml = get<0>(thr_local(i));
      const int ol = get<1>(thr_local(i));
      tile_[ol * kPitch + ml] = p.alpha * static_cast<float>(accumulators(i));
    }
    // The tile's bias (0 past O or without one), read from shared memory in step 2.
    const int M = static_cast<int>(size(get<0>(problem_shape_mnkl)));
    const int N = static_cast<int>(size(get<1>(problem_shape_mnkl)));
    const int m0 = static_cast<int>(get<0>(blk_coord_mnkl)) * TileM;
    const int o0 = static_cast<int>(get<1>(blk_coord_mnkl)) * TileN;
    float* bias_s = reinterpret_cast<SharedStorage*>(shared)->bias;
    for (int j = thread_idx; j < TileN; j += kThreads) {
      bias_s[j] = p.bias != nullptr && o0 + j < N ? static_cast<float>(p.bias[o0 + j]) : 0.0f;
    }
    cutlass::arch::NamedBarrier::sync(kThreads,
                                      cutlass::arch::ReservedNamedBarriers::EpilogueBarrier);

    // 2. Vectors of kVec pixels of one channel, consecutive threads along the pixels, kIters per
    // thread in batches of kBatch: a batch's residual loads are issued before its stores (the
    // compiler cannot move a load above a store that might alias it).
    constexpr int kGroups = TileM / kVec;
    constexpr int kIters = TileN * kGroups / kThreads;
    static_assert(TileN * kGroups % kThreads == 0, "whole iterations");
    constexpr int kBatch = kIters < 4 ? kIters : 4;
    static_assert(kIters % kBatch == 0, "whole batches");
    using Vec = cutlass::Array<Element, kVec>;
    gpukern::with_activation(p.act, [&](auto kind) {
      constexpr int kAct = decltype(kind)::value;
      for (int it = 0; it < kIters; it += kBatch) {
        int64_t off[kBatch];  // the vector's offset in y; -1: element by element; -2: none
        Vec r[kBatch];
        CUTLASS_PRAGMA_UNROLL
        for (int k = 0; k < kBatch; ++k) {
          const int idx = thread_idx + (it + k) * kThreads;
          const int ol = idx / kGroups;
          const int m = m0 + (idx - ol * kGroups) * kVec;
          const int o = o0 + ol;
          off[k] = -2;
          if (m >= M || o >= N) continue;
          int img, pq;
          p.div_pq(img, pq, m);
          off[k] = -1;
          // One image's packed plane: pixels pq .. pq + kVec - 1 consecutive, 16-byte aligned.
          if (p.vec_ok && m + kVec <= M && pq + kVec <= p.PQ && pq % kVec == 0) {
            off[k] = img * p.s_n + o * p.s_o + pq;
            if (p.residual != nullptr) r[k] = *reinterpret_cast<const Vec*>(p.residual + off[k]);
          }
        }
        CUTLASS_PRAGMA_UNROLL
        for (int k = 0; k < kBatch; ++k) {
          if (off[k] == -2) continue;
          const int idx = thread_idx + (it + k) * kThreads;
          const int ol = idx / kGroups;
          const int ml = (idx - ol * kGroups) * kVec;
          float v[kVec];
          const float4* src = reinterpret_cast<const float4*>(tile_ + ol * kPitch + ml);
          CUTLASS_PRAGMA_UNROLL
          for (int j = 0; j < kVec / 4; ++j) {
            const float4 f = src[j];
            v[4 * j] = f.x;
            v[4 * j + 1] = f.y;
            v[4 * j + 2] = f.z;
            v[4 * j + 3] = f.w;
          }
          const float b = bias_s[ol];
          if (off[k] >= 0) {
            Vec out;
            CUTLASS_PRAGMA_UNROLL
            for (int j = 0; j < kVec; ++j) {
              float x = v[j] + b;
              if (p.residual != nullptr) x += static_cast<float>(r[k][j]);
              out[j] = static_cast<Element>(activate_k<kAct>(x));
            }
            *reinterpret_cast<Vec*>(p.y + off[k]) = out;
          } else {
            const int m = m0 + ml;
            const int o = o0 + ol;
            CUTLASS_PRAGMA_UNROLL
            for (int j = 0; j < kVec; ++j) {
              if (m + j >= M) break;
              int img, pq, row, col;
              p.div_pq(img, pq, m + j);
              p.div_q(row, col, pq);
              const int64_t e = img * p.s_n + o * p.s_o + row * p.s_p + col * p.s_q;
              float x = v[j] + b;
              if (p.residual != nullptr) x += static_cast<float>(p.residual[e]);
              p.y[e] = static_cast<Element>(activate_k<kAct>(x));
            }
          }
        }
      }
    });
  }

 private:
  Params params_;
};

}  // namespace conv
}  // namespace gpukern
