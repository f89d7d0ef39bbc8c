// Layout conversions between NCHW (or any strides) and packed channels_last with zero channel
// padding (conv/layout.h). Four kernels to NHWC, two back:
//   - tiled: the H*W planes packed (NCHW, or NCHW with sliced channels / images) on the NCHW
//     side, packed channels_last on the NHWC side: a transpose [C, HW] <-> [HW, C] per image
//     through a shared-memory tile, coalesced on both sides, 16-byte vectors on the NHWC side;
//     16-bit types move the NCHW side as 4-byte pixel pairs where pairs are aligned (half the
//     load or store instructions of one element at a time: ResNet-50's 64-channel 56x56 bf16
//     activations took 9.3 us to NHWC and 7.1 back on an H100 one element at a time, 6.5 and
//     5.5 in pairs, cuDNN's kernels 7.4 and 5.9);
//   - wide, to NHWC only: the tiled transpose reading 16-byte vectors of a channel's pixels
//     where planes split into whole aligned vectors (wide_for);
//   - small planes, to NHWC only (up to 64 pixels: filters, 7x7 activations, and sampled
//     planes such as x[:, :, ::2, ::2] of 14x14 ones): a block per (image, chunk of channels)
//     through shared memory, 16-byte vectors on both sides where aligned;
//   - strided: anything else (planes not packed, a source not packed channels_last, odd 16-bit
//     channel counts on the tiled paths):
//     one element per thread in NHWC order, int64 offsets.
// All are pure copies: elements move as raw 16- or 32-bit words, so float16 and bfloat16 share
// the 16-bit instantiations and values are bit exact.
#include "conv/layout.h"

#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/cuda/CUDAContext.h>

#include <algorithm>
#include <cstdint>

#include "core/checks.h"
#include "core/knobs.h"
#include "core/launch.cuh"
#include "device/fastdiv.cuh"
#include "device/vec.cuh"

