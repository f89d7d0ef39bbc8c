#pragma once
// depthwise_nhwc: depthwise channels_last (NHWC) conv2d: groups == C == O, any stride /
// dilation / padding, filters of up to NhwcTraits::kMaxTaps taps. Each thread owns one vector of
// channels at consecutive output columns of one output row, so every input access of a warp is
// consecutive 16-byte vectors of one pixel (coalesced along C, no layout conversion) and a warp
// instruction moves 512 bytes. Two kernels: conv2d_depthwise_nhwc_kernel<T> (any filter, one
// load per tap and output) and conv2d_depthwise_nhwc_roll_kernel<T, kK> (square 3/5/7, stride 1,
// dilation 1: each input row loaded once per strip of output rows, partial sums rotating
// through kK register slots).
//
// Contract (details above each kernel):
//   grid   1-D: blockIdx.x = (row chunk or (image, strip), column block, channel block), channel
//          blocks fastest so neighbouring blocks take neighbouring memory (NhwcShape).
//   block  tc x tw threads: tc lanes (a power of two <= 32) over channel vectors, tw groups of
//          output columns (items_w(elem_size) or NhwcRoll::items(kK) columns each).
//   shared the block's taps as float [tap][channel], 16 bytes per lane and tap.
//   barriers one: the taps are staged before any thread reads them.
#include <cstdint>
#include <type_traits>

#include "conv/direct/common2d.cuh"
#include "device/limits.cuh"
#include "device/vec.cuh"

