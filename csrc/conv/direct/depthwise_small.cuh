#pragma once
// depthwise_small: depthwise NCHW conv2d (groups == C == O, multiplier 1), square kK x kK filter
// (3/5/7), equal strides kS (1 or 2), dilation 1, any padding, any element strides; output rows
// of at most kMaxThreads columns. For the layers where a plane is much smaller than a block
// (14x14, 7x7: MobileNetV3's tail) and for stride-2 downsampling at any plane size, which are
// latency bound: little work per plane, so what counts is how many loads are in flight and how
// few instructions each staged element costs, not the multiply-adds.
//
// A unit is a band of output rows of one plane, full width: band_rows = strips * kR rows
// (whole planes when the thread budget and the shared budget allow). A block takes `upb`
// consecutive units (plane-major: consecutive planes of one image are consecutive in an NCHW
// tensor), so that a block covers a few KB of contiguous input even when a plane is 784 bytes.
//
//   1. prologue (no global memory): zero the staged tiles (16-byte stores; the padding is what
//      the staging leaves untouched), the units' descriptors (threads < upb), then the PDL wait
//      (launched with launch_pdl: the launch overlaps the previous kernel's tail) and a barrier.
//   2. staging: the units' input rows (whole planes: the image rows only, the padding rows
//      are what step 1 zeroed), as vectors of `ve` elements (16 bytes where the rows, the
//      planes and the pointer allow it: 8 bytes for 14-wide fp32 rows, 4 for 14-wide bf16,
//      element by element through the strides otherwise), kBatch vectors a thread issued before
//      the first is stored. Each vector goes to shared memory as fp32, with vector stores:
//        stride 1: staged column c0 + ix (c0 = pad_w rounded up to 4, so that the stores are
//                  aligned); the reads go through coff = c0 - pad_w.
//        stride 2: de-interleaved on the padded column u = ix + pad_w: even u at e_off + u / 2,
//                  odd u at half + o_off + u / 2; the offsets align the vector's even and odd
//                  halves (consecutive positions each) to 4 floats. Consecutive outputs then
//                  read consecutive words (no 2-way bank conflict), with two row pointers.
//      The units' taps and biases are staged beside them (loaded before the input, stored
//      after it: their latency overlaps the input's). A barrier.
//   3. compute: thread t serves unit t / tpu, strip (t % tpu) / OW, column (t % tpu) % OW: kR
//      outputs of one column (a strip), each staged row under the strip read once (kK words)
//      and used by every output of the strip whose window holds it, taps in registers (read
//      from shared memory, one broadcast per unit), fp32 accumulation. Consecutive threads take consecutive columns: coalesced output rows.
//   4. epilogue: y = act(acc + bias [+ residual]) in registers (the residual prefetched before
//      the multiply-adds; the activation chosen at run time, one switch per thread), stores
//      through the output's strides.
//
// Contract (conv2d_depthwise_small_kernel<T, kK, kS>):
//   grid    1-D: block b takes units [b * upb, b * upb + upb) (unit = plane * bands + band,
//           plane = n * C + c); launched with launch_pdl.
//   block   blockDim.x threads (a multiple of 32, >= upb * tpu, <= kMaxThreads).
//   shared  dynamic (small_smem_bytes): upb tiles of `tile` floats (in_rows rows of `pitch`
//           floats, 16-byte aligned), the units' taps and biases (kK * kK + 1 floats a unit),
//           then the units' descriptors.
//   barriers two: descriptors and zeros written; tiles, taps and biases staged.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "conv/direct/common2d.cuh"
#include "device/activation.cuh"
#include "device/fastdiv.cuh"
#include "device/pdl.cuh"
#include "device/vec.cuh"

