#pragma once
// depthwise_tma: depthwise / single-channel NCHW conv2d through the TMA (sm_90+): groups == C ==
// O, stride 1, dilation 1, square kK x kK filter (3/5/7), any padding, unit column stride. Each
// block runs persistently over output tiles (7x7 with few tiles a block: one block a tile, one
// slot); the TMA copies a tile's input box (the tile plus its halo, zeros outside the image)
// into a ring of shared slots, several tiles ahead, so a few large requests keep the memory
// system busy with no registers spent on loads in flight. Threads own 4 columns x kRows rows of
// the tile and slide down them: every staged row is read once per thread and fed to the up-to-kK
// outputs of each column that use it, and each output row is stored as soon as it is complete
// (storing every row after the multiply-adds, behind a block barrier per tile, left warps
// stalled in the store tail and the barrier). Warps do not wait for each other between tiles:
// each counts its release of a slot, and the block's last warp to release it requests the
// slot's next box. The taps and bias of the next plane are fetched while the current tile
// computes.
//
// Contract (conv2d_depthwise_tma_kernel<T, kK, kTX, kThreads, kO>; details above the kernel):
//   grid   1-D, persistent: block b takes tiles b, b + gridDim.x, ... (or claims them from the
//          stream's counter in g_tma_sched, TmaShape::dynamic); tiles numbered plane-major, then
//          tile row, then tile column.
//   block  kThreads threads, kTX across a tile row; a thread owns kCols = 4 columns x kRows = 8
//          rows of the kTH x kTW tile (TmaGeometry).
//   shared kHeaderBytes (slot mbarriers, release counters, slot tiles, claims), each warp's taps
//          and bias (kTapsBytes), then `stages` slots of one input box each (128-byte aligned).
//   barriers block barriers: after the mbarrier init; after zeroing the box columns left of the
//          image that a misaligned x's map still covers; before the last block resets the claim
//          counters. Otherwise per-slot mbarriers (box arrived) and per-warp __syncwarp (the
//          warp's taps row written, then read; the warp done with a slot).
#include <cstdint>
#include <type_traits>

#include "conv/direct/common2d.cuh"
#include "device/async_mma.cuh"
#include "device/fastdiv.cuh"
#include "device/pdl.cuh"
#include "device/tickets.cuh"
#include "device/tma.cuh"
#include "device/vec.cuh"

