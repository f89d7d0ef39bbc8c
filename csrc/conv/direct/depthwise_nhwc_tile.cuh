#pragma once
// depthwise_nhwc_tile: depthwise channels_last (NHWC) conv2d for the layers where
// depthwise_nhwc's row decomposition leaves the GPU idle: small planes (7x7 .. 28x28 outputs) and
// stride 2. groups == C == O, square kK x kK filter (3/5/7), equal strides kS (1 or 2),
// dilation 1, any padding.
//
// A thread owns one channel vector (16 bytes: 8 half / bfloat16 or 4 fp32 channels) at kItems
// adjacent output columns of one output row (a pixel group). Per filter row it loads the
// (kItems - 1) * kS + kK input pixels under its outputs once (16-byte loads, all independent and
// in flight together), converts them to fp32 once and feeds every (output, tap) pair that reads
// them: (kItems - 1) * kS + kK loads per filter row instead of kItems * kK. The taps are staged
// per block as fp32 [tap][channel] (read as 16-byte shared loads, one set per filter tap and
// kItems outputs). Pixel groups are numbered over (image, output row, column group), so small
// planes of many images fill the blocks as large planes do: a block is tc channel lanes x tp
// pixel groups (tc * tp <= 256, lanes fastest: a warp's loads are consecutive vectors of one
// pixel, or of a few neighbouring pixels when C is small) and walks `reps` passes of pixel
// groups. The fused epilogue y = act(acc + bias + residual) is applied in registers (act chosen
// at run time: one switch per thread and pixel group).
//
// Contract (conv2d_depthwise_nhwc_tile_kernel<T, kK, kS>):
//   grid   1-D: blockIdx.x = pb * c_blocks + cb (channel blocks fastest); block pb takes pixel
//          groups [pb * reps * tp, (pb + 1) * reps * tp), pass r the tp groups from r * tp.
//   block  tc * tp threads: thread t serves channel vector cb * tc + t % tc, pixel group
//          t / tc of each pass.
//   shared the block's taps as float [tap][channel]: kK * kK * tc * V * 4 bytes (<= 32 KB).
//   barriers one: the taps are staged before any thread reads them.
#include <cstdint>

#include "conv/direct/common2d.cuh"
#include "conv/direct/depthwise_nhwc.cuh"
#include "device/activation.cuh"
#include "device/vec.cuh"