namespace gpukern {
namespace conv {

struct SmallTraits {
  static constexpr int kMaxThreads = 256;  // block size limit; also the widest output row
  static constexpr int kRows = 4;          // output rows per thread (a strip): a staged row is
                                           // read once per strip, (kRows - 1) * kS + kK rows
  // The other strip height, for stride 2 onto outputs of a multiple of 7 rows (MobileNetV3's
  // 56x56, 28x28 and 14x14 stride-2 outputs: no idle strip rows, where 4-row strips leave 2 of
  // 16 idle at 14 rows; fewer staged rows per output; small_rows below says where).
  static constexpr int kRowsLong = 7;
  static constexpr int kMaxUnits = 64;     // units a block stages at once (descriptor table)
  // Shared bytes of a block (its tiles, taps, biases and descriptors): at least 6 blocks an SM
  // by shared memory (228 KB), no opt-in needed (< 48 KB).
  static constexpr int kSmemBudget = 32 * 1024;
  // Staging bytes a thread issues before it stores the first (in flight together), and the
  // most vectors that takes (element-by-element staging of 16-bit data). On the small planes a
  // thread has 1-3 vectors to stage in all: bytes in flight come from resident blocks, so the
  // batch is kept small for the registers (64 bytes / 8 vectors needed 64 registers at 3x3).
  static constexpr int kBatchBytes = 32;
  static constexpr int kMaxBatch = 4;
  // The 7-row 3x3 instances: 128 bytes (8 16-byte vectors) in flight a thread. Their blocks
  // have half the threads of 4-row ones for the same planes, so each thread stages twice the
  // vectors (16 x 240 x 28 x 28 3x3 stride 2 fp32: 6 a thread, three dependent round trips at
  // 32 bytes; ncu: 41% of the warp samples waiting in the staging). H100, batch 16 (fp32 /
  // bf16, us): that layer 7.8 / 8.2 -> 6.4 / 6.7, 64ch 112x112 3x3 fp32 29.4 -> 26.0 (bf16
  // 16.4 -> 18.9: the 64 registers' occupancy). The 5x5 ones keep 32 bytes and 48 registers:
  // with the batch 72ch 56x56 5x5 ran 9.7 / 11.6 against 8.9 / 9.2.
  static constexpr int kBatchBytesLong = 128;
  static constexpr int kMaxBatchLong = 8;
  static constexpr bool long_batch(int k, int rows) { return rows != kRows && k == 3; }
  // Resident blocks asked of ptxas: 6 for 3x3 (40 registers: 7 blocks of 224 threads an SM),
  // 5 for 5x5 (48), 3 for 7x7 (80: its 49 taps). None spills (cuobjdump -res-usage). The
  // alternative not taken, unmeasured: 3x3 at 64 registers with its taps loaded before the input
  // (their latency overlapping the staging's), 4 blocks of 224 threads an SM.
  static constexpr int min_blocks(int k) { return k == 7 ? 3 : k == 5 ? 5 : 6; }
  // The 7-row 3x3 instances: 64 registers, for the staging batch (long_batch).
  static constexpr int min_blocks(int k, int rows) {
    return long_batch(k, rows) ? 4 : min_blocks(k);
  }
};

// Work decomposition (host: depthwise_small.cu, plan_small_geometry() and the run).
struct SmallShape {
  int strips;           // strips per unit (of the kernel's kR rows: kRows or kRowsLong)
  int band_rows;        // strips * kR: output rows per unit
  int bands;            // units per plane
  int tpu;              // threads per unit: OW * strips
  int upb;              // units per block
  int in_rows;          // staged rows per unit: (band_rows - 1) * kS + kK
  int pitch;            // floats per staged row (a multiple of 2; of 4 when ve == 8)
  int tile;             // floats per unit: in_rows * pitch rounded up to 4 (16-byte aligned)
  int c0, coff;         // kS == 1: staged column of image column 0 (a multiple of 4, >= pad_w),
                        // and c0 - pad_w
  int half;             // kS == 2: where the odd half of a staged row starts (a multiple of 4)
  int e_off, o_off;     // kS == 2: the halves' offsets (0..3)
  int ev_base, od_base; // kS == 2: e_off + ceil(pad_w / 2), half + o_off + floor(pad_w / 2):
                        // where image column 0's even / odd half-vector goes (multiples of 4)
  int ve;               // staging vector: elements (1, 2, 4 or 8; > 1: unit column stride)
  int nvr;              // vectors per image row: W / ve
  FastDiv nvr_div;      // nvr: staging index -> unit row
  int stage_t0;         // first staged row the staging loads (rows before it: padding)
  int stage_rows;       // rows it loads a unit from stage_t0 (in_rows; for whole planes, the
                        // image rows only: the rows above and below are padding, left zero)
  FastDiv rows_div;     // stage_rows: unit row -> unit
  int64_t units;        // N * C * bands
};

// One unit's placement, computed once per block by the thread of the same index.
struct SmallUnit {
  int64_t x_off, y_off, r_off;  // element offsets of the unit's plane in x, y and the residual
  int iy0;                      // input row of staged row 0 (may be negative: padding)
  int oy0;                      // first output row of the band
  int c;                        // channel (its taps and bias)
  int valid;                    // 0: past the last unit
};

// 16-byte units the taps and biases of upb units take in shared memory (k * k + 1 floats a unit).
__host__ __device__ __forceinline__ int small_taps_vec4(int upb, int k) {
  return (upb * (k * k + 1) + 3) / 4;
}

// N elements of T as one load of N * sizeof(T) bytes (aligned by the caller).
template <typename T, int N>
__device__ __forceinline__ Vec<T, N> load_raw(const T* src) {
  Vec<T, N> v;
  constexpr int kBytes = static_cast<int>(sizeof(T)) * N;
  if constexpr (kBytes == 16) {
    *reinterpret_cast<uint4*>(&v) = *reinterpret_cast<const uint4*>(src);
  } else if constexpr (kBytes == 8) {
    *reinterpret_cast<uint2*>(&v) = *reinterpret_cast<const uint2*>(src);
  } else if constexpr (kBytes == 4) {
    *reinterpret_cast<unsigned*>(&v) = *reinterpret_cast<const unsigned*>(src);
  } else {
    v.v[0] = src[0];
  }
  return v;
}

// N consecutive floats to shared memory at d (aligned to min(N, 4) floats): one 4-, 8- or 16-byte
// store, two of 16 bytes for N == 8. Explicit st.shared vectors: through a plain float4 store
// the compiler split them into scalar stores (the destination's alignment unknown to it).
__device__ __forceinline__ void sts2(float* d, float a, float b) {
#if defined(__CUDA_ARCH__)
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(d));
  asm volatile("st.shared.v2.f32 [%0], {%1, %2};" ::"r"(addr), "f"(a), "f"(b) : "memory");
#else
  d[0] = a;
  d[1] = b;
#endif
}
__device__ __forceinline__ void sts4(float* d, float a, float b, float c, float e) {
#if defined(__CUDA_ARCH__)
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(d));
  asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "f"(a), "f"(b), "f"(c),
               "f"(e)
               : "memory");