namespace gpukern {
namespace conv {
namespace {

template <int kElemBytes>
struct Bits;
template <>
struct Bits<2> {
  using type = uint16_t;
};
template <>
struct Bits<4> {
  using type = uint32_t;
};

// One tile: kCT channel words x kTP pixels of one image, 2048 words (8 KB) of data. A word is 4
// bytes: kEpw channels of one pixel (2 for 16-bit types, 1 for float32), the unit the tile is
// stored in, so the NHWC side's vectors come out of (or go into) shared memory whole.
template <int kElemBytes_, int kCT_, int kVec_>
struct TileTraits {
  using E = typename Bits<kElemBytes_>::type;
  static constexpr int kThreads = 256;
  static constexpr int kMinBlocks = 4;  // resident blocks per SM: at most 64 registers a thread
  static constexpr int kTileWords = 2048;
  static constexpr int kEpw = 4 / kElemBytes_;             // channels per word
  static constexpr int kCT = kCT_;                          // channel words per tile
  static constexpr int kTP = kTileWords / kCT;              // pixels per tile
  static constexpr int kPitch = kCT + 1;                    // words per tile row (one pixel)
  static constexpr int kVec = kVec_;                        // words per NHWC-side access
  static constexpr int kChunks = kCT / kVec;                // NHWC-side accesses per tile row
  static constexpr int kWordsPerThread = kTileWords / kThreads;
  static constexpr int kChunksPerThread = kTileWords / (kVec * kThreads);
  static constexpr int kElemsPerThread = kTileWords * kEpw / kThreads;
  static_assert(kCT >= 4 && kCT <= 32 && (kCT & (kCT - 1)) == 0, "kCT: 4, 8, 16 or 32");
  static_assert(kVec == 1 || kVec == 4, "kVec: 4-byte or 16-byte NHWC-side accesses");
  static_assert(kTileWords % (kVec * kThreads) == 0, "whole vectors per thread");
  // The odd pitch puts 32 consecutive pixels of one word column in 32 different banks.
  static_assert(kPitch % 2 == 1, "odd pitch");
};

// The tiled kernels' problem: image n's NCHW side at base + n * sn + c * sc + p (p = h * W + w,
// the plane packed), its NHWC side at base + (n * HW + p) * cw words. Tiles cover the channel
// words [0, tile_cw), ordered (n, pixel tile, channel tile) with the channel tile fastest: the
// blocks that touch one pixel range run together, so the NHWC side's lines are completed in L2
// while they are still there.
struct TileParams {
  int64_t N;        // images
  int64_t C;        // channels of the NCHW side: x's (to_nhwc) or dst's (nhwc_copy_to)
  int64_t HW;       // pixels per image
  int64_t sn, sc;   // NCHW-side strides in elements
  int64_t cw;       // NHWC-side words per pixel: Cp (to_nhwc) or Cs (src) channels in words
  int64_t tile_cw;  // channel words the tiles cover: cw (to_nhwc), ceil(C / kEpw) (copy_to)
  int64_t ctiles, ptiles, tiles;  // set by launch_tiled_es
  // 16-bit only: the NCHW side moved as 4-byte pixel pairs (two pixels of one channel), split
  // into / joined from the two channels' words with byte permutes. The host sets it when sc, sn
  // and the NCHW side's base put every pair at a 4-byte boundary (tiles start at even pixels).
  // (fp32 as 8-byte pairs measured no faster: 13.0 against 13.1 us for the same activations.)
  bool pairs = false;
};

// Tile b of a layout-conversion grid (channel tiles fastest, then pixel tiles, then images):
// its image, first word column and first pixel, and how many pixels and words of it exist.
struct TileAt {
  int64_t n, w0, p0;
  int np, nw;
};
template <class K>
__device__ __forceinline__ TileAt tile_at(int64_t b, const TileParams& prm) {
  const int64_t ct = b % prm.ctiles;
  const int64_t rest = b / prm.ctiles;
  TileAt at;
  at.n = rest / prm.ptiles;
  at.w0 = ct * K::kCT;
  at.p0 = (rest % prm.ptiles) * K::kTP;
  at.np = static_cast<int>(min(static_cast<int64_t>(K::kTP), prm.HW - at.p0));
  at.nw = static_cast<int>(min(static_cast<int64_t>(K::kCT), prm.tile_cw - at.w0));
  return at;
}

// to_nhwc, tiled. Grid: a grid-stride loop over tiles (one per block for all but huge inputs).
// Block: kThreads threads, one tile.
// Load: a thread builds kWordsPerThread words, lanes along pixels, so a warp reads 32 consecutive
// pixels of one or two channel rows (coalesced); every load is issued before the first shared
// store. Words of channels >= C are zero: the padding. Shared stores tile[p][w]: conflict-free
// (odd pitch).
// Store: a thread writes kChunksPerThread vectors of kVec words, each a pixel's channel segment;
// a warp writes 32 * kVec words, contiguous within each pixel row (kCT = 32: whole 128-byte rows).
// Shared reads tile[p][j * kVec + k]: conflict-free for kCT = 32, at most 2-way below.
// Barriers: the first makes the tile visible to all threads before the stores read it; the
// second keeps the next tile's shared stores behind this tile's reads.
template <class K, bool kPairs>
__global__ void __launch_bounds__(K::kThreads, K::kMinBlocks)
    nchw_to_nhwc_tiled(const typename K::E* __restrict__ x, uint32_t* __restrict__ y,
                       TileParams prm) {
  static_assert(!kPairs || K::kEpw == 2, "pixel pairs: 16-bit elements");
  using E = typename K::E;
  __shared__ uint32_t tile[K::kTP * K::kPitch];
  for (int64_t b = blockIdx.x; b < prm.tiles; b += gridDim.x) {
    const TileAt at = tile_at<K>(b, prm);
    const int64_t n = at.n, w0 = at.w0, p0 = at.p0;
    const int np = at.np, nw = at.nw;
    const E* xs = x + n * prm.sn + p0;

    uint32_t v[K::kWordsPerThread];
    if constexpr (kPairs) {
      // Slot (pixel pair q, word w): the two channels' 4-byte pairs at pixels 2q, 2q + 1, a
      // warp reading 128 contiguous bytes of one channel row; pixel 2q's word takes the low
      // halves, pixel 2q + 1's the high ones.
      constexpr int kTQ = K::kTP / 2;
#pragma unroll
      for (int i = 0; i < K::kWordsPerThread / 2; ++i) {
        const int idx = threadIdx.x + i * K::kThreads;
        const int p = 2 * (idx % kTQ);
        const int w = idx / kTQ;
        uint32_t pair[2] = {0, 0};
        if (p < np && w < nw) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int64_t c = (w0 + w) * 2 + e;
            if (c < prm.C) {
              const E* q = xs + c * prm.sc + p;
              pair[e] = p + 1 < np ? *reinterpret_cast<const uint32_t*>(q)
                                   : static_cast<uint32_t>(*q);
            }
          }
        }
        v[2 * i] = __byte_perm(pair[0], pair[1], 0x5410);
        v[2 * i + 1] = __byte_perm(pair[0], pair[1], 0x7632);
      }
#pragma unroll
      for (int i = 0; i < K::kWordsPerThread / 2; ++i) {
        const int idx = threadIdx.x + i * K::kThreads;
        const int p = 2 * (idx % kTQ);
        const int w = idx / kTQ;
        tile[p * K::kPitch + w] = v[2 * i];
        tile[(p + 1) * K::kPitch + w] = v[2 * i + 1];
      }
    } else {
#pragma unroll
      for (int i = 0; i < K::kWordsPerThread; ++i) {
        const int idx = threadIdx.x + i * K::kThreads;
        const int p = idx % K::kTP;
        const int w = idx / K::kTP;
        uint32_t word = 0;
        if (p < np && w < nw) {
#pragma unroll
          for (int e = 0; e < K::kEpw; ++e) {
            const int64_t c = (w0 + w) * K::kEpw + e;
            if (c < prm.C) {
              word |= static_cast<uint32_t>(xs[c * prm.sc + p]) << (8 * sizeof(E) * e);
            }
          }
        }
        v[i] = word;
      }
#pragma unroll
      for (int i = 0; i < K::kWordsPerThread; ++i) {
        const int idx = threadIdx.x + i * K::kThreads;
        tile[(idx % K::kTP) * K::kPitch + idx / K::kTP] = v[i];
      }
    }
    __syncthreads();

