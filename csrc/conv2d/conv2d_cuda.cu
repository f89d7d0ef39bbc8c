// conv2d CUDA host side: argument checks (conv/args), the algorithm choice, one launch on
// the current stream, and the CUDA registration of both overloads.
#include <c10/cuda/CUDAFunctions.h>
#include <cudaTypedefs.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/algo_table.h"

#include "core/checks.h"
#include "conv/args.h"
#include "conv/dispatch.h"
#include "core/dispatch.h"
#include "core/launch.cuh"
#include "core/tickets.h"
#include "conv2d/conv2d.h"
#include "conv2d/conv2d_kernels.cuh"

namespace gpukern {
namespace {

constexpr const char* kOp = "conv2d";
constexpr int64_t kMaxGridY = 65535;
constexpr int64_t kMaxGridX = 2147483647;

enum class Algo {
  kDepthwiseNhwc,  // conv2d_depthwise_nhwc_roll_kernel<T, 3/5/7>, conv2d_depthwise_nhwc_kernel<T>
  kDepthwiseRows,  // conv2d_depthwise_rows_kernel<T, 3/5/7>
  kDepthwiseTma,   // conv2d_depthwise_tma_kernel<T, 3/5/7, 16/32, 128/256>
  kDepthwisePlane,  // conv2d_depthwise_plane_kernel<T, 3>
  kDepthwiseLarge,  // conv2d_depthwise_large_kernel<T, 0, false>, <float, 0..3, true> (TMA)
  kDepthwiseNchw,  // conv2d_depthwise_nchw_kernel
  kGeneralStaged,  // conv2d_general_kernel<T, true>
  kGeneralDirect,  // conv2d_general_kernel<T, false>
};

// Names in Algo order: what _set_algorithm("conv2d", ...) accepts and _algorithm_conv2d returns.
const std::vector<std::string>& conv2d_algo_names() {
  static const std::vector<std::string> names = {
      "depthwise_nhwc", "depthwise_rows",  "depthwise_tma",  "depthwise_plane",
      "depthwise_large", "depthwise_nchw", "general_staged", "general_direct"};
  return names;
}

struct Plan {
  Algo algo = Algo::kGeneralDirect;
  int static_k = 0;                  // depthwise NCHW: 3/5/7 = filter in registers, -1 = runtime
                                     // filter in register chunks (row dilation 1), 0 = runtime;
                                     // rows: the filter size
  conv2d::DepthwiseTile tile{0, 0};  // depthwise NCHW shared tile
  bool vec_ok = false;               // depthwise NCHW: 16-byte loads allowed; large: vector
                                     // stores allowed
  int rows_per_chunk = 0;            // general staged: filter rows per staged chunk
  int region_cols = 0;               // general staged: staged input columns
  conv2d::RowsShape rows{};          // depthwise rows: work decomposition
  conv2d::NhwcShape nhwc{};          // depthwise nhwc: work decomposition (static_k: 3/5/7 =
                                     // the roll kernel; 0 = runtime filter)
  conv2d::TmaShape tma{};            // depthwise tma: work decomposition (static_k: the filter)
  conv2d::PlaneShape plane{};        // depthwise plane: work decomposition (static_k: the filter)
  bool tma_narrow = false;           // depthwise tma: the 64-column instance (OW <= 64)
  bool tma_same_o = false;           // depthwise tma: the instance skipping kSameO columns
  uint64_t tma_strides[3] = {};      // depthwise tma / large: the map's byte strides
                                     // (tma_strides())
  bool large_tma = false;            // depthwise large: the TMA stages the tiles
  int large_o = 0;                   // depthwise large (TMA): box columns before the window
  size_t smem_bytes = 0;
};

int64_t round_up(int64_t a, int64_t m) { return ceil_div(a, m) * m; }

bool depthwise1(const Conv2dParams& p) { return p.groups == p.C && p.O == p.C; }

// Warps of work the rows kernel aims for (row chunks are cut until there are about this many):
// ~2 waves of 132 SMs x 16 resident warps (the 7x7 instance's occupancy), fewer chunks = fewer
// re-read halo rows.
constexpr int64_t kRowsTargetWarps = 4096;

// The rows kernel indexes columns and image rows in int (offsets in int64).
constexpr int64_t kMaxRowsDim = int64_t{1} << 30;

// Each plan_* fills the plan of one algorithm and says whether it can run the shape at all.
bool plan_rows(const Conv2dParams& p, int64_t elem_size, Plan& plan) {
  using Tr = conv2d::RowsTraits;
  const bool k_ok = p.KH == p.KW && (p.KH == 3 || p.KH == 5 || p.KH == 7);
  if (!depthwise1(p) || p.stride_h != 1 || p.stride_w != 1 || p.dil_h != 1 || p.dil_w != 1 ||
      !k_ok || p.pad_w > Tr::kHalo || p.KW - 1 - p.pad_w > Tr::kHalo ||
      std::max({p.H, p.W, p.OW}) > kMaxRowsDim || p.pad_h > kMaxRowsDim) {
    return false;
  }
  conv2d::RowsShape& s = plan.rows;
  int S = 1;
  while (S < 32 && S * Tr::kItems < p.OW) S *= 2;
  s.seg_lanes = S;
  s.strips = ceil_div(p.OW, static_cast<int64_t>(S) * Tr::kItems);
  const int64_t groups = ceil_div(p.N * p.C, 32 / S);
  s.chunks = std::max<int64_t>(
      1, std::min(ceil_div(p.OH, 16), ceil_div(kRowsTargetWarps, groups * s.strips)));
  s.rows = ceil_div(p.OH, s.chunks);
  s.chunks = ceil_div(p.OH, s.rows);
  s.units = groups * s.chunks * s.strips;
  const int64_t I = Tr::kItems;
  s.x_vec = p.x_sw == 1 && p.x_sh % I == 0 && (p.N == 1 || p.x_sn % I == 0) &&
            (p.C == 1 || p.x_sc % I == 0) && is_aligned16(p.x);
  s.y_vec = p.y_sw == 1 && p.y_sh % I == 0 && (p.N == 1 || p.y_sn % I == 0) &&
            (p.O == 1 || p.y_so % I == 0) && is_aligned16(p.y);
  plan.algo = Algo::kDepthwiseRows;
  plan.static_k = static_cast<int>(p.KH);
  plan.smem_bytes = static_cast<size_t>(Tr::kWarps) * Tr::kStages * Tr::slot(S) * elem_size;
  return true;
}

// Blocks the runtime-filter nhwc kernel aims for (output rows per block grow until about this
// many): a few waves of 132 SMs, each block staging the filter once for its rows.
constexpr int64_t kNhwcTargetBlocks = 2048;
constexpr int64_t kNhwcMaxRows = 16;

// Whether p's strides allow kV-element vector accesses of a channels_last tensor at `data`.
bool nhwc_vec(int64_t C, int64_t kV, int64_t elem_size, int64_t N, int64_t sc, int64_t sw,
              int64_t sh, int64_t sn, const void* data) {
  return C % kV == 0 && sc == 1 && sw % kV == 0 && sh % kV == 0 && (N == 1 || sn % kV == 0) &&
         reinterpret_cast<uintptr_t>(data) % static_cast<uintptr_t>(kV * elem_size) == 0;
}

bool plan_nhwc(const Conv2dParams& p, int64_t elem_size, Plan& plan) {
  using Tr = conv2d::NhwcTraits;
  constexpr int64_t kIntMax = int64_t{1} << 30;  // the kernels keep columns/rows in int
  if (!depthwise1(p) || p.KH * p.KW > Tr::kMaxTaps ||
      std::max({p.H, p.W, p.OH, p.OW + 4, p.pad_h, p.pad_w}) > kIntMax) {
    return false;
  }
  const bool square = p.KH == p.KW && p.stride_h == 1 && p.stride_w == 1 && p.dil_h == 1 &&
                      p.dil_w == 1 && (p.KH == 3 || p.KH == 5 || p.KH == 7);
  // The roll kernel: 4 channels x items(K) columns per thread, taps staged as float.
  const int64_t V = square ? conv2d::NhwcRoll::kV : 16 / elem_size;
  const int64_t items = square ? conv2d::NhwcRoll::items(static_cast<int>(p.KH))
                               : Tr::items_w(static_cast<int>(elem_size));
  conv2d::NhwcShape& s = plan.nhwc;
  s.c_vecs = ceil_div(p.C, V);
  int tc = 1;
  while (tc < 32 && tc < s.c_vecs) tc *= 2;
  s.tc = tc;
  s.c_blocks = ceil_div(s.c_vecs, static_cast<int64_t>(tc));
  s.w_groups = ceil_div(p.OW, items);
  // As few column blocks as the thread budget allows, then their width evened out (56 columns =
  // 14 groups: two blocks of 7, not 8 + 6).
  const int64_t max_tw = Tr::kMaxThreads / tc;
  s.w_blocks = ceil_div(s.w_groups, max_tw);
  s.tw = static_cast<int>(ceil_div(s.w_groups, s.w_blocks));
  if (square) {
    s.rows = s.img_chunks = s.row_chunks = 0;  // strips: set at launch (launch_nhwc_roll)
  } else {
    const int64_t row_units = p.N * p.OH;
    const int64_t per_row = s.c_blocks * s.w_blocks;
    s.rows = std::max<int64_t>(
        1, std::min(kNhwcMaxRows, (per_row * row_units) / kNhwcTargetBlocks));
    s.row_chunks = ceil_div(row_units, s.rows);
    s.img_chunks = 0;
  }
  s.x_vec = nhwc_vec(p.C, V, elem_size, p.N, p.x_sc, p.x_sw, p.x_sh, p.x_sn, p.x);
  s.y_vec = nhwc_vec(p.C, V, elem_size, p.N, p.y_so, p.y_sw, p.y_sh, p.y_sn, p.y);
  plan.algo = Algo::kDepthwiseNhwc;
  plan.static_k = square ? static_cast<int>(p.KH) : 0;
  plan.smem_bytes = static_cast<size_t>(p.KH * p.KW * tc * 16);  // 16 B of taps per lane
  return true;
}

// The TMA kernel's instances: 64-column tiles of 128 threads for narrow planes (OW <= 64, e.g.
// MobileNet's 56x56), 128-column tiles of 256 threads otherwise. Tile sizes do not depend on the
// dtype or the filter.
template <typename T, int kK, bool kNarrow>
using TmaGeom = conv2d::TmaGeometry<T, kK, kNarrow ? 16 : 32, kNarrow ? 128 : 256>;
using TmaNarrowTile = TmaGeom<float, 3, true>;
using TmaWideTile = TmaGeom<float, 3, false>;

// Whether the device runs TMA kernels: sm_90+, and the extension carries code compiled for it (a
// build for older targets only would run their PTX, whose TMA calls trap). Read once per device.
// With no GPU visible (the algorithm query on a build machine) the answer is for sm_90, the
// build's default target.
bool tma_device() {
  if (c10::cuda::device_count() == 0) return true;
  static std::atomic<int> cache[64];  // 0 = not read yet, 1 = no, 2 = yes
  const int slot = c10::cuda::current_device() & 63;
  int v = cache[slot].load(std::memory_order_relaxed);
  if (v == 0) {
    cudaFuncAttributes attr{};
    const auto probe = conv2d::conv2d_depthwise_tma_kernel<float, 3, 16, 128, 0>;
    const bool ok = device_props().major >= 9 &&
                    cudaFuncGetAttributes(&attr, probe) == cudaSuccess && attr.ptxVersion >= 90;
    (void)cudaGetLastError();
    v = ok ? 2 : 1;
    cache[slot].store(v, std::memory_order_relaxed);
  }
  return v == 2;
}

// Byte strides of the TMA map's dims 1..3 (rows, channels, images), or false if the layout cannot
// be described: each a multiple of 16 below 2^40 (a size-1 dim gets the dense value).
bool tma_strides(const Conv2dParams& p, int64_t e, int64_t shift, uint64_t (&out)[3]) {
  const int64_t sizes[4] = {p.W + shift, p.H, p.C, p.N};
  const int64_t strides[3] = {p.x_sh, p.x_sc, p.x_sn};
  int64_t prev = sizes[0] * e;  // dense extent of the dims below
  for (int d = 0; d < 3; ++d) {
    const int64_t bytes = sizes[d + 1] == 1 ? round_up(prev, 16) : strides[d] * e;
    if (bytes <= 0 || bytes % 16 != 0 || bytes >= (int64_t{1} << 40)) return false;
    out[d] = static_cast<uint64_t>(bytes);
    prev = bytes * sizes[d + 1];
  }
  return true;
}

bool plan_tma(const Conv2dParams& p, int64_t elem_size, Plan& plan) {
  constexpr int64_t kIntMax = int64_t{1} << 30;  // TMA coordinates and tile indices are int
  const bool k_ok = p.KH == p.KW && (p.KH == 3 || p.KH == 5 || p.KH == 7);
  if (!depthwise1(p) || p.stride_h != 1 || p.stride_w != 1 || p.dil_h != 1 || p.dil_w != 1 ||
      !k_ok || (p.W > 1 && p.x_sw != 1) ||
      std::max({p.H, p.W, p.OH, p.OW, p.pad_h, p.pad_w, p.C, p.N}) > kIntMax) {
    return false;
  }
  // The map starts 16-byte aligned, `shift` elements before x (meta tensors: null, shift 0).
  const int64_t shift = static_cast<int64_t>(reinterpret_cast<uintptr_t>(p.x) % 16) / elem_size;
  if (!tma_strides(p, elem_size, shift, plan.tma_strides) || !tma_device()) return false;
  // Columns between a 16-byte boundary of the map and a tile's first window column: skipped in
  // shared memory by the instance compiled for them ('same' padding, aligned x), else the output
  // tiles shift left by as many (lead) so that every box starts on a boundary.
  const int64_t A = 16 / elem_size;
  const int64_t o = ((shift - p.pad_w) % A + A) % A;
  const bool same_o = o == A - p.KH / 2;
  const int64_t lead = same_o ? 0 : o;
  const bool narrow = p.OW + lead <= TmaNarrowTile::kTW;
  const int64_t tw = narrow ? TmaNarrowTile::kTW : TmaWideTile::kTW;
  const int64_t th = narrow ? TmaNarrowTile::kTH : TmaWideTile::kTH;
  const int64_t tiles_w = ceil_div(p.OW + lead, tw), tiles_h = ceil_div(p.OH, th);
  const int64_t tiles = p.N * p.C * tiles_h * tiles_w;
  if (tiles > kIntMax) return false;  // the kernel numbers tiles in int
  conv2d::TmaShape& s = plan.tma;
  s.tiles = static_cast<int>(tiles);
  s.per_plane = conv2d::FastDiv(static_cast<uint32_t>(tiles_h * tiles_w));
  s.tiles_w = conv2d::FastDiv(static_cast<uint32_t>(tiles_w));
  s.channels = conv2d::FastDiv(static_cast<uint32_t>(p.C));
  s.shift = static_cast<int>(shift);
  s.lead = static_cast<int>(lead);
  s.box_col0 = static_cast<int>(shift - p.pad_w - o);
  s.stages = 2;  // launch_tma() raises it where occupancy allows
  s.y_vec = lead % 4 == 0 && p.y_sw == 1 && p.y_sh % 4 == 0 && (p.N == 1 || p.y_sn % 4 == 0) &&
            (p.O == 1 || p.y_so % 4 == 0) && is_aligned16(p.y);
  plan.algo = Algo::kDepthwiseTma;
  plan.static_k = static_cast<int>(p.KH);
  plan.tma_narrow = narrow;
  plan.tma_same_o = same_o;
  return true;
}

// Planes whole in shared memory, one warp each (the plane kernel): depthwise with multiplier
// 1, stride 1, dilation 1, 3x3 'same' filter, W a multiple of 4 up to 128 and a plane of at most
// kMaxPlaneBytes, on sm_90+ (bulk copies). Any strides: planes whose rows are not contiguous (or
// not 16-byte aligned) are staged element by element.
bool plan_plane(const Conv2dParams& p, int64_t elem_size, Plan& plan) {
  using Tr = conv2d::PlaneTraits;
  const int64_t plane_bytes = p.H * p.W * elem_size;
  if (!depthwise1(p) || p.stride_h != 1 || p.stride_w != 1 || p.dil_h != 1 || p.dil_w != 1 ||
      p.KH != 3 || p.KW != 3 || p.pad_h != 1 || p.pad_w != 1 || p.W % Tr::kCols != 0 ||
      p.W > Tr::kMaxW || plane_bytes > Tr::kMaxPlaneBytes ||
      p.N * p.C > std::numeric_limits<int>::max() - Tr::kWarps || !tma_device()) {
    return false;
  }
  conv2d::PlaneShape& s = plan.plane;
  s.planes = static_cast<int>(p.N * p.C);
  s.channels = conv2d::FastDiv(static_cast<uint32_t>(p.C));
  s.lanes_w = static_cast<int>(p.W / Tr::kCols);
  s.bands = 32 / s.lanes_w;
  s.band_rows = static_cast<int>(ceil_div(p.H, s.bands));
  s.plane_bytes = static_cast<int>(plane_bytes);
  s.mma = elem_size == 2 && p.W % 8 == 0 && (p.W * elem_size / 16) % 2 == 1;
  s.slot_bytes = static_cast<int>(
      round_up((p.H + (s.mma ? 1 : 0)) * p.W * elem_size, Tr::kSlotAlign));  // + a spare row
  s.bulk = p.x_sw == 1 && (p.x_sh == p.W || p.H == 1) && plane_bytes % 16 == 0;  // W >= 4
  s.y_vec = p.y_sw == 1 && p.y_sh % 4 == 0 && (p.N == 1 || p.y_sn % 4 == 0) &&
            (p.O == 1 || p.y_so % 4 == 0) && is_aligned16(p.y);
  s.y_rows16 = p.y_sw == 1 && (p.y_sh * elem_size) % 16 == 0;
  plan.algo = Algo::kDepthwisePlane;
  plan.static_k = 3;
  plan.smem_bytes = Tr::kSlotsOffset + static_cast<size_t>(Tr::kWarps) * s.slot_bytes;
  return true;
}

bool plan_depthwise_nchw(const Conv2dParams& p, int64_t elem_size, Plan& plan) {
  if (!depthwise1(p) || p.stride_h != 1 || p.stride_w != 1) return false;
  using Tr = conv2d::DepthwiseTraits;
  const int64_t V = 16 / elem_size;
  const int64_t off = ((-p.pad_w) % V + V) % V;
  const int64_t rows = Tr::kTileH + (p.KH - 1) * p.dil_h;
  const int64_t pitch = round_up(off + Tr::kTileW + (p.KW - 1) * p.dil_w, V);
  const bool square_small = p.KH == p.KW && p.dil_h == 1 && p.dil_w == 1 &&
                            (p.KH == 3 || p.KH == 5 || p.KH == 7);
  const int64_t floats = rows * pitch + (square_small ? 0 : p.KH * p.KW);
  if (rows > Tr::kMaxSmemFloats || pitch > Tr::kMaxSmemFloats || floats > Tr::kMaxSmemFloats) {
    return false;
  }
  plan.algo = Algo::kDepthwiseNchw;
  plan.static_k = square_small ? static_cast<int>(p.KH) : (p.dil_h == 1 ? -1 : 0);
  plan.tile = {static_cast<int>(rows), static_cast<int>(pitch)};
  plan.vec_ok = p.x_sw == 1 && p.x_sh % V == 0 && (p.N == 1 || p.x_sn % V == 0) &&
                (p.C == 1 || p.x_sc % V == 0) && is_aligned16(p.x);
  plan.smem_bytes = static_cast<size_t>(floats) * sizeof(float);
  return true;
}

// The large-filter kernel's shared budget (floats): a 64 x 64 tile's input and the taps up to
// 31 x 31 filters take ~10.4K; up to ~90 x 90 fits.
constexpr int64_t kLargeMaxSmemFloats = 24 * 1024;
// fp32 filters from this many taps on (beyond 7x7) take the large-filter kernel.
constexpr int64_t kLargeMinTaps = 50;

bool plan_large(const Conv2dParams& p, int64_t elem_size, Plan& plan) {
  using Tr = conv2d::LargeTraits;
  constexpr int64_t kIntMax = int64_t{1} << 30;  // the kernel keeps rows / columns in int
  if (!depthwise1(p) || p.stride_h != 1 || p.stride_w != 1 || p.dil_h != 1 || p.dil_w != 1 ||
      p.KH > kLargeMaxSmemFloats || p.KW > kLargeMaxSmemFloats ||
      std::max({p.H, p.W, p.OH, p.OW, p.pad_h, p.pad_w}) > kIntMax) {
    return false;
  }
  const int64_t rows = Tr::kTileH + p.KH - 1;
  const int64_t taps = p.KH * Tr::tap_pitch(p.KW);
  const int64_t floats = rows * Tr::pitch(p.KW) + taps;
  if (floats > kLargeMaxSmemFloats) return false;
  const int64_t V = Tr::kC;
  plan.algo = Algo::kDepthwiseLarge;
  plan.vec_ok = p.y_sw == 1 && p.y_sh % V == 0 && (p.N == 1 || p.y_sn % V == 0) &&
                (p.C == 1 || p.y_so % V == 0) &&
                reinterpret_cast<uintptr_t>(p.y) % static_cast<uintptr_t>(V * elem_size) == 0;
  plan.smem_bytes = static_cast<size_t>(floats) * sizeof(float);
  // fp32 tiles through the TMA where the map can describe x as it is (16-byte aligned, rows /
  // planes / images 16 bytes apart, unit column stride) and the box fits its limits; the box
  // starts large_o = -pad_w mod 4 columns before the window, on a 16-byte boundary (tiles start
  // at multiples of 64 columns). A misaligned x (a view) stages element by element.
  const int64_t o = (4 - p.pad_w % 4) % 4;
  const int64_t tma_floats = rows * Tr::tma_pitch(p.KW, o) + taps;
  if (elem_size == 4 && is_aligned16(p.x) && (p.W == 1 || p.x_sw == 1) &&
      std::max(p.C, p.N) <= kIntMax && rows <= 256 && Tr::tma_pitch(p.KW, o) <= 256 &&
      tma_floats <= kLargeMaxSmemFloats && tma_strides(p, elem_size, 0, plan.tma_strides) &&
      tma_device()) {
    plan.large_tma = true;
    plan.large_o = static_cast<int>(o);
    plan.smem_bytes = Tr::kSlotAlign + static_cast<size_t>(tma_floats) * sizeof(float) +
                      Tr::kBarBytes;
  }
  return true;
}

bool plan_general_staged(const Conv2dParams& p, Plan& plan) {
  using Tr = conv2d::GeneralTraits;
  const int64_t region_cols = (Tr::kTileW - 1) * p.stride_w + (p.KW - 1) * p.dil_w + 1;
  const int64_t one_row = (Tr::kTileH - 1) * p.stride_h + 1;  // region rows of one filter row
  if (p.KW > Tr::kMaxTaps || region_cols > Tr::kMaxRegion ||
      one_row * region_cols > Tr::kMaxRegion) {
    return false;
  }
  // Most filter rows R with region rows one_row + (R-1)*dil_h and R*KW taps inside budget.
  const int64_t by_region = (Tr::kMaxRegion / region_cols - one_row) / p.dil_h + 1;
  const int64_t by_taps = Tr::kMaxTaps / p.KW;
  const int64_t R = std::max<int64_t>(1, std::min({p.KH, by_region, by_taps}));
  const int64_t region_rows = one_row + (R - 1) * p.dil_h;
  plan.algo = Algo::kGeneralStaged;
  plan.rows_per_chunk = static_cast<int>(R);
  plan.region_cols = static_cast<int>(region_cols);
  plan.smem_bytes = static_cast<size_t>(R * p.KW + region_rows * region_cols) * sizeof(float);
  return true;
}

// Whether algorithm a can run the shape; fills its plan when it can.
bool plan_for(Algo a, const Conv2dParams& p, int64_t elem_size, Plan& plan) {
  switch (a) {
    case Algo::kDepthwiseNhwc: return plan_nhwc(p, elem_size, plan);  // any strides
    case Algo::kDepthwiseRows: return plan_rows(p, elem_size, plan);
    case Algo::kDepthwiseTma: return plan_tma(p, elem_size, plan);
    case Algo::kDepthwisePlane: return plan_plane(p, elem_size, plan);
    case Algo::kDepthwiseLarge: return plan_large(p, elem_size, plan);
    case Algo::kDepthwiseNchw: return plan_depthwise_nchw(p, elem_size, plan);
    case Algo::kGeneralStaged: return plan_general_staged(p, plan);
    case Algo::kGeneralDirect: plan.algo = a; return true;
  }
  return false;
}

// The automatic choice: a pure function of the shape, strides and dtype, and of the device's
// architecture only for the TMA kernel (sm_90+; the query without a GPU answers for sm_90). Never
// of the data pointers: alignment only switches vector loads on or off inside a kernel, or moves
// the TMA map's base. First match wins:
//  1. depthwise_nhwc: depthwise with multiplier 1 (groups == C == O) whose channels are the
//     contiguous dim (channels_last, C > 1) and filter of <= NhwcTraits::kMaxTaps taps: threads
//     own 16-byte channel vectors at 4 consecutive output columns, any stride, dilation and
//     padding; the input is read in place. Square 3/5/7 filters with stride 1 / dilation 1 run
//     on the roll kernel (4 channels x 4/2/1 columns per thread walking strips of rows, every
//     input row loaded once per strip): measured on the H200 against the per-row kernel it
//     replaces, 32x256x56x56 3x3 fp32 82.6 -> 60 us, bf16 103.8 -> 49 us (cuDNN 71 / 48).
//  2. depthwise_plane (sm_90+): depthwise with multiplier 1, stride 1, dilation 1, 3x3 'same'
//     filter, W a multiple of 4 up to 128, a plane of at most PlaneTraits::kMaxPlaneBytes (16 KB),
//     and a plane that the TMA kernel's 64x64 tiles do not cover exactly (H or W not a multiple
//     of 64): one warp per plane, the whole plane staged by one bulk copy. Measured on the H200
//     (forced, same run) against depthwise_tma: 32x256x56x56 fp32 55.1 vs 62.0 us, bf16 38.4 vs
//     41.3, fp16 37.3 vs 39.8; 64x256x32x32 fp32 35.4 vs 50.8, bf16 26.3 vs 48.6; 32x512x28x28
//     fp32 29.6 vs 50.1 (16-bit: the TMA kernel cannot run 56-byte rows). On 8x384x64x64, where
//     the 64x64 tiles fit, fp32 ties (30.2 vs 30.4) and 16-bit loses (bf16 21.9 vs 19.7), so
//     those planes stay on the TMA kernel. 5x5 and 7x7 are not built: a first version measured
//     slower than the TMA kernel there (8x384x64x64 7x7 fp32 53.8 vs 42.4 us, 32x256x56x56 5x5
//     fp32 70.0 vs 65.2).
//     16-bit planes whose rows are an odd number of 16-byte units (W = 8, 24, 40, 56, ...) run
//     on the tensor cores inside the plane kernel (banded mma tiles, outputs staged per 16 rows
//     and written by row bulk copies): 32x256x56x56 bf16 38.4 -> 35.1 us (TMA 41.4, same run);
//     one bulk copy a band from lane 0 and tiles in pairs (round 20): 31.3-32.1 us; each
//     column block read once per row offset, outputs staged over the plane, one copy a plane,
//     one warp a block (round 21): 28.4-28.9 us (h200_round21_variants.txt).
//  3. depthwise_tma (sm_90+): depthwise with multiplier 1 (C == 1: single-channel images), stride
//     1, dilation 1, square 3x3/5x5/7x7 filter, any padding, unit column stride and rows / planes
//     / images a multiple of 16 bytes apart (W * element size % 16 == 0 for contiguous NCHW; the
//     TMA's rule for its tensor map; x itself may be misaligned). Persistent blocks, the TMA
//     copying each output tile's input box (zeros outside the image) into a ring of shared slots
//     ahead of the compute; threads own 4 x 8 outputs and reuse every staged row for all kK filter
//     rows. Measured on the H200 against the kernels it replaces (same run of the benchmark):
//     c2_3 175 -> 151 us (rows), c2_5 250 -> 153 (rows), c2_7 400 -> 167 (tile), dw2_3 fp32
//     103 -> 62 / bf16 105 -> 40 (rows), dw2_7 87 -> 43 (tile). Since round 19 rows are
//     stored as they complete and warps release slots without a block barrier: c2_7 168.7 ->
//     150.6-153.8 us, dw2_7 43.7 -> 37.0-37.7 (h200_round19_tma_variants.txt). Since round 20
//     3x3 / 5x5 blocks with 16+ tiles claim tiles from a counter: c2_3 153.4 -> 148.9 us, c2_5
//     152.8 -> 150.2 (same run, h200_round20_variants.txt). Since round 22 a 7x7 thread runs
//     its 8 rows as two groups of 4 (half the unrolled code): c2_7 ~153 -> ~151 us; and 7x7
//     shapes with under 16 tiles a block launch one block a tile: dw2_7 rotated H100 48.4 ->
//     42.5 us, H200 39.7 -> 36.0 (TmaTraits; h200_round22_variants.txt). Rows whose stride
//     is not a multiple of 16 bytes (odd widths) fall through to the kernels below.
//  4. depthwise_rows: depthwise with multiplier 1 (C == 1: single-channel images, batched or
//     not), stride 1, dilation 1, square 3x3/5x5 filter, column padding pw with pw <= 4 and
//     K-1-pw <= 4 (all 'same' shapes): warps stream down row strips, 4 input rows in flight per
//     warp through cp.async, every input element read once, narrow planes packed several per
//     warp. Replaces the 64x64-tile kernel for these filters: the tile kernel's one tile per
//     block behind a barrier left ~8 KB in flight per SM (c2_3 measured 52% of the copy roof,
//     dw2_3 39%, the 56-wide planes wasting 23% of the tile).
//     Not for 7x7 (the rows kernel can run it, forced): measured on the H200, rows vs
//     depthwise_nchw: c2_7 (1x1x8192x8192) 424.8 vs 413 us, dw2_7 (8x384x64x64) 112.2 vs
//     91.9 us: its 7x7 instance needs 190 registers (12.5% occupancy) and loses on both.
//     5x5: rows 249.4 vs 340 us (c2_5), so the crossover lies between 5 and 7.
//  5. depthwise_large (fp32 only, from kLargeMinTaps = 50 taps: beyond 7x7): depthwise with
//     multiplier 1, stride 1, dilation 1, any KH x KW within kLargeMaxSmemFloats: 64x64 tiles,
//     taps in 4x4 register chunks, 4 x 8 outputs per thread. Measured on the H200 against
//     depthwise_nchw (forced, same run): 8192x8192 15x15 830 vs 956 us, 8x384x64x64 9x9 85 vs
//     108, 13x13 131 vs 162, 31x31 559 vs 655 (7x7: 70 vs 87, TMA 43). bf16 11x11: 157 vs 119 us
//     (its staging converts element by element), so 16-bit stays on 6.
//     Tiles are staged by one TMA box each where x is 16-byte aligned with 16-byte row / plane
//     strides (sm_90+), else element by element through cp.async; the same data through both
//     (an aligned tensor and a misaligned copy, H200, same run): 15x15 662 vs 798 us, 13x13
//     111.8 vs 130.5, 31x31 510 vs 564, 9x9 60.0 vs 84.5 (h200_round18_large_forced.txt).
//  6. depthwise_nchw: depthwise with multiplier 1, stride 1, 64x64 tile + halo within
//     DepthwiseTraits::kMaxSmemFloats (larger or dilated filters, other paddings): filter in
//     register chunks when the row dilation is 1, else taps from shared memory.
//  7. general_staged: anything whose tile region of one filter row fits GeneralTraits' shared
//     budget (grouped / dense channels, strides, depthwise multipliers).
//  8. general_direct: everything else (huge stride or dilation).
Plan choose_algo_auto(const Conv2dParams& p, int64_t elem_size) {
  Plan plan;
  if (depthwise1(p) && p.C > 1 && p.x_sc == 1 && p.x_sw != 1 &&
      plan_nhwc(p, elem_size, plan)) {
    return plan;
  }
  if (p.OH % TmaNarrowTile::kTH != 0 || p.OW % TmaNarrowTile::kTW != 0) {
    Plan candidate;
    if (plan_plane(p, elem_size, candidate)) return candidate;
  }
  {
    Plan candidate;
    if (plan_tma(p, elem_size, candidate)) return candidate;
  }
  if (p.KH != 7 || p.KW != 7) {
    Plan candidate;
    if (plan_rows(p, elem_size, candidate)) return candidate;
  }
  if (elem_size == 4 && p.KH * p.KW >= kLargeMinTaps) {
    Plan candidate;
    if (plan_large(p, elem_size, candidate)) return candidate;
  }
  for (Algo a : {Algo::kDepthwiseNchw, Algo::kGeneralStaged}) {
    Plan candidate;
    if (plan_for(a, p, elem_size, candidate)) return candidate;
  }
  plan.algo = Algo::kGeneralDirect;
  return plan;
}

// The automatic choice, or the forced one (core/algo_table.h) when it can run the shape.
Plan choose_algo(const Conv2dParams& p, int64_t elem_size) {
  const std::string forced = forced_algorithm(kOp);
  if (forced.empty()) return choose_algo_auto(p, elem_size);
  const auto a = static_cast<Algo>(algorithm_index(kOp, forced, conv2d_algo_names()));
  Plan plan;
  GK_CHECK(plan_for(a, p, elem_size, plan), kOp, "forced algorithm '", forced,
           "' cannot run this shape (C=", p.C, ", O=", p.O, ", groups=", p.groups, ", kernel=",
           p.KH, "x", p.KW, ", stride=", p.stride_h, "x", p.stride_w, ", dilation=", p.dil_h,
           "x", p.dil_w, ", padding=", p.pad_h, "x", p.pad_w, ")");
  return plan;
}

// cuTensorMapEncodeTiled from the driver (through the runtime: no link against libcuda).
using EncodeTiled = PFN_cuTensorMapEncodeTiled_v12000;
EncodeTiled tensor_map_encoder() {
  static const EncodeTiled fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault,
                                         &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      return EncodeTiled{nullptr};
    }
    return reinterpret_cast<EncodeTiled>(f);
  }();
  return fn;
}

