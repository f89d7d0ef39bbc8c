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
// (The wide kernel: conv/layout_wide.cu; the small-plane one: conv/layout_small.cu; what they
// share with the tiled ones: conv/layout_tiles.cuh.)
#include "conv/layout.h"

#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/cuda/CUDAContext.h>

#include <algorithm>
#include <cstdint>

#include "conv/layout_tiles.cuh"
#include "core/checks.h"
#include "core/knobs.h"
#include "core/launch.cuh"
#include "device/fastdiv.cuh"
#include "device/vec.cuh"

namespace gpukern {
namespace conv {
namespace layout {
namespace {

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

// The strided kernels' problem: out[n, c, h, w] = c < C_in ? in[n, c, h, w] : 0 for the
// [N, C_out, H, W] elements, both sides at int64 element strides, visited in NHWC order.
struct StridedParams {
  int64_t C_in, C_out, H, W;
  int64_t in_s[4], out_s[4];  // (n, c, h, w) strides in elements
  int64_t total;              // N * C_out * H * W
  FastDiv div_c, div_w, div_h;  // C_out, W, H (used when total < 2^31)
};

constexpr int kStridedThreads = 256;

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

bool aligned(const void* p, uintptr_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

}  // namespace
}  // namespace layout
}  // namespace conv

namespace lay = conv::layout;

at::Tensor to_nhwc(const at::Tensor& t, int64_t c_multiple) {
  return to_nhwc(t, c_multiple, at::cuda::getCurrentCUDAStream(t.device().index()).stream());
}

at::Tensor to_nhwc(const at::Tensor& t, int64_t c_multiple, cudaStream_t stream) {
  constexpr const char* op = "to_nhwc";
  lay::check_layout_tensor(op, t, "input");
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
  const bool small = HW < lay::kMinTilePixels || lay::small_planes_for(HW);
  const bool packed = lay::planes_packed(t);
  const bool sampled = !packed && lay::sampled_planes(t);
  if (((packed && small) || sampled) && Cp < (int64_t{1} << 30)) {
    lay::launch_small_planes(t, y.data_ptr(), Cp, sampled, stream, op);
    return y;
  }
  // The tiled transpose: planes packed, whole 4-byte words per NHWC pixel row, planes big enough
  // to fill a tile's lanes.
  if (lay::planes_packed(t) && HW >= lay::kMinTilePixels && (Cp * es) % 4 == 0) {
    lay::TileParams prm{};
    prm.C = C;
    prm.HW = HW;
    prm.sn = t.stride(0);
    prm.sc = t.stride(1);
    prm.cw = Cp * es / 4;
    prm.tile_cw = prm.cw;
    prm.N = N;
    prm.pairs = es == 2 && (C == 1 || prm.sc % 2 == 0) && (N == 1 || prm.sn % 2 == 0) &&
                lay::aligned(t.const_data_ptr(), 4);
    if (const int vec = lay::wide_for(prm, es, t.const_data_ptr(), y.data_ptr())) {
      lay::launch_wide(vec, es, t.const_data_ptr(), y.data_ptr(), prm, stream, op);
      return y;
    }
    const bool vec4 = prm.cw % 4 == 0 && is_aligned16(y.data_ptr());
    lay::launch_tiled_any<true>(es, t.const_data_ptr(), y.data_ptr(), prm, vec4, stream, op);
    return y;
  }
  lay::launch_strided(t, y, C, Cp, stream, op);
  return y;
}

void nhwc_copy_to(const at::Tensor& src, const at::Tensor& dst) {
  constexpr const char* op = "nhwc_copy_to";
  lay::check_layout_tensor(op, src, "src");
  lay::check_layout_tensor(op, dst, "dst");
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
  if (lay::packed_nhwc(src) && lay::planes_packed(dst) && HW >= lay::kMinTilePixels &&
      (Cs * es) % 4 == 0 && lay::aligned(sp, 4)) {
    lay::TileParams prm{};
    prm.C = C;
    prm.HW = HW;
    prm.sn = dst.stride(0);
    prm.sc = dst.stride(1);
    prm.cw = Cs * es / 4;
    prm.tile_cw = ceil_div(C * es, 4);
    prm.N = dst.size(0);
    prm.pairs = es == 2 && (C == 1 || prm.sc % 2 == 0) && (prm.N == 1 || prm.sn % 2 == 0) &&
                lay::aligned(dst.data_ptr(), 4);
    const bool vec4 = prm.cw % 4 == 0 && is_aligned16(sp);
    lay::launch_tiled_any<false>(es, sp, dst.data_ptr(), prm, vec4, stream, op);
    return;
  }
  lay::launch_strided(src, dst, C, C, stream, op);
}

}  // namespace gpukern
