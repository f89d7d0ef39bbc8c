// pointwise_nchw, host side: the plan (which problems, which tile), the launch and the kernel's
// instantiations (the kernel: pointwise_nchw.cuh).
#include <algorithm>
#include <array>
#include <utility>

#include "conv/direct/direct2d.h"
#include "conv/direct/pointwise_nchw.cuh"
#include "conv/direct/pointwise_nchw.h"
#include "core/knobs.h"
#include "core/launch.cuh"
#include "device/vec.cuh"

namespace gpukern {
namespace {

constexpr const char* kOp = kConv2dOp;

// Pixel j of an image at data + j: unit pixel stride and rows back to back (or one row).
bool plane_contiguous(int64_t h, int64_t w, int64_t sh, int64_t sw) {
  return (w == 1 || sw == 1) && (h == 1 || sh == w);
}

// Pixel quads of images (n, c) as float4: P % 4 == 0, every plane start 16-byte aligned.
bool quads_ok(const void* data, int64_t N, int64_t C, int64_t sn, int64_t sc, int64_t P) {
  return P % 4 == 0 && (N == 1 || sn % 4 == 0) && (C == 1 || sc % 4 == 0) && is_aligned16(data);
}

bool plan(const ConvProblem& p, conv::PointwisePlan& s) {
  if (p.elem_size != 4 || p.groups != 1 || p.KH != 1 || p.KW != 1 || p.stride_h != 1 ||
      p.stride_w != 1 || p.pad_h != 0 || p.pad_w != 0 || p.OH != p.H || p.OW != p.W) {
    return false;
  }
  if (p.N < 0 || p.C < 1 || p.O < 1) return false;
  // x's planes contiguous (what the algorithm query sees); y and the residual any strides
  // (pointwise_nchw_run stages others through contiguous copies).
  if (!plane_contiguous(p.H, p.W, p.x_sh, p.x_sw)) return false;
  const int64_t P = p.H * p.W;
  if (P >= (int64_t{1} << 31)) return false;
  s.P = static_cast<int>(P);
  s.cols = p.N * P;
  // The grid bound for the narrowest tile (the most blocks); the tile itself: choose_tile.
  if (((p.O + 63) / 64) * ((s.cols + 63) / 64) >= (int64_t{1} << 31)) return false;
  // 16-byte copies: x's pixel quads and W's channel quads (W [O][C] with unit channel stride).
  s.vec = quads_ok(p.x, p.N, p.C, p.x_sn, p.x_sc, P) && p.C % 4 == 0 && p.w_sc == 1 &&
          (p.O == 1 || p.w_so % 4 == 0) && is_aligned16(p.w);
  s.y_vec = quads_ok(p.y, p.N, p.O, p.y_sn, p.y_so, P) &&
            (p.r == nullptr || quads_ok(p.r, p.N, p.O, p.r_sn, p.r_so, P));
  return true;
}

// The block and warp tiles (kBM, kBN, kWM, kWN), the stages, the blocks per SM the registers are
// capped for and the column order (pointwise_nchw.cuh: permuted, 16-byte B loads and pixel-quad
// epilogue; plain, scalar B loads and pixel pairs): one kernel instance each (x2 for kVec). The
// six choose_tile takes, of thirteen timed (benchmarks/pointwise_nchw.py --tiles; 128 x 128,
// 32 x 128, 32 x 64, 8-stage and 4-stage 32 x 64-warp tiles won no block).
// Tiles 6 and 7 split the channels over the CTAs of a cluster (kSplitK, pointwise_nchw.cuh).
struct Tile {
  int bm, bn, wm, wn, stages, min_blocks;
  bool permute = true;
  bool split = false;
};
constexpr Tile kTiles[] = {
    {64, 128, 32, 32, 4, 1},         // 0: 8 warps
    {64, 64, 32, 32, 4, 1},          // 1: 4 warps
    {64, 128, 32, 64, 2, 4},         // 2: 4 warps, 4 blocks an SM (52 KB each, <= 128 registers)
    {64, 128, 32, 32, 2, 3},         // 3: 8 warps, 3 blocks an SM (52 KB each, <= 80 registers)
    {64, 128, 32, 32, 4, 1, false},  // 4: tile 0 in the plain order
    {64, 128, 32, 32, 2, 3, false},  // 5: tile 3 in the plain order
    {64, 64, 32, 32, 4, 1, true, true},   // 6: tile 1, channels split over a cluster
    {64, 64, 32, 32, 4, 1, false, true},  // 7: the same in the plain order
};
constexpr int kNumTiles = static_cast<int>(sizeof(kTiles) / sizeof(kTiles[0]));

void set_tile(const ConvProblem& p, conv::PointwisePlan& s, int i) {
  s.tile = i;
  s.splits = 1;
  s.m_tiles = static_cast<int>((p.O + kTiles[i].bm - 1) / kTiles[i].bm);
  s.blocks = s.m_tiles * ((s.cols + kTiles[i].bn - 1) / kTiles[i].bn);
}

// The channel split of a split tile: `forced` when in 2..8 (the portable cluster size), else
// for planes under 14x14 with at least kSplitMinStages channel stages a CTA: enough CTAs for
// about three 4-warp CTAs an SM (kSplitCtas), at most kSplitMax; 1 where it does not split.
// H100, batch 16, fp32 (benchmarks/pointwise_nchw.py --splits; h100_pointwise_nchw_splits.md):
// on 7x7 planes 672 -> 160 takes 20.4 us unsplit, 16.4 / 13.7 / 19.6 in 2 / 4 / 8 CTAs (torch's
// unfused 17.8), 960 -> 160 + residual 31.4, 21.9 / 17.2 / 22.7 (24.5); on 14x14 planes every
// split was slower than the unsplit tile (240 -> 80 7.1 us unsplit, 10.3 in 2 CTAs; 480 -> 112
// 10.8, 13.0), and with more outputs too (160 -> 960 at 7x7 16.9, 24.5): the cluster's two
// syncs and the reduction cost more than a few fewer channel stages save there.
constexpr int64_t kSplitCtas = 3 * 132;
constexpr int kSplitMinStages = 3;
constexpr int kSplitMax = 4;
int choose_splits(const ConvProblem& p, const conv::PointwisePlan& s, long long forced) {
  const int64_t k_tiles = (p.C + conv::kPwBK - 1) / conv::kPwBK;
  if (forced >= 2 && forced <= 8) return static_cast<int>(std::min<int64_t>(forced, k_tiles));
  if (s.P >= 196) return 1;
  int splits = 1;
  while (splits < kSplitMax && s.blocks * splits * 2 <= kSplitCtas &&
         k_tiles >= int64_t{splits} * 2 * kSplitMinStages) {
    splits *= 2;
  }
  return splits;
}

// By the channels a block walks (k_tiles stages of kPwBK), the residual and the grid, from the
// tile timings (H100, batch 16, fp32 NCHW blocks with a bias; benchmarks/results/
// h100_pointwise_nchw_tiles_s22b.md). The plain order wins without a residual (64 -> 64 56x56
// 12.0 us against 14.9 permuted; 40 -> 240 28x28 10.5 against 13.2), the permuted one with a
// residual, whose loads it makes 16-byte (120 -> 40 28x28 7.1 against 8.8; 16 -> 16 112x112
// 27.7 against 32.5):
//   one stage (C <= 32): 32 x 64 warps, two stages, 4 blocks an SM (16 -> 64 112x112 31.2);
//   two stages (C <= 64): two stages, 3 blocks an SM (64 -> 24 56x56 8.6, 64 -> 256 + residual
//     62.5);
//   more, < 90 blocks of 64 x 128 (14x14 planes into few outputs): 64 x 64 blocks (240 -> 80
//     7.1 against 9.6-11.1);
//   more, without a residual: four stages below 300 blocks (80 -> 480 14x14 10.8, 512 -> 128
//     28x28 22.9), two stages at 3 blocks an SM above (256 -> 64 56x56 31.8 against 35.5);
//   more, with a residual: four stages, 8 warps (120 -> 40 28x28 7.1).
// GPUKERN_PW_TILE=<1 + an index into kTiles> forces one (a tuning knob for
// benchmarks/pointwise_nchw.py --tiles; read per call while GPUKERN_PW_KNOBS=1 was set at the
// first call, core/knobs.h).
// choose_tile's grid thresholds, in 64 x 128 blocks (H100, 132 SMs; the timings above).
struct TileRule {
  static constexpr int64_t kFewBlocks = 90;    // below: 64 x 64 blocks
  static constexpr int64_t kManyBlocks = 300;  // from here, no residual: 2 stages, 3 blocks an SM
};

void choose_tile(const ConvProblem& p, conv::PointwisePlan& s) {
  static const bool knobs = knobs_enabled("PW");
  const long long forced_splits = knobs ? knob_value("PW", "SPLITS") : 0;
  if (knobs) {
    const long long forced = knob_value("PW", "TILE");
    if (forced >= 1 && forced <= kNumTiles) {
      set_tile(p, s, static_cast<int>(forced - 1));
      if (kTiles[s.tile].split) s.splits = choose_splits(p, s, forced_splits);
      return;
    }
  }
  const bool residual = p.r != nullptr;
  const int64_t k_tiles = (p.C + conv::kPwBK - 1) / conv::kPwBK;
  if (k_tiles == 1) return set_tile(p, s, 2);
  if (k_tiles == 2) return set_tile(p, s, residual ? 3 : 5);
  set_tile(p, s, 0);
  if (s.blocks < TileRule::kFewBlocks) {
    set_tile(p, s, 6);
    const int splits = choose_splits(p, s, forced_splits);
    if (splits == 1) return set_tile(p, s, 1);
    s.splits = splits;
    return;
  }
  if (!residual) set_tile(p, s, s.blocks < TileRule::kManyBlocks ? 4 : 5);
}

// A split tile's launch: clusters of s.splits CTAs along x, with programmatic dependent launch.
template <typename Kernel>
void launch_cluster(Kernel kernel, dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                    const ConvProblem& p, const conv::PointwisePlan& s) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = static_cast<unsigned>(s.splits);
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  attr[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[1].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 2;
  C10_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, p, s));
}