namespace gpukern {
namespace conv {

struct NhwcTraits {
  static constexpr int kMaxThreads = 256;
  // Consecutive output columns per thread: 4 for fp32 (16 sums), 2 for 16-bit types (their
  // vectors hold 8 channels: 16 sums; 4 columns took 128-134 registers and spilled).
  static constexpr int items_w(int elem_size) { return elem_size == 4 ? 4 : 2; }
  // Taps staged per block in shared memory as [tap][channel]: K*K * TC * 16 bytes <= 48 KB
  // (no opt-in) with TC = 32 lanes of channel vectors.
  static constexpr int kMaxTaps = 96;
  static constexpr int kMaxSmemBytes = kMaxTaps * 32 * 16;
  static_assert(static_cast<size_t>(kMaxSmemBytes) <= kDefaultSmemLimit, "fits without opt-in");
};

// Work decomposition (host: depthwise_nhwc.cu, plan_nhwc()). A block is tc x tw threads: tc lanes
// (a power of two <= 32) over channel vectors, tw groups of items_w output columns; it covers
// channel vectors [cb * tc, cb * tc + tc), column groups [wb * tw, wb * tw + tw) and output rows
// (n * OH + oh) [rc * rows, rc * rows + rows). blockIdx.x = (rc * w_blocks + wb) * c_blocks + cb:
// neighbouring blocks take neighbouring memory.
struct NhwcShape {
  int tc, tw;
  int64_t c_vecs;    // channel vectors: ceil(C / V)
  int64_t c_blocks, w_groups, w_blocks, row_chunks, rows;
  int64_t img_chunks;  // roll kernel: row strips per image (row_chunks: the other kernel)
  bool x_vec, y_vec;   // vector loads / stores (channels contiguous, aligned, C % V == 0)
};

// NW words as floats: 1 per word for fp32, 2 for half / bfloat16 (low half first; bfloat16
// widens by shifts, 2 instructions per pair). Words in registers, never an addressed local array
// (which ptxas put on the stack).
template <typename T, int NW>
__device__ __forceinline__ void words_to_floats(const unsigned (&w)[NW],
                                                float (&out)[NW * 4 / sizeof(T)]) {
#pragma unroll
  for (int q = 0; q < NW; ++q) {
    if constexpr (std::is_same_v<T, float>) {
      out[q] = __uint_as_float(w[q]);
    } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      out[2 * q] = __uint_as_float(w[q] << 16);
      out[2 * q + 1] = __uint_as_float(w[q] & 0xffff0000u);
    } else {
      const float2 f = __half22float2(
          __halves2half2(__ushort_as_half(static_cast<unsigned short>(w[q] & 0xffffu)),
                         __ushort_as_half(static_cast<unsigned short>(w[q] >> 16))));
      out[2 * q] = f.x;
      out[2 * q + 1] = f.y;
    }
  }
}

// One 16-byte vector (4 words) as V floats.
template <typename T>
__device__ __forceinline__ void words_to_float(const uint4& u, float (&out)[kVec16<T>]) {
  const unsigned w[4] = {u.x, u.y, u.z, u.w};
  words_to_floats<T, 4>(w, out);
}

// V channels of one pixel (p = its first channel): zeros when !in (padding), one vector load
// when allowed, else `valid` scalars through the channel stride (zeros past C).
template <typename T, int V>
__device__ __forceinline__ void nhwc_load(float (&v)[V], const T* p, bool in, bool vec,
                                          int valid, int64_t x_sc) {
  if (!in) {
#pragma unroll
    for (int e = 0; e < V; ++e) v[e] = 0.f;
  } else if (vec) {
    words_to_float<T>(*reinterpret_cast<const uint4*>(p), v);
  } else {
#pragma unroll
    for (int e = 0; e < V; ++e) v[e] = e < valid ? to_float(p[e * x_sc]) : 0.f;
  }
}

// The V taps (kh, kw) of the thread's channels, from the block's shared [tap][channel] copy.
template <typename T, int V>
__device__ __forceinline__ void nhwc_taps(float (&wv)[V], const T* s_tap) {
  words_to_float<T>(*reinterpret_cast<const uint4*>(s_tap), wv);
}

// Stores a thread's sums acc[j][e] (channels c0 + e of output columns ow0 + j, those < OW) of
// one output row yr (at channel c0): a V-element vector per column when allowed, else the
// `valid` channels one by one through the channel stride.
template <typename T, int V, int IW>
__device__ __forceinline__ void nhwc_store(T* yr, const float (&acc)[IW][V], int ow0, int OW,
                                           int64_t y_sw, int64_t y_so, int valid, bool vec) {
#pragma unroll
  for (int j = 0; j < IW; ++j) {
    const int ow = ow0 + j;
    if (ow >= OW) break;
    if (vec) {
      Vec<T, V> out;
#pragma unroll
      for (int e = 0; e < V; ++e) out.v[e] = from_float<T>(acc[j][e]);
      store_vec<T, V>(yr + ow * y_sw, out);
    } else {
#pragma unroll
      for (int e = 0; e < V; ++e)
        if (e < valid) yr[ow * y_sw + e * y_so] = from_float<T>(acc[j][e]);
    }
  }
}

// Any filter, stride and dilation: one load per tap and output (square 3/5/7 filters with
// stride 1 and dilation 1 take conv2d_depthwise_nhwc_roll_kernel below).
template <typename T>
__global__ void __launch_bounds__(NhwcTraits::kMaxThreads)
    conv2d_depthwise_nhwc_kernel(const ConvProblem p, NhwcShape s) {
  using Tr = NhwcTraits;
  constexpr int V = kVec16<T>;
  constexpr int IW = Tr::items_w(sizeof(T));
  extern __shared__ float4 smem4[];  // float4: 16-byte aligned tap vectors
  T* s_w = reinterpret_cast<T*>(smem4);
  const int tcv = s.tc * V;  // channels per block
  const int KH = static_cast<int>(p.KH), KW = static_cast<int>(p.KW), KK = KH * KW;
  const int64_t cb = blockIdx.x % s.c_blocks;
  const int64_t wb = (blockIdx.x / s.c_blocks) % s.w_blocks;
  const int64_t rc = blockIdx.x / s.c_blocks / s.w_blocks;
  const int nthreads = s.tc * s.tw;
  {
    const T* w = ptr<T>(p.w);
    // Tap-fastest reads (contiguous for a contiguous weight), [tap][channel] writes.
    for (int i = threadIdx.x; i < KK * tcv; i += nthreads) {
      const int ch = i / KK, tap = i - ch * KK;
      const int kh = tap / KW, kw = tap - kh * KW;
      const int64_t cg = cb * tcv + ch;
      s_w[tap * tcv + ch] = cg < p.C ? w[cg * p.w_so + kh * p.w_sh + kw * p.w_sw]
                                     : from_float<T>(0.f);
    }
  }
  __syncthreads();  // the only barrier: taps staged
  const int tc = threadIdx.x % s.tc;
  const int tw = threadIdx.x / s.tc;
  const int64_t cv = cb * s.tc + tc;
  const int64_t wg = wb * s.tw + tw;
  if (cv >= s.c_vecs || wg >= s.w_groups) return;
  const int64_t c0 = cv * V;
  const int valid = static_cast<int>(min(static_cast<int64_t>(V), p.C - c0));
  const int ow0 = static_cast<int>(wg * IW);
  const T* s_tap = s_w + tc * V;
  const int OW = static_cast<int>(p.OW);
  const int64_t x_sh = p.x_sh, x_sw = p.x_sw, x_sc = p.x_sc;
  const bool x_vec = s.x_vec;

  float bias[V];
#pragma unroll
  for (int e = 0; e < V; ++e)
    bias[e] = (p.b != nullptr && e < valid) ? to_float(ptr<T>(p.b)[(c0 + e) * p.b_s]) : 0.f;

  const int64_t total_rows = p.N * p.OH;
  const int64_t row_end = min(total_rows, (rc + 1) * s.rows);
#pragma unroll 1
  for (int64_t row = rc * s.rows; row < row_end; ++row) {
    const int64_t n = row / p.OH;
    const int oh = static_cast<int>(row - n * p.OH);
    const T* xn = ptr<T>(p.x) + n * p.x_sn + c0 * x_sc;
    float acc[IW][V];
#pragma unroll
    for (int j = 0; j < IW; ++j)
#pragma unroll
      for (int e = 0; e < V; ++e) acc[j][e] = bias[e];

    const int64_t ih0 = oh * p.stride_h - p.pad_h;
    const int64_t iw0 = static_cast<int64_t>(ow0) * p.stride_w - p.pad_w;
    for (int kh = 0; kh < KH; ++kh) {
      const int64_t ih = ih0 + kh * p.dil_h;
      if (!inside(ih, p.H)) continue;
      const T* xr = xn + ih * x_sh;
      for (int kw = 0; kw < KW; ++kw) {
        float wv[V];
        nhwc_taps<T, V>(wv, s_tap + (kh * KW + kw) * tcv);
#pragma unroll
        for (int j = 0; j < IW; ++j) {
          const int64_t iw = iw0 + j * p.stride_w + kw * p.dil_w;
          const bool in = inside(iw, p.W);
          float v[V];
          nhwc_load<T, V>(v, in ? xr + iw * x_sw : xr, in, x_vec, valid, x_sc);
#pragma unroll
          for (int e = 0; e < V; ++e) acc[j][e] += wv[e] * v[e];
        }
      }
    }

    T* yr = static_cast<T*>(p.y) + n * p.y_sn + c0 * p.y_so + oh * p.y_sh;
    nhwc_store<T, V, IW>(yr, acc, ow0, OW, p.y_sw, p.y_so, valid, s.y_vec);
  }
}

// Square kK x kK filter (kK = 3/5/7), stride 1, dilation 1: a thread owns 4 channels (NhwcRoll::kV:
// one 16-byte fp32 or 8-byte half / bfloat16 vector) at kItems consecutive output columns and walks
// down a strip of s.rows output rows of one image. Each input row under the strip is loaded once
// (kItems + kK - 1 pixels, raw words, prefetched one row ahead) and fed to the kK output rows whose
// window holds it; those rows' partial sums rotate through kK register slots (output row r lives in
// slot r % kK, compile-time after unrolling the row loop by kK), and a row is stored as soon as its
// last input row has passed. Loads per output vector: (kItems + kK - 1) / kItems * (rows + kK - 1)
// / rows, against kK * (kItems + kK - 1) / kItems for a thread that recomputes each output row on
// its own. Taps: staged once per block as float [tap][channel], read as one 16-byte shared load per
// tap and filter row.
// Grid: blockIdx.x = ((n * s.img_chunks + chunk) * s.w_blocks + wb) * s.c_blocks + cb.
struct NhwcRoll {
  static constexpr int kV = 4;         // channels per thread
  static constexpr int kMaxRows = 64;  // output rows per strip
  // Columns per thread, and whether the next input row is prefetched into registers (its loads
  // in flight during this row's FMAs): as much as 128 registers hold without spills (2 blocks of
  // 256 threads per SM): kK sum slots of items * kV floats, items + kK - 1 input pixels as
  // floats, and as raw words when prefetched. One row ahead: two rows ahead rotates buffers by
  // register copies, which wait for the loads in flight (or spills when unrolled instead).
  static constexpr int items(int k) { return k == 3 ? 4 : (k == 5 ? 2 : 1); }
  template <typename T>
  static constexpr bool prefetch(int k) {
    return k == 3 || (k == 5 && sizeof(T) == 2);
  }
};

template <typename T>
using NhwcRaw = std::conditional_t<sizeof(T) == 4, uint4, uint2>;  // NhwcRoll::kV elements

template <typename T>
__device__ __forceinline__ unsigned elem_bits(const T& v) {
  if constexpr (sizeof(T) == 4) {
    return __float_as_uint(v);
  } else {
    return static_cast<unsigned>(*reinterpret_cast<const unsigned short*>(&v));
  }
}

// kV channels of one pixel (p = its first channel) as raw words: zeros when !in (padding), one
// vector load when allowed, else `valid` scalars through the channel stride (zeros past C).
template <typename T>
__device__ __forceinline__ NhwcRaw<T> nhwc_raw_load(const T* p, bool in, bool vec, int valid,
                                                    int64_t x_sc) {
  if (!in) return NhwcRaw<T>{};
  if (vec) return *reinterpret_cast<const NhwcRaw<T>*>(p);
  unsigned b[NhwcRoll::kV];
#pragma unroll
  for (int e = 0; e < NhwcRoll::kV; ++e) b[e] = e < valid ? elem_bits(p[e * x_sc]) : 0u;
  if constexpr (sizeof(T) == 4) {
    return make_uint4(b[0], b[1], b[2], b[3]);
  } else {
    return make_uint2(b[0] | (b[1] << 16), b[2] | (b[3] << 16));
  }
}

template <typename T>
__device__ __forceinline__ void raw_to_float(const NhwcRaw<T>& r, float (&out)[NhwcRoll::kV]) {
  if constexpr (sizeof(T) == 4) {
    const unsigned w[4] = {r.x, r.y, r.z, r.w};
    words_to_floats<T, 4>(w, out);
  } else {
    const unsigned w[2] = {r.x, r.y};
    words_to_floats<T, 2>(w, out);
  }
}

template <typename T, int kK>
__global__ void __launch_bounds__(NhwcTraits::kMaxThreads, 2)
    conv2d_depthwise_nhwc_roll_kernel(const ConvProblem p, NhwcShape s) {
  constexpr int V = NhwcRoll::kV;
  constexpr int IW = NhwcRoll::items(kK);
  constexpr int NI = IW + kK - 1;  // input pixels under a thread's outputs
  extern __shared__ float4 smem4[];
  float* s_w = reinterpret_cast<float*>(smem4);  // [tap][channel]
  const int tcv = s.tc * V;                      // channels per block
  unsigned bid = blockIdx.x;
  const int cb = static_cast<int>(bid % s.c_blocks);
  bid /= static_cast<unsigned>(s.c_blocks);
  const int wb = static_cast<int>(bid % s.w_blocks);
  bid /= static_cast<unsigned>(s.w_blocks);
  const int chunk = static_cast<int>(bid % s.img_chunks);
  const int64_t n = bid / s.img_chunks;
  {
    const T* w = ptr<T>(p.w);
    // Tap-fastest reads (contiguous for a contiguous weight), [tap][channel] writes.
    for (int i = threadIdx.x; i < kK * kK * tcv; i += s.tc * s.tw) {
      const int ch = i / (kK * kK), tap = i - ch * (kK * kK);
      const int kh = tap / kK, kw = tap - kh * kK;
      const int64_t cg = static_cast<int64_t>(cb) * tcv + ch;
      s_w[tap * tcv + ch] = cg < p.C ? to_float(w[cg * p.w_so + kh * p.w_sh + kw * p.w_sw]) : 0.f;
    }
  }
  __syncthreads();  // the only barrier: taps staged
  const int tc = threadIdx.x % s.tc;
  const int tw = threadIdx.x / s.tc;
  const int64_t cv = static_cast<int64_t>(cb) * s.tc + tc;
  const int64_t wg = static_cast<int64_t>(wb) * s.tw + tw;
  if (cv >= s.c_vecs || wg >= s.w_groups) return;
  const int64_t c0 = cv * V;
  const int valid = static_cast<int>(min(static_cast<int64_t>(V), p.C - c0));
  const int ow0 = static_cast<int>(wg * IW);
  const int iw0 = ow0 - static_cast<int>(p.pad_w);
  const float* s_tap = s_w + tc * V;
  const int H = static_cast<int>(p.H), W = static_cast<int>(p.W), OW = static_cast<int>(p.OW);
  const int64_t x_sh = p.x_sh, x_sw = p.x_sw, x_sc = p.x_sc;
  const bool x_vec = s.x_vec;
  const int oh0 = chunk * static_cast<int>(s.rows);
  const int rows = min(static_cast<int>(s.rows), static_cast<int>(p.OH) - oh0);
  const int ih0 = oh0 - static_cast<int>(p.pad_h);  // input row of step t = ih0 + t
  const int steps = rows + kK - 1;
  const T* xn = ptr<T>(p.x) + n * p.x_sn + c0 * x_sc;
  T* yn = static_cast<T*>(p.y) + n * p.y_sn + c0 * p.y_so;

  float bias[V];
#pragma unroll
  for (int e = 0; e < V; ++e)
    bias[e] = (p.b != nullptr && e < valid) ? to_float(ptr<T>(p.b)[(c0 + e) * p.b_s]) : 0.f;

  auto load_row = [&](NhwcRaw<T> (&raw)[NI], int t) {
    const int ih = ih0 + t;
    const bool row_in = t < steps && ih >= 0 && ih < H;
    const T* xr = xn + static_cast<int64_t>(row_in ? ih : 0) * x_sh;
#pragma unroll
    for (int i = 0; i < NI; ++i) {
      const int iw = iw0 + i;
      const bool in = row_in && iw >= 0 && iw < W;
      raw[i] = nhwc_raw_load<T>(in ? xr + iw * x_sw : xr, in, x_vec, valid, x_sc);
    }
  };

  float acc[kK][IW][V];
#pragma unroll
  for (int q = 0; q < kK; ++q)
#pragma unroll
    for (int j = 0; j < IW; ++j)
#pragma unroll
      for (int e = 0; e < V; ++e) acc[q][j][e] = bias[e];

  constexpr bool kPrefetch = NhwcRoll::prefetch<T>(kK);
  NhwcRaw<T> raw[NI];  // input row t (prefetched: loaded during row t - 1)
  if (kPrefetch) load_row(raw, 0);
#pragma unroll 1
  for (int t = 0; t < steps; ++t) {
    if (!kPrefetch) load_row(raw, t);
    float v[NI][V];
#pragma unroll
    for (int i = 0; i < NI; ++i) raw_to_float<T>(raw[i], v[i]);
    if (kPrefetch) load_row(raw, t + 1);  // in flight during this row's FMAs
    const int ih = ih0 + t;
    if (ih >= 0 && ih < H) {
#pragma unroll
      for (int kh = 0; kh < kK; ++kh) {
        // Input row t meets output row t - kh (of the strip) at filter row kh; that row's sums
        // are in slot kK - 1 - kh (slot 0: the oldest row in flight).
        if (t - kh < 0 || t - kh >= rows) continue;
#pragma unroll
        for (int kw = 0; kw < kK; ++kw) {
          const float4 wq = *reinterpret_cast<const float4*>(s_tap + (kh * kK + kw) * tcv);
          const float wv[V] = {wq.x, wq.y, wq.z, wq.w};
#pragma unroll
          for (int j = 0; j < IW; ++j)
#pragma unroll
            for (int e = 0; e < V; ++e) acc[kK - 1 - kh][j][e] += wv[e] * v[j + kw][e];
        }
      }
    }
    const int r = t - (kK - 1);  // slot 0's last input row has passed: store it
    if (r >= 0) {
      nhwc_store<T, V, IW>(yn + static_cast<int64_t>(oh0 + r) * p.y_sh, acc[0], ow0, OW,
                           p.y_sw, p.y_so, valid, s.y_vec);
    }
    // Rotate: every row moves one slot older, the newest slot starts from the bias.
#pragma unroll
    for (int q = 0; q < kK; ++q)
#pragma unroll
      for (int j = 0; j < IW; ++j)
#pragma unroll
        for (int e = 0; e < V; ++e) acc[q][j][e] = q + 1 < kK ? acc[q + 1][j][e] : bias[e];
  }
}

}  // namespace conv
}  // namespace gpukern