namespace gpukern {
namespace conv {

struct TmaTraits {
  static constexpr int kCols = 4;   // output columns per thread (one 4-element shared load)
  static constexpr int kRows = 8;   // output rows per thread
  static constexpr int kMaxStages = 4;
  static constexpr int kSlotAlign = 128;  // the TMA's shared destinations are 128-byte aligned
  static constexpr int kHeaderBytes = 128;  // the barriers, the slots' counters, tiles and claims
  static constexpr int kCountersOffset = 64;  // kMaxStages barriers (8 B), then the counters
  static constexpr int kTilesOffset = 96;     // then the tile each slot holds (int)
  static constexpr int kClaimsOffset = 112;   // then the tile claimed for each slot's next use
  // A launch's run of tiles is long from kLongRunTiles tiles a persistent block on average.
  // Long runs of the instances that can claim tiles from a counter (TmaShape::dynamic) do so
  // (shorter runs lose more to the claims' lookahead than the balance gains); short 7x7 runs
  // launch one block a tile (tile_a_block).
  static constexpr int kLongRunTiles = 16;
  static constexpr bool claims(int kK) { return kK <= 5; }
  // A thread's kRows rows run as row_groups(kK) groups, one after another (tma_tile_rows): one
  // group per 7x7 thread tile was 1,568 multiply-adds of straight-line code (25 KB), and warps
  // waited on instruction fetch. Two groups halve the code for 43% more shared loads (each
  // group reads its own kK - 1 halo rows).
  static constexpr int row_groups(int kK) { return kK >= 7 ? 2 : 1; }
  // Short 7x7 runs (kLongRunTiles) launch one block a tile with one slot instead (the
  // hardware refills each SM as its blocks finish; a block waits for its own box while the
  // SM's other blocks compute). Long 7x7 runs stay persistent (one block a tile loses there).
  static constexpr bool tile_a_block(int kK) { return kK == 7; }
  // Blocks per SM asked of ptxas (registers: 32 sums, 16 in two row groups, kK*kK taps, the
  // window, addresses).
  static constexpr int min_blocks(int kK, int threads) {
    return threads >= 256 ? (kK <= 3 ? 3 : 2) : (kK <= 3 ? 6 : 4);
  }
};

// The geometry of one instance: kTX threads across a tile row (4 columns each), kThreads / kTX
// thread rows of kRows output rows. The TMA only starts a box on a 16-byte boundary (kAlign
// elements) of a row, so a box starts up to kAlign - 1 columns left of the tile's window; kO of
// them (compile-time) are skipped when reading, the rest shift the output tiles (TmaShape::lead).
// The input box is kBW x kBH elements (the tile + kK - 1 halo + alignment, columns a multiple of
// 16 bytes as the TMA requires); a slot holds one box. A thread's window (kC + kK - 1 columns
// from box column 4 * lx + kO) is read as 4-element vectors kV0 .. kV1.
template <typename T, int kK, int kTX, int kThreads>
struct TmaGeometry {
  static constexpr int kFilter = kK;
  static constexpr int kTW = kTX * TmaTraits::kCols;
  static constexpr int kTH = (kThreads / kTX) * TmaTraits::kRows;
  static constexpr int kAlign = 16 / static_cast<int>(sizeof(T));
  static constexpr int kBW = (kTW + kAlign - 1 + kK - 1 + kAlign - 1) / kAlign * kAlign;
  static constexpr int kBH = kTH + kK - 1;
  static constexpr int kBoxBytes = kBW * kBH * static_cast<int>(sizeof(T));
  static constexpr int kSlotBytes =
      (kBoxBytes + TmaTraits::kSlotAlign - 1) / TmaTraits::kSlotAlign * TmaTraits::kSlotAlign;
  // Each warp's taps and bias (floats, 16-byte rows), between the barriers and the slots.
  static constexpr int kTapsPitch = (kK * kK + 1 + 3) / 4 * 4;
  static constexpr int kTapsBytes =
      ((kThreads / 32) * kTapsPitch * 4 + TmaTraits::kSlotAlign - 1) / TmaTraits::kSlotAlign *
      TmaTraits::kSlotAlign;
  // The kO skipped columns for 'same' padding (kK / 2) with a 16-byte aligned x.
  static constexpr int kSameO = kAlign - kK / 2;
  static constexpr int v0(int o) { return o / 4; }
  static constexpr int v1(int o) { return (o + TmaTraits::kCols + kK - 2) / 4; }
  static_assert(kThreads % kTX == 0 && kThreads % 32 == 0, "whole thread rows and warps");
  static_assert(kK / 2 < kAlign, "one alignment step covers the padding");
  static_assert(TmaTraits::kCols * (kTX + v1(kAlign - 1)) <= kBW, "window loads stay in the box");
  static_assert(kBW <= 256 && kBH <= 256, "TMA box dimensions");
};

// Work decomposition (host: depthwise_tma.cu, plan_tma()). Tiles are numbered plane-major,
// then tile row, then tile column; block b takes tiles b, b + gridDim.x, ..., or with `dynamic`
// the first S of those (one per ring slot) and then tiles claimed from a counter in g_tma_sched
// in the order its slots are refilled, so that blocks on faster SMs take more tiles (with a
// fixed share each, SMs sit idle while the slowest finishes). Not for short runs of tiles a
// block, which lose more to the claims' lookahead than they gain (TmaTraits::kLongRunTiles).
// Tile tw covers output columns tw * kTW - lead ..; its box starts at map column
// tw * kTW + box_col0, a multiple of 16 bytes (TmaGeometry).
struct TmaShape {
  int tiles;           // N * C * tiles_h * tiles_w (< 2^30)
  bool dynamic;        // tiles after each slot's first use are claimed from a counter
  int sched;           // dynamic: this stream's pair in g_tma_sched (tiles claimed, blocks done)
  FastDiv per_plane, tiles_w, channels;  // tiles_h * tiles_w, tiles_w, C
  int lead;            // output columns left of tile 0 (0 .. 16 / sizeof(T) - 1)
  int box_col0;        // map column of tile 0's box: shift - pad_w - lead - kO
  int shift;           // the map starts `shift` elements before x (16-byte aligned base)
  int stages;          // ring slots, 2..kMaxStages
  int box_rows;        // rows of a box: kBH, or OH + kK - 1 when one tile covers the plane's rows
  int slot_bytes;      // bytes between slots (a box, 128-byte aligned); the last slot is kSlotBytes
  bool y_vec;          // 4-element vector stores allowed (unit stride, aligned rows, lead % 4 == 0)
};

// Tile counters of depthwise_tma, a pair per (device, stream) slot of tickets.cuh: zero when the
// module loads, and the last block of each launch puts both back to zero.
__device__ unsigned int g_tma_sched[kTicketSlots * 2];

template <typename T>
__device__ __forceinline__ void load4_float(float* v, const T* src) {
  if constexpr (std::is_same_v<T, float>) {
    const float4 q = *reinterpret_cast<const float4*>(src);
    v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
  } else {
    const Vec<T, 4> q = load_vec<T, 4>(src);
#pragma unroll
    for (int e = 0; e < 4; ++e) v[e] = to_float(q.v[e]);
  }
}

// Four outputs, converted to T, in one aligned vector store (p: 4 * sizeof(T)-byte aligned,
// global). Written out because the compiler split the plain Vec store of tma_tile_rows into
// four scalar ones (PTX st.global.f32) once the tile loop changed around it.
template <typename T>
__device__ __forceinline__ void store4_global(T* p, const float (&a)[4]) {
  if constexpr (std::is_same_v<T, float>) {
    asm volatile("st.global.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(p), "f"(a[0]), "f"(a[1]),
                 "f"(a[2]), "f"(a[3]));
  } else {
    asm volatile("st.global.v2.b32 [%0], {%1, %2};\n" ::"l"(p), "r"(reg_pack2<T>(a[0], a[1])),
                 "r"(reg_pack2<T>(a[2], a[3])));
  }
}

// One thread's kRows x kC outputs of a staged box (src = its first window row, column 0 of the
// 4-aligned window block), in row_groups(kK) groups of kR rows one after another: each group
// slides down its kR + kK - 1 input rows, reading each once and feeding it to every output row
// of the group that uses it; an output row is stored as soon as it is complete (the stores
// spread between the multiply-adds). kFast: all rows, one vector store each at yr; else the
// first `rows` rows through store_cols (columns o0.., OW, stride y_sw).
template <typename T, typename G, int kO, bool kFast>
__device__ __forceinline__ void tma_tile_rows(const T* src,
                                              const float (&wr)[G::kFilter][G::kFilter],
                                              float bias, T* yr, int64_t y_sh, int rows, int o0,
                                              int OW, int64_t y_sw) {
  constexpr int kK = G::kFilter, kBW = G::kBW;
  constexpr int kGroups = TmaTraits::row_groups(kK);
  constexpr int kR = TmaTraits::kRows / kGroups;
  constexpr int kC = TmaTraits::kCols;
  constexpr int kV0 = G::v0(kO), kV1 = G::v1(kO);
  static_assert(TmaTraits::kRows % kGroups == 0, "whole row groups");
#pragma unroll 1
  for (int g = 0; g < kGroups; ++g, src += kR * kBW, yr += kR * y_sh, rows -= kR) {
    if (!kFast && rows <= 0) break;
    float acc[kR][kC];
#pragma unroll
    for (int i = 0; i < kR; ++i)
#pragma unroll
      for (int j = 0; j < kC; ++j) acc[i][j] = bias;
#pragma unroll
    for (int r = 0; r < kR + kK - 1; ++r) {
      float buf[4 * (kV1 - kV0 + 1)];
#pragma unroll
      for (int v = kV0; v <= kV1; ++v) load4_float<T>(buf + 4 * (v - kV0), src + r * kBW + 4 * v);
      const float* win = buf + kO - 4 * kV0;  // window column 0 (compile-time offset)
#pragma unroll
      for (int i = 0; i < kR; ++i) {
        const int kh = r - i;
        if (kh < 0 || kh >= kK) continue;
#pragma unroll
        for (int kw = 0; kw < kK; ++kw)
#pragma unroll
          for (int j = 0; j < kC; ++j) acc[i][j] = fmaf(wr[kh][kw], win[j + kw], acc[i][j]);
      }
      const int done = r - (kK - 1);  // output row complete after this input row
      if (done < 0) continue;
      if constexpr (kFast) {
        static_assert(kC == 4, "one 4-element store a row");
        store4_global<T>(yr + done * y_sh, acc[done]);
      } else if (done < rows) {
        store_cols<T, kC>(yr + done * y_sh, acc[done], o0, OW, y_sw, false);
      }
    }
  }
}

template <typename T, int kK, int kTX, int kThreads, int kO>
__global__ void __launch_bounds__(kThreads, TmaTraits::min_blocks(kK, kThreads))
    conv2d_depthwise_tma_kernel(const __grid_constant__ CUtensorMap map, const ConvProblem p,
                                const TmaShape s) {
  using G = TmaGeometry<T, kK, kTX, kThreads>;
  constexpr int kR = TmaTraits::kRows;
  constexpr int kC = TmaTraits::kCols;
  constexpr int kWarps = kThreads / 32;
  static_assert(8 * TmaTraits::kMaxStages <= TmaTraits::kCountersOffset &&
                    TmaTraits::kCountersOffset + 4 * TmaTraits::kMaxStages <=
                        TmaTraits::kTilesOffset &&
                    TmaTraits::kTilesOffset + 4 * TmaTraits::kMaxStages <=
                        TmaTraits::kClaimsOffset &&
                    TmaTraits::kClaimsOffset + 4 * TmaTraits::kMaxStages <= TmaTraits::kHeaderBytes,
                "barriers, counters, slot tiles and claims fit before the taps");
  extern __shared__ __align__(TmaTraits::kSlotAlign) unsigned char smem_raw[];
  pdl_wait_then_release();  // launched with launch_pdl: no global memory touched before it
  // The TMA writes aligned slots: align the base by hand (the host adds kSlotAlign of slack).
  constexpr uint32_t kAlignMask = TmaTraits::kSlotAlign - 1;
  const uint32_t raw = tma::smem_addr(smem_raw);
  unsigned char* smem = smem_raw + (((raw + kAlignMask) & ~kAlignMask) - raw);
  const uint32_t bars = tma::smem_addr(smem);
  const uint32_t counters = bars + TmaTraits::kCountersOffset;
  const uint32_t slots = bars + TmaTraits::kHeaderBytes + G::kTapsBytes;
  const int tid = threadIdx.x;
  const int lane = tid % 32;
  const int S = s.stages;
  const int ph = static_cast<int>(p.pad_h);
  // Tile t -> plane (n, c), tile row th, tile column tw.
  auto plane_of = [&](int t) { return s.per_plane.div(t); };
  auto decode = [&](int t, int& n, int& c, int& th, int& tw) {
    const int plane = plane_of(t);
    const int rem = t - plane * static_cast<int>(s.per_plane.d);
    th = s.tiles_w.div(rem);
    tw = rem - th * static_cast<int>(s.tiles_w.d);
    n = s.channels.div(plane);
    c = plane - n * static_cast<int>(s.channels.d);
  };
  auto channel_of = [&](int plane) {
    return plane - s.channels.div(plane) * static_cast<int>(s.channels.d);
  };

  // One thread requests tile t into a slot; t >= tiles: no tile (the waiting warps leave).
  // Its tile number is written before the barrier arrival, which releases it to them.
  volatile int* const slot_tile = reinterpret_cast<volatile int*>(smem + TmaTraits::kTilesOffset);
  auto request = [&](int slot, int t) {
    slot_tile[slot] = t;
    if (t >= s.tiles) {
      tma::arrive(bars + 8 * slot);
      return;
    }
    int n, c, th, tw;
    decode(t, n, c, th, tw);
    tma::fence_proxy_async();  // the block's reads (and zero fills) of the slot come first
    tma::arrive_expect_tx(bars + 8 * slot, G::kBW * s.box_rows * sizeof(T));
    tma::load_4d(slots + slot * s.slot_bytes, &map, tw * G::kTW + s.box_col0, th * G::kTH - ph,
                 c, n, bars + 8 * slot);
  };
  // Dynamic claims. The first use of each slot is fixed: slot i of block b holds tile b + i * grid.
  // Later tiles come from the counter (tile S * grid + its value). A refill uses the tile
  // claimed one use earlier (claimed[slot]) and claims the next, so that the atomic's round trip
  // (~1 us under load) delays neither the refill nor its warp. The claiming lane writes the
  // value into claimed[] at the end of its next tile, before it releases that tile's slot: the
  // slot's refill, after every warp's release of it, sees it (count_arrival is acq_rel).
  // Refills run in ring order, so claims grow along the ring.
  // Only the 3x3 / 5x5 instances claim (TmaTraits::claims()): 7x7 runs are bound by their
  // multiply-adds and gain nothing, and the claiming code compiled in slowed them.
  const bool dynamic = TmaTraits::claims(kK) && s.dynamic;
  unsigned int* const sched = g_tma_sched + s.sched;  // [0]: tiles claimed, [1]: blocks done
  int* const claimed = reinterpret_cast<int*>(smem + TmaTraits::kClaimsOffset);
  const int claim_base = S * static_cast<int>(gridDim.x);
  unsigned int pend = 0;  // lane 0: a claim in flight for slot pend_slot (-2: all slots)
  int pend_slot = -1;
  auto settle_claim = [&]() {  // lane 0, between tiles
    if (pend_slot == -2) {
      for (int i = 0; i < S; ++i) claimed[i] = claim_base + static_cast<int>(pend) + i;
    } else if (pend_slot >= 0) {
      claimed[pend_slot] = claim_base + static_cast<int>(pend);
    }
    pend_slot = -1;
  };
  if (tid == 0) {
    for (int i = 0; i < S; ++i) {
      tma::mbar_init(bars + 8 * i, 1);
      reinterpret_cast<uint32_t*>(smem + TmaTraits::kCountersOffset)[i] = 0;
    }
    tma::fence_mbar_init();
  }
  __syncthreads();
  // The first slot alone at the start: every block's first box arrives sooner than if all
  // slots' boxes of every block shared the memory system; the others follow its arrival.
  if (tid == 0) {
    request(0, blockIdx.x);
    if (dynamic) {
      pend = atomicAdd(sched, static_cast<unsigned int>(S));  // the slots' second uses
      pend_slot = -2;
    }
  }

  // The warp's taps and bias pass through its own shared row (kTapsPitch floats): lane l fetches
  // values l and l + 32 of the plane's kK * kK taps followed by the bias. The next tile's taps
  // (when it changes plane) are fetched while the current one computes where the next tile is
  // known by then (fixed shares: always; claims: once its box has arrived), else when it starts.
  constexpr int kTaps = kK * kK;
  static_assert(kTaps + 1 <= 64, "two values per lane");
  float* taps =
      reinterpret_cast<float*>(smem + TmaTraits::kHeaderBytes) + (tid / 32) * G::kTapsPitch;
  auto tap_offset = [&](int i) -> int64_t {
    return i < kTaps ? (i / kK) * p.w_sh + (i % kK) * p.w_sw : 0;
  };
  auto fetch_taps = [&](int c, float& v0, float& v1) {
    const int64_t toff0 = tap_offset(lane), toff1 = tap_offset(lane + 32);
    const T* wc = ptr<T>(p.w) + c * p.w_so;
    auto value = [&](int i, int64_t off) {
      if (i < kTaps) return to_float(wc[off]);
      if (i == kTaps && p.b != nullptr) return to_float(ptr<T>(p.b)[c * p.b_s]);
      return 0.f;
    };
    v0 = value(lane, toff0);
    v1 = value(lane + 32, toff1);
  };
  float tv0 = 0.f, tv1 = 0.f;  // the taps of plane tap_plane, in flight
  int tap_plane = plane_of(blockIdx.x);  // grid <= tiles: every block has a first tile
  fetch_taps(channel_of(tap_plane), tv0, tv1);

  const int lx = tid % kTX;
  const int r0 = (tid / kTX) * kR;  // the thread's first row in the tile
  int loaded_plane = -1;
  float wr[kK][kK];
  float bias = 0.f;
  // Tile t's taps and bias into registers (from tv0 / tv1 when they were fetched ahead).
  auto load_plane = [&](int t) {
    const int plane = plane_of(t);
    if (plane == loaded_plane) return;  // warp-uniform
    if (plane != tap_plane) {           // not fetched ahead: fetch now
      tap_plane = plane;
      fetch_taps(channel_of(plane), tv0, tv1);
    }
    __syncwarp();
    if (lane <= kTaps) taps[lane] = tv0;  // the row holds kTaps + 1 values (and padding)
    if (lane + 32 <= kTaps) taps[lane + 32] = tv1;
    __syncwarp();
#pragma unroll
    for (int i = 0; i < (kTaps + 1 + 3) / 4; ++i) {
      const float4 q = *reinterpret_cast<const float4*>(taps + 4 * i);
      const float v[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int k = 4 * i + e;
        if (k < kTaps) wr[k / kK][k % kK] = v[e];
        if (k == kTaps) bias = v[e];
      }
    }
    loaded_plane = plane;
  };
  int slot = 0;
  uint32_t phase = 0;  // parity of the slot's current use
  int t = blockIdx.x;  // the slot's tile where known before its box arrives (dynamic: -1 if not)
  // A new plane's taps travel while the tile before it computes.
  auto prefetch_taps = [&](int tn) {
    if (tn < 0 || tn >= s.tiles) return;
    const int next_plane = plane_of(tn);
    if (next_plane != tap_plane) {
      tap_plane = next_plane;
      fetch_taps(channel_of(next_plane), tv0, tv1);
    }
  };
#pragma unroll 1
  for (bool first = true;; first = false) {  // the same sequence of tiles in every warp
    // Static: the block's tiles are blockIdx.x + k * gridDim.x. Dynamic: the next slot's tile
    // is known once its box has arrived (then before this one's wait), else after the wait.
    if (!dynamic && t >= s.tiles) break;
    int n, c, th, tw, tn = -1;
    if (t >= 0 && t < s.tiles) {  // before the wait, so the work overlaps it
      decode(t, n, c, th, tw);
      load_plane(t);
      if (!dynamic) {
        tn = t + static_cast<int>(gridDim.x);
        prefetch_taps(tn);
      }
    }
    tma::wait_parity(bars + 8 * slot, phase);
    if (dynamic) {
      const int ts = slot_tile[slot];
      if (ts >= s.tiles) break;  // claims grow along the ring: later slots are empty too
      if (ts != t) {
        t = ts;
        decode(t, n, c, th, tw);
        load_plane(t);
      }
      const int next_slot = slot + 1 == S ? 0 : slot + 1;
      if (tma::test_parity(bars + 8 * next_slot, next_slot == 0 ? phase ^ 1u : phase)) {
        tn = slot_tile[next_slot];
        prefetch_taps(tn);
      }
    }
    if (first && tid == 0) {
      for (int i = 1; i < S; ++i) request(i, blockIdx.x + i * gridDim.x);
    }
    // Threads past the box's last row read the next slot (or the last slot's full-size tail):
    // stale values, only for outputs below the image, which are not stored.
    T* box = reinterpret_cast<T*>(smem + TmaTraits::kHeaderBytes + G::kTapsBytes +
                                  slot * s.slot_bytes);
    // A misaligned x: the map starts `shift` elements early, so box columns left of the image
    // that the map still covers hold real memory. Zero them (left-most tiles only).
    const int left = s.shift - (tw * G::kTW + s.box_col0);  // box columns left of the image
    if (s.shift != 0 && left > 0) {                         // block-uniform
      const int cols = min(left, G::kBW);
      for (int i = tid; i < s.box_rows * cols; i += kThreads)
        box[(i / cols) * G::kBW + i % cols] = from_float<T>(0.f);
      __syncthreads();
    }

    const int oh0 = th * G::kTH + r0;
    const int ow0 = tw * G::kTW - s.lead + lx * kC;  // may be negative in tile 0
    if (oh0 < p.OH && ow0 < p.OW && ow0 + kC > 0) {
      const int rows = min(kR, static_cast<int>(p.OH) - oh0);  // rows to store
      T* yr = static_cast<T*>(p.y) + n * p.y_sn + c * p.y_so + oh0 * p.y_sh;
      const T* src = box + r0 * G::kBW + lx * kC;
      // All kR rows and vector stores (most threads): stores without branches, a compact hot
      // loop; else every store checked.
      if (rows == kR && s.y_vec && ow0 >= 0 && ow0 + kC <= p.OW) {
        tma_tile_rows<T, G, kO, true>(src, wr, bias, yr + ow0, p.y_sh, kR, 0, 0, 0);
      } else {
        tma_tile_rows<T, G, kO, false>(src, wr, bias, yr, p.y_sh, rows, ow0,
                                       static_cast<int>(p.OW), p.y_sw);
      }
    }
    // The warp is done with the slot; the block's last warp to say so refills it.
    __syncwarp();
    if (lane == 0) {
      settle_claim();
      if (tma::count_arrival(counters + 4 * slot) % kWarps == kWarps - 1) {
        if (dynamic) {
          request(slot, claimed[slot]);
          pend = atomicAdd(sched, 1u);
          pend_slot = slot;
        } else {
          request(slot, t + S * static_cast<int>(gridDim.x));
        }
      }
    }
    if (++slot == S) slot = 0, phase ^= 1u;
    t = tn;
  }
  // The block's claims are over (settling the last one waits for its atomic); the last block to
  // finish puts the counters back to zero for the next launch on this stream.
  if (!dynamic) return;
  if (lane == 0) settle_claim();
  __syncthreads();
  if (tid == 0 && ticket_arrive_acq_rel(sched + 1) == gridDim.x - 1) {
    atomicExch(sched, 0u);
    atomicExch(sched + 1, 0u);
  }
}

}  // namespace conv
}  // namespace gpukern
