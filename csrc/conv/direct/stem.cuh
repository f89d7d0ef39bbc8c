#pragma once
// stem_direct: dense conv2d (groups = 1) over a few input channels (1 <= C <= 4: the RGB stems
// of MobileNet, EfficientNet, RegNet, ResNet), square kK x kK filter (3, 5, 7), equal strides kS
// (1 or 2), dilation 1, any padding, any element strides of x, w, bias, y and the residual.
//
// Why a direct kernel: a stem's GEMM has K = C * kK * kK = 27 (3x3) to 147 (7x7) and, in
// MobileNet's case, N = O = 16. The implicit-GEMM path pads C to the tensor cores' 8 (16-bit) or
// 4 (fp32) and spends a 64- or 128-wide tile on 16 output channels; cuDNN took 27-31 us on
// MobileNetV3's 16x3x224x224 -> 16 3x3 stride-2 layer, whose 3.2 M outputs need 87 M
// multiply-adds (3 us of the H100's fp32 cores) and move 10-22 MB (4-7 us at the memory's rate).
//
// A block computes a tile of kStemTileH x kStemTileW output pixels of one image for every output
// channel (O <= kStemMaxO), kStemOc channels at a time:
//   1. every channel's taps, stored [chunk][c][kh][kw][o] (one broadcast float4 read serves 4
//      channels), the biases, and the tile's input window (C planes of in_h x in_w, zero where
//      the window leaves the image) are staged in shared memory as fp32, once; the window's
//      loads walk x in its memory order (columns fastest for NCHW, channels fastest for
//      channels_last), kStemBatch loads in flight per thread.
//   2. per chunk of kStemOc channels, each thread owns kStemPx consecutive output pixels of one
//      row: kStemPx x kStemOc fp32 accumulators. Per input channel and filter row it reads the
//      (kStemPx - 1) * kS + kK staged inputs under its pixels once, then per tap one float4 of
//      taps per 4 channels feeds 4 * kStemPx multiply-adds.
//   3. the chunk's epilogue: y = act(acc + bias [+ residual]) in registers (the activation
//      chosen at run time, one switch per thread and chunk), stored as 16-byte channel vectors
//      (channels_last y), as row vectors of kStemPx (NCHW y), else element by element.
//
// Contract (conv2d_stem_kernel<T, kK, kS>):
//   grid    1-D: N * tiles_h * tiles_w blocks (image-major); launched with launch_pdl.
//   block   kStemThreads (kStemTx x kStemTy).
//   shared  dynamic (stem_smem_bytes): taps chunks * C * kK * kK * kStemOc floats, biases
//           chunks * kStemOc floats, the window C * in_h * pitch floats.
//   barriers one: taps, biases and window staged.
#include <cstddef>
#include <cstdint>

#include "conv/direct/common2d.cuh"
#include "device/activation.cuh"
#include "device/fastdiv.cuh"
#include "device/pdl.cuh"
#include "device/vec.cuh"

