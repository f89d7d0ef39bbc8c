// The fused ops' elementwise epilogue pass, y = act(y [+ bias] + r) in fp32 (conv/epilogue.h):
// one flat, vectorised kernel for a dense y and a residual of the same dense layout (or none),
// one indexed kernel for every other pair of strides. Both are grid-stride loops with int64
// indices, one instantiation per dtype x activation x residual present / absent (the bias is a
// run-time pointer).
#include <algorithm>
#include <utility>

#include "conv/epilogue.h"
#include "core/launch.cuh"
#include "device/activation.cuh"
#include "device/fastdiv.cuh"
#include "device/vec.cuh"

namespace gpukern {
namespace {

constexpr int kThreads = 256;
// Blocks per SM of the grid-stride grid (8 x 256 threads = a full sm_90 SM); a smaller output
// launches one thread per element (vector).
constexpr int64_t kBlocksPerSm = 8;
// Outputs below this many elements index the strided pass in 32 bits (FastDiv's range).
constexpr int64_t kMaxNarrow = int64_t{1} << 31;

// The output's 4 dims ordered by y's strides, outermost first: dim 3 is y's innermost, so
// consecutive threads write consecutive addresses of y; r is read through its own strides.
struct EpilogueLayout {
  int64_t size[4];
  int64_t ys[4];
  int64_t rs[4];
};

// One element: fp32 sum, the activation, one rounding to T. b: the channel's bias (0 without).
template <typename T, int kind, bool kResidual>
__device__ __forceinline__ T epilogue_value(T yv, const T* r_elem, float b = 0.f) {
  float v = to_float(yv) + b;
  if constexpr (kResidual) v += to_float(*r_elem);
  return from_float<T>(activate_k<kind>(v));
}

// The bias of an optional per-channel bias (a runtime choice: no extra instantiations). Flat
// order: element e of a dense y is in channel (e / cs) % O (cs: y's channel stride), 32-bit.
template <typename T>
struct EpilogueBias {
  const T* ptr = nullptr;  // nullptr: no bias
  int64_t stride = 0;
  int O = 1;
  FastDiv div_cs, div_o;
  __device__ __forceinline__ float flat(int64_t e) const {
    if (ptr == nullptr) return 0.f;
    const int q = div_cs.div(static_cast<int>(e));
    const int c = q - div_o.div(q) * O;
    return to_float(ptr[c * stride]);
  }
  __device__ __forceinline__ float at(int64_t c) const {
    return ptr == nullptr ? 0.f : to_float(ptr[c * stride]);
  }
};

// y and r as flat arrays of n elements in the same order (a dense y, and r of y's layout or
// absent). The first nvec 16-byte vectors (0 when y or r is not 16-byte aligned) move as vectors,
// the remaining elements one by one.
template <typename T, int kind, bool kResidual>
__global__ void __launch_bounds__(kThreads)
    epilogue_flat_kernel(T* __restrict__ y, const T* __restrict__ r, int64_t n, int64_t nvec,
                         EpilogueBias<T> bias) {
  constexpr int V = kVec16<T>;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kThreads;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  for (int64_t i = first; i < nvec; i += step) {
    Vec<T, V> yv = load_vec<T, V>(y + i * V);
    Vec<T, V> rv;
    if constexpr (kResidual) rv = load_vec<T, V>(r + i * V);
#pragma unroll
    for (int j = 0; j < V; ++j) {
      yv.v[j] = epilogue_value<T, kind, kResidual>(yv.v[j], kResidual ? &rv.v[j] : nullptr,
                                                   bias.flat(i * V + j));
    }
    store_vec<T, V>(y + i * V, yv);
  }
  for (int64_t e = nvec * V + first; e < n; e += step) {
    y[e] = epilogue_value<T, kind, kResidual>(y[e], kResidual ? r + e : nullptr, bias.flat(e));
  }
}

// Any strides: element i of y's memory order, its coordinates, y's and r's offsets. kNarrow
// (fewer than 2^31 elements): the coordinates by 32-bit multiply-shift division (FastDiv), else
// by int64 division; the offsets are int64 either way.
template <typename T, int kind, bool kResidual, bool kNarrow>
__global__ void __launch_bounds__(kThreads)
    epilogue_strided_kernel(T* __restrict__ y, const T* __restrict__ r, EpilogueLayout L,
                            FastDiv div1, FastDiv div2, FastDiv div3, int64_t n,
                            EpilogueBias<T> bias, int o_pos) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += step) {
    int64_t c[4];
    if constexpr (kNarrow) {
      const int r0 = static_cast<int>(i);
      const int q3 = div3.div(r0);
      const int q2 = div2.div(q3);
      const int q1 = div1.div(q2);
      c[3] = r0 - q3 * static_cast<int>(L.size[3]);
      c[2] = q3 - q2 * static_cast<int>(L.size[2]);
      c[1] = q2 - q1 * static_cast<int>(L.size[1]);
      c[0] = q1;
    } else {
      int64_t rest = i;
#pragma unroll
      for (int d = 3; d >= 1; --d) {
        const int64_t q = rest / L.size[d];
        c[d] = rest - q * L.size[d];
        rest = q;
      }
      c[0] = rest;
    }
    int64_t yo = 0, ro = 0;
#pragma unroll
    for (int d = 0; d < 4; ++d) {
      yo += c[d] * L.ys[d];
      if constexpr (kResidual) ro += c[d] * L.rs[d];
    }
    y[yo] = epilogue_value<T, kind, kResidual>(y[yo], kResidual ? r + ro : nullptr,
                                               bias.at(c[o_pos]));
  }
}