#else
  d[0] = a;
  d[1] = b;
  d[2] = c;
  d[3] = e;
#endif
}
template <int N>
__device__ __forceinline__ void store_floats(float* d, const float* f) {
  if constexpr (N == 1) {
    d[0] = f[0];
  } else if constexpr (N == 2) {
    sts2(d, f[0], f[1]);
  } else if constexpr (N == 4) {
    sts4(d, f[0], f[1], f[2], f[3]);
  } else {
    static_assert(N == 8, "1, 2, 4 or 8 floats");
    sts4(d, f[0], f[1], f[2], f[3]);
    sts4(d + 4, f[4], f[5], f[6], f[7]);
  }
}

// Image columns q * VE .. q * VE + VE - 1 of one staged row (values f) into the row at `row`.
template <int kS, int VE>
__device__ __forceinline__ void put_cols(float* row, const float (&f)[VE], int q,
                                         const SmallShape& s, int pad_w) {
  if constexpr (kS == 1) {
    store_floats<VE>(row + s.c0 + q * VE, f);
  } else if constexpr (VE == 1) {
    const int u = q + pad_w;  // padded column
    row[(u & 1) ? s.half + s.o_off + (u >> 1) : s.e_off + (u >> 1)] = f[0];
  } else {
    // u = q * VE + j + pad_w: even for j = p, p + 2, ... (p = pad_w & 1), at ev_base + q * VE / 2
    // + m for j = p + 2m; odd for j = 1 - p + 2m, at od_base + q * VE / 2 + m.
    constexpr int kH = VE / 2;
    float ev[kH], od[kH];
    const bool p = (pad_w & 1) != 0;
#pragma unroll
    for (int m = 0; m < kH; ++m) {
      ev[m] = p ? f[2 * m + 1] : f[2 * m];
      od[m] = p ? f[2 * m] : f[2 * m + 1];
    }
    store_floats<kH>(row + s.ev_base + q * kH, ev);
    store_floats<kH>(row + s.od_base + q * kH, od);
  }
}

// Stages the image rows of the block's units (rows outside the image stay zero) with VE-element
// vectors. Index i over (unit, staged row, vector), vectors fastest: a warp reads consecutive
// vectors of a row (coalesced). kBatch loads are issued before their stores.
template <typename T, int kS, int VE, int kBatchBytes = SmallTraits::kBatchBytes,
          int kMaxBatch = SmallTraits::kMaxBatch>