template <typename T>
CUtensorMapDataType tma_dtype() {
  if constexpr (std::is_same_v<T, float>) return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  if constexpr (std::is_same_v<T, __half>) return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
}

// The TMA's 4-D view of x (columns, rows, channels, images; byte strides from the plan) starting
// `shift` elements before x, read in box_w x box_h boxes, zeros outside.
template <typename T>
CUtensorMap x_tensor_map(const Conv2dParams& p, const Plan& plan, int64_t shift, int box_w,
                         int box_h) {
  const EncodeTiled encode = tensor_map_encoder();
  GK_CHECK(encode != nullptr, kOp, "the CUDA driver offers no cuTensorMapEncodeTiled (TMA path)");
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(p.W + shift), static_cast<cuuint64_t>(p.H),
                              static_cast<cuuint64_t>(p.C), static_cast<cuuint64_t>(p.N)};
  const cuuint32_t box[4] = {static_cast<cuuint32_t>(box_w), static_cast<cuuint32_t>(box_h), 1, 1};
  const cuuint32_t unit[4] = {1, 1, 1, 1};
  void* base = const_cast<char*>(static_cast<const char*>(p.x) - shift * int64_t{sizeof(T)});
  CUtensorMap map;
  const CUresult r = encode(&map, tma_dtype<T>(), 4, base, dims, plan.tma_strides, box, unit,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  GK_CHECK(r == CUDA_SUCCESS, kOp, "cuTensorMapEncodeTiled failed (CUresult ", static_cast<int>(r),
           ")");
  return map;
}