// Whether the 4 dims (sizes, strides) tile exactly numel consecutive elements (size-1 dims and
// their strides ignored): sorted by stride, the smallest is 1 and each is the previous one's
// stride times its size.
bool is_dense(const int64_t* size, const int64_t* stride) {
  std::pair<int64_t, int64_t> dims[4];  // (stride, size) of the dims of size > 1
  int m = 0;
  for (int d = 0; d < 4; ++d) {
    if (size[d] != 1) dims[m++] = {stride[d], size[d]};
  }
  std::sort(dims, dims + m);
  int64_t expect = 1;
  for (int k = 0; k < m; ++k) {
    if (dims[k].first != expect) return false;
    expect *= dims[k].second;
  }
  return true;
}

int64_t grid_blocks(int64_t work) {
  const int64_t cap = static_cast<int64_t>(device_props().multiProcessorCount) * kBlocksPerSm;
  return std::max<int64_t>(1, std::min(ceil_div(work, kThreads), cap));
}

template <typename T, int kind, bool kResidual>
void launch(T* y, const T* r, const int64_t* size, const int64_t* ys,
            const int64_t* rs, int64_t n, EpilogueBias<T> bias, cudaStream_t stream) {
  bool same_layout = true;  // r absent, or r's strides equal y's on every dim of size > 1
  if constexpr (kResidual) {
    for (int d = 0; d < 4; ++d) same_layout = same_layout && (size[d] == 1 || ys[d] == rs[d]);
  }
  if (same_layout && is_dense(size, ys) && (bias.ptr == nullptr || n < kMaxNarrow)) {
    if (bias.ptr != nullptr) {  // channel = (e / y's channel stride) % O in flat order
      bias.div_cs = FastDiv(static_cast<uint32_t>(size[1] == 1 ? 1 : ys[1]));
      bias.div_o = FastDiv(static_cast<uint32_t>(size[1]));
    }
    const bool aligned = is_aligned16(y) && (!kResidual || is_aligned16(r));
    const int64_t nvec = aligned ? n / kVec16<T> : 0;
    const int64_t work = nvec + (n - nvec * kVec16<T>);
    epilogue_flat_kernel<T, kind, kResidual>
        <<<static_cast<unsigned>(grid_blocks(work)), kThreads, 0, stream>>>(y, r, n, nvec, bias);
    GK_CHECK_LAUNCH();
    return;
  }
  // Dims by y's stride, largest first (a stable order for equal strides: size-1 dims).
  int order[4] = {0, 1, 2, 3};
  std::stable_sort(order, order + 4, [&](int a, int b) { return ys[a] > ys[b]; });
  EpilogueLayout L;
  int o_pos = 1;
  for (int k = 0; k < 4; ++k) {
    if (order[k] == 1) o_pos = k;
    L.size[k] = size[order[k]];
    L.ys[k] = ys[order[k]];
    L.rs[k] = kResidual ? rs[order[k]] : 0;
  }
  const unsigned blocks = static_cast<unsigned>(grid_blocks(n));
  if (n < kMaxNarrow) {
    const FastDiv d1(static_cast<uint32_t>(L.size[1])), d2(static_cast<uint32_t>(L.size[2])),
        d3(static_cast<uint32_t>(L.size[3]));
    epilogue_strided_kernel<T, kind, kResidual, true>
        <<<blocks, kThreads, 0, stream>>>(y, r, L, d1, d2, d3, n, bias, o_pos);
  } else {
    epilogue_strided_kernel<T, kind, kResidual, false>
        <<<blocks, kThreads, 0, stream>>>(y, r, L, FastDiv(1), FastDiv(1), FastDiv(1), n, bias,
                                          o_pos);
  }
  GK_CHECK_LAUNCH();
}