template <int kBM, int kBN, int kWM, int kWN, int kStages, int kMinBlocks, bool kPermute,
          bool kSplit>
void launch(const ConvProblem& p, const conv::PointwisePlan& s, cudaStream_t stream) {
  constexpr size_t smem = conv::pointwise_smem_bytes<kBM, kBN, kStages, kPermute>();
  const dim3 block(kBM / kWM * kBN / kWN * 32);
  auto go = [&](auto kernel) {
    allow_dynamic_smem(kernel, smem);
    if constexpr (kSplit) {
      if (s.splits > 1) {
        return launch_cluster(kernel, checked_grid(kOp, s.blocks * s.splits), block, smem,
                              stream, p, s);
      }
    }
    launch_pdl(kernel, checked_grid(kOp, s.blocks), block, smem, stream, p, s);
  };
  if (s.vec) {
    go(conv::conv2d_pointwise_nchw_kernel<kBM, kBN, kWM, kWN, kStages, kMinBlocks, kPermute,
                                          true, kSplit>);
  } else {
    go(conv::conv2d_pointwise_nchw_kernel<kBM, kBN, kWM, kWN, kStages, kMinBlocks, kPermute,
                                          false, kSplit>);
  }
}

template <int... kI>
void launch_tile(const ConvProblem& p, const conv::PointwisePlan& s, cudaStream_t stream,
                 std::integer_sequence<int, kI...>) {
  // One instance per kTiles entry; s.tile picks it.
  (void)((s.tile == kI &&
          (launch<kTiles[kI].bm, kTiles[kI].bn, kTiles[kI].wm, kTiles[kI].wn, kTiles[kI].stages,
                  kTiles[kI].min_blocks, kTiles[kI].permute, kTiles[kI].split>(p, s, stream),
           true)) ||
         ...);
}

}  // namespace