    uint32_t* ys = y + (n * prm.HW + p0) * prm.cw + w0;
#pragma unroll
    for (int i = 0; i < K::kChunksPerThread; ++i) {
      const int idx = threadIdx.x + i * K::kThreads;
      const int p = idx / K::kChunks;
      const int w = (idx % K::kChunks) * K::kVec;
      if (p < np && w < nw) {
        const uint32_t* s = tile + p * K::kPitch + w;
        uint32_t* d = ys + p * prm.cw + w;
        if constexpr (K::kVec == 4) {
          *reinterpret_cast<uint4*>(d) = make_uint4(s[0], s[1], s[2], s[3]);
        } else {
          *d = s[0];
        }
      }
    }
    __syncthreads();
  }
}

// nhwc_copy_to, tiled: the reverse transpose. Grid and block as above.
// Load: a thread reads kChunksPerThread vectors of kVec words of the packed NHWC source (a warp:
// 32 * kVec consecutive words of pixel rows), all issued before the shared stores
// tile[p][j * kVec + k] (conflict-free for kCT = 32, at most 2-way below). A vector may reach
// past tile_cw (channels dst does not take) but never past the source row or the tile row: the
// host picks kVec = 4 only when 4 divides cw, and 4 divides kCT.
// Store: a thread writes kElemsPerThread elements, lanes along pixels, so a warp writes 32
// consecutive pixels of one channel row (coalesced); shared reads tile[p][c / kEpw] are
// conflict-free (odd pitch).
// Barriers: as in nchw_to_nhwc_tiled.
template <class K, bool kPairs>
__global__ void __launch_bounds__(K::kThreads, K::kMinBlocks)
    nhwc_to_nchw_tiled(const uint32_t* __restrict__ src, typename K::E* __restrict__ dst,
                       TileParams prm) {
  static_assert(!kPairs || K::kEpw == 2, "pixel pairs: 16-bit elements");
  using E = typename K::E;
  __shared__ uint32_t tile[K::kTP * K::kPitch];
  for (int64_t b = blockIdx.x; b < prm.tiles; b += gridDim.x) {
    const TileAt at = tile_at<K>(b, prm);
    const int64_t n = at.n, w0 = at.w0, p0 = at.p0;
    const int np = at.np, nw = at.nw;
    const uint32_t* ss = src + (n * prm.HW + p0) * prm.cw + w0;

    uint32_t v[K::kChunksPerThread][K::kVec];
#pragma unroll
    for (int i = 0; i < K::kChunksPerThread; ++i) {
      const int idx = threadIdx.x + i * K::kThreads;
      const int p = idx / K::kChunks;
      const int w = (idx % K::kChunks) * K::kVec;
      if (p < np && w < nw) {
        const uint32_t* s = ss + p * prm.cw + w;
        if constexpr (K::kVec == 4) {
          const uint4 q = *reinterpret_cast<const uint4*>(s);
          v[i][0] = q.x;
          v[i][1] = q.y;
          v[i][2] = q.z;
          v[i][3] = q.w;
        } else {
          v[i][0] = s[0];
        }
      } else {
#pragma unroll
        for (int k = 0; k < K::kVec; ++k) v[i][k] = 0;
      }
    }
#pragma unroll
    for (int i = 0; i < K::kChunksPerThread; ++i) {
      const int idx = threadIdx.x + i * K::kThreads;
      uint32_t* t = tile + (idx / K::kChunks) * K::kPitch + (idx % K::kChunks) * K::kVec;
#pragma unroll
      for (int k = 0; k < K::kVec; ++k) t[k] = v[i][k];
    }
    __syncthreads();

    E* ds = dst + n * prm.sn + p0;
    const int64_t c0 = w0 * K::kEpw;
    if constexpr (kPairs) {
      // Slot (pixel pair q, channel cl): pixels 2q and 2q + 1 of one channel joined into one
      // 4-byte store, a warp writing 128 contiguous bytes of one channel row.
      constexpr int kTQ = K::kTP / 2;
#pragma unroll 4
      for (int i = 0; i < K::kElemsPerThread / 2; ++i) {
        const int idx = threadIdx.x + i * K::kThreads;
        const int p = 2 * (idx % kTQ);
        const int cl = idx / kTQ;
        if (p < np && c0 + cl < prm.C) {
          E* d = ds + (c0 + cl) * prm.sc + p;
          const uint32_t lo = tile[p * K::kPitch + cl / 2];
          const uint32_t hi = tile[(p + 1) * K::kPitch + cl / 2];
          const int sel = cl % 2 == 0 ? 0x5410 : 0x7632;  // the channel's half of each word
          const uint32_t both = __byte_perm(lo, hi, sel);  // pixel p low, p + 1 high
          if (p + 1 < np) {
            *reinterpret_cast<uint32_t*>(d) = both;
          } else {
            *d = static_cast<E>(both);
          }
        }
      }
    } else {
#pragma unroll 4
      for (int i = 0; i < K::kElemsPerThread; ++i) {
        const int idx = threadIdx.x + i * K::kThreads;
        const int p = idx % K::kTP;
        const int cl = idx / K::kTP;
        if (p < np && c0 + cl < prm.C) {
          const uint32_t word = tile[p * K::kPitch + cl / K::kEpw];
          ds[(c0 + cl) * prm.sc + p] = static_cast<E>(word >> (8 * sizeof(E) * (cl % K::kEpw)));
        }
      }
    }
    __syncthreads();
  }
}

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

// The strided kernels' problem: out[n, c, h, w] = c < C_in ? in[n, c, h, w] : 0 for the
// [N, C_out, H, W] elements, both sides at int64 element strides, visited in NHWC order.
struct StridedParams {
  int64_t C_in, C_out, H, W;
  int64_t in_s[4], out_s[4];  // (n, c, h, w) strides in elements
  int64_t total;              // N * C_out * H * W
  FastDiv div_c, div_w, div_h;  // C_out, W, H (used when total < 2^31)
};

constexpr int kStridedThreads = 256;
constexpr int64_t kMaxBlocks = int64_t{1} << 20;  // grid cap; the kernels loop over the rest

// Any strides. Grid-stride over the output's elements in NHWC order: a lane per element, so a
// warp reads and writes channels-last neighbours (coalesced where a side is channels_last, e.g.
// a channels_last input or the packed output of to_nhwc). kWide: int64 index arithmetic for
// totals from 2^31; otherwise 32-bit indices with multiply-shift division (fast enough to stay
// memory bound).
template <class E, bool kWide>
__global__ void __launch_bounds__(kStridedThreads)
    strided_copy_nhwc_order(const E* __restrict__ in, E* __restrict__ out, StridedParams prm) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < prm.total;
       i += step) {
    int64_t n, c, h, w;
    if constexpr (kWide) {
      c = i % prm.C_out;
      int64_t q = i / prm.C_out;
      w = q % prm.W;
      q /= prm.W;
      h = q % prm.H;
      n = q / prm.H;
    } else {
      const int ii = static_cast<int>(i);
      const int q0 = prm.div_c.div(ii);
      const int q1 = prm.div_w.div(q0);
      const int q2 = prm.div_h.div(q1);
      c = ii - q0 * static_cast<int>(prm.div_c.d);
      w = q0 - q1 * static_cast<int>(prm.div_w.d);
      h = q1 - q2 * static_cast<int>(prm.div_h.d);
      n = q2;
    }
    const int64_t o = n * prm.out_s[0] + c * prm.out_s[1] + h * prm.out_s[2] + w * prm.out_s[3];
    E value = 0;
    if (c < prm.C_in) {
      value = in[n * prm.in_s[0] + c * prm.in_s[1] + h * prm.in_s[2] + w * prm.in_s[3]];
    }
    out[o] = value;
  }
}

