// The wide transpose to NHWC (conv/layout_tiles.cuh): the tiled transpose of conv/layout.cu
// reading the NCHW side as 16- or 8-byte vectors of one channel's pixels.
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

// Wide tiles, to_nhwc only: the tiled transpose with the NCHW side read as 16-byte vectors of
// one channel's kPix consecutive pixels (4 fp32 / 8 16-bit; 16-bit also as 8-byte vectors of 4),
// for planes whose every vector is whole and aligned (the host's check and the measurements:
// wide_for). A tile is 32 channel words x 64 pixels as in the kCT = 32 tiled kernels; a block of
// 128 threads has 64 bytes of loads a thread in flight (the tiled kernels: 256 threads, eight
// 4-byte loads), up to 10 blocks an SM.
// NCHW-side tasks: fp32, (channel, vector): one load; 16-bit, (word, vector): the word's two
// channels' vectors, joined into kPix words with byte permutes (low half: the even channel).
// Lanes: 32 / kPix consecutive vectors of kPix rows, so a task's kPix shared stores
// tile[vector * kPix + k][word] fall in 32 different banks across the warp (bank = vector * kPix
// + word + k, odd pitch); a warp's loads are 128- (fp32) or 64-byte (16-bit) runs of rows.
// NHWC side: as the tiled kernels' kVec = 4 (16-byte vectors of a pixel's channel words).
template <int kElemBytes, int kVecBytes>
struct WideTraits {
  using E = typename Bits<kElemBytes>::type;
  static constexpr int kVecWords = kVecBytes / 4;  // words per NCHW-side vector
  static constexpr int kThreads = 128;
  static constexpr int kMinBlocks = 10;
  static constexpr int kCT = 32;                  // channel words per tile
  static constexpr int kTP = 64;                  // pixels per tile
  static constexpr int kPitch = kCT + 1;
  static constexpr int kEpw = 4 / kElemBytes;     // channels per word
  static constexpr int kPix = kVecBytes / kElemBytes;  // pixels per NCHW-side vector
  static constexpr int kPV = kTP / kPix;          // vectors per channel row of a tile
  static constexpr int kLanesV = 32 / kPix;       // lanes along vectors
  static constexpr int kTasksPerThread = kCT * kPV / kThreads;
  static constexpr int kChunks = kCT / 4;         // NHWC-side vectors per pixel row
  static constexpr int kChunksPerThread = kTP * kChunks / kThreads;
  static_assert(kPV % kLanesV == 0 && kCT % kPix == 0, "whole lane groups");
  static_assert((kCT * kPV) % kThreads == 0 && (kTP * kChunks) % kThreads == 0, "whole tasks");
};

// Task idx's vector (its first pixel / kPix) and word column within the tile.
template <class K>
__device__ __forceinline__ void wide_task(int idx, int& v, int& w) {
  const int lane = idx % 32, g = idx / 32;
  constexpr int kGroupsV = K::kPV / K::kLanesV;
  v = (g % kGroupsV) * K::kLanesV + lane % K::kLanesV;
  w = (g / kGroupsV) * K::kPix + lane / K::kLanesV;
}

// A 16- or 8-byte load as 32-bit words.
template <int kWords>
struct Words {
  uint32_t u[kWords];
};
template <int kWords>
__device__ __forceinline__ Words<kWords> load_words(const void* p) {
  if constexpr (kWords == 4) {
    const uint4 q = *reinterpret_cast<const uint4*>(p);
    return Words<4>{{q.x, q.y, q.z, q.w}};
  } else {
    static_assert(kWords == 2, "16- or 8-byte vectors");
    const uint2 q = *reinterpret_cast<const uint2*>(p);
    return Words<2>{{q.x, q.y}};
  }
}