bool pointwise_nchw_can_run(const ConvProblem& p) {
  if (p.elem_size == 2) return pointwise_nchw16_can_run(p);
  conv::PointwisePlan s;
  return plan(p, s);
}

// Planes of 14x14 and up, 17 to 512 output channels from at most 240 input channels (or 256 into
// at most 64 without a residual), a residual only into 33 to 255 outputs. H100, batch 16, fp32
// NCHW blocks with a bias (+ residual, activation), against igemm's other 1x1 forms (cuBLASLt
// then an epilogue pass, or CUTLASS over NHWC copies) or cuDNN, whichever the previous rule ran
// (benchmarks/pointwise_nchw.py --tiles; docs/performance.md, twenty-second session): 72 -> 40
// 28x28 5.4 us against 7.1, 120 -> 40 28x28 + residual 7.1 against 8.2, 240 -> 80 14x14 7.1
// against 7.6, 80 -> 200 14x14 + hardswish 6.2 against 7.9, 40 -> 240 28x28 + hardswish 10.5
// against 15.0, 16 -> 64 112x112 31.2 against 35.3 (the kernel's earlier form), 256 -> 64 56x56
// 31.8 against 33.7. It loses with more input channels (512 -> 256 28x28 34.1 against 25.8,
// 480 -> 112 14x14 10.7 against 10.0, 1024 -> 256 14x14 29.0 against 16.8), into 672 outputs
// (112 -> 672 14x14 15.2 against 14.7), on 7x7 and 1x1 planes (672 -> 160 7x7 20.7 against
// 15.2), and with a residual into few or many outputs (72 -> 24 56x56 13.0 against 11.9,
// 128 -> 512 28x28 40.4 against 41.9 on its best tile, 43.5 on the one chosen).
// Split tiles (channels over a cluster): planes of 7x7 up to (not including) 14x14 with 241 to
// 1024 input channels into at most 256 outputs, where choose_tile splits (choose_splits).
bool pointwise_nchw_preferred(const ConvProblem& p) {
  if (p.elem_size == 2) return pointwise_nchw16_preferred(p);
  const bool residual_ok = p.r == nullptr || (p.O > 32 && p.O < 256);
  const bool channels_ok = p.C <= 240 || (p.C <= 256 && p.O <= 64 && p.r == nullptr);
  conv::PointwisePlan s;
  if (!plan(p, s)) return false;
  if (p.O > 16 && p.O <= 512 && channels_ok && p.OH * p.OW >= 196 && residual_ok) return true;
  if (p.C <= 240 || p.C > 1024 || p.O > 256 || p.OH * p.OW < 49 || p.OH * p.OW >= 196) {
    return false;
  }
  choose_tile(p, s);
  return s.splits > 1;
}