// Below this many pixels per image a tile (64 to 512 pixels) would be mostly idle threads: the
// small-plane kernels take such tensors.
constexpr int64_t kMinTilePixels = 32;

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
void launch_small_planes(const at::Tensor& nchw, void* nhwc, int64_t Cp, bool sampled,
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

// Channel words per tile for a tile row of cw words: the smallest of 4, 8, 16, 32 that holds it
// (32 for wider rows, which take several channel tiles).
int tile_words(int64_t cw) { return cw > 16 ? 32 : cw > 8 ? 16 : cw > 4 ? 8 : 4; }

template <bool kToNhwc, class K, bool kPairs>
void launch_tiled_pairs(const void* in, void* out, const TileParams& prm, cudaStream_t stream,
                        const char* op) {
  const dim3 grid = checked_grid(op, std::min(prm.tiles, kMaxBlocks));
  if constexpr (kToNhwc) {
    nchw_to_nhwc_tiled<K, kPairs><<<grid, K::kThreads, 0, stream>>>(
        static_cast<const typename K::E*>(in), static_cast<uint32_t*>(out), prm);
  } else {
    nhwc_to_nchw_tiled<K, kPairs><<<grid, K::kThreads, 0, stream>>>(
        static_cast<const uint32_t*>(in), static_cast<typename K::E*>(out), prm);
  }
  GK_CHECK_LAUNCH();
}

template <bool kToNhwc, class K>
void launch_tiled(const void* in, void* out, const TileParams& prm, cudaStream_t stream,
                  const char* op) {
  if constexpr (K::kEpw == 2) {
    if (prm.pairs) return launch_tiled_pairs<kToNhwc, K, true>(in, out, prm, stream, op);
  }
  launch_tiled_pairs<kToNhwc, K, false>(in, out, prm, stream, op);
}

template <bool kToNhwc, int kElemBytes, int kCT>
void launch_tiled_vec(const void* in, void* out, const TileParams& prm, bool vec4,
                      cudaStream_t stream, const char* op) {
  if (vec4) {
    launch_tiled<kToNhwc, TileTraits<kElemBytes, kCT, 4>>(in, out, prm, stream, op);
  } else {
    launch_tiled<kToNhwc, TileTraits<kElemBytes, kCT, 1>>(in, out, prm, stream, op);
  }
}

template <bool kToNhwc, int kElemBytes>
void launch_tiled_es(const void* in, void* out, TileParams prm, bool vec4, cudaStream_t stream,
                     const char* op) {
  const int ct = tile_words(prm.tile_cw);
  prm.ctiles = ceil_div(prm.tile_cw, ct);
  prm.ptiles = ceil_div(prm.HW, TileTraits<kElemBytes, 4, 1>::kTileWords / ct);  // kTP of ct
  prm.tiles = prm.N * prm.ptiles * prm.ctiles;
  switch (ct) {
    case 4: return launch_tiled_vec<kToNhwc, kElemBytes, 4>(in, out, prm, vec4, stream, op);
    case 8: return launch_tiled_vec<kToNhwc, kElemBytes, 8>(in, out, prm, vec4, stream, op);
    case 16: return launch_tiled_vec<kToNhwc, kElemBytes, 16>(in, out, prm, vec4, stream, op);
    default: return launch_tiled_vec<kToNhwc, kElemBytes, 32>(in, out, prm, vec4, stream, op);
  }
}

template <bool kToNhwc>
void launch_tiled_any(int64_t elem_bytes, const void* in, void* out, const TileParams& prm,
                      bool vec4, cudaStream_t stream, const char* op) {
  if (elem_bytes == 2) {
    launch_tiled_es<kToNhwc, 2>(in, out, prm, vec4, stream, op);
  } else {
    launch_tiled_es<kToNhwc, 4>(in, out, prm, vec4, stream, op);
  }
}

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

template <class E>
void launch_strided_es(const void* in, void* out, const StridedParams& prm, cudaStream_t stream,
                       const char* op) {
  const dim3 grid = checked_grid(op, std::min(ceil_div(prm.total, kStridedThreads), kMaxBlocks));
  if (prm.total < (int64_t{1} << 31)) {
    strided_copy_nhwc_order<E, false><<<grid, kStridedThreads, 0, stream>>>(
        static_cast<const E*>(in), static_cast<E*>(out), prm);
  } else {
    strided_copy_nhwc_order<E, true><<<grid, kStridedThreads, 0, stream>>>(
        static_cast<const E*>(in), static_cast<E*>(out), prm);
  }
  GK_CHECK_LAUNCH();
}

// out[:, :C_out] (sizes N, C_out, H, W) from in[:, :C_in] and zeros, any strides; total > 0.
void launch_strided(const at::Tensor& in, const at::Tensor& out, int64_t C_in, int64_t C_out,
                    cudaStream_t stream, const char* op) {
  StridedParams prm{};
  prm.C_in = C_in;
  prm.C_out = C_out;
  prm.H = out.size(2);
  prm.W = out.size(3);
  for (int d = 0; d < 4; ++d) {
    prm.in_s[d] = in.stride(d);
    prm.out_s[d] = out.stride(d);
  }
  prm.total = out.size(0) * C_out * prm.H * prm.W;
  if (prm.total < (int64_t{1} << 31)) {
    prm.div_c = FastDiv(static_cast<uint32_t>(C_out));
    prm.div_w = FastDiv(static_cast<uint32_t>(prm.W));
    prm.div_h = FastDiv(static_cast<uint32_t>(prm.H));
  }
  if (in.element_size() == 2) {
    launch_strided_es<uint16_t>(in.const_data_ptr(), out.data_ptr(), prm, stream, op);
  } else {
    launch_strided_es<uint32_t>(in.const_data_ptr(), out.data_ptr(), prm, stream, op);
  }
}

void check_layout_tensor(const char* op, const at::Tensor& t, const char* name) {
  check_defined(op, t, name);
  GK_CHECK(t.is_cuda(), op, "expected ", name, " on a CUDA device, got ", t.device());
  GK_CHECK(t.dim() == 4, op, "expected ", name, " with 4 dimensions [N, C, H, W], got ", t.dim(),
           " (shape ", t.sizes(), ")");
  const auto st = t.scalar_type();
  GK_CHECK(st == at::kFloat || st == at::kHalf || st == at::kBFloat16, op, name, " has dtype ",
           st, "; supported: float32, float16, bfloat16");
}

// Whether the H*W plane of a [N, C, H, W] tensor is packed: element (h, w) at h * W + w.
bool planes_packed(const at::Tensor& t) {
  return (t.size(3) == 1 || t.stride(3) == 1) && (t.size(2) == 1 || t.stride(2) == t.size(3));
}

// Whether t is packed channels_last: (n, c, h, w) at ((n * H + h) * W + w) * C + c (a size-1
// dim's stride, never stepped, is free).
bool packed_nhwc(const at::Tensor& t) {
  const int64_t C = t.size(1), H = t.size(2), W = t.size(3);
  return (C == 1 || t.stride(1) == 1) && (W == 1 || t.stride(3) == C) &&
         (H == 1 || t.stride(2) == W * C) && (t.size(0) == 1 || t.stride(0) == H * W * C);
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

bool aligned(const void* p, uintptr_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

}  // namespace
}  // namespace conv

at::Tensor to_nhwc(const at::Tensor& t, int64_t c_multiple) {
  return to_nhwc(t, c_multiple, at::cuda::getCurrentCUDAStream(t.device().index()).stream());
}

at::Tensor to_nhwc(const at::Tensor& t, int64_t c_multiple, cudaStream_t stream) {
  constexpr const char* op = "to_nhwc";
  conv::check_layout_tensor(op, t, "input");
  GK_CHECK(c_multiple >= 1, op, "expected c_multiple >= 1, got ", c_multiple);
  const int64_t N = t.size(0), C = t.size(1), H = t.size(2), W = t.size(3);
  const int64_t Cp = ceil_div(C, c_multiple) * c_multiple;
  at::Tensor y =
      at::empty({N, Cp, H, W}, t.options().memory_format(at::MemoryFormat::ChannelsLast));
  if (y.numel() == 0) return y;
  const int64_t es = t.element_size();
  const int64_t HW = H * W;
  // The small-plane transpose: planes packed, under kMinTilePixels or where small_planes_for
  // says.
  // Sampled planes (a strided 1x1 layer's pixels, x[:, :, ::2, ::2]): the same kernel, each
  // channel's sampled pixels gathered.
  const bool small = HW < conv::kMinTilePixels || conv::small_planes_for(HW);
  const bool packed = conv::planes_packed(t);
  const bool sampled = !packed && conv::sampled_planes(t);
  if (((packed && small) || sampled) && Cp < (int64_t{1} << 30)) {
    if (es == 2) {
      conv::launch_small_planes<uint16_t>(t, y.data_ptr(), Cp, sampled, stream, op);
    } else {
      conv::launch_small_planes<uint32_t>(t, y.data_ptr(), Cp, sampled, stream, op);
    }
    return y;
  }
  // The tiled transpose: planes packed, whole 4-byte words per NHWC pixel row, planes big enough
  // to fill a tile's lanes.
  if (conv::planes_packed(t) && HW >= conv::kMinTilePixels && (Cp * es) % 4 == 0) {
    conv::TileParams prm{};
    prm.C = C;
    prm.HW = HW;
    prm.sn = t.stride(0);
    prm.sc = t.stride(1);
    prm.cw = Cp * es / 4;
    prm.tile_cw = prm.cw;
    prm.N = N;
    prm.pairs = es == 2 && (C == 1 || prm.sc % 2 == 0) && (N == 1 || prm.sn % 2 == 0) &&
                conv::aligned(t.const_data_ptr(), 4);
    if (const int vec = conv::wide_for(prm, es, t.const_data_ptr(), y.data_ptr())) {
      if (es == 4) {
        conv::launch_wide_es<4, 16>(t.const_data_ptr(), y.data_ptr(), prm, stream, op);
      } else if (vec == 16) {
        conv::launch_wide_es<2, 16>(t.const_data_ptr(), y.data_ptr(), prm, stream, op);
      } else {
        conv::launch_wide_es<2, 8>(t.const_data_ptr(), y.data_ptr(), prm, stream, op);
      }
      return y;
    }
    const bool vec4 = prm.cw % 4 == 0 && is_aligned16(y.data_ptr());
    conv::launch_tiled_any<true>(es, t.const_data_ptr(), y.data_ptr(), prm, vec4, stream, op);
    return y;
  }
  conv::launch_strided(t, y, C, Cp, stream, op);
  return y;
}

void nhwc_copy_to(const at::Tensor& src, const at::Tensor& dst) {
  constexpr const char* op = "nhwc_copy_to";
  conv::check_layout_tensor(op, src, "src");
  conv::check_layout_tensor(op, dst, "dst");
  check_same_device(op, src, "src", dst, "dst");
  check_same_dtype(op, src, "src", dst, "dst");
  GK_CHECK(src.size(0) == dst.size(0) && src.size(2) == dst.size(2) &&
               src.size(3) == dst.size(3) && src.size(1) >= dst.size(1),
           op, "expected src of sizes [N, Cs >= C, H, W] for dst of sizes [N, C, H, W], got src ",
           src.sizes(), " and dst ", dst.sizes());
  GK_CHECK(at::has_internal_overlap(dst) != at::MemOverlap::Yes, op,
           "dst has internal overlap (an expanded view): its elements cannot all be written");
  if (dst.numel() == 0) return;
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream(dst.device().index()).stream();
  const int64_t es = src.element_size();
  const int64_t C = dst.size(1), Cs = src.size(1);
  const int64_t HW = dst.size(2) * dst.size(3);
  const void* sp = src.const_data_ptr();
  if (conv::packed_nhwc(src) && conv::planes_packed(dst) && HW >= conv::kMinTilePixels &&
      (Cs * es) % 4 == 0 && conv::aligned(sp, 4)) {
    conv::TileParams prm{};
    prm.C = C;
    prm.HW = HW;
    prm.sn = dst.stride(0);
    prm.sc = dst.stride(1);
    prm.cw = Cs * es / 4;
    prm.tile_cw = ceil_div(C * es, 4);
    prm.N = dst.size(0);
    prm.pairs = es == 2 && (C == 1 || prm.sc % 2 == 0) && (prm.N == 1 || prm.sn % 2 == 0) &&
                conv::aligned(dst.data_ptr(), 4);
    const bool vec4 = prm.cw % 4 == 0 && is_aligned16(sp);
    conv::launch_tiled_any<false>(es, sp, dst.data_ptr(), prm, vec4, stream, op);
    return;
  }
  conv::launch_strided(src, dst, C, C, stream, op);
}

}  // namespace gpukern
