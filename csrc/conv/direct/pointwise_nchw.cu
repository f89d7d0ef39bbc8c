// pointwise_nchw, host side: the plan (which problems, which tile), the launch and the kernel's
// instantiations (the kernel: pointwise_nchw.cuh).
#include <array>

#include "conv/direct/direct2d.h"
#include "conv/direct/pointwise_nchw.cuh"
#include "core/launch.cuh"

namespace gpukern {
namespace {

constexpr const char* kOp = kConv2dOp;

// Pixel j of an image at data + j: unit pixel stride and rows back to back (or one row).
bool plane_contiguous(int64_t h, int64_t w, int64_t sh, int64_t sw) {
  return (w == 1 || sw == 1) && (h == 1 || sh == w);
}

bool aligned(const void* ptr, uintptr_t bytes) {
  return reinterpret_cast<uintptr_t>(ptr) % bytes == 0;
}

// Pixel pairs of images (n, c) as float2: P even, every plane start 8-byte aligned.
bool pairs_ok(const void* data, int64_t N, int64_t C, int64_t sn, int64_t sc, int64_t P) {
  return P % 2 == 0 && (N == 1 || sn % 2 == 0) && (C == 1 || sc % 2 == 0) && aligned(data, 8);
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
  if (((p.O + 31) / 32) * ((s.cols + 63) / 64) >= (int64_t{1} << 31)) return false;
  s.x_vec = P % 4 == 0 && (p.N == 1 || p.x_sn % 4 == 0) && (p.C == 1 || p.x_sc % 4 == 0) &&
            aligned(p.x, 16);
  s.y_pair = pairs_ok(p.y, p.N, p.O, p.y_sn, p.y_so, P) &&
             (p.r == nullptr || pairs_ok(p.r, p.N, p.O, p.r_sn, p.r_so, P));
  return true;
}

// The widest tile first (fewer re-reads of x per output channel); a narrower one while the grid
// would not fill two waves (7x7 and 14x14 planes, few output channels).
void choose_tile(const ConvProblem& p, conv::PointwisePlan& s) {
  const int64_t sms = device_props().multiProcessorCount;
  struct Tile {
    int bm, bn;
  };
  const Tile tiles[] = {{p.O > 32 ? 64 : 32, 128}, {32, 128}, {32, 64}};
  for (const Tile& t : tiles) {
    s.bm = t.bm;
    s.bn = t.bn;
    s.m_tiles = static_cast<int>((p.O + t.bm - 1) / t.bm);
    s.blocks = s.m_tiles * ((s.cols + t.bn - 1) / t.bn);
    if (s.blocks >= 2 * sms) return;
  }
}

template <int kBM, int kBN>
void launch(const ConvProblem& p, const conv::PointwisePlan& s, cudaStream_t stream) {
  constexpr size_t smem = conv::pointwise_smem_bytes<kBM, kBN>();
  const dim3 grid = checked_grid(kOp, s.blocks);
  auto go = [&](auto kernel) {
    allow_dynamic_smem(kernel, smem);
    launch_pdl(kernel, grid, dim3(kBM * kBN / 32), smem, stream, p, s);
  };
  if (s.x_vec) {
    go(conv::conv2d_pointwise_nchw_kernel<kBM, kBN, true>);
  } else {
    go(conv::conv2d_pointwise_nchw_kernel<kBM, kBN, false>);
  }
}

}  // namespace

bool pointwise_nchw_can_run(const ConvProblem& p) {
  conv::PointwisePlan s;
  return plan(p, s);
}

// Planes of 28x28 and up, more than 16 output channels, and few input channels (the layer is
// memory-bound: each output reads C inputs), or up to 256 of them into at most 64 outputs without
// a residual. H100, batch 16, fp32 NCHW blocks with a bias (+ residual, activation), against
// igemm's other 1x1 forms (cuBLASLt then an epilogue pass, or CUTLASS over NHWC copies;
// benchmarks/pointwise_nchw.py, docs/performance.md): 64 -> 64 56x56 + ReLU 12.1 us against 16.5,
// 16 -> 64 112x112 35.6 against 63.8, 64 -> 24 56x56 9.2 against 11.3, 40 -> 240 28x28 +
// hardswish 12.2 against 14.6, 256 -> 64 56x56 + ReLU 29.2 against 33.7, 72 -> 40 28x28 7.1
// against 7.4. It lost with more channels or outputs (mma.sync at 2 blocks an SM: 1024 -> 256
// 14x14 41.1 against 17.4; 256 -> 128 56x56 49.4 against 46.4), with a residual beyond 64
// channels (120 -> 40 28x28 10.7 against 8.0; 72 -> 24 56x56 15.6 against 11.8), on 1x1 planes
// (24 -> 72: 4.4 against 3.9) and at 16 -> 16 112x112 + residual (37.2 against 23.0).
bool pointwise_nchw_preferred(const ConvProblem& p) {
  const bool narrow = p.C <= 64 || (p.C <= 256 && p.O <= 64 && p.r == nullptr);
  return narrow && p.O > 16 && p.OH * p.OW >= 784 && pointwise_nchw_can_run(p);
}

void pointwise_nchw_run(const ConvProblem& call, cudaStream_t stream) {
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
  if (s.bm == 64) {
    launch<64, 128>(p, s, stream);
  } else if (s.bn == 128) {
    launch<32, 128>(p, s, stream);
  } else {
    launch<32, 64>(p, s, stream);
  }
  if (y_staged) {
    at::from_blob(call.y, sizes, {call.y_sn, call.y_so, call.y_sh, call.y_sw}, opts).copy_(y_tmp);
  }
}

}  // namespace gpukern
