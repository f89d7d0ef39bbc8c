// The small-plane transpose to NHWC (conv/layout_tiles.cuh): packed planes of up to 64 pixels
// (filters, 7x7 activations) and sampled or cropped views of NCHW planes, a block per image and
// chunk of channels through shared memory.
#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>

#include "conv/layout_tiles.cuh"
#include "core/knobs.h"
#include "core/launch.cuh"
#include "device/vec.cuh"

namespace gpukern {
namespace conv {
namespace layout {
namespace {

// Small planes, to_nhwc: a block per (image, chunk of channels) reads the chunk's planes in input
// order (consecutive pixels, then channels: contiguous when sc == HW) into shared memory,
// tile[channel][pixel] at pitch HW + 1, and writes each pixel's channel run in output order.
// Used below kMinTilePixels (a 3x3 filter [O, C, 3, 3] to OHWI, which the strided kernel read at
// 18-byte steps: 17 us for ResNet-50's 512 -> 512 3x3 filter on an H200, as did this kernel with
// 32-channel chunks, a block's two barriers for one element per thread) and for planes up to
// kMaxSmallPixels (7x7 activations; numbers at small_planes_for).
// Chunks: a.chunk channels (small_chunk), chunk * (HW + 1) <= kSmallTile elements. Padding
// channels (C <= c < Cp) are written as zeros. E: the raw element word (uint16_t / uint32_t).
// vec (the host's check): the planes back to back (sc == HW), every chunk's planes and every
// output pixel row 16-byte aligned; then a full chunk's planes are one contiguous run read as
// 16-byte vectors, and each pixel's channel run written as 16-byte vectors, 16 / sizeof(E)
// channels gathered from the tile each (one element per load or store made the 512 -> 512 3x3
// filter's conversion take 8.9 us in bf16 and 9.2 in fp32 on an H100, the same time for half the
// bytes). Partial chunks take the element loops.
constexpr int kSmallThreads = 256;
constexpr int kSmallBatch = 8;  // element loads in flight a thread (the element loops)
constexpr int kSmallTile = 256 * 33;  // elements: 33 KB of fp32
constexpr int kMaxSmallPixels = 64;
struct SmallPlaneParams {
  int64_t N, sn, sc;  // the input's strides
  int64_t sh, sw;     // sampled: the input's row and pixel strides
  int C, Cp;          // channels in and out (padded)
  int HW, W, chunk, chunks;
  bool vec;
  bool sampled;  // planes not packed: pixel (h, w) at h * sh + w * sw (else at h * W + w)
};

// in: the NCHW side; out: packed [N, HW, Cp].
template <class E>
__global__ void __launch_bounds__(kSmallThreads)
    small_planes_to_nhwc(const E* __restrict__ in, E* __restrict__ out, SmallPlaneParams a) {
  __shared__ E tile[kSmallTile];
  constexpr int kPer = 16 / static_cast<int>(sizeof(E));  // elements per 16-byte vector
  const int pitch = a.HW + 1;
  const int n_el = a.chunk * a.HW;
  const int run_vecs = a.chunk / kPer;  // vectors per pixel's channel run
  for (int64_t b = blockIdx.x; b < a.N * a.chunks; b += gridDim.x) {
    const int64_t n = b / a.chunks;
    const int c0 = static_cast<int>(b - n * a.chunks) * a.chunk;
    const E* src = in + n * a.sn;
    const bool vec = a.vec && c0 + a.chunk <= a.C;
    if (vec) {
      const uint4* v_src = reinterpret_cast<const uint4*>(src + static_cast<int64_t>(c0) * a.HW);
      for (int i = threadIdx.x; i < n_el / kPer; i += kSmallThreads) {
        const uint4 v = v_src[i];
        const E* ve = reinterpret_cast<const E*>(&v);
        int c = i * kPer / a.HW;
        int px = i * kPer - c * a.HW;
#pragma unroll
        for (int k = 0; k < kPer; ++k) {
          tile[c * pitch + px] = ve[k];
          if (++px == a.HW) px = 0, ++c;
        }
      }
    } else {
      // Element by element, kSmallBatch loads in flight a thread before their shared stores.
      for (int e0 = threadIdx.x; e0 < n_el; e0 += kSmallBatch * kSmallThreads) {
        E v[kSmallBatch];
#pragma unroll
        for (int k = 0; k < kSmallBatch; ++k) {
          const int e = e0 + k * kSmallThreads;
          const int c = e / a.HW;
          const int px = e - c * a.HW;
          const int cg = c0 + c;
          const int64_t at = a.sampled ? (px / a.W) * a.sh + (px % a.W) * a.sw : px;
          v[k] = e < n_el && cg < a.C ? src[cg * a.sc + at] : E(0);
        }
#pragma unroll
        for (int k = 0; k < kSmallBatch; ++k) {
          const int e = e0 + k * kSmallThreads;
          const int c = e / a.HW;
          if (e < n_el) tile[c * pitch + e - c * a.HW] = v[k];
        }
      }
    }
    __syncthreads();
    E* dst = out + n * static_cast<int64_t>(a.HW) * a.Cp;
    if (vec && c0 + a.chunk <= a.Cp) {
      for (int i = threadIdx.x; i < a.HW * run_vecs; i += kSmallThreads) {
        const int px = i / run_vecs;
        const int c = (i - px * run_vecs) * kPer;
        uint4 v;
        E* ve = reinterpret_cast<E*>(&v);
#pragma unroll
        for (int k = 0; k < kPer; ++k) ve[k] = tile[(c + k) * pitch + px];
        *reinterpret_cast<uint4*>(dst + static_cast<int64_t>(px) * a.Cp + c0 + c) = v;
      }
    } else {
      for (int e = threadIdx.x; e < n_el; e += kSmallThreads) {
        const int px = e / a.chunk;
        const int c = e - px * a.chunk;
        if (c0 + c < a.Cp) dst[static_cast<int64_t>(px) * a.Cp + c0 + c] = tile[c * pitch + px];
      }
    }
    __syncthreads();
  }
}

// Channels per chunk: 256 for planes under kMinTilePixels (as measured on the filters), else at
// most kSmallChunkPixels / HW of them (a block's planes about as many elements as the tiled
// kernels' 2048-word tile), a multiple of 8 that fits the tile, the largest such that divides the
// channel count where one of at least 16 does: a partial last chunk runs the element loops, and on
// an H200 one such chunk (80-channel chunks of MobileNetV3's bf16 672 channels of 7x7) made the
// whole conversion take 5.5 us; 56-channel chunks, 2.4.
constexpr int kSmallChunkPixels = 4096;

int small_chunk(int HW, int64_t C) {
  if (HW < kMinTilePixels) return 256;
  const int most = std::max(8, std::min(kSmallTile / (HW + 1), kSmallChunkPixels / HW) / 8 * 8);
  for (int c = most; c >= 16; c -= 8) {
    if (C % c == 0) return c;
  }
  return most;
}

template <class E>
void launch_small_planes_es(const at::Tensor& nchw, void* nhwc, int64_t Cp, bool sampled,
                         cudaStream_t stream, const char* op) {
  SmallPlaneParams a{};
  a.N = nchw.size(0);
  a.sn = nchw.stride(0);
  a.sc = nchw.stride(1);
  a.C = static_cast<int>(nchw.size(1));
  a.Cp = static_cast<int>(Cp);
  a.HW = static_cast<int>(nchw.size(2) * nchw.size(3));
  a.W = static_cast<int>(nchw.size(3));
  a.sh = nchw.stride(2);
  a.sw = nchw.stride(3);
  a.sampled = sampled;
  a.chunk = small_chunk(a.HW, Cp);  // the padding channels written too
  a.chunks = static_cast<int>((Cp + a.chunk - 1) / a.chunk);
  const int64_t es = static_cast<int64_t>(sizeof(E));
  a.vec = !sampled && a.sc == a.HW && (a.N == 1 || (a.sn * es) % 16 == 0) && (Cp * es) % 16 == 0 &&
          is_aligned16(nchw.const_data_ptr()) && is_aligned16(nhwc);
  const dim3 grid = checked_grid(op, std::min<int64_t>(a.N * a.chunks, kMaxBlocks));
  small_planes_to_nhwc<E><<<grid, kSmallThreads, 0, stream>>>(
      static_cast<const E*>(nchw.const_data_ptr()), static_cast<E*>(nhwc), a);
  GK_CHECK_LAUNCH();
}

}  // namespace

// Whether planes of HW pixels (kMinTilePixels <= HW) go to NHWC on the small-plane kernel rather
// than the tiled one: up to kMaxSmallPixels. The tiled kernel's 64-pixel tiles leave a quarter of
// their lanes idle on 7x7 planes and, with an odd plane, move 16-bit elements one at a time.
// Measured on an H200 (16 images of 7x7, warm L2, benchmarks/profile_pointwise7.py), tiled against
// small: bf16 960 channels 4.50 against 2.86 us, bf16 672 4.50 against 2.44, fp32 2048 6.99
// against 4.40 (cuDNN's nchwToNhwcKernel: 2.6 us for the bf16 960, 4.1 for the fp32 2048).
// The way back (nhwc_copy_to) stays on the tiled kernel: the same design measured 2.8 against 2.8
// us (bf16 160 channels) and 3.5 against 2.5 (fp32 512).
// GPUKERN_LAYOUT_SMALL=0 / 1 in the environment forces the tiled / small kernel where both can
// run (benchmarks; read on every call).
bool small_planes_for(int64_t HW) {
  const int on = env_switch("GPUKERN_LAYOUT_SMALL");
  if (HW > kMaxSmallPixels) return false;
  return on < 0 ? true : on == 1;
}

// Whether t's planes, not packed, go to the small-plane kernel's gather: at most
// kMaxSmallPixels pixels, strides in NCHW order (positive, each channel's sampled elements
// before the next channel's, each row's before the next row's: a sampled or cropped view of NCHW
// planes), so that a warp's lanes read one channel's pixels, element by element (kSmallBatch
// loads in flight a thread). On an H200 (ResNet-50's 1024 -> 2048 stride-2 shortcut,
// x[:, :, ::2, ::2] of 16 images of 14x14, graph replays, warm L2,
// benchmarks/profile_pointwise7.py --strided), the gather and the residual's transpose together:
// one element in flight a thread, fp32 17.9 us (bf16 11.3); eight, 14.4 (10.2); each channel's
// span read whole as 8-byte vectors and the samples picked from them, 17.7 (12.2), not kept.
bool sampled_planes(const at::Tensor& t) {
  const int64_t C = t.size(1), H = t.size(2), W = t.size(3);
  const int64_t sc = t.stride(1), sh = t.stride(2), sw = t.stride(3);
  return H * W <= kMaxSmallPixels && sw >= 1 && sh >= (W - 1) * sw + 1 &&
         (C == 1 || sc >= (H - 1) * sh + (W - 1) * sw + 1);
}

void launch_small_planes(const at::Tensor& nchw, void* nhwc, int64_t Cp, bool sampled,
                         cudaStream_t stream, const char* op) {
  if (nchw.element_size() == 2) {
    launch_small_planes_es<uint16_t>(nchw, nhwc, Cp, sampled, stream, op);
  } else {
    launch_small_planes_es<uint32_t>(nchw, nhwc, Cp, sampled, stream, op);
  }
}

}  // namespace layout
}  // namespace conv
}  // namespace gpukern