__device__ __forceinline__ void stage_tiles(const ConvProblem& p, const SmallShape& s,
                                            const SmallUnit* units, float* tiles, int tid,
                                            int nthreads) {
  constexpr int kBytes = static_cast<int>(sizeof(T)) * VE;
  constexpr int kBatch = kBatchBytes / kBytes < 1           ? 1
                         : kBatchBytes / kBytes > kMaxBatch ? kMaxBatch
                                                            : kBatchBytes / kBytes;
  const T* x = static_cast<const T*>(p.x);
  const int H = static_cast<int>(p.H);
  const int pad_w = static_cast<int>(p.pad_w);
  const int total = s.upb * s.stage_rows * s.nvr;
#pragma unroll 1
  for (int i0 = tid; i0 < total; i0 += nthreads * kBatch) {
    Vec<T, VE> raw[kBatch];  // as loaded (16-bit: half the registers of floats)
    int dst[kBatch], col[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int i = i0 + b * nthreads;
      dst[b] = -1;
      col[b] = 0;
      if (i < total) {
        const int ur = s.nvr_div.div(i);  // unit row
        const int q = i - ur * s.nvr;
        const int u = s.rows_div.div(ur);
        const int t = s.stage_t0 + (ur - u * s.stage_rows);
        const SmallUnit& d = units[u];
        const int iy = d.iy0 + t;
        if (d.valid && iy >= 0 && iy < H) {
          raw[b] = load_raw<T, VE>(x + d.x_off + iy * p.x_sh +
                                   static_cast<int64_t>(q) * VE * p.x_sw);
          dst[b] = u * s.tile + t * s.pitch;
          col[b] = q;
        }
      }
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      if (dst[b] >= 0) {
        float f[VE];
#pragma unroll
        for (int j = 0; j < VE; ++j) f[j] = to_float(raw[b].v[j]);
        put_cols<kS, VE>(tiles + dst[b], f, col[b], s, pad_w);
      }
    }
  }
}