// Shared bytes of the TMA kernel with `stages` slots of slot_bytes: alignment slack, the
// barriers and counters, the warps' taps, the slots, the last one full-size (threads below a
// short box read on into it).
template <typename G>
size_t tma_smem(int stages, int slot_bytes) {
  return conv2d::TmaTraits::kSlotAlign + conv2d::TmaTraits::kBarBytes + G::kTapsBytes +
         static_cast<size_t>(stages - 1) * slot_bytes + G::kSlotBytes;
}

// The roll kernel's strip height, chosen here because it depends on the device: taller strips
// re-read fewer halo rows ((rows + K - 1) / rows input rows per output row), more strips fill
// the waves better. The cost of a height is waves * (rows + K - 1) input-row steps, the waves
// counted from the kernel's resident blocks per SM; the cheapest wins (the shorter on a tie).
// dw2_3 (32 x 256 x 56 x 56) on 132 SMs with 2 blocks each: 28 rows, 256 blocks, one wave.
template <auto kKernel>
void launch_nhwc_roll(const Conv2dParams& p, const Plan& plan, cudaStream_t stream) {
  conv2d::NhwcShape s = plan.nhwc;
  const int threads = s.tc * s.tw;
  const int64_t wave =
      int64_t{device_props().multiProcessorCount} *
      resident_blocks_per_sm<kKernel>(c10::cuda::current_device(), threads);
  const int64_t per_strip = p.N * s.w_blocks * s.c_blocks;  // blocks per strip of every image
  int64_t best = -1;
  for (int64_t rows = std::min<int64_t>(p.OH, conv2d::NhwcRoll::kMaxRows); rows >= 1; --rows) {
    const int64_t cost = ceil_div(per_strip * ceil_div(p.OH, rows), wave) * (rows + p.KH - 1);
    if (best < 0 || cost <= best) {
      best = cost;
      s.rows = rows;
    }
  }
  s.img_chunks = ceil_div(p.OH, s.rows);
  const int64_t blocks = per_strip * s.img_chunks;
  GK_CHECK(blocks <= kMaxGridX, kOp, "output too large for the grid (", blocks, " blocks)");
  kKernel<<<static_cast<unsigned>(blocks), threads, plan.smem_bytes, stream>>>(p, s);
  GK_CHECK_LAUNCH();
}

