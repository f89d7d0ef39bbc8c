// depthwise_tma, host side: can_run, plan, launch and the kernel's instantiations; also the TMA
// host helpers (device check, map strides, tensor map) that depthwise_large shares.
#include <c10/cuda/CUDAFunctions.h>

#include <algorithm>
#include <atomic>

#include "conv/direct/depthwise_tma.cuh"
#include "conv/direct/direct2d.h"
#include "core/launch.cuh"
#include "core/tensor_map.h"
#include "core/tickets.h"

namespace gpukern {
namespace {

constexpr const char* kOp = kConv2dOp;

// The kernel's instances: 64-column tiles of 128 threads for narrow planes (OW <= 64, e.g.
// MobileNet's 56x56), 128-column tiles of 256 threads otherwise. Tile sizes do not depend on the
// dtype or the filter.
template <typename T, int kK, bool kNarrow>
using TmaGeom = conv::TmaGeometry<T, kK, kNarrow ? 16 : 32, kNarrow ? 128 : 256>;
using TmaNarrowTile = TmaGeom<float, 3, true>;
using TmaWideTile = TmaGeom<float, 3, false>;

template <typename T, int kK, bool kNarrow, int kO>
constexpr auto kTmaKernel =
    conv::conv2d_depthwise_tma_kernel<T, kK, kNarrow ? 16 : 32, kNarrow ? 128 : 256, kO>;

struct TmaPlan {
  conv::TmaShape shape{};    // work decomposition (stages, box rows, slots, claims: at launch)
  int k = 0;                 // the filter: 3, 5 or 7
  bool narrow = false;       // the 64-column instance (OW + lead <= 64)
  bool same_o = false;       // the instance skipping kSameO columns ('same' padding, aligned x)
  uint64_t strides[3] = {};  // the map's byte strides (tma_strides)
};

bool plan_tma(const ConvProblem& p, TmaPlan& plan) {
  const int64_t elem_size = p.elem_size;
  const bool k_ok = p.KH == p.KW && (p.KH == 3 || p.KH == 5 || p.KH == 7);
  if (!p.depthwise1() || p.stride_h != 1 || p.stride_w != 1 || p.dil_h != 1 || p.dil_w != 1 ||
      !k_ok || (p.W > 1 && p.x_sw != 1) ||
      std::max({p.H, p.W, p.OH, p.OW, p.pad_h, p.pad_w, p.C, p.N}) > kMaxIntIndex) {
    return false;  // TMA coordinates and tile indices are int
  }
  // The map starts 16-byte aligned, `shift` elements before x (meta tensors: null, shift 0).
  const int64_t shift = static_cast<int64_t>(reinterpret_cast<uintptr_t>(p.x) % 16) / elem_size;
  if (!tma_strides(p, shift, plan.strides) || !tma_device()) return false;
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
  if (tiles > kMaxIntIndex) return false;  // the kernel numbers tiles in int
  conv::TmaShape& s = plan.shape;
  s.tiles = static_cast<int>(tiles);
  s.per_plane = FastDiv(static_cast<uint32_t>(tiles_h * tiles_w));
  s.tiles_w = FastDiv(static_cast<uint32_t>(tiles_w));
  s.channels = FastDiv(static_cast<uint32_t>(p.C));
  s.shift = static_cast<int>(shift);
  s.lead = static_cast<int>(lead);
  s.box_col0 = static_cast<int>(shift - p.pad_w - o);
  s.stages = 2;  // launch_tma() raises it where occupancy allows
  s.y_vec = lead % 4 == 0 && nchw_vec_y(p, 4);
  plan.k = static_cast<int>(p.KH);
  plan.narrow = narrow;
  plan.same_o = same_o;
  return true;
}

// Shared bytes of the kernel with `stages` slots of slot_bytes: alignment slack, the header
// (barriers and counters), the warps' taps, the slots, the last one full-size (threads below a
// short box read on into it).
template <typename G>
size_t tma_smem(int stages, int slot_bytes) {
  return conv::TmaTraits::kSlotAlign + conv::TmaTraits::kHeaderBytes + G::kTapsBytes +
         static_cast<size_t>(stages - 1) * slot_bytes + G::kSlotBytes;
}

template <typename T, int kK, bool kNarrow, bool kSameO>
void launch_tma(const ConvProblem& p, const TmaPlan& plan, cudaStream_t stream) {
  conv::TmaShape s = plan.shape;
  using G = TmaGeom<T, kK, kNarrow>;
  using Tr = conv::TmaTraits;
  constexpr int kThreads = kNarrow ? 128 : 256;
  constexpr auto kernel = kTmaKernel<T, kK, kNarrow, kSameO ? G::kSameO : 0>;
  const int64_t e = sizeof(T);
  // Boxes of a plane covered by one tile row stop at its last input row (less shared memory).
  s.box_rows = s.per_plane.d == s.tiles_w.d ? static_cast<int>(p.OH) + kK - 1 : G::kBH;
  s.slot_bytes = static_cast<int>(round_up(int64_t{G::kBW} * s.box_rows * e, Tr::kSlotAlign));
  const CUtensorMap map = x_tensor_map(p, tma_dtype<T>(), plan.strides, s.shift, G::kBW,
                                       s.box_rows);
  // As many blocks as registers and shared memory allow with two slots, then the most slots
  // (<= kMaxStages) that keep that many blocks.
  const cudaDeviceProp& prop = device_props();
  auto fit = [&](int stages) {
    return static_cast<int>(prop.sharedMemPerMultiprocessor /
                            (tma_smem<G>(stages, s.slot_bytes) + prop.reservedSharedMemPerBlock));
  };
  const int per_sm = std::max(
      1, std::min(resident_blocks_per_sm<kernel>(c10::cuda::current_device(), kThreads), fit(2)));
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
  // speeds (TmaShape::dynamic).
  s.dynamic = Tr::claims(kK) && long_run;
  // The stream's counters (a table lookup under a lock): only where the kernel claims.
  s.sched = s.dynamic ? ticket_slot_base(c10::cuda::current_device(), stream) / kTicketsPerSlot * 2
                      : 0;
  allow_dynamic_smem(kernel, smem);
  launch_pdl(kernel, dim3(static_cast<unsigned>(blocks)), dim3(kThreads), smem, stream, map, p, s);
  GK_CHECK_LAUNCH();
}

template <typename T, int kK>
void launch_tma_k(const ConvProblem& p, const TmaPlan& plan, cudaStream_t stream) {
  if (plan.narrow) {
    plan.same_o ? launch_tma<T, kK, true, true>(p, plan, stream)
                : launch_tma<T, kK, true, false>(p, plan, stream);
  } else {
    plan.same_o ? launch_tma<T, kK, false, true>(p, plan, stream)
                : launch_tma<T, kK, false, false>(p, plan, stream);
  }
}

}  // namespace

bool tma_device() {
  if (c10::cuda::device_count() == 0) return true;
  static std::atomic<int> cache[64];  // 0 = not read yet, 1 = no, 2 = yes
  const int slot = c10::cuda::current_device() & 63;
  int v = cache[slot].load(std::memory_order_relaxed);
  if (v == 0) {
    cudaFuncAttributes attr{};
    const auto probe = kTmaKernel<float, 3, true, 0>;
    const bool ok = device_props().major >= 9 &&
                    cudaFuncGetAttributes(&attr, probe) == cudaSuccess && attr.ptxVersion >= 90;
    (void)cudaGetLastError();
    v = ok ? 2 : 1;
    cache[slot].store(v, std::memory_order_relaxed);
  }
  return v == 2;
}

bool tma_strides(const ConvProblem& p, int64_t shift, uint64_t (&out)[3]) {
  const int64_t e = p.elem_size;
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

CUtensorMap x_tensor_map(const ConvProblem& p, CUtensorMapDataType dtype,
                         const uint64_t (&strides)[3], int64_t shift, int box_w, int box_h) {
  const TensorMapEncodeTiled encode = tensor_map_encoder();
  GK_CHECK(encode != nullptr, kOp, "the CUDA driver offers no cuTensorMapEncodeTiled (TMA path)");
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(p.W + shift), static_cast<cuuint64_t>(p.H),
                              static_cast<cuuint64_t>(p.C), static_cast<cuuint64_t>(p.N)};
  const cuuint32_t box[4] = {static_cast<cuuint32_t>(box_w), static_cast<cuuint32_t>(box_h), 1, 1};
  const cuuint32_t unit[4] = {1, 1, 1, 1};
  void* base = const_cast<char*>(static_cast<const char*>(p.x) - shift * p.elem_size);
  CUtensorMap map;
  const CUresult r = encode(&map, dtype, 4, base, dims, strides, box, unit,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  GK_CHECK(r == CUDA_SUCCESS, kOp, "cuTensorMapEncodeTiled failed (CUresult ", static_cast<int>(r),
           ")");
  return map;
}

bool tma_tiles_cover_plane(const ConvProblem& p) {
  return p.OH % TmaNarrowTile::kTH == 0 && p.OW % TmaNarrowTile::kTW == 0;
}

bool depthwise_tma_can_run(const ConvProblem& p) {
  TmaPlan plan;
  return plan_tma(p, plan);
}

template <typename T>
void depthwise_tma_run(const ConvProblem& p, cudaStream_t stream) {
  TmaPlan plan;
  GK_CHECK(plan_tma(p, plan), kOp, "internal error: depthwise_tma cannot run this shape");
  switch (plan.k) {
    case 3: launch_tma_k<T, 3>(p, plan, stream); break;
    case 5: launch_tma_k<T, 5>(p, plan, stream); break;
    default: launch_tma_k<T, 7>(p, plan, stream); break;
  }
}

// Every dtype x filter 3/5/7 x narrow/wide x same_o: 36 kernels.
template void depthwise_tma_run<float>(const ConvProblem&, cudaStream_t);
template void depthwise_tma_run<__half>(const ConvProblem&, cudaStream_t);
template void depthwise_tma_run<__nv_bfloat16>(const ConvProblem&, cudaStream_t);

}  // namespace gpukern