// kR: output rows per strip (the `rows` small_geometry planned s with).
template <typename T, int kK, int kS, int kR = SmallTraits::kRows>
__global__ void __launch_bounds__(SmallTraits::kMaxThreads, SmallTraits::min_blocks(kK, kR))
    conv2d_depthwise_small_kernel(const ConvProblem p, const SmallShape s) {
  constexpr bool kLong = SmallTraits::long_batch(kK, kR);
  // (16-bit: half the bytes, the same vectors a thread; 128 bytes spilled 92 at 64 registers)
  constexpr int kBB = !kLong ? SmallTraits::kBatchBytes
                             : SmallTraits::kBatchBytesLong / (sizeof(T) == 4 ? 1 : 2);
  constexpr int kMB = kLong ? SmallTraits::kMaxBatchLong : SmallTraits::kMaxBatch;
  static_assert(kS == 1 || kS == 2, "stride 1 or 2");
  extern __shared__ float4 s_dyn[];
  float* tiles = reinterpret_cast<float*>(s_dyn);
  constexpr int kTapsPerUnit = kK * kK + 1;  // the taps, then the bias
  float* s_taps = tiles + s.upb * s.tile;
  SmallUnit* s_unit =
      reinterpret_cast<SmallUnit*>(s_dyn + s.upb * s.tile / 4 + small_taps_vec4(s.upb, kK));
  const int tid = threadIdx.x;
  const int nthreads = blockDim.x;

  // 1. Prologue: zeros (the padding), descriptors; no global memory before the PDL wait.
  {
    const int n4 = s.upb * s.tile / 4;
    const float4 z = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 1
    for (int i = tid; i < n4; i += nthreads) s_dyn[i] = z;
  }
  if (tid < s.upb) {
    SmallUnit d{};
    const int64_t unit = static_cast<int64_t>(blockIdx.x) * s.upb + tid;
    d.valid = unit < s.units;
    if (d.valid) {
      const int64_t plane = unit / s.bands;
      const int band = static_cast<int>(unit - plane * s.bands);
      const int64_t n = plane / p.C;
      d.c = static_cast<int>(plane - n * p.C);
      d.x_off = n * p.x_sn + d.c * p.x_sc;
      d.y_off = n * p.y_sn + d.c * p.y_so;
      d.r_off = n * p.r_sn + d.c * p.r_so;
      d.oy0 = band * s.band_rows;
      d.iy0 = d.oy0 * kS - static_cast<int>(p.pad_h);
    }
    s_unit[tid] = d;
  }
  pdl_wait_then_release();
  __syncthreads();  // descriptors and zeros written

  // 2. Staging, with the units' taps and biases staged beside the input: index j over (unit,
  // tap) takes the taps (kK * kK) then the bias of each unit. A thread's first two are loaded
  // before the input and stored after it (their latency overlaps the input's; every layer of
  // the issue has at most two a thread), any others after the input, one by one.
  auto tap_value = [&](int j) {
    const int uu = j / kTapsPerUnit;
    const int k = j - uu * kTapsPerUnit;
    const SmallUnit& du = s_unit[uu];
    if (!du.valid) return 0.f;
    if (k < kK * kK) {
      const int kh = k / kK, kw = k - kh * kK;
      return to_float(static_cast<const T*>(p.w)[du.c * p.w_so + kh * p.w_sh + kw * p.w_sw]);
    }
    return p.b != nullptr ? to_float(static_cast<const T*>(p.b)[du.c * p.b_s]) : 0.f;
  };
  const int n_taps = s.upb * kTapsPerUnit;
  float tap0 = 0.f, tap1 = 0.f;
  if (tid < n_taps) tap0 = tap_value(tid);
  if (tid + nthreads < n_taps) tap1 = tap_value(tid + nthreads);
  switch (s.ve) {
    case 2: stage_tiles<T, kS, 2, kBB, kMB>(p, s, s_unit, tiles, tid, nthreads); break;
    case 4: stage_tiles<T, kS, 4, kBB, kMB>(p, s, s_unit, tiles, tid, nthreads); break;
    case 8:  // 16-bit only (the host never asks it of fp32)
      if constexpr (sizeof(T) == 2) {
        stage_tiles<T, kS, 8, kBB, kMB>(p, s, s_unit, tiles, tid, nthreads);
      } else {
        stage_tiles<T, kS, 4, kBB, kMB>(p, s, s_unit, tiles, tid, nthreads);
      }
      break;
    default: stage_tiles<T, kS, 1, kBB, kMB>(p, s, s_unit, tiles, tid, nthreads); break;
  }
  if (tid < n_taps) s_taps[tid] = tap0;
  if (tid + nthreads < n_taps) s_taps[tid + nthreads] = tap1;
#pragma unroll 1
  for (int j = tid + 2 * nthreads; j < n_taps; j += nthreads) s_taps[j] = tap_value(j);
  __syncthreads();  // tiles, taps and biases staged

  // This thread's strip: unit u, rows oy_first .. oy_first + kR - 1, column ox.
  const int OH = static_cast<int>(p.OH), OW = static_cast<int>(p.OW);
  const int u = tid / s.tpu;
  if (u >= s.upb) return;
  const int rem = tid - u * s.tpu;
  const int strip = rem / OW;
  const int ox = rem - strip * OW;
  const int oy_first = s_unit[u].oy0 + strip * kR;
  if (!s_unit[u].valid || oy_first >= OH) return;
  float w[kK][kK];
  const float* tp = s_taps + u * kTapsPerUnit;
#pragma unroll
  for (int kh = 0; kh < kK; ++kh)
#pragma unroll
    for (int kw = 0; kw < kK; ++kw) w[kh][kw] = tp[kh * kK + kw];
  const float bias = tp[kK * kK];

  const SmallUnit& d = s_unit[u];
  // The residual of the strip's outputs, loaded before the multiply-adds.
  float res[kR];
#pragma unroll
  for (int i = 0; i < kR; ++i) res[i] = 0.f;
  const bool has_res = p.r != nullptr;
  if (has_res) {
    const T* rp = static_cast<const T*>(p.r) + d.r_off + ox * p.r_sw;
#pragma unroll
    for (int i = 0; i < kR; ++i) {
      const int oy = oy_first + i;
      if (oy < OH) res[i] = to_float(rp[oy * p.r_sh]);
    }
  }

  // 3. Compute. Staged row strip * kR * kS + t of the unit is input row t of the strip; it
  // meets output row i of the strip at filter row t - i * kS.
  float acc[kR];
#pragma unroll
  for (int i = 0; i < kR; ++i) acc[i] = bias;
  const float* base = tiles + u * s.tile + strip * (kR * kS) * s.pitch;
  // stride 1: column ox + kw (+ coff); stride 2: padded column 2 ox + kw, in the even half
  // (kw even) or the odd half (kw odd), at ox + kw / 2.
  const float* re = base + (kS == 1 ? s.coff : s.e_off) + ox;
  const float* ro = base + (kS == 1 ? s.coff : s.half + s.o_off) + ox;
  constexpr int kSteps = (kR - 1) * kS + kK;
#pragma unroll
  for (int t = 0; t < kSteps; ++t) {
    const int off = t * s.pitch;
    float v[kK];
#pragma unroll
    for (int kw = 0; kw < kK; ++kw) {
      if constexpr (kS == 1) {
        v[kw] = re[off + kw];
      } else {
        v[kw] = (kw & 1) ? ro[off + kw / 2] : re[off + kw / 2];
      }
    }
#pragma unroll
    for (int i = 0; i < kR; ++i) {
      const int kh = t - i * kS;
      if (kh < 0 || kh >= kK) continue;
#pragma unroll
      for (int kw = 0; kw < kK; ++kw) acc[i] = fmaf(w[kh][kw], v[kw], acc[i]);
    }
  }

  // 4. Epilogue, specialised per activation (one switch per thread, none per output).
  T* yp = static_cast<T*>(p.y) + d.y_off + ox * p.y_sw;
  with_activation(p.act, [&](auto kind) {
    constexpr int kAct = decltype(kind)::value;
#pragma unroll
    for (int i = 0; i < kR; ++i) {
      const int oy = oy_first + i;
      if (oy >= OH) break;
      const float v = has_res ? acc[i] + res[i] : acc[i];
      yp[oy * p.y_sh] = from_float<T>(activate_k<kAct>(v));
    }
  });
}