namespace gpukern {
namespace conv {

// Two pixels x 16 channels a thread (32 accumulators, under 100 registers: 5+ blocks an SM, so
// that one block's staging overlaps the others' math; with 4 pixels, 168 registers left 3
// blocks an SM and MobileNetV3's stem at 1.13 waves, 31 us for fp32 on the H100).
constexpr int kStemPx = 2;                       // output pixels per thread, along a row
constexpr int kStemOc = 16;                      // output channels per chunk (and per thread)
constexpr int kStemTx = 16;                      // threads along a row
constexpr int kStemTy = 8;                       // rows of a tile (one thread row each)
constexpr int kStemThreads = kStemTx * kStemTy;  // 128
constexpr int kStemTileW = kStemTx * kStemPx;    // 32 output columns
constexpr int kStemTileH = kStemTy;              // 8 output rows
constexpr int kStemMaxC = 4;
constexpr int kStemBatch = 8;   // window loads a thread issues before storing the first
constexpr int kStemMaxO = 64;   // output channels (all their taps staged at once)

// The launch's geometry, planned on the host from the shape and the pointers alone.
struct StemPlan {
  int C = 1;
  int tiles_w = 1, tiles_h = 1;  // output tiles per image
  int in_h = 1, in_w = 1;        // staged window: rows and columns per input channel
  int pitch = 1;                 // floats per staged row
  bool x_chan_major = false;     // x's channels are its contiguous dim (channels_last, C > 1)
  bool y_chan_vec = false;       // y stored as 16-byte channel vectors
  bool y_row_vec = false;        // y stored as kStemPx-element row vectors
  FastDiv div_a, div_b;          // the window walk's two divisors (see stage_window)
  int64_t blocks_x = 0;
  int chunks = 1;
};

__host__ __device__ constexpr int stem_taps_floats(int C, int k) { return C * k * k * kStemOc; }

// Stages the block's input window: s_x[(c * in_h + r) * pitch + col] = x[n, c, ih0 + r, iw0 + col]
// (0 outside the image). The flat index walks x's memory order: for NCHW (c, r, col), col
// fastest (div_a = in_w, div_b = in_h); for channels_last (r, col, c), c fastest (div_a = C,
// div_b = in_w).
template <typename T>
__device__ __forceinline__ void stem_stage_window(const ConvProblem& p, const StemPlan& s,
                                                  const T* __restrict__ xn, int ih0, int iw0,
                                                  float* s_x) {
  const int total = s.C * s.in_h * s.in_w;
  const int H = static_cast<int>(p.H), W = static_cast<int>(p.W);
  for (int i0 = threadIdx.x; i0 < total; i0 += kStemBatch * kStemThreads) {
    float v[kStemBatch];
    int dst[kStemBatch];
#pragma unroll
    for (int b = 0; b < kStemBatch; ++b) {
      const int i = i0 + b * kStemThreads;
      dst[b] = -1;
      v[b] = 0.f;
      if (i < total) {
        int c, r, col;
        if (s.x_chan_major) {
          const int q = s.div_a.div(i);  // pixel index r * in_w + col
          c = i - q * s.C;
          r = s.div_b.div(q);
          col = q - r * s.in_w;
        } else {
          const int q = s.div_a.div(i);  // row index c * in_h + r
          col = i - q * s.in_w;
          c = s.div_b.div(q);
          r = q - c * s.in_h;
        }
        dst[b] = (c * s.in_h + r) * s.pitch + col;
        const int ih = ih0 + r, iw = iw0 + col;
        if (ih >= 0 && ih < H && iw >= 0 && iw < W) {
          v[b] = to_float(xn[c * p.x_sc + ih * p.x_sh + iw * p.x_sw]);
        }
      }
    }
#pragma unroll
    for (int b = 0; b < kStemBatch; ++b)
      if (dst[b] >= 0) s_x[dst[b]] = v[b];
  }
}

template <typename T, int kK, int kS>
__global__ void __launch_bounds__(kStemThreads, 5)
    conv2d_stem_kernel(const ConvProblem p, const StemPlan s) {
  extern __shared__ float4 stem_smem[];
  // Taps [chunk][c][kh][kw][kStemOc], bias [chunk * kStemOc], window [c][in_h][pitch].
  float* s_w = reinterpret_cast<float*>(stem_smem);
  float* s_b = s_w + s.chunks * stem_taps_floats(s.C, kK);
  float* s_x = s_b + s.chunks * kStemOc;

  const int tiles = s.tiles_w * s.tiles_h;
  const int blk = static_cast<int>(blockIdx.x);
  const int n = blk / tiles;
  const int t = blk - n * tiles;
  const int th = t / s.tiles_w;
  const int oh0 = th * kStemTileH;
  const int ow0 = (t - th * s.tiles_w) * kStemTileW;
  const int O = static_cast<int>(p.O);
  const int tid = threadIdx.x;

  pdl_wait_then_release();

  // 1. Taps and bias of every output channel (zero past O), and the input window.
  const T* __restrict__ w = ptr<T>(p.w);
  const int ntaps = s.chunks * stem_taps_floats(s.C, kK);
  for (int i = tid; i < ntaps; i += kStemThreads) {
    const int ol = i % kStemOc;
    const int r = i / kStemOc;  // (chunk * C + c) * kK * kK + kh * kK + kw
    const int kw = r % kK;
    const int kh = (r / kK) % kK;
    const int cr = r / (kK * kK);  // chunk * C + c
    const int chunk = cr / s.C;
    const int c = cr - chunk * s.C;
    const int o = chunk * kStemOc + ol;
    s_w[i] = o < O ? to_float(w[o * p.w_so + c * p.w_sc + kh * p.w_sh + kw * p.w_sw]) : 0.f;
  }
  for (int i = tid; i < s.chunks * kStemOc; i += kStemThreads) {
    s_b[i] = (p.b != nullptr && i < O) ? to_float(ptr<T>(p.b)[i * p.b_s]) : 0.f;
  }
  stem_stage_window<T>(p, s, ptr<T>(p.x) + n * p.x_sn, oh0 * kS - static_cast<int>(p.pad_h),
                       ow0 * kS - static_cast<int>(p.pad_w), s_x);
  __syncthreads();

  // 2.-3. Per chunk of kStemOc output channels: the thread's kStemPx pixels x kStemOc channels,
  // then their epilogue.
  const int tx = tid % kStemTx;
  const int ty = tid / kStemTx;
  const int OH = static_cast<int>(p.OH), OW = static_cast<int>(p.OW);
  const int oh = oh0 + ty;
  const int owb = ow0 + tx * kStemPx;
  if (oh >= OH || owb >= OW) return;  // no barrier follows
  constexpr int kSpan = (kStemPx - 1) * kS + kK;
  T* yp = static_cast<T*>(p.y) + n * p.y_sn + oh * p.y_sh;
  for (int chunk = 0; chunk < s.chunks; ++chunk) {
    const int o0 = chunk * kStemOc;
    const float* cw = s_w + chunk * stem_taps_floats(s.C, kK);
    float acc[kStemPx][kStemOc];
#pragma unroll
    for (int j = 0; j < kStemPx; ++j)
#pragma unroll
      for (int q = 0; q < kStemOc; ++q) acc[j][q] = s_b[o0 + q];
    for (int c = 0; c < s.C; ++c) {
#pragma unroll
      for (int kh = 0; kh < kK; ++kh) {
        const float* row = s_x + (c * s.in_h + ty * kS + kh) * s.pitch + tx * (kStemPx * kS);
        float v[kSpan];
#pragma unroll
        for (int i = 0; i < kSpan; ++i) v[i] = row[i];
        const float4* wr = reinterpret_cast<const float4*>(cw + (c * kK + kh) * kK * kStemOc);
#pragma unroll
        for (int kw = 0; kw < kK; ++kw) {
#pragma unroll
          for (int q = 0; q < kStemOc / 4; ++q) {
            const float4 w4 = wr[kw * (kStemOc / 4) + q];
#pragma unroll
            for (int j = 0; j < kStemPx; ++j) {
              const float xv = v[j * kS + kw];
              acc[j][4 * q + 0] = fmaf(xv, w4.x, acc[j][4 * q + 0]);
              acc[j][4 * q + 1] = fmaf(xv, w4.y, acc[j][4 * q + 1]);
              acc[j][4 * q + 2] = fmaf(xv, w4.z, acc[j][4 * q + 2]);
              acc[j][4 * q + 3] = fmaf(xv, w4.w, acc[j][4 * q + 3]);
            }
          }
        }
      }
    }
    if (p.r != nullptr) {
      const T* rp = ptr<T>(p.r) + n * p.r_sn + oh * p.r_sh;
#pragma unroll
      for (int j = 0; j < kStemPx; ++j)
#pragma unroll
        for (int q = 0; q < kStemOc; ++q)
          if (owb + j < OW && o0 + q < O) {
            acc[j][q] += to_float(rp[(owb + j) * p.r_sw + (o0 + q) * p.r_so]);
          }
    }
    with_activation(p.act, [&](auto kind) {
      constexpr int kAct = decltype(kind)::value;
#pragma unroll
      for (int j = 0; j < kStemPx; ++j)
#pragma unroll
        for (int q = 0; q < kStemOc; ++q) acc[j][q] = activate_k<kAct>(acc[j][q]);
    });
    if (s.y_chan_vec && o0 + kStemOc <= O) {
      constexpr int kV = kVec16<T>;
#pragma unroll
      for (int j = 0; j < kStemPx; ++j) {
        if (owb + j >= OW) break;
        T* yq = yp + (owb + j) * p.y_sw + o0;
#pragma unroll
        for (int q0 = 0; q0 < kStemOc; q0 += kV) {
          Vec<T, kV> out;
#pragma unroll
          for (int e = 0; e < kV; ++e) out.v[e] = from_float<T>(acc[j][q0 + e]);
          store_vec<T, kV>(yq + q0, out);
        }
      }
      continue;
    }
#pragma unroll
    for (int q = 0; q < kStemOc; ++q) {
      if (o0 + q >= O) break;
      float vals[kStemPx];
#pragma unroll
      for (int j = 0; j < kStemPx; ++j) vals[j] = acc[j][q];
      store_cols<T, kStemPx>(yp + (o0 + q) * p.y_so, vals, owb, OW, p.y_sw, s.y_row_vec);
    }
  }
}

// ---- Host planning (torch-free) ----
// Sizes above this are rejected (int indices inside a block; real stems are far below it).
constexpr int64_t kStemMaxIndex = int64_t{1} << 24;

inline bool stem_shape_ok(const ConvProblem& p) {
  if (p.nsp != 2 || p.groups != 1 || p.C < 1 || p.C > kStemMaxC) return false;
  if (p.O < 1 || p.O > kStemMaxO) return false;
  if (p.KH != p.KW || (p.KH != 3 && p.KH != 5 && p.KH != 7)) return false;
  if (p.stride_h != p.stride_w || (p.stride_h != 1 && p.stride_h != 2)) return false;
  if (p.dil_h != 1 || p.dil_w != 1) return false;
  for (int64_t v : {p.H, p.W, p.OH, p.OW, p.pad_h, p.pad_w}) {
    if (v < 0 || v > kStemMaxIndex) return false;
  }
  // Offsets inside one image and one filter in int (the image's base offset is int64).
  auto span = [](int64_t a, int64_t sa, int64_t b, int64_t sb, int64_t c, int64_t sc,
                 int64_t d, int64_t sd) {
    auto m = [](int64_t size, int64_t st) {
      return size > 0 ? (size - 1) * (st < 0 ? -st : st) : 0;
    };
    return m(a, sa) + m(b, sb) + m(c, sc) + m(d, sd);
  };
  const int64_t lim = (int64_t{1} << 31) - 1;
  if (span(1, 0, p.C, p.x_sc, p.H, p.x_sh, p.W, p.x_sw) > lim) return false;
  if (span(p.O, p.w_so, p.C, p.w_sc, p.KH, p.w_sh, p.KW, p.w_sw) > lim) return false;
  if (span(1, 0, p.O, p.y_so, p.OH, p.y_sh, p.OW, p.y_sw) > lim) return false;
  if (p.r != nullptr && span(1, 0, p.O, p.r_so, p.OH, p.r_sh, p.OW, p.r_sw) > lim) return false;
  if (p.O * p.b_s > lim) return false;
  return true;
}

// Plans the launch; false where the kernel cannot run the problem (the grid's limits included).
inline bool stem_plan(const ConvProblem& p, StemPlan& s) {
  if (!stem_shape_ok(p)) return false;
  const int k = static_cast<int>(p.KH), st = static_cast<int>(p.stride_h);
  s.C = static_cast<int>(p.C);
  s.tiles_h = static_cast<int>((p.OH + kStemTileH - 1) / kStemTileH);
  s.tiles_w = static_cast<int>((p.OW + kStemTileW - 1) / kStemTileW);
  s.in_h = (kStemTileH - 1) * st + k;
  s.in_w = (kStemTileW - 1) * st + k;
  // The last thread's row reads (kStemPx - 1) * st + k columns from (kStemTx - 1) * kStemPx * st:
  // exactly in_w. An odd pitch spreads the rows of a warp over the banks.
  s.pitch = s.in_w | 1;
  s.x_chan_major = p.C > 1 && p.x_sc == 1;
  s.div_a = FastDiv(static_cast<uint32_t>(s.x_chan_major ? s.C : s.in_w));
  s.div_b = FastDiv(static_cast<uint32_t>(s.x_chan_major ? s.in_w : s.in_h));
  s.blocks_x = p.N * s.tiles_h * s.tiles_w;
  s.chunks = static_cast<int>((p.O + kStemOc - 1) / kStemOc);
  if (s.blocks_x > (int64_t{1} << 31) - 1) return false;
  const int64_t v = 16 / p.elem_size;  // elements per 16-byte vector
  const auto addr = reinterpret_cast<uintptr_t>(p.y);
  s.y_chan_vec = p.y_so == 1 && p.y_sw % v == 0 && p.y_sh % v == 0 &&
                 (p.N == 1 || p.y_sn % v == 0) && addr % 16 == 0;
  // Row vectors of kStemPx elements (16 bytes for fp32, 8 for 16-bit), aligned.
  s.y_row_vec = nchw_vec(p.y, p.N, p.O, p.y_sn, p.y_so, p.y_sh, p.y_sw, kStemPx,
                         kStemPx * p.elem_size);
  return true;
}

inline size_t stem_smem_bytes(const StemPlan& s, int k) {
  return sizeof(float) *
         (static_cast<size_t>(s.chunks) * (stem_taps_floats(s.C, k) + kStemOc) +
          static_cast<size_t>(s.C) * s.in_h * s.pitch);
}

}  // namespace conv
}  // namespace gpukern
