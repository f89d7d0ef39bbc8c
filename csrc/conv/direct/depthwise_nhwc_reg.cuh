#pragma once
// depthwise_nhwc_reg: depthwise channels_last (NHWC) conv2d with register-blocked output tiles,
// for the shapes real networks run (ConvNeXt 7x7, MobileNet 3x3 / 5x5, stride 1 and 2).
// groups == C == O, square kK x kK filter (3/5/7), equal strides kS (1 or 2), dilation 1, any
// padding. The fused epilogue y = act(acc + bias [+ residual]) is applied in registers.
//
// Why: depthwise_nhwc's roll kernel gives a thread one output column at 7x7 (each 16-byte tap
// read from shared memory feeds 4 FMAs) and depthwise_nhwc_tile one output row (each input pixel
// loaded and converted once per output row it meets); both were instruction-bound, with 16-bit no
// faster than fp32. Here a thread owns kV = 4 channels (one 16-byte fp32 or 8-byte 16-bit load
// per pixel) of a kR x kIW tile of output pixels:
//   - it walks the NR = (kR - 1) * kS + kK input rows under its tile once, each row's
//     NI = (kIW - 1) * kS + kK pixels loaded once (raw words, the next row's loads issued before
//     this row's FMAs: software-pipelined one row ahead) and converted to fp32 once, then fed to
//     every (output row r of the tile, filter row kh = t - r * kS) pair that reads it;
//   - each 16-byte shared tap load feeds kIW * kV FMAs;
//   - the tile loops are fully unrolled (compile-time register indices, no local memory).
// Per output and channel: K*K FMAs against NR * NI / (kR * kIW) pixel loads + conversions and
// kK*kK / kIW tap loads / kV.
//
// Tiles (NhwcRegTile below, chosen at compile time per (kK, kS, dtype) and by the host between a
// "big" and a "small" variant): big tiles for layers with enough pixels to fill >= 2 waves of the
// GPU with them, small (1 x 2) tiles otherwise (14x14 / 7x7 planes), so that small layers still
// get enough threads to hide the load latency.
//
// Contract (conv2d_depthwise_nhwc_reg_kernel<T, kK, kS, kR, kIW, kVecX>):
// kVecX: x read as 4-element vectors (the host's s.x_vec; the scalar instance reads `valid`
// channels through the channel stride and runs the small tile only).
//   grid   1-D: blockIdx.x = pb * c_blocks + cb (channel blocks fastest); block pb takes tiles
//          [pb * reps * tp, (pb + 1) * reps * tp), pass `rep` the tp tiles from rep * tp.
//          Tiles are numbered (n, tile row, tile column), tile columns fastest (neighbouring
//          threads share halo pixels in L1).
//   block  tc * tp threads (<= 256): thread t serves channel vector cb * tc + t % tc and tile
//          slot t / tc of each pass.
//   shared the block's taps as float [tap][32 lanes * kV channels] (lanes >= tc unused; the
//          fixed pitch makes every tap's offset a compile-time constant: sm_90a, bf16 7x7 big
//          tile, 2642 instructions per tile instead of 2746 and no spills instead of 40 bytes):
//          kK * kK * 512 bytes (<= 25 KB).
//   barriers one: the taps are staged before any thread reads them.
//   launch  launch_pdl (programmatic dependent launch): the kernel waits for the previous one
//          before touching global memory, so its launch and block scheduling overlap that
//          kernel's tail (back to back, e.g. replayed from a CUDA graph).
//   indices in-image offsets (h, w, c of x, y and the residual) in int32 (the host checks each
//          image's span < 2^31 elements), image bases in int64.
#include <cstdint>
#include <type_traits>

#include "conv/direct/common2d.cuh"
#include "conv/direct/depthwise_nhwc.cuh"
#include "device/activation.cuh"
#include "device/async_mma.cuh"
#include "device/pdl.cuh"
#include "device/vec.cuh"