// ---- Host planning (torch-free) ----
// Blocks an SM should get at least (where the units allow it, fewer units per block): the
// layers here are latency bound, whole in one or two waves of resident threads; many small
// blocks spread them evenly over the SMs (800 blocks of 224 threads on 132 SMs leave some SMs
// 7 blocks and others 6; 1,600 of 112 threads, 13 against 12) and let a block that waits on
// its loads stand beside others that compute.
constexpr int64_t kSmallBlocksPerSm = 8;
// No block below this many threads (two warps) when units per block are cut for the rule above.
constexpr int kSmallMinBlockThreads = 64;

// Sizes above this are rejected (columns, rows and shared offsets in int; the shared budget
// rejects far smaller ones anyway).
constexpr int64_t kMaxSmallIndex = int64_t{1} << 24;

inline int64_t small_round_up(int64_t a, int64_t m) { return (a + m - 1) / m * m; }

// Shared bytes a unit takes besides its tile: its taps and bias (k * k + 1 floats), its
// descriptor, and 4 bytes of slack (the taps are rounded up to 16 bytes: small_taps_vec4).
inline int64_t small_unit_extra_bytes(int k) {
  return int64_t{k} * k * 4 + 4 + static_cast<int64_t>(sizeof(SmallUnit)) + 4;
}
inline int64_t small_ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The strip height for a shape: kRowsLong for stride 2 (filters 3 and 5, the instances built)
// onto outputs of a multiple of 7 rows from 14 up, else kRows. H100, batch 16, MobileNetV3's
// NCHW stride-2 layers (benchmarks/dw_nchw_layers.py, GPUKERN_SMALL_ROWS=4 / 7, fp32 / bf16 us):
// 240ch 28x28 3x3 7.8 / 8.5 -> 6.4 / 6.7 (with the 3x3 staging batch, long_batch), 64ch
// 112x112 3x3 29.6 / 22.2 -> 26.0 / 18.9, 72ch 56x56 5x5 10.5 / 10.6 -> 8.9 / 9.2; 672ch
// 14x14 5x5 (7 output rows: one strip a plane) ran slower, 10.4 / 10.3 against 9.2 / 9.7.
// `forced` (4 or 7, the GPUKERN_SMALL_ROWS knob) overrides the rule where an instance exists.
inline int small_rows(const ConvProblem& p, long long forced = 0) {
  using Tr = SmallTraits;
  const bool long_ok = p.stride_h == 2 && (p.KH == 3 || p.KH == 5);
  if (forced == Tr::kRows || (forced == Tr::kRowsLong && !long_ok)) return Tr::kRows;
  if (forced == Tr::kRowsLong) return Tr::kRowsLong;
  return long_ok && p.OH % Tr::kRowsLong == 0 && p.OH >= 2 * Tr::kRowsLong ? Tr::kRowsLong
                                                                          : Tr::kRows;
}

