// The split-K reduction of the implicit GEMM (conv/igemm/splitk.h).
//
// One block per 32 output pixels x 32 channels: the partials read channel-fastest (each warp a
// 128-byte row per slice), summed with the bias into a shared tile, then written with the lanes
// along y's unit-stride dim: channels for an NHWC y, pixels for an NCHW one (the transpose the
// NHWC kernel output needs costs no extra pass). The residual is read through y's strides.
#include "conv/igemm/splitk.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "core/checks.h"
#include "core/launch.cuh"
#include "device/activation.cuh"
#include "device/vec.cuh"

namespace gpukern {
namespace conv {
namespace {

constexpr int kTile = 32;  // pixels and channels per block
constexpr int kRows = 8;   // warps per block

template <typename T, int kAct>
__global__ void __launch_bounds__(kTile * kRows) split_reduce_kernel(const SplitReduce r) {
  __shared__ float tile[kTile][kTile + 1];  // [channel][pixel]
  const int lane = static_cast<int>(threadIdx.x) % kTile;
  const int row = static_cast<int>(threadIdx.x) / kTile;
  const int64_t o0 = static_cast<int64_t>(blockIdx.x) * kTile;
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * kTile;
  {
    const int64_t o = o0 + lane;
    const bool o_ok = o < r.O;
    const float b =
        (r.bias != nullptr && o_ok) ? to_float(static_cast<const T*>(r.bias)[o]) : 0.f;
#pragma unroll
    for (int i = row; i < kTile; i += kRows) {
      const int64_t m = m0 + i;
      float s = b;
      if (o_ok && m < r.M) {
        const float* src = r.partials + m * r.O + o;
        for (int k = 0; k < r.splits; ++k) s += src[k * r.split_stride];
      }
      tile[lane][i] = s;
    }
  }
  __syncthreads();
  const T* res = static_cast<const T*>(r.residual);
  T* y = static_cast<T*>(r.y);
  const int64_t PQ = r.P * r.Q;
  const bool lanes_on_channels = r.y_so == 1;
#pragma unroll
  for (int i = row; i < kTile; i += kRows) {
    const int c = lanes_on_channels ? lane : i;  // tile coordinates
    const int px = lanes_on_channels ? i : lane;
    const int64_t o = o0 + c, m = m0 + px;
    if (o >= r.O || m >= r.M) continue;
    const int64_t n = m / PQ, pq = m - n * PQ;
    const int64_t p = pq / r.Q, q = pq - p * r.Q;
    const int64_t off = n * r.y_sn + o * r.y_so + p * r.y_sp + q * r.y_sq;
    float v = tile[c][px];
    if (res != nullptr) v += to_float(res[off]);
    y[off] = from_float<T>(activate_k<kAct>(v));
  }
}

template <typename T>
void launch(const SplitReduce& r, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((r.O + kTile - 1) / kTile),
                  static_cast<unsigned>((r.M + kTile - 1) / kTile));
  with_activation(r.act, [&](auto kind) {
    split_reduce_kernel<T, decltype(kind)::value><<<grid, kTile * kRows, 0, stream>>>(r);
  });
  GK_CHECK_LAUNCH();
}

}  // namespace

void split_reduce_run(const SplitReduce& r, cudaStream_t stream) {
  if (r.M == 0 || r.O == 0) return;
  GK_CHECK(r.splits >= 1 && (r.O + kTile - 1) / kTile < (int64_t{1} << 31) &&
               (r.M + kTile - 1) / kTile < 65536,
           "conv", "igemm: split-K reduction grid out of range");
  switch (r.dtype) {
    case 0: return launch<float>(r, stream);
    case 1: return launch<__nv_bfloat16>(r, stream);
    default: return launch<__half>(r, stream);
  }
}

}  // namespace conv
}  // namespace gpukern