template <typename T, int kK, bool kNarrow, bool kSameO>
void launch_tma(const Conv2dParams& p, const Plan& plan, cudaStream_t stream) {
  conv2d::TmaShape s = plan.tma;
  using G = TmaGeom<T, kK, kNarrow>;
  constexpr int kThreads = kNarrow ? 128 : 256;
  constexpr auto kernel = conv2d::conv2d_depthwise_tma_kernel<T, kK, kNarrow ? 16 : 32, kThreads,
                                                              kSameO ? G::kSameO : 0>;
  const int64_t e = sizeof(T);
  // Boxes of a plane covered by one tile row stop at its last input row (less shared memory).
  s.box_rows = s.per_plane.d == s.tiles_w.d ? static_cast<int>(p.OH) + kK - 1 : G::kBH;
  s.slot_bytes =
      static_cast<int>(round_up(int64_t{G::kBW} * s.box_rows * e, conv2d::TmaTraits::kSlotAlign));
  const CUtensorMap map = x_tensor_map<T>(p, plan, s.shift, G::kBW, s.box_rows);
  // As many blocks as registers and shared memory allow with two slots, then the most slots
  // (<= kMaxStages) that keep that many blocks.
  const cudaDeviceProp& prop = device_props();
  auto fit = [&](int stages) {
    return static_cast<int>(prop.sharedMemPerMultiprocessor /
                            (tma_smem<G>(stages, s.slot_bytes) + prop.reservedSharedMemPerBlock));
  };
  const int per_sm = std::max(
      1, std::min(resident_blocks_per_sm<kernel>(c10::cuda::current_device(), kThreads), fit(2)));
  using Tr = conv2d::TmaTraits;
  s.stages = 2;
  while (s.stages < Tr::kMaxStages && fit(s.stages + 1) >= per_sm) ++s.stages;
  int64_t blocks = std::min<int64_t>(s.tiles, int64_t{prop.multiProcessorCount} * per_sm);
  const bool long_run = s.tiles >= int64_t{Tr::kLongRunTiles} * blocks;
  if (Tr::tile_a_block(kK) && !long_run) {
    blocks = s.tiles;  // one tile a block, one slot (TmaTraits::tile_a_block)
    s.stages = 1;
  }
  const size_t smem = tma_smem<G>(s.stages, s.slot_bytes);
  // Blocks claim tiles from a counter where they run long enough for it to even out their
  // speeds (TmaShape::dynamic; H200, same run against fixed shares: c2_3, 21 tiles a block,
  // 153.4 -> 148.9 us, c2_5 152.8 -> 150.2; dw2_7, 12 tiles a block, 38.5 -> 41.4).
  s.dynamic = Tr::claims(kK) && long_run;
  // The stream's counters (a table lookup under a lock): only where the kernel claims.
  s.sched = s.dynamic ? ticket_slot_base(c10::cuda::current_device(), stream) / kTicketsPerSlot * 2
                      : 0;
  allow_dynamic_smem(kernel, smem);
  launch_pdl(kernel, dim3(static_cast<unsigned>(blocks)), dim3(kThreads), smem, stream, map, p, s);
  GK_CHECK_LAUNCH();
}