// The tile geometry: everything but upb and the staging vector. A pure function of the shape
// and the strip height (can_run's answer with kRows; no device, no pointer). Returns false where
// the kernel does not apply or one strip's tile exceeds the shared budget.
inline bool small_geometry(const ConvProblem& p, SmallShape& s, int rows = SmallTraits::kRows) {
  using Tr = SmallTraits;
  const bool k_ok = p.KH == p.KW && (p.KH == 3 || p.KH == 5 || p.KH == 7);
  const int64_t S = p.stride_h;
  if (!p.depthwise1() || !k_ok || p.stride_h != p.stride_w || (S != 1 && S != 2) ||
      p.dil_h != 1 || p.dil_w != 1 || p.H < 1 || p.W < 1 || p.OH < 1 || p.OW < 1 ||
      p.OW > Tr::kMaxThreads ||
      std::max({p.H, p.W, p.OH * S + p.KH, p.pad_h, p.pad_w}) > kMaxSmallIndex ||
      p.C > std::numeric_limits<int>::max()) {
    return false;
  }
  const int64_t K = p.KH, W = p.W, OW = p.OW, pad = p.pad_w;
  // Staged row layout (depthwise_small.cuh, staging). Rows of 16-bit data staged 8 elements at
  // a time need a pitch that is a multiple of 4 floats; the stride-2 pitch is 2 mod 4 below
  // 32 output columns (so that strips 8 rows apart fall in other banks), which caps the vector
  // at 4 elements there (small_staging_vector).
  int64_t pitch = 0;
  if (S == 1) {
    s.c0 = static_cast<int>(small_round_up(pad, 4));
    s.coff = static_cast<int>(s.c0 - pad);
    pitch = small_round_up(std::max<int64_t>(s.c0 + W, s.coff + OW - 1 + K), 4);
    if (OW < 32 && pitch % 8 == 0) pitch += 4;  // strips 4 rows apart: 16 banks apart
    s.half = s.e_off = s.o_off = s.ev_base = s.od_base = 0;
  } else {
    // Highest padded column read (2 (OW - 1) + K - 1) or staged (W - 1 + pad).
    const int64_t um = std::max<int64_t>(2 * (OW - 1) + K - 1, W - 1 + pad);
    const int64_t half = small_round_up(um / 2 + 4, 4);  // offsets 0..3 + positions 0..um / 2
    s.half = static_cast<int>(half);
    const int ce = static_cast<int>((pad + 1) / 2), fe = static_cast<int>(pad / 2);
    s.e_off = (4 - ce % 4) % 4;
    s.o_off = (4 - fe % 4) % 4;
    s.ev_base = s.e_off + ce;
    s.od_base = s.half + s.o_off + fe;
    pitch = 2 * half + (OW < 32 ? 2 : 0);
    s.c0 = s.coff = 0;
  }
  if (pitch * 4 * K > Tr::kSmemBudget) return false;
  s.pitch = static_cast<int>(pitch);
  auto tile_floats = [&](int64_t strips) {
    return small_round_up(((strips * rows - 1) * S + K) * pitch, 4);
  };
  auto unit_bytes = [&](int64_t strips) {
    return tile_floats(strips) * 4 + small_unit_extra_bytes(static_cast<int>(K));
  };
  // As many strips a unit as the threads allow (whole planes when they fit), within the budget.
  const int64_t strips_total = small_ceil_div(p.OH, rows);
  int64_t strips = std::min<int64_t>(strips_total, Tr::kMaxThreads / OW);
  while (strips > 1 && unit_bytes(strips) > Tr::kSmemBudget) --strips;
  if (unit_bytes(strips) > Tr::kSmemBudget) return false;
  const int64_t bands = small_ceil_div(strips_total, strips);
  strips = small_ceil_div(strips_total, bands);  // evened out: 14 strips in 4 bands -> 4, 4, 4, 2
  const int64_t units = p.N * p.C * bands;
  if (bands > std::numeric_limits<int>::max()) return false;
  s.strips = static_cast<int>(strips);
  s.band_rows = static_cast<int>(strips * rows);
  s.bands = static_cast<int>(bands);
  s.tpu = static_cast<int>(OW * strips);
  s.in_rows = static_cast<int>((strips * rows - 1) * S + K);
  s.tile = static_cast<int>(tile_floats(strips));
  s.units = units;
  s.upb = 1;
  s.ve = 1;
  s.nvr = static_cast<int>(W);
  s.stage_t0 = 0;
  s.stage_rows = s.in_rows;
  return true;
}

// Dynamic shared bytes of a block of upb units: the tiles, the taps and biases, then the
// descriptors.
inline size_t small_smem_bytes_for(const SmallShape& s, int k, int64_t upb) {
  return static_cast<size_t>(upb) * s.tile * sizeof(float) +
         static_cast<size_t>(small_taps_vec4(static_cast<int>(upb), k)) * 16 +
         static_cast<size_t>(upb) * sizeof(SmallUnit);
}

// No resident-block count known (the planning without a device): the rule alone.
struct SmallNoOccupancy {
  int operator()(int /*threads*/, size_t /*smem*/) const { return 0; }
};