// to_nhwc, wide. Grid, tiles and barriers as nchw_to_nhwc_tiled.
template <int kElemBytes, int kVecBytes>
__global__ void __launch_bounds__(WideTraits<kElemBytes, kVecBytes>::kThreads,
                                  WideTraits<kElemBytes, kVecBytes>::kMinBlocks)
    nchw_to_nhwc_wide(const typename WideTraits<kElemBytes, kVecBytes>::E* __restrict__ x,
                      uint32_t* __restrict__ y, TileParams prm) {
  using K = WideTraits<kElemBytes, kVecBytes>;
  using E = typename K::E;
  __shared__ uint32_t tile[K::kTP * K::kPitch];
  for (int64_t b = blockIdx.x; b < prm.tiles; b += gridDim.x) {
    const TileAt at = tile_at<K>(b, prm);
    const E* xs = x + at.n * prm.sn + at.p0;

    uint32_t v[K::kTasksPerThread][K::kPix];
#pragma unroll
    for (int i = 0; i < K::kTasksPerThread; ++i) {
      int vi, w;
      wide_task<K>(threadIdx.x + i * K::kThreads, vi, w);
      const int p = vi * K::kPix;
      Words<K::kVecWords> a{}, b2{};
      if (p < at.np && w < at.nw) {
        const int64_t c = (at.w0 + w) * K::kEpw;
        if (c < prm.C) a = load_words<K::kVecWords>(xs + c * prm.sc + p);
        if constexpr (K::kEpw == 2) {
          if (c + 1 < prm.C) b2 = load_words<K::kVecWords>(xs + (c + 1) * prm.sc + p);
        }
      }
      if constexpr (K::kEpw == 2) {
        // pixel k: element k of each channel's vector, i.e. half k % 2 of word k / 2
#pragma unroll
        for (int k = 0; k < K::kPix; ++k) {
          v[i][k] = __byte_perm(a.u[k / 2], b2.u[k / 2], k % 2 == 0 ? 0x5410 : 0x7632);
        }
      } else {
#pragma unroll
        for (int k = 0; k < K::kPix; ++k) v[i][k] = a.u[k];
      }
    }
#pragma unroll
    for (int i = 0; i < K::kTasksPerThread; ++i) {
      int vi, w;
      wide_task<K>(threadIdx.x + i * K::kThreads, vi, w);
#pragma unroll
      for (int k = 0; k < K::kPix; ++k) tile[(vi * K::kPix + k) * K::kPitch + w] = v[i][k];
    }
    __syncthreads();

    uint32_t* ys = y + (at.n * prm.HW + at.p0) * prm.cw + at.w0;
#pragma unroll
    for (int i = 0; i < K::kChunksPerThread; ++i) {
      const int idx = threadIdx.x + i * K::kThreads;
      const int p = idx / K::kChunks;
      const int w = (idx % K::kChunks) * 4;
      if (p < at.np && w < at.nw) {
        const uint32_t* s = tile + p * K::kPitch + w;
        *reinterpret_cast<uint4*>(ys + p * prm.cw + w) = make_uint4(s[0], s[1], s[2], s[3]);
      }
    }
    __syncthreads();
  }
}

}  // namespace

// The NCHW-side vector bytes (16, or 8 for 16-bit types) with which the wide kernel takes a
// to_nhwc the tiled kernels would (prm with the NCHW side's strides in elements), or 0: whole
// aligned pixel vectors on the NCHW side (HW, sc and sn multiples of the vector, base aligned),
// whole 16-byte vectors on the NHWC side's rows, and rows of more than 16 words (32-word tiles;
// narrower rows keep the narrow tiled kernels). 8-byte vectors serve 16-bit planes of 4 mod 8
// pixels (14x14: 196).
// Measured on an H200 (benchmarks/transpose.py, HBM-resident inputs, batch 16), tiled against
// wide: fp32 128ch 56x56 20.2 against 14.7 us, fp32 512ch 28x28 20.7 / 15.2, fp32 1024ch 14x14
// 12.2 / 9.2, bf16 256ch 56x56 22.8 / 16.3, bf16 64ch 56x56 7.6 / 5.2. The same design for the way
// back (nhwc_copy_to) measured slower (fp32 512ch 28x28 17.2 against 18.9 us, bf16 512ch 28x28
// 11.5 / 16.0) and was not kept.
// GPUKERN_LAYOUT_WIDE=0 in the environment keeps the tiled kernels (benchmarks; read per call).
int wide_for(const TileParams& prm, int64_t es, const void* nchw, const void* nhwc) {
  if (env_switch("GPUKERN_LAYOUT_WIDE") == 0) return 0;
  if (!(is_aligned16(nhwc) && prm.cw % 4 == 0 && prm.tile_cw > 16)) return 0;
  for (int bytes : {16, 8}) {
    const int64_t pix = bytes / es;
    if (bytes == 8 && es == 4) break;  // fp32: 16-byte vectors only
    if (prm.HW % pix == 0 && (prm.C == 1 || prm.sc % pix == 0) &&
        (prm.N == 1 || prm.sn % pix == 0) && reinterpret_cast<uintptr_t>(nchw) % bytes == 0) {
      return bytes;
    }
  }
  return 0;
}

template <int kElemBytes, int kVecBytes>
void launch_wide_es(const void* in, void* out, TileParams prm, cudaStream_t stream,
                    const char* op) {
  using K = WideTraits<kElemBytes, kVecBytes>;
  prm.ctiles = ceil_div(prm.tile_cw, static_cast<int64_t>(K::kCT));
  prm.ptiles = ceil_div(prm.HW, static_cast<int64_t>(K::kTP));
  prm.tiles = prm.N * prm.ptiles * prm.ctiles;
  const dim3 grid = checked_grid(op, std::min(prm.tiles, kMaxBlocks));
  nchw_to_nhwc_wide<kElemBytes, kVecBytes><<<grid, K::kThreads, 0, stream>>>(
      static_cast<const typename K::E*>(in), static_cast<uint32_t*>(out), prm);
  GK_CHECK_LAUNCH();
}

void launch_wide(int vec_bytes, int64_t es, const void* in, void* out, const TileParams& prm,
                 cudaStream_t stream, const char* op) {
  if (es == 4) {
    launch_wide_es<4, 16>(in, out, prm, stream, op);
  } else if (vec_bytes == 16) {
    launch_wide_es<2, 16>(in, out, prm, stream, op);
  } else {
    launch_wide_es<2, 8>(in, out, prm, stream, op);
  }
}

}  // namespace layout
}  // namespace conv
}  // namespace gpukern