// The grid of the tile kernels: x = output tiles (tile row * tiles_w + tile column), y = planes
// (grid-stride past kMaxGridY).
dim3 tile_grid(const Conv2dParams& p, int tile_w, int tile_h, int64_t planes, int64_t& tiles_w) {
  tiles_w = ceil_div(p.OW, tile_w);
  const int64_t gx = ceil_div(p.OH, tile_h) * tiles_w;
  GK_CHECK(gx <= kMaxGridX, kOp, "output too large for the grid (", gx, " blocks)");
  return dim3(static_cast<unsigned>(gx), static_cast<unsigned>(std::min(planes, kMaxGridY)));
}

template <typename T>
void launch(const Conv2dParams& p, const Plan& plan, cudaStream_t stream) {
  switch (plan.algo) {
    case Algo::kDepthwiseNhwc: {
      switch (plan.static_k) {
        case 3: launch_nhwc_roll<conv2d::conv2d_depthwise_nhwc_roll_kernel<T, 3>>(p, plan, stream); break;
        case 5: launch_nhwc_roll<conv2d::conv2d_depthwise_nhwc_roll_kernel<T, 5>>(p, plan, stream); break;
        case 7: launch_nhwc_roll<conv2d::conv2d_depthwise_nhwc_roll_kernel<T, 7>>(p, plan, stream); break;
        default: {
          const conv2d::NhwcShape& s = plan.nhwc;
          const int64_t blocks = s.row_chunks * s.w_blocks * s.c_blocks;
          GK_CHECK(blocks <= kMaxGridX, kOp, "output too large for the grid (", blocks,
                   " blocks)");
          conv2d::conv2d_depthwise_nhwc_kernel<T>
              <<<static_cast<unsigned>(blocks), s.tc * s.tw, plan.smem_bytes, stream>>>(p, s);
          GK_CHECK_LAUNCH();
        }
      }
      break;
    }
    case Algo::kDepthwiseRows: {
      using Tr = conv2d::RowsTraits;
      const int64_t blocks = ceil_div(plan.rows.units, Tr::kWarps);
      GK_CHECK(blocks <= kMaxGridX, kOp, "output too large for the grid (", blocks, " blocks)");
      auto go = [&](auto kernel) {
        allow_dynamic_smem(kernel, plan.smem_bytes);
        kernel<<<static_cast<unsigned>(blocks), Tr::kNThreads, plan.smem_bytes, stream>>>(
            p, plan.rows);
        GK_CHECK_LAUNCH();
      };
      switch (plan.static_k) {
        case 3: go(conv2d::conv2d_depthwise_rows_kernel<T, 3>); break;
        case 5: go(conv2d::conv2d_depthwise_rows_kernel<T, 5>); break;
        default: go(conv2d::conv2d_depthwise_rows_kernel<T, 7>); break;
      }
      break;
    }
    case Algo::kDepthwiseTma: {
      auto go = [&](auto k, auto narrow) {
        constexpr int kK = decltype(k)::value;
        constexpr bool kNarrow = decltype(narrow)::value;
        plan.tma_same_o ? launch_tma<T, kK, kNarrow, true>(p, plan, stream)
                        : launch_tma<T, kK, kNarrow, false>(p, plan, stream);
      };
      auto by_k = [&](auto narrow) {
        switch (plan.static_k) {
          case 3: go(std::integral_constant<int, 3>{}, narrow); break;
          case 5: go(std::integral_constant<int, 5>{}, narrow); break;
          default: go(std::integral_constant<int, 7>{}, narrow); break;
        }
      };
      plan.tma_narrow ? by_k(std::true_type{}) : by_k(std::false_type{});
      break;
    }
    case Algo::kDepthwisePlane: {
      using Tr = conv2d::PlaneTraits;
      constexpr auto kernel = conv2d::conv2d_depthwise_plane_kernel<T, 3>;
      const int64_t blocks = ceil_div(int64_t{plan.plane.planes}, Tr::kWarps);
      allow_dynamic_smem(kernel, plan.smem_bytes);
      launch_pdl(kernel, dim3(static_cast<unsigned>(blocks)), dim3(Tr::kThreads), plan.smem_bytes,
                 stream, p, plan.plane);
      GK_CHECK_LAUNCH();
      break;
    }
    case Algo::kDepthwiseLarge: {
      using Tr = conv2d::LargeTraits;
      int64_t tiles_w = 0;
      const dim3 grid = tile_grid(p, Tr::kTileW, Tr::kTileH, p.N * p.C, tiles_w);
      auto go = [&](auto kernel, const CUtensorMap& map) {
        allow_dynamic_smem(kernel, plan.smem_bytes);
        kernel<<<grid, Tr::kThreads, plan.smem_bytes, stream>>>(map, p, tiles_w, plan.vec_ok);
        GK_CHECK_LAUNCH();
      };
      if constexpr (std::is_same_v<T, float>) {
        if (plan.large_tma) {
          const int rows = Tr::kTileH + static_cast<int>(p.KH) - 1;
          const int pitch = static_cast<int>(Tr::tma_pitch(p.KW, plan.large_o));
          const CUtensorMap map = x_tensor_map<T>(p, plan, 0, pitch, rows);
          switch (plan.large_o) {
            case 0: go(conv2d::conv2d_depthwise_large_kernel<T, 0, true>, map); break;
            case 1: go(conv2d::conv2d_depthwise_large_kernel<T, 1, true>, map); break;
            case 2: go(conv2d::conv2d_depthwise_large_kernel<T, 2, true>, map); break;
            default: go(conv2d::conv2d_depthwise_large_kernel<T, 3, true>, map); break;
          }
          break;
        }
      }
      go(conv2d::conv2d_depthwise_large_kernel<T, 0, false>, CUtensorMap{});
      break;
    }
    case Algo::kDepthwiseNchw: {
      using Tr = conv2d::DepthwiseTraits;
      int64_t tiles_w = 0;
      const dim3 grid = tile_grid(p, Tr::kTileW, Tr::kTileH, p.N * p.C, tiles_w);
      auto go = [&](auto kernel) {
        allow_dynamic_smem(kernel, plan.smem_bytes);
        kernel<<<grid, Tr::threads(plan.static_k), plan.smem_bytes, stream>>>(p, plan.tile,
                                                                               tiles_w,
                                                                               plan.vec_ok);
        GK_CHECK_LAUNCH();
      };
      switch (plan.static_k) {
        case 3: go(conv2d::conv2d_depthwise_nchw_kernel<T, 3>); break;
        case 5: go(conv2d::conv2d_depthwise_nchw_kernel<T, 5>); break;
        case 7: go(conv2d::conv2d_depthwise_nchw_kernel<T, 7>); break;
        case -1: go(conv2d::conv2d_depthwise_nchw_kernel<T, -1>); break;
        default: go(conv2d::conv2d_depthwise_nchw_kernel<T, 0>); break;
      }
      break;
    }
    case Algo::kGeneralStaged:
    case Algo::kGeneralDirect: {
      using Tr = conv2d::GeneralTraits;
      int64_t tiles_w = 0;
      const dim3 grid = tile_grid(p, Tr::kTileW, Tr::kTileH, p.N * p.O, tiles_w);
      if (plan.algo == Algo::kGeneralStaged) {
        conv2d::conv2d_general_kernel<T, true><<<grid, Tr::kNThreads, plan.smem_bytes, stream>>>(
            p, plan.rows_per_chunk, plan.region_cols, tiles_w);
      } else {
        conv2d::conv2d_general_kernel<T, false><<<grid, Tr::kNThreads, 0, stream>>>(p, 0, 0,
                                                                                   tiles_w);
      }
      GK_CHECK_LAUNCH();
      break;
    }
  }
}

}  // namespace

// TEMPORARY bridge on the conv1d branch (the conv2d branch replaces this file): the run entry that
// conv/ops.cpp calls, with the batched input for its dtype; the host entries and the CUDA
// registration of conv2d live in conv/ops.cpp.
void conv2d_cuda_run(const ConvProblem& p, const at::Tensor& x) {
  const Plan plan = choose_algo(p, p.elem_size);
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  GK_DISPATCH_FLOAT_CUDA(x.scalar_type(), kOp, [&] { launch<scalar_t>(p, plan, stream); });
}

std::string conv2d_cuda_algorithm(const ConvProblem& p) {
  return conv2d_algo_names()[static_cast<int>(choose_algo(p, p.elem_size).algo)];
}

}  // namespace gpukern