// Units per block: as many as the threads (kMaxThreads / tpu), the descriptor table and the
// shared budget allow, fewer where that leaves under kSmallBlocksPerSm blocks an SM, but not below
// kSmallMinBlockThreads threads a block. Then, where `resident(threads, smem)` (blocks of that
// many threads and shared bytes an SM holds at once; 0: unknown) says the grid takes more waves
// of resident blocks than another units-per-block in range would, the nearest one with the
// fewest waves: a layer whose grid overflows one wave by a few blocks runs two block lifetimes
// (MobileNetV3's 16 x 672 x 14 x 14 5x5 stride 2: 1,076 blocks of 160 threads against 1,056
// resident on 132 SMs; 11 units a block instead of 10 make it one wave, fp32 11.3 -> 10.3 us,
// bf16 13.1 -> 10.7 on an H100, h100_dw_nchw_small_{plain,waves}.md; no other MobileNetV3
// layer moved).
template <typename Resident = SmallNoOccupancy>
inline int small_units_per_block(const SmallShape& s, int k, int64_t sms,
                                 const Resident& resident = Resident()) {
  using Tr = SmallTraits;
  const int64_t unit_bytes = int64_t{s.tile} * 4 + small_unit_extra_bytes(k);
  const int64_t hi = std::max<int64_t>(
      1, std::min<int64_t>({Tr::kMaxThreads / s.tpu, Tr::kMaxUnits,
                            Tr::kSmemBudget / unit_bytes}));
  const int64_t lo = std::min<int64_t>(hi, small_ceil_div(kSmallMinBlockThreads, s.tpu));
  const int64_t want = s.units / std::max<int64_t>(1, kSmallBlocksPerSm * sms);
  const int64_t base = std::clamp<int64_t>(want, lo, hi);
  auto waves = [&](int64_t upb) -> int64_t {  // -1: unknown
    const int threads = static_cast<int>(small_round_up(upb * s.tpu, 32));
    const int per_sm = resident(threads, small_smem_bytes_for(s, k, upb));
    if (per_sm <= 0) return -1;
    return small_ceil_div(small_ceil_div(s.units, upb), int64_t{per_sm} * sms);
  };
  int64_t best = base, best_waves = waves(base);
  if (best_waves < 0) return static_cast<int>(base);
  for (int64_t d = 1; base - d >= lo || base + d <= hi; ++d) {
    for (const int64_t upb : {base - d, base + d}) {  // the nearer first, the smaller on ties
      if (upb < lo || upb > hi) continue;
      const int64_t w = waves(upb);
      if (w >= 0 && w < best_waves) best = upb, best_waves = w;
    }
  }
  return static_cast<int>(best);
}

// The staging vector: the most elements (16 bytes at most) that every staged row start, plane
// and image offset and the pointer keep aligned, with W a multiple (a vector never straddles a
// row); 1 (element by element, any strides) otherwise. Stride 2 below 32 output columns: at
// most 4 (its pitch is 2 mod 4 floats).
inline int small_staging_vector(const ConvProblem& p) {
  int v = static_cast<int>(16 / p.elem_size);
  if (p.stride_h == 2 && p.OW < 32) v = std::min(v, 4);
  for (; v >= 2; v /= 2) {
    if (p.W % v == 0 && nchw_vec(p.x, p.N, p.C, p.x_sn, p.x_sc, p.x_sh, p.x_sw, v,
                                 v * p.elem_size)) {
      return v;
    }
  }
  return 1;
}

// upb, the staging vector, the staged rows and the dividers, for a launch on a device of `sms`
// SMs (resident: as in small_units_per_block; stage_every_row: the staging walks every staged
// row, padding included, as before whole planes skipped it; an A/B knob).
template <typename Resident = SmallNoOccupancy>
inline void small_launch_shape(const ConvProblem& p, int64_t sms, SmallShape& s,
                               const Resident& resident = Resident(),
                               bool stage_every_row = false) {
  s.upb = small_units_per_block(s, static_cast<int>(p.KH), sms, resident);
  s.ve = small_staging_vector(p);
  s.nvr = static_cast<int>(p.W / s.ve);
  s.nvr_div = FastDiv(static_cast<uint32_t>(s.nvr));
  // Whole planes (one band): every unit's staged row t is image row t - pad_h, so only the
  // rows t = pad_h .. pad_h + H - 1 (within the tile) are loaded; the index space of the staging
  // loop drops the padding rows (MobileNetV3's 14x14 5x5 stride 2: 14 of 19 staged rows). Bands:
  // every staged row (a band's rows may fall anywhere in the image).
  s.stage_t0 = 0;
  s.stage_rows = s.in_rows;
  if (s.bands == 1 && !stage_every_row) {
    const int64_t t0 = std::min<int64_t>(p.pad_h, s.in_rows);
    const int64_t t1 = std::min<int64_t>(p.pad_h + p.H, s.in_rows);
    s.stage_t0 = static_cast<int>(t0);
    s.stage_rows = static_cast<int>(std::max<int64_t>(t1 - t0, 0));
  }
  s.rows_div = FastDiv(static_cast<uint32_t>(std::max(s.stage_rows, 1)));
}

// Threads a block: upb * tpu rounded up to whole warps.
inline int small_threads(const SmallShape& s) {
  return static_cast<int>(small_round_up(int64_t{s.upb} * s.tpu, 32));
}

// Dynamic shared bytes of the launch (its upb units).
inline size_t small_smem_bytes(const SmallShape& s, int k) {
  return small_smem_bytes_for(s, k, s.upb);
}

}  // namespace conv
}  // namespace gpukern