// The way back with the epilogue: y[n, c, q] = act(src[n, q, c] + r[n, c, q]) (q = h * OW + w),
// src packed NHWC of Cs >= O channels, y and r NCHW-planed (each channel's plane packed, any
// channel and image strides). A block per tile of kFromTP pixels x TC channels of one image
// (channel tiles fastest): loads of 16-byte vectors along channels into shared memory
// (tile[q][c], odd pitch), then stores along pixels, a warp reading r and writing y at consecutive
// addresses of one plane. TC = 8 vectors (32 fp32 or 64 16-bit channels): 32 bytes of src in
// flight per thread.
constexpr int kFromTP = 64;

struct FromNhwc {
  int64_t N, O, HW, Cs;
  int64_t y_sn, y_sc, r_sn, r_sc;
  int64_t ctiles, ptiles, tiles;
};

template <typename T>
constexpr int kFromTC = 8 * kVec16<T>;

template <typename T, int kind, bool kResidual>
__global__ void __launch_bounds__(kThreads)
    epilogue_from_nhwc_kernel(const T* __restrict__ src, T* __restrict__ y,
                              const T* __restrict__ r, FromNhwc a) {
  constexpr int kV = kVec16<T>;
  constexpr int TC = kFromTC<T>;
  __shared__ T tile[kFromTP][TC + 1];
  constexpr int kLanes = TC / kV;            // threads along one pixel's channels
  constexpr int kRows = kThreads / kLanes;   // pixels a load pass covers
  constexpr int kCols = kThreads / kFromTP;  // channels a store pass covers
  for (int64_t b = blockIdx.x; b < a.tiles; b += gridDim.x) {
    const int64_t ct = b % a.ctiles, rest = b / a.ctiles;
    const int64_t n = rest / a.ptiles;
    const int64_t q0 = (rest % a.ptiles) * kFromTP, c0 = ct * TC;
    {
      const int c = (threadIdx.x % kLanes) * kV;
      Vec<T, kV> v[kFromTP / kRows];
#pragma unroll
      for (int i = 0; i < kFromTP / kRows; ++i) {
        const int q = threadIdx.x / kLanes + i * kRows;
        // Cs is a multiple of kV: a vector that starts below O ends inside src's row.
        if (q0 + q < a.HW && c0 + c < a.O) {
          v[i] = load_vec<T, kV>(src + (n * a.HW + q0 + q) * a.Cs + c0 + c);
        } else {
#pragma unroll
          for (int j = 0; j < kV; ++j) v[i].v[j] = from_float<T>(0.f);
        }
      }
#pragma unroll
      for (int i = 0; i < kFromTP / kRows; ++i) {
#pragma unroll
        for (int j = 0; j < kV; ++j) tile[threadIdx.x / kLanes + i * kRows][c + j] = v[i].v[j];
      }
    }
    __syncthreads();
    {
      const int q = threadIdx.x % kFromTP;
#pragma unroll
      for (int i = 0; i < TC / kCols; ++i) {
        const int c = threadIdx.x / kFromTP + i * kCols;
        if (q0 + q < a.HW && c0 + c < a.O) {
          float v = to_float(tile[q][c]);
          if constexpr (kResidual) v += to_float(r[n * a.r_sn + (c0 + c) * a.r_sc + q0 + q]);
          y[n * a.y_sn + (c0 + c) * a.y_sc + q0 + q] = from_float<T>(activate_k<kind>(v));
        }
      }
    }
    __syncthreads();
  }
}

