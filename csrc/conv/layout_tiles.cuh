#pragma once
// Internal to the layout conversions (conv/layout.h): what the tiled transposes (conv/layout.cu),
// the wide one (conv/layout_wide.cu) and the small-plane one (conv/layout_small.cu) share, and
// the entry points of the last two. CUDA translation units only.
#include <ATen/ATen.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace gpukern {
namespace conv {
namespace layout {

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

constexpr int64_t kMaxBlocks = int64_t{1} << 20;  // grid cap; the kernels loop over the rest

// Below this many pixels per image a tile (64 to 512 pixels) would be mostly idle threads: the
// small-plane kernels take such tensors.
constexpr int64_t kMinTilePixels = 32;

// The wide transpose to NHWC (conv/layout_wide.cu): the NCHW-side vector bytes it takes prm with
// (0: not wide), and its launch (prm's tile counts set there).
int wide_for(const TileParams& prm, int64_t es, const void* nchw, const void* nhwc);
void launch_wide(int vec_bytes, int64_t es, const void* in, void* out, const TileParams& prm,
                 cudaStream_t stream, const char* op);

// The small-plane transpose to NHWC (conv/layout_small.cu): whether packed planes of HW pixels
// take it, whether t's unpacked planes take its gather, and its launch into the packed
// [N, H, W, Cp] buffer nhwc.
bool small_planes_for(int64_t HW);
bool sampled_planes(const at::Tensor& t);
void launch_small_planes(const at::Tensor& nchw, void* nhwc, int64_t Cp, bool sampled,
                         cudaStream_t stream, const char* op);

}  // namespace layout
}  // namespace conv
}  // namespace gpukern