namespace gpukern {
namespace conv {

struct NhwcTileTraits {
  static constexpr int kThreads = 256;
  // Output columns per thread: 2 for 16-bit (8 channels: 16 sums), 4 for fp32 (4 channels).
  // With kS = 2, kK = 7 a 16-bit thread holds 9 converted pixels (72 floats) and 16 sums.
  static constexpr int items(int elem_size) { return elem_size == 4 ? 4 : 2; }
  static constexpr int kMaxTapBytes = 32 * 1024;  // 7 blocks of 256 threads fit an SM
  // Resident blocks asked of ptxas: 2 x 256 threads (128 registers). A 16-bit thread holds a
  // row's converted pixels (up to 72 floats at 7x7 stride 2), 16 sums and 8 taps: at
  // 80 registers (3 blocks) every instance spilled, 7x7 stride 2 by 500 bytes.
  static constexpr int kMinBlocks = 2;
};

// Work decomposition (host: depthwise_nhwc_tile.cu, plan_nhwc_tile()).
struct NhwcTileShape {
  int tc, tp;        // channel-vector lanes and pixel groups per pass of a block
  int c_blocks;      // channel blocks (each tc vectors)
  int w_groups;      // column groups per output row: ceil(OW / items)
  int reps;          // passes of tp pixel groups per block
  int64_t c_vecs;    // ceil(C / V)
  int64_t groups;    // N * OH * w_groups (< 2^31)
  bool x_vec, y_vec, r_vec;  // 16-byte vector access of x, y and the residual
};

// The residual's V channels at r (zeros past `valid`), as floats.
template <typename T, int V>
__device__ __forceinline__ void nhwc_tile_residual(float (&v)[V], const T* r, bool vec,
                                                   int valid, int64_t r_so) {
  if (vec) {
    words_to_float<T>(*reinterpret_cast<const uint4*>(r), v);
  } else {
#pragma unroll
    for (int e = 0; e < V; ++e) v[e] = e < valid ? to_float(r[e * r_so]) : 0.f;
  }
}

template <typename T, int kK, int kS>
__global__ void __launch_bounds__(NhwcTileTraits::kThreads, NhwcTileTraits::kMinBlocks)
    conv2d_depthwise_nhwc_tile_kernel(const ConvProblem p, NhwcTileShape s) {
  constexpr int V = kVec16<T>;
  constexpr int IW = NhwcTileTraits::items(sizeof(T));
  constexpr int NI = (IW - 1) * kS + kK;  // input pixels under a thread's outputs, per row
  constexpr int KK = kK * kK;
  extern __shared__ float4 smem4[];
  float* s_w = reinterpret_cast<float*>(smem4);  // [tap][channel]
  const int tcv = s.tc * V;
  const int cb = static_cast<int>(blockIdx.x % static_cast<unsigned>(s.c_blocks));
  const int64_t pb = blockIdx.x / static_cast<unsigned>(s.c_blocks);
  {
    const T* w = ptr<T>(p.w);
    // Tap-fastest reads (contiguous for a contiguous weight), [tap][channel] writes.
    for (int i = threadIdx.x; i < KK * tcv; i += blockDim.x) {
      const int ch = i / KK, tap = i - ch * KK;
      const int kh = tap / kK, kw = tap - kh * kK;
      const int64_t cg = static_cast<int64_t>(cb) * tcv + ch;
      s_w[tap * tcv + ch] = cg < p.C ? to_float(w[cg * p.w_so + kh * p.w_sh + kw * p.w_sw]) : 0.f;
    }
  }
  __syncthreads();  // the only barrier: taps staged
  const int tcl = threadIdx.x % s.tc;
  const int tpl = threadIdx.x / s.tc;
  const int64_t cv = static_cast<int64_t>(cb) * s.tc + tcl;
  if (tpl >= s.tp || cv >= s.c_vecs) return;
  const int64_t c0 = cv * V;
  const int valid = static_cast<int>(min(static_cast<int64_t>(V), p.C - c0));
  const float* s_tap = s_w + tcl * V;
  const int H = static_cast<int>(p.H), W = static_cast<int>(p.W);
  const int OH = static_cast<int>(p.OH), OW = static_cast<int>(p.OW);
  const int64_t x_sh = p.x_sh, x_sw = p.x_sw, x_sc = p.x_sc;
  const bool x_vec = s.x_vec;

  const int g_first = static_cast<int>(pb * s.reps * s.tp) + tpl;
#pragma unroll 1
  for (int rep = 0; rep < s.reps; ++rep) {
    const int g = g_first + rep * s.tp;
    if (g >= s.groups) break;
    const int row = g / s.w_groups;  // n * OH + oh
    const int wg = g - row * s.w_groups;
    const int n = row / OH;
    const int oh = row - n * OH;
    const int ow0 = wg * IW;
    const int ih0 = oh * kS - static_cast<int>(p.pad_h);
    const int iw0 = ow0 * kS - static_cast<int>(p.pad_w);
    const T* xn = ptr<T>(p.x) + n * p.x_sn + c0 * x_sc;

    // The sums start from the bias, read again each pass (L1 hits) rather than held in 8
    // registers across the passes: 16-bit 7x7 stride 2 spilled with them.
    float acc[IW][V];
#pragma unroll
    for (int e = 0; e < V; ++e) {
      const float bias =
          (p.b != nullptr && e < valid) ? to_float(ptr<T>(p.b)[(c0 + e) * p.b_s]) : 0.f;
#pragma unroll
      for (int j = 0; j < IW; ++j) acc[j][e] = bias;
    }

    // Filter rows one at a time: a row's NI loads are in flight together, and unrolling the
    // rows (several rows' pixels live at once) took 120-128 registers and spilled at 16-bit 7x7
    // stride 2, halving the resident warps the small layers need.
#pragma unroll 1
    for (int kh = 0; kh < kK; ++kh) {
      const int ih = ih0 + kh;
      if (ih < 0 || ih >= H) continue;
      const T* xr = xn + ih * x_sh;
      float v[NI][V];
#pragma unroll
      for (int i = 0; i < NI; ++i) {
        const int iw = iw0 + i;
        const bool in = iw >= 0 && iw < W;
        nhwc_load<T, V>(v[i], in ? xr + iw * x_sw : xr, in, x_vec, valid, x_sc);
      }
#pragma unroll
      for (int kw = 0; kw < kK; ++kw) {
        float wv[V];
        const float* tp = s_tap + (kh * kK + kw) * tcv;
#pragma unroll
        for (int q = 0; q < V / 4; ++q) {
          const float4 w4 = reinterpret_cast<const float4*>(tp)[q];
          wv[4 * q] = w4.x;
          wv[4 * q + 1] = w4.y;
          wv[4 * q + 2] = w4.z;
          wv[4 * q + 3] = w4.w;
        }
#pragma unroll
        for (int j = 0; j < IW; ++j)
#pragma unroll
          for (int e = 0; e < V; ++e) acc[j][e] = fmaf(wv[e], v[j * kS + kw][e], acc[j][e]);
      }
    }

    T* yr = static_cast<T*>(p.y) + n * p.y_sn + c0 * p.y_so + oh * p.y_sh;
    const T* rr = p.r != nullptr ? ptr<T>(p.r) + n * p.r_sn + c0 * p.r_so + oh * p.r_sh : nullptr;
    // The epilogue, specialised per activation (one switch per pixel group, none per element).
    with_activation(p.act, [&](auto kind) {
      constexpr int kAct = decltype(kind)::value;
#pragma unroll
      for (int j = 0; j < IW; ++j) {
        const int ow = ow0 + j;
        if (ow >= OW) break;
        float out[V];
#pragma unroll
        for (int e = 0; e < V; ++e) out[e] = acc[j][e];
        if (rr != nullptr) {
          float res[V];
          nhwc_tile_residual<T, V>(res, rr + ow * p.r_sw, s.r_vec, valid, p.r_so);
#pragma unroll
          for (int e = 0; e < V; ++e) out[e] += res[e];
        }
        T* yp = yr + ow * p.y_sw;
        if (s.y_vec) {
          Vec<T, V> o;
#pragma unroll
          for (int e = 0; e < V; ++e) o.v[e] = from_float<T>(activate_k<kAct>(out[e]));
          store_vec<T, V>(yp, o);
        } else {
#pragma unroll
          for (int e = 0; e < V; ++e)
            if (e < valid) yp[e * p.y_so] = from_float<T>(activate_k<kAct>(out[e]));
        }
      }
    });
  }
}

}  // namespace conv
}  // namespace gpukern