template <typename T>
void launch_from_nhwc(const ConvProblem& p, const T* src, FromNhwc a, cudaStream_t stream) {
  a.ctiles = ceil_div(p.O, int64_t{kFromTC<T>});
  a.ptiles = ceil_div(a.HW, int64_t{kFromTP});
  a.tiles = a.N * a.ctiles * a.ptiles;
  if (a.tiles == 0) return;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(a.tiles, int64_t{1} << 20));
  T* y = static_cast<T*>(p.y);
  const T* r = static_cast<const T*>(p.r);
  with_activation(p.act, [&](auto k) {
    constexpr int kind = decltype(k)::value;
    if (r != nullptr) {
      epilogue_from_nhwc_kernel<T, kind, true><<<blocks, kThreads, 0, stream>>>(src, y, r, a);
    } else {
      epilogue_from_nhwc_kernel<T, kind, false><<<blocks, kThreads, 0, stream>>>(src, y, r, a);
    }
    GK_CHECK_LAUNCH();
  });
}

}  // namespace

template <typename T>
void conv_epilogue_from_nhwc(const ConvProblem& p, const void* src, int64_t Cs,
                             cudaStream_t stream) {
  FromNhwc a{};
  a.N = p.N;
  a.O = p.O;
  a.HW = p.OH * p.OW;
  a.Cs = Cs;
  a.y_sn = p.y_sn;
  a.y_sc = p.y_so;
  a.r_sn = p.r_sn;
  a.r_sc = p.r_so;
  const T* s = static_cast<const T*>(src);
  GK_CHECK(Cs % kVec16<T> == 0 && Cs >= p.O && is_aligned16(s), "conv",
           "internal error: the epilogue's way back needs 16-byte pixel rows");
  launch_from_nhwc<T>(p, s, a, stream);
}

template void conv_epilogue_from_nhwc<float>(const ConvProblem&, const void*, int64_t,
                                             cudaStream_t);
template void conv_epilogue_from_nhwc<__half>(const ConvProblem&, const void*, int64_t,
                                              cudaStream_t);
template void conv_epilogue_from_nhwc<__nv_bfloat16>(const ConvProblem&, const void*, int64_t,
                                                     cudaStream_t);

template <typename T>
void conv_epilogue_run(const ConvProblem& p, cudaStream_t stream, bool with_bias) {
  const int64_t size[4] = {p.N, p.O, p.OH, p.OW};
  const int64_t n = p.N * p.O * p.OH * p.OW;
  EpilogueBias<T> bias;
  if (with_bias && p.b != nullptr) {
    bias.ptr = static_cast<const T*>(p.b);
    bias.stride = p.b_s;
    bias.O = static_cast<int>(p.O);
  }
  if (n == 0 || (!p.fused() && bias.ptr == nullptr)) return;
  const int64_t ys[4] = {p.y_sn, p.y_so, p.y_sh, p.y_sw};
  const int64_t rs[4] = {p.r_sn, p.r_so, p.r_sh, p.r_sw};
  T* y = static_cast<T*>(p.y);
  const T* r = static_cast<const T*>(p.r);
  with_activation(p.act, [&](auto k) {
    constexpr int kind = decltype(k)::value;
    if (r != nullptr) {
      launch<T, kind, true>(y, r, size, ys, rs, n, bias, stream);
    } else {
      launch<T, kind, false>(y, r, size, ys, rs, n, bias, stream);
    }
  });
}

template void conv_epilogue_run<float>(const ConvProblem&, cudaStream_t, bool);
template void conv_epilogue_run<__half>(const ConvProblem&, cudaStream_t, bool);
template void conv_epilogue_run<__nv_bfloat16>(const ConvProblem&, cudaStream_t, bool);

}  // namespace gpukern