void pointwise_nchw_run(const ConvProblem& call, cudaStream_t stream) {
  if (call.elem_size == 2) return pointwise_nchw16_run(call, stream);
  // The kernel reads the residual and writes y with contiguous planes; other strides (a
  // channels_last residual, an output view) go through a contiguous copy, on the current stream.
  ConvProblem p = call;
  const at::TensorOptions opts =
      at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, c10::cuda::current_device());
  const std::array<int64_t, 4> sizes{p.N, p.O, p.OH, p.OW};
  const std::array<int64_t, 4> packed{p.O * p.OH * p.OW, p.OH * p.OW, p.OW, 1};
  at::Tensor r_tmp, y_tmp;
  if (p.r != nullptr && !plane_contiguous(p.OH, p.OW, p.r_sh, p.r_sw)) {
    r_tmp = at::from_blob(const_cast<void*>(p.r), sizes, {p.r_sn, p.r_so, p.r_sh, p.r_sw}, opts)
                .contiguous();
    p.r = r_tmp.const_data_ptr();
    p.r_sn = packed[0], p.r_so = packed[1], p.r_sh = packed[2], p.r_sw = packed[3];
  }
  const bool y_staged = !plane_contiguous(p.OH, p.OW, p.y_sh, p.y_sw);
  if (y_staged) {
    y_tmp = at::empty(sizes, opts);
    p.y = y_tmp.data_ptr();
    p.y_sn = packed[0], p.y_so = packed[1], p.y_sh = packed[2], p.y_sw = packed[3];
  }
  conv::PointwisePlan s;
  GK_CHECK(plan(p, s), kOp, "internal error: pointwise_nchw cannot run this shape");
  choose_tile(p, s);
  if (s.blocks == 0) return;
  launch_tile(p, s, stream, std::make_integer_sequence<int, kNumTiles>{});
  if (y_staged) {
    at::from_blob(call.y, sizes, {call.y_sn, call.y_so, call.y_sh, call.y_sw}, opts).copy_(y_tmp);
  }
}

}  // namespace gpukern