namespace gpukern {
namespace conv {

struct NhwcRegTraits {
  static constexpr int kThreads = 256;
  static constexpr int kV = 4;         // channels per thread
  static constexpr int kMaxLanes = 32;  // channel-vector lanes per block (taps <= 25 KB)
  static constexpr int kMinBlocks = 2;  // 2 x 256 threads per SM: up to 128 registers
  static constexpr int kMaxReps = 8;
  static constexpr int kTapVecs = 8;    // 16-byte tap vectors in flight a thread (staging)
  // The lean instances (depthwise_nhwc_reg_run.cuh says where they run): 3 blocks of 256
  // threads per SM, <= 80 registers; registers of raw input words requested ahead of the FMAs
  // (16-bit 3x3 stride 2, 1 x 2 tile: all 3 rows of 5 pixels, 30); 2 tap vectors in flight
  // (3x3, 256 threads: all of the block's taps), not 8 (32 registers live beside the early
  // input rows: ptxas spilled at 80).
  static constexpr int kLeanMinBlocks = 3;
  static constexpr int kLeanDepthBudget = 48;
  static constexpr int kLeanTapVecs = 2;
};

// Output tile (rows kR x columns kIW) per thread, per filter, stride and element size (kElem:
// 4 for fp32, 2 for 16-bit). Registers: sums kR * kIW * 4 + two rows of raw words in flight
// NI * (4 fp32 / 2 16-bit) each + the current row as floats NI * 4 (16-bit only) + addressing,
// within 128 (2 blocks of 256 threads per SM). Chosen from ptxas's output (sm_90a): the largest
// tile without spills in the FMA loop.
//   16-bit, stride 1: big 2 x 4 (3x3: 4 x 6 input pixels per 8 outputs; 7x7: 8 x 10)
//   fp32, stride 1:   big 2 x 4 for 3x3; 2 x 2 for 5x5 / 7x7 (2 x 4 and 4 x 2 spilled 48-128
//                     bytes: two rows of 8-10 16-byte pixels in flight are 64-80 registers;
//                     fp32 pixels need no conversion, so more loads per output cost less)
//   stride 2:         big 2 x 2 (3x3: 5 x 5 input pixels per 4 outputs); fp32 7x7: 1 x 2
//   small:            1 x 2 for every filter, stride and dtype.
template <int kK, int kS, bool kBig, int kElem>
struct NhwcRegTile {
  static constexpr bool kWide = kS == 1 && (kElem == 2 || kK == 3);  // 2 x 4, else 2 x 2
  static constexpr bool kSmall = !kBig || (kS == 2 && kElem == 4 && kK == 7);
  static constexpr int kR = kSmall ? 1 : 2;
  static constexpr int kIW = kSmall ? 2 : (kWide ? 4 : 2);
};

// Work decomposition (host: depthwise_nhwc_reg.cu).
struct NhwcRegShape {
  int tc, tp;              // channel-vector lanes and tile slots per pass of a block
  int c_blocks;            // channel blocks (each tc vectors)
  int tiles_w, tiles_h;    // tiles per output row / column of an image
  int reps;                // passes of tp tiles per block
  int tiles;               // N * tiles_h * tiles_w (+ reps * tp fits in int)
  int64_t c_vecs;          // ceil(C / kV)
  // In-image element strides in int32 (rows, columns of x, y and the residual); 0 for a size-1
  // dim (never stepped), so that a huge stride there does not stop the int32 indexing.
  int x_sh, x_sw, y_sh, y_sw, r_sh, r_sw;
  int x_sc;  // x's channel stride (0 for C == 1), for the scalar loads
  bool x_vec, y_vec, r_vec;  // 4-element vector access of x, y and the residual
  // The staged variant (conv2d_depthwise_nhwc_stage_kernel) only: its block's tile slots as a
  // grid of st_h x st_w tiles (<= tp), i.e. a patch of st_h * kR x st_w * kIW outputs, and the
  // patches per image column / row (tiles_h / tiles_w above count patches there).
  int st_h, st_w;
  bool x_vec8;  // x as 8-element vectors too (C % 8, strides, alignment): 16-byte copies
};

// 4 channels of y at yp from floats: one vector store when allowed, else `valid` scalars
// through the channel stride.
template <typename T>
__device__ __forceinline__ void nhwc_reg_store(T* yp, const float (&o)[NhwcRegTraits::kV],
                                               bool vec, int valid, int64_t y_so) {
  if (vec) {
    if constexpr (sizeof(T) == 4) {
      *reinterpret_cast<float4*>(yp) = make_float4(o[0], o[1], o[2], o[3]);
    } else {
      const T a = from_float<T>(o[0]), b = from_float<T>(o[1]);
      const T c = from_float<T>(o[2]), d = from_float<T>(o[3]);
      *reinterpret_cast<uint2*>(yp) =
          make_uint2(elem_bits(a) | (elem_bits(b) << 16), elem_bits(c) | (elem_bits(d) << 16));
    }
  } else {
#pragma unroll
    for (int e = 0; e < NhwcRegTraits::kV; ++e)
      if (e < valid) yp[e * y_so] = from_float<T>(o[e]);
  }
}

// p unchanged, but opaque to the optimiser (kept in a register pair as it is).
template <typename P>
__device__ __forceinline__ P* opaque_ptr(P* p) {
  uintptr_t v = reinterpret_cast<uintptr_t>(p);
  asm("" : "+l"(v));
  return reinterpret_cast<P*>(v);
}

// Input rows requested ahead of the row being multiplied (D): 1 for the big tiles (their sums
// and a row of up to 10 pixels already fill the registers) and the scalar-load instances, and
// for the small (1-row) vector tiles as many rows as 32 registers of raw words hold, up to all
// of them: a small tile is a few rows of little arithmetic each, so its time is the loads'
// round trips (all rows at once: one round trip instead of one per row). More (40 registers)
// spilled 16-72 bytes at 7x7. `budget` is that register count: 64 for 3x3 stride 1 (ptxas,
// sm_90a, fp32 small vector tiles: all 3 rows in 119 registers, no spills; 32 had left them at 2
// rows, 110 registers; stride 2 at 64 held all 3 rows in 125 registers and ran no faster, so
// it keeps 32: 1 row, 116); 5x5 spilled 160 bytes at 48.
template <typename T>
constexpr int nhwc_reg_depth(int rows, bool vec, int nr, int ni, int budget = 32) {
  if (rows > 1 || !vec) return 1;
  const int per_row = ni * static_cast<int>(sizeof(NhwcRaw<T>) / 4);  // registers a row
  const int d = budget / per_row;
  return d < 1 ? 1 : (d > nr ? nr : d);
}

// The block's taps (channel block cb, tcv channels) to shared memory as float [tap][channel]
// (zeros past C). Tap t's channels start at s_w + t * pitch (pitch >= tcv). The caller's barrier
// publishes them. Every block stages its taps before its first tile, so their latency is part of
// every block's time (H100, ConvNeXt's 384ch 14x14 7x7 bf16 layer: 128-thread blocks, twice the
// blocks and each thread twice the loads, ran 26.7 us against 21.0). Two ways:
//   - a dense weight ([C, 1, K, K] contiguous) whose block run of tcv * K * K elements is 16-byte
//     aligned and inside C: 16-byte vectors, all of a thread's in flight at once (bf16 7x7, 128
//     channels: 784 vectors, 3-4 a thread: one round trip);
//   - otherwise element by element through the strides, tap-fastest reads, 8 loads in flight per
//     thread before their stores (one dependent round trip per 8).
template <typename T, int kK, int kMaxVecs = NhwcRegTraits::kTapVecs>  // vectors in flight
__device__ __forceinline__ void nhwc_reg_stage_taps(const ConvProblem& p, float* s_w, int cb,
                                                    int tcv, int pitch) {
  constexpr int KK = kK * kK;
  constexpr int kVecElems = 16 / static_cast<int>(sizeof(T));
  const T* w = ptr<T>(p.w);
  const int total = KK * tcv;
  const int nthreads = static_cast<int>(blockDim.x);
  const int64_t c_first = static_cast<int64_t>(cb) * tcv;
  const T* run = w + c_first * KK;
  const bool dense = p.w_sw == 1 && p.w_sh == kK && p.w_so == KK && c_first + tcv <= p.C &&
                     (reinterpret_cast<uintptr_t>(run) & 15u) == 0 && total % kVecElems == 0;
  const int nvec = total / kVecElems;
  if (dense && nvec <= kMaxVecs * nthreads) {
    uint4 raw[kMaxVecs];
#pragma unroll
    for (int u = 0; u < kMaxVecs; ++u) {
      const int v = static_cast<int>(threadIdx.x) + u * nthreads;
      if (v < nvec) raw[u] = __ldg(reinterpret_cast<const uint4*>(run) + v);
    }
#pragma unroll
    for (int u = 0; u < kMaxVecs; ++u) {
      const int v = static_cast<int>(threadIdx.x) + u * nthreads;
      if (v < nvec) {
        const T* e = reinterpret_cast<const T*>(&raw[u]);
#pragma unroll
        for (int k = 0; k < kVecElems; ++k) {
          const int i = v * kVecElems + k;  // element i of the run: channel i / KK, tap i % KK
          const int ch = i / KK, tap = i - ch * KK;
          s_w[tap * pitch + ch] = to_float(e[k]);
        }
      }
    }
    return;
  }
  {
    constexpr int kBatch = 8;
    for (int i0 = threadIdx.x; i0 < total; i0 += kBatch * nthreads) {
      float tmp[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int i = i0 + u * nthreads;
        tmp[u] = 0.f;
        if (i < total) {
          const int ch = i / KK, tap = i - ch * KK;
          const int kh = tap / kK, kw = tap - kh * kK;
          const int64_t cg = c_first + ch;
          if (cg < p.C) tmp[u] = to_float(w[cg * p.w_so + kh * p.w_sh + kw * p.w_sw]);
        }
      }
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int i = i0 + u * nthreads;
        if (i < total) {
          const int ch = i / KK, tap = i - ch * KK;
          s_w[tap * pitch + ch] = tmp[u];
        }
      }
    }
  }
}

// The biases of channels c0 .. c0 + V - 1 (0 past valid or without a bias).
template <typename T, int V>
__device__ __forceinline__ void nhwc_reg_load_bias(const ConvProblem& p, int64_t c0, int valid,
                                                   float (&bias)[V]) {
#pragma unroll
  for (int e = 0; e < V; ++e)
    bias[e] = (p.b != nullptr && e < valid) ? to_float(ptr<T>(p.b)[(c0 + e) * p.b_s]) : 0.f;
}

// The epilogue of a tile of kR x kIW outputs from (oh0, ow0) of image n, channels c0 ..
// c0 + valid - 1: y = act(acc [+ residual]) (acc holds the bias), specialised per activation
// (one switch per tile, none per element).
template <typename T, int kR, int kIW>
__device__ __forceinline__ void nhwc_reg_epilogue(const ConvProblem& p, const NhwcRegShape& s,
                                                  const float (&acc)[kR][kIW][NhwcRegTraits::kV],
                                                  int n, int oh0, int ow0, int64_t c0,
                                                  int valid) {
  constexpr int V = NhwcRegTraits::kV;
  using Raw = NhwcRaw<T>;
  const int OH = static_cast<int>(p.OH), OW = static_cast<int>(p.OW);
  T* yn = static_cast<T*>(p.y) + n * p.y_sn + c0 * p.y_so;
  const T* rn = p.r != nullptr ? ptr<T>(p.r) + n * p.r_sn + c0 * p.r_so : nullptr;
  const int y_sh = s.y_sh, y_sw = s.y_sw, r_sh = s.r_sh, r_sw = s.r_sw;
  with_activation(p.act, [&](auto kind) {
    constexpr int kAct = decltype(kind)::value;
#pragma unroll
    for (int r = 0; r < kR; ++r) {
      const int oh = oh0 + r;
      if (oh >= OH) break;
#pragma unroll
      for (int j = 0; j < kIW; ++j) {
        const int ow = ow0 + j;
        if (ow >= OW) break;
        float out[V];
#pragma unroll
        for (int e = 0; e < V; ++e) out[e] = acc[r][j][e];
        if (rn != nullptr) {
          float res[V];
          const Raw rw = nhwc_raw_load<T>(rn + (oh * r_sh + ow * r_sw), true, s.r_vec, valid,
                                          p.r_so);
          raw_to_float<T>(rw, res);
#pragma unroll
          for (int e = 0; e < V; ++e) out[e] += res[e];
        }
#pragma unroll
        for (int e = 0; e < V; ++e) out[e] = activate_k<kAct>(out[e]);
        nhwc_reg_store<T>(yn + (oh * y_sh + ow * y_sw), out, s.y_vec, valid, p.y_so);
      }
    }
  });
}

template <typename T, int kK, int kS, int kR, int kIW, bool kVecX,
          int kMinB = NhwcRegTraits::kMinBlocks>
__global__ void __launch_bounds__(NhwcRegTraits::kThreads, kMinB)
    conv2d_depthwise_nhwc_reg_kernel(const ConvProblem p, NhwcRegShape s) {
  constexpr int V = NhwcRegTraits::kV;
  constexpr int NR = (kR - 1) * kS + kK;   // input rows under a tile
  constexpr int NI = (kIW - 1) * kS + kK;  // input pixels under a tile, per row
  // Rows in flight ahead of the FMAs; 3x3 stride-1 small tiles get 64 registers of raw words
  // (fp32: every row of the tile at once, 3 rows of 4 pixels). Not stride 2: all 3 rows of 5
  // pixels there (125 registers) and one row (116) both ran MobileNetV3's channels_last
  // 16x240x28x28 fp32 layer in 6.1 us (H100, dw_layers.py: h100_dw_layers_pdl.md, then
  // h100_dw_layers_s18.md), so it keeps the smaller budget.
  // kMinB: NhwcRegTraits::kMinBlocks, or kLeanMinBlocks for the lean instances.
  constexpr bool kLean = kMinB == NhwcRegTraits::kLeanMinBlocks;
  constexpr int D = nhwc_reg_depth<T>(kR, kVecX, NR, NI,
                                      kLean                 ? NhwcRegTraits::kLeanDepthBudget
                                      : kK == 3 && kS == 1 ? 64
                                                           : 32);
  // The first tile's first D rows requested before the taps are staged: small vector tiles of
  // 3x3 / 5x5 only (the big, scalar and 7x7 instances spilled 16-100 bytes with those registers
  // live across the staging).
  constexpr bool kEarly = kR == 1 && kVecX && kK < 7;
  static_assert(NI <= 32, "column mask in one word");
  using Raw = NhwcRaw<T>;  // 4 channels: uint4 (fp32) or uint2 (16-bit)
  extern __shared__ float4 smem4[];
  float* s_w = reinterpret_cast<float*>(smem4);  // [tap][channel]
  const int tcv = s.tc * V;
  pdl_wait_then_release();  // launched with launch_pdl: no global memory touched before it
  const int cb = static_cast<int>(blockIdx.x % static_cast<unsigned>(s.c_blocks));
  const int pb = static_cast<int>(blockIdx.x / static_cast<unsigned>(s.c_blocks));
  const int tcl = threadIdx.x % s.tc;
  const int tpl = threadIdx.x / s.tc;
  const int64_t cv = static_cast<int64_t>(cb) * s.tc + tcl;
  // Threads past the last channel vector stage taps, then leave (no early return before the
  // barrier). c0 is clamped to a real vector for them so that no address below is formed past C.
  const bool active = tpl < s.tp && cv < s.c_vecs;
  const int64_t c0 = (active ? cv : 0) * V;
  const int valid = static_cast<int>(min(static_cast<int64_t>(V), p.C - c0));
  const int H = static_cast<int>(p.H), W = static_cast<int>(p.W);
  // In-image strides in unsigned int32 (the host checked every image's span).
  const unsigned ux_sh = static_cast<unsigned>(s.x_sh), ux_sw = static_cast<unsigned>(s.x_sw);
  const unsigned ux_sc = static_cast<unsigned>(s.x_sc);
  const T* xc = ptr<T>(p.x) + c0 * s.x_sc;  // channel c0 of image 0

  // The current tile: its first output row / column, its input origin, image and the columns of
  // its input pixels inside the image (one bit each).
  int g = pb * s.reps * s.tp + tpl;  // tile of pass 0
  int n = 0, oh0 = 0, ow0 = 0, ih0 = 0, iw0 = 0;
  unsigned cmask = 0;
  const T* xn = xc;
  auto set_tile = [&]() {
    const int twi = g % s.tiles_w;
    const int rest = g / s.tiles_w;
    const int thi = rest % s.tiles_h;
    n = rest / s.tiles_h;
    oh0 = thi * kR;
    ow0 = twi * kIW;
    ih0 = oh0 * kS - static_cast<int>(p.pad_h);
    iw0 = ow0 * kS - static_cast<int>(p.pad_w);
    // The image's base as an opaque register pair: without it the compiler folded the base
    // back into a 64-bit element index and rebuilt each pixel's address from the kernel
    // parameter (5-6 instructions per load instead of one 32 x 32 -> 64-bit multiply-add).
    xn = opaque_ptr(xc + n * p.x_sn);
    cmask = 0;
#pragma unroll
    for (int i = 0; i < NI; ++i)
      if (iw0 + i >= 0 && iw0 + i < W) cmask |= 1u << i;
  };

  // Input row t of the tile, NI pixels as raw words: zeros outside the image (padding).
  auto load_row = [&](Raw (&raw)[NI], int t) {
    const int ih = ih0 + t;
    const bool row_in = ih >= 0 && ih < H;
    const unsigned m = row_in ? cmask : 0u;
    // Offsets in unsigned (wrapping) arithmetic: pixel (ih, iw0) may lie left of the image
    // (iw0 < 0), but a pixel inside it gets its exact offset, which is below 2^31; unsigned
    // also makes the address one 32 x 32 -> 64-bit multiply-add.
    const unsigned roff =
        static_cast<unsigned>(row_in ? ih : 0) * ux_sh + static_cast<unsigned>(iw0) * ux_sw;
#pragma unroll
    for (int i = 0; i < NI; ++i) {
      const bool in = (m >> i) & 1u;
      const unsigned off = roff + static_cast<unsigned>(i) * ux_sw;
      if constexpr (kVecX) {
        // __ldg: a global load (the opaque base lost the address space; x is read-only).
        raw[i] = in ? __ldg(reinterpret_cast<const Raw*>(xn + off)) : Raw{};
      } else {
        // `valid` channels through the channel stride (int32: inside the image's span).
        unsigned b[V];
#pragma unroll
        for (int e = 0; e < V; ++e)
          b[e] = (in && e < valid) ? elem_bits(xn[off + static_cast<unsigned>(e) * ux_sc]) : 0u;
        if constexpr (sizeof(T) == 4) {
          raw[i] = make_uint4(b[0], b[1], b[2], b[3]);
        } else {
          raw[i] = make_uint2(b[0] | (b[1] << 16), b[2] | (b[3] << 16));
        }
      }
    }
  };

  // Rows in flight: buf[t] holds input row t of the tile (only D + 1 of them live at a time;
  // every index is a compile-time constant after unrolling, so buf is registers). kEarly: the
  // first tile's first D rows are requested before the taps are staged, their round trip
  // overlapping the staging's.
  Raw buf[NR][NI];
  if (kEarly && active && g < s.tiles) {
    set_tile();
#pragma unroll
    for (int t = 0; t < D; ++t) load_row(buf[t], t);
  }

  nhwc_reg_stage_taps<T, kK, kLean ? NhwcRegTraits::kLeanTapVecs : NhwcRegTraits::kTapVecs>(
      p, s_w, cb, tcv, NhwcRegTraits::kMaxLanes * V);
  __syncthreads();  // the only barrier: taps staged
  if (!active) return;
  const float* s_tap = s_w + tcl * V;

  float bias[V];
  nhwc_reg_load_bias<T, V>(p, c0, valid, bias);

#pragma unroll 1
  for (int rep = 0; rep < s.reps; ++rep, g += s.tp) {
    if (g >= s.tiles) break;
    if (!kEarly || rep > 0) {
      set_tile();
#pragma unroll
      for (int t = 0; t < D; ++t) load_row(buf[t], t);
    }

    float acc[kR][kIW][V];
#pragma unroll
    for (int r = 0; r < kR; ++r)
#pragma unroll
      for (int j = 0; j < kIW; ++j)
#pragma unroll
        for (int e = 0; e < V; ++e) acc[r][j][e] = bias[e];

#pragma unroll
    for (int t = 0; t < NR; ++t) {
      if (t + D < NR) load_row(buf[t + D], t + D);  // in flight during this row's FMAs
      // A padding row adds nothing. (Running it on zeros instead, to keep the unrolled loop one
      // basic block, let the scheduler hoist more loads than registers hold: 7x7 spilled
      // 300-450 bytes.)
      if (ih0 + t < 0 || ih0 + t >= H) continue;
      float v[NI][V];
#pragma unroll
      for (int i = 0; i < NI; ++i) raw_to_float<T>(buf[t][i], v[i]);
#pragma unroll
      for (int r = 0; r < kR; ++r) {
        const int kh = t - r * kS;  // input row t meets output row r at filter row kh
        if (kh < 0 || kh >= kK) continue;
#pragma unroll
        for (int kw = 0; kw < kK; ++kw) {
          // Fixed tap pitch (32 lanes): a compile-time offset, no address arithmetic per tap.
          const float4 w4 = *reinterpret_cast<const float4*>(
              s_tap + (kh * kK + kw) * (NhwcRegTraits::kMaxLanes * V));
          const float wv[V] = {w4.x, w4.y, w4.z, w4.w};
#pragma unroll
          for (int j = 0; j < kIW; ++j)
#pragma unroll
            for (int e = 0; e < V; ++e)
              acc[r][j][e] = fmaf(wv[e], v[j * kS + kw][e], acc[r][j][e]);
        }
      }
    }

    nhwc_reg_epilogue<T, kR, kIW>(p, s, acc, n, oh0, ow0, c0, valid);
  }
}


// ---- The staged variant: 16-bit, stride 1 (ConvNeXt 7x7) ----
// The register-tile kernel above spends, per input pixel, a predicated global load, its 64-bit
// address, the zeroing of padding and 4 conversions (about 13 instructions per pixel against
// 49 * 4 FMAs per output at 7x7; ~60% FFMA in the 2 x 4 tile's loop), keeps the next input row
// in registers to hide the load latency (which caps the tile at 2 x 4 within 128 registers) and
// exposes a round trip per tile. Here a block first copies its whole input patch, halo and
// padding included, to shared memory with cp.async (zero-fill for padding: no predicates or
// zeroing later, all of the patch's loads in flight at once, no registers held), then each
// thread computes a kR x kIW tile (the host's 3 x 4: 7.5 input pixels per output against the
// big tile's 10) from shared memory: one LDS.64 per pixel at a compile-time offset from a
// per-row address, 4 conversions, filter column outermost so that only about kIW converted
// pixels are live. sm_90a, bf16 3 x 4: 124 registers, no spills; the FMA loop 3210 instructions
// per tile (74.5% FFMA; the big tile's: 61%), the copies ~15 per 16-byte copy (2 lanes).
//   grid   1-D: blockIdx.x = pb * c_blocks + cb; block pb takes patches pb * reps .. + reps - 1,
//          numbered (n, patch row, patch column), patch columns fastest.
//   block  tc * tp threads: lane t % tc (channel vector cb * tc + t % tc), slot t / tc; slots
//          below st_h * st_w own tile (slot / st_w, slot % st_w) of the patch; all stage.
//   shared taps float [tap][32 lanes * 4 channels] (kK * kK * 512 bytes: the tap pitch fixed
//          for compile-time tap offsets, lanes >= tc unused), then the input patch
//          [IR][IC][32 lanes] of 8-byte pixels, IR = st_h * kR + kK - 1, IC = st_w * kIW + kK - 1
//          (the lane pitch fixed at 32 for compile-time pixel offsets; lanes >= tc unused).
//   barriers two per patch (copies landed; patch consumed before the next one's copies). The
//          taps are staged after the first patch's copies are issued, before the first wait.
template <typename T, int kK, int kR, int kIW>
__global__ void __launch_bounds__(NhwcRegTraits::kThreads, NhwcRegTraits::kMinBlocks)
    conv2d_depthwise_nhwc_stage_kernel(const ConvProblem p, NhwcRegShape s) {
  static_assert(sizeof(T) == 2, "16-bit only (8-byte pixels of 4 channels)");
  constexpr int V = NhwcRegTraits::kV;
  constexpr int L = NhwcRegTraits::kMaxLanes;  // lane pitch of a staged pixel
  constexpr int NR = kR + kK - 1;               // input rows under a tile
  constexpr int NI = kIW + kK - 1;              // input pixels under a tile, per row
  using Raw = NhwcRaw<T>;                       // uint2
  extern __shared__ float4 smem4[];
  float* s_w = reinterpret_cast<float*>(smem4);  // [tap][L * V channels]
  const int tcv = s.tc * V;
  Raw* s_in = reinterpret_cast<Raw*>(s_w + kK * kK * L * V);  // [IR][IC][L]
  pdl_wait_then_release();  // launched with launch_pdl: no global memory touched before it
  const int cb = static_cast<int>(blockIdx.x % static_cast<unsigned>(s.c_blocks));
  const int pb = static_cast<int>(blockIdx.x / static_cast<unsigned>(s.c_blocks));
  const int tcl = threadIdx.x % s.tc;
  const int tpl = threadIdx.x / s.tc;
  const int64_t cv = static_cast<int64_t>(cb) * s.tc + tcl;
  const bool lane_ok = tpl < s.tp && cv < s.c_vecs;  // stages this lane's channels
  const bool active = lane_ok && tpl < s.st_h * s.st_w;  // also owns a tile
  const int64_t c0 = (lane_ok ? cv : 0) * V;
  const int valid = static_cast<int>(min(static_cast<int64_t>(V), p.C - c0));
  const int H = static_cast<int>(p.H), W = static_cast<int>(p.W);
  const int PH = s.st_h * kR, PW = s.st_w * kIW;  // outputs of a patch
  const int IR = PH + kK - 1, IC = PW + kK - 1;   // its input pixels
  const unsigned ux_sh = static_cast<unsigned>(s.x_sh), ux_sw = static_cast<unsigned>(s.x_sw);

  // The thread's tile inside the patch and its first staged pixel.
  const int qy = active ? tpl / s.st_w : 0, qx = active ? tpl % s.st_w : 0;
  const Raw* s_tile = s_in + (qy * kR * IC + qx * kIW) * L + tcl;

  float bias[V];
  nhwc_reg_load_bias<T, V>(p, c0, valid, bias);

#pragma unroll 1
  for (int rep = 0; rep < s.reps; ++rep) {
    const int g = pb * s.reps + rep;  // patch
    if (g >= s.tiles) break;          // uniform across the block
    const int pw = g % s.tiles_w;
    const int rest = g / s.tiles_w;
    const int ph = rest % s.tiles_h;
    const int n = rest / s.tiles_h;
    const int poh = ph * PH, pow_ = pw * PW;  // the patch's first output row / column
    const int ih0 = poh - static_cast<int>(p.pad_h), iw0 = pow_ - static_cast<int>(p.pad_w);
    if (rep > 0) __syncthreads();  // the previous patch consumed
    {
      // Row by row (the row's offset and whether it lies inside the image once per row), the
      // row's pixels spread over the copy slots: pixel (pr, pc) of the patch is input pixel
      // (ih0 + pr, iw0 + pc), written zero outside the image. A thread copies a pair of lanes
      // (2 pl, 2 pl + 1) of a pixel: one 16-byte copy where x has 8-element vectors and the
      // pair's first channel is 16-byte aligned (cb * tc even), else one 8-byte copy a lane;
      // ceil(tc / 2) pairs, so about 2 tp copy slots (half the copies of one lane a thread).
      const int tcp = (s.tc + 1) >> 1;
      const int pl = static_cast<int>(threadIdx.x) % tcp, ps = static_cast<int>(threadIdx.x) / tcp;
      const int nps = (s.tc * s.tp) / tcp;  // copy slots
      const int64_t cv0 = static_cast<int64_t>(cb) * s.tc + 2 * pl;
      const bool l0 = cv0 < s.c_vecs;
      const bool l1 = 2 * pl + 1 < s.tc && cv0 + 1 < s.c_vecs;
      const bool wide = l1 && s.x_vec8 && ((cb * s.tc) & 1) == 0;
      const T* xn = opaque_ptr(ptr<T>(p.x) + cv0 * V + n * p.x_sn);
      const unsigned uW = static_cast<unsigned>(W);
      // The copy loops, one instance per kind of copy (no branch per copy).
      auto copy_rows = [&](auto kind) {
        constexpr int kKind = decltype(kind)::value;  // 0: one lane, 1: two 8-byte, 2: 16-byte
        Raw* s_lane = s_in + ps * L + 2 * pl;
#pragma unroll 1
        for (int pr = 0; pr < IR; ++pr, s_lane += IC * L) {
          const int ih = ih0 + pr;
          const bool row_in = ih >= 0 && ih < H;
          const unsigned roff = static_cast<unsigned>(row_in ? ih : 0) * ux_sh;
#pragma unroll 1
          for (int pc = ps; pc < IC; pc += nps) {
            const unsigned iw = static_cast<unsigned>(iw0 + pc);  // wraps below 0: not < W
            const bool in = row_in && iw < uW;
            Raw* dst = s_lane + (pc - ps) * L;
            const T* src = xn + (in ? roff + iw * ux_sw : 0u);
            if constexpr (kKind == 2) {
              cp_async_zfill<16>(dst, src, in);
            } else {
              cp_async_zfill<8>(dst, src, in);
              if constexpr (kKind == 1) cp_async_zfill<8>(dst + 1, src + V, in);
            }
          }
        }
      };
      if (ps < nps && l0) {
        if (wide) {
          copy_rows(std::integral_constant<int, 2>{});
        } else if (l1) {
          copy_rows(std::integral_constant<int, 1>{});
        } else {
          copy_rows(std::integral_constant<int, 0>{});
        }
      }
    }
    cp_async_commit();
    // The taps once, while the first patch's copies are in flight (their round trips overlap).
    if (rep == 0) nhwc_reg_stage_taps<T, kK>(p, s_w, cb, tcv, L * V);
    cp_async_wait<0>();
    __syncthreads();  // the patch (and, at rep 0, the taps) staged
    const int oh0 = poh + qy * kR, ow0 = pow_ + qx * kIW;
    // A tile past the image's last output row or column (the patch overhangs it) has nothing
    // to compute.
    if (!active || oh0 >= static_cast<int>(p.OH) || ow0 >= static_cast<int>(p.OW)) continue;
    const int tih0 = ih0 + qy * kR;  // the tile's first input row

    float acc[kR][kIW][V];
#pragma unroll
    for (int r = 0; r < kR; ++r)
#pragma unroll
      for (int j = 0; j < kIW; ++j)
#pragma unroll
        for (int e = 0; e < V; ++e) acc[r][j][e] = bias[e];

    const float* s_tap = s_w + tcl * V;
#pragma unroll
    for (int t = 0; t < NR; ++t) {
      // A padding row (zeros in shared memory) adds nothing: skipped (border tiles).
      if (tih0 + t < 0 || tih0 + t >= H) continue;
      const Raw* srow = s_tile + t * IC * L;
      // Filter column outermost: step kw reads pixels kw .. kw + kIW - 1, so pixel
      // kw + kIW - 1 is converted just before step kw needs it and pixel kw is dead after it.
      float v[NI][V];
#pragma unroll
      for (int i = 0; i < kIW - 1; ++i) raw_to_float<T>(srow[i * L], v[i]);
#pragma unroll
      for (int kw = 0; kw < kK; ++kw) {
        raw_to_float<T>(srow[(kIW - 1 + kw) * L], v[kIW - 1 + kw]);
#pragma unroll
        for (int r = 0; r < kR; ++r) {
          const int kh = t - r;  // input row t meets output row r at filter row kh
          if (kh < 0 || kh >= kK) continue;
          const float4 w4 =
              *reinterpret_cast<const float4*>(s_tap + (kh * kK + kw) * (L * V));
          const float wv[V] = {w4.x, w4.y, w4.z, w4.w};
#pragma unroll
          for (int j = 0; j < kIW; ++j)
#pragma unroll
            for (int e = 0; e < V; ++e)
              acc[r][j][e] = fmaf(wv[e], v[j + kw][e], acc[r][j][e]);
        }
      }
    }
    nhwc_reg_epilogue<T, kR, kIW>(p, s, acc, n, oh0, ow0, c0, valid);
  }
}

}  // namespace conv
}  // namespace gpukern
