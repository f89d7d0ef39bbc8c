// CPU model of conv2d_depthwise_small_kernel (csrc/conv/direct/depthwise_small.cuh): the kernel's
// own source compiled by a host compiler, one std::thread per CUDA thread of a block, std::barrier
// for __syncthreads, the dynamic shared memory a global array (filled with garbage before each
// block: the kernel must write what it reads), the host planning (small_geometry,
// small_launch_shape) as the extension runs it for 132 SMs. Each case is compared with a float64
// loop (bias, residual, activation). Checks the index arithmetic, the staging layouts and the
// padding without a GPU; says nothing about races the barriers would not order, or timing.
//
//   g++ -std=c++20 -O1 -w -Icsrc -I/usr/local/cuda/include tests/cpu_model/depthwise_small.cpp \
//       -o /tmp/dw_small_model -lpthread && /tmp/dw_small_model
//
// (about 1.5 minutes on 2 cores; exit status 1 on a mismatch). To also check the alignment of
// every vector access, add a test of the pointer to load_raw / store_floats in a copy of the
// header (the host does not fault on a misaligned access).
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <vector_types.h>
#include <vector_functions.h>
#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>
#include <functional>

struct SimIdx { unsigned x = 0, y = 0, z = 0; };
thread_local SimIdx sim_threadIdx;
SimIdx sim_blockIdx, sim_blockDim;
std::barrier<>* g_bar = nullptr;
inline void __syncthreads() { g_bar->arrive_and_wait(); }
inline unsigned __umulhi(unsigned a, unsigned b) {
  return (unsigned)(((unsigned long long)a * b) >> 32);
}
#define __launch_bounds__(...)
#define threadIdx sim_threadIdx
#define blockIdx sim_blockIdx
#define blockDim sim_blockDim

#include "conv/direct/depthwise_small.cuh"

namespace gpukern { namespace conv { alignas(16) float4 s_dyn[64 * 1024 / 16]; } }

using namespace gpukern;

template <typename T> T cvt(float f);
template <> float cvt<float>(float f) { return f; }
template <> __half cvt<__half>(float f) { return __float2half_rn(f); }
template <> __nv_bfloat16 cvt<__nv_bfloat16>(float f) { return __float2bfloat16_rn(f); }
float back(float f) { return f; }
float back(__half h) { return __half2float(h); }
float back(__nv_bfloat16 h) { return __bfloat162float(h); }

double act_ref(int a, double v) {
  switch (a) {
    case 1: return v < 0 ? 0 : v;
    case 2: return v < 0 ? 0 : (v > 6 ? 6 : v);
    case 3: return v / (1 + std::exp(-v));
    case 4: return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    case 5: return 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
    case 6: { double t = v + 3; t = t < 0 ? 0 : (t > 6 ? 6 : t); return v * t / 6; }
    case 7: return 1 / (1 + std::exp(-v));
    default: return v;
  }
}

// layout: 0 NCHW contiguous, 1 channels_last, 2 view inside a bigger NCHW tensor (pitched rows,
// channel slice), 3 NCHW at a storage offset of `shift` elements.
struct Layout { int kind; int shift; };

template <typename T>
struct Tensor4 {
  std::vector<T> buf;
  int64_t off = 0, sn, sc, sh, sw;
  T* data() { return buf.data() + off; }
};

template <typename T>
Tensor4<T> make_tensor(int N, int C, int H, int W, Layout L, std::mt19937& g, bool fill) {
  Tensor4<T> t;
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  if (L.kind == 0 || L.kind == 3) {
    t.sw = 1; t.sh = W; t.sc = (int64_t)H * W; t.sn = (int64_t)C * H * W;
    t.off = L.kind == 3 ? L.shift : 0;
    t.buf.resize(t.off + (size_t)N * C * H * W + 8);
  } else if (L.kind == 1) {
    t.sc = 1; t.sw = C; t.sh = (int64_t)W * C; t.sn = (int64_t)H * W * C;
    t.buf.resize((size_t)N * C * H * W + 8);
  } else {
    const int C2 = C + 1, H2 = H + 2, W2 = W + 5;
    t.sw = 1; t.sh = W2; t.sc = (int64_t)H2 * W2; t.sn = (int64_t)C2 * H2 * W2;
    t.off = t.sc + t.sh + 3;
    t.buf.resize((size_t)N * C2 * H2 * W2 + 8);
  }
  for (auto& v : t.buf) v = cvt<T>(fill ? d(g) : 12345.f);  // outputs: a marker
  return t;
}

static int g_fail = 0, g_cases = 0;
static int g_ve_hist[5][9][3];

template <typename T, int K, int S, int R = conv::SmallTraits::kRows>
void run_case(int N, int C, int H, int W, int ph, int pw, Layout xl, Layout yl, bool bias,
              bool resid, int act, uint32_t seed) {
  std::mt19937 g(seed);
  const int OH = (H + 2 * ph - K) / S + 1, OW = (W + 2 * pw - K) / S + 1;
  if (OH < 1 || OW < 1) return;
  auto x = make_tensor<T>(N, C, H, W, xl, g, true);
  auto y = make_tensor<T>(N, C, OH, OW, yl, g, false);
  auto r = make_tensor<T>(N, C, OH, OW, Layout{yl.kind == 1 ? 0 : 1, 0}, g, true);
  std::vector<T> w((size_t)C * K * K), b(C);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  for (auto& v : w) v = cvt<T>(d(g));
  for (auto& v : b) v = cvt<T>(d(g));
  ConvProblem p;
  p.N = N; p.C = C; p.H = H; p.W = W; p.O = C; p.KH = K; p.KW = K; p.OH = OH; p.OW = OW;
  p.groups = C; p.c_per_group = 1; p.o_per_group = 1; p.stride_h = S; p.stride_w = S;
  p.pad_h = ph; p.pad_w = pw;
  p.x_sn = x.sn; p.x_sc = x.sc; p.x_sh = x.sh; p.x_sw = x.sw;
  p.w_so = K * K; p.w_sc = K * K; p.w_sh = K; p.w_sw = 1; p.b_s = 1;
  p.y_sn = y.sn; p.y_so = y.sc; p.y_sh = y.sh; p.y_sw = y.sw;
  p.elem_size = sizeof(T);
  p.x = x.data(); p.w = w.data(); p.b = bias ? b.data() : nullptr; p.y = y.data();
  p.act = act;
  p.r = resid ? r.data() : nullptr;
  p.r_sn = r.sn; p.r_so = r.sc; p.r_sh = r.sh; p.r_sw = r.sw;
  conv::SmallShape s;
  ++g_cases;
  if (!conv::small_geometry(p, s, R)) {
    std::printf("REFUSED N%d C%d %dx%d K%d S%d p%d,%d\n", N, C, H, W, K, S, ph, pw);
    return;
  }
  // The resident blocks an SM holds, modelled as threads and shared memory alone (the extension
  // asks the runtime for the registers' limit): units per block then follow the waves rule.
  conv::small_launch_shape(p, 132, s, [](int threads, size_t smem) {
    return std::max(1, std::min(2048 / threads, static_cast<int>(233472 / (smem + 1024))));
  });
  const int threads = conv::small_threads(s);
  const size_t smem = conv::small_smem_bytes(s, K);
  g_ve_hist[sizeof(T)][s.ve][S]++;
  if (smem > sizeof(conv::s_dyn)) { std::printf("SMEM %zu\n", smem); ++g_fail; return; }
  const int64_t blocks = (s.units + s.upb - 1) / s.upb;
  sim_blockDim.x = threads;
  for (int64_t blk = 0; blk < blocks; ++blk) {
    sim_blockIdx.x = (unsigned)blk;
    std::memset(conv::s_dyn, 0x7f, smem);  // garbage: the kernel must zero what it reads
    std::barrier<> bar(threads);
    g_bar = &bar;
    std::vector<std::thread> th;
    th.reserve(threads);
    for (int t = 0; t < threads; ++t) {
      th.emplace_back([&, t] {
        sim_threadIdx.x = t;
        conv::conv2d_depthwise_small_kernel<T, K, S, R>(p, s);
      });
    }
    for (auto& t : th) t.join();
  }
  // reference
  double max_err = 0, max_ref = 0;
  int bad = 0;
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c)
      for (int oy = 0; oy < OH; ++oy)
        for (int ox = 0; ox < OW; ++ox) {
          double acc = bias ? back(b[c]) : 0.0;
          for (int kh = 0; kh < K; ++kh)
            for (int kw = 0; kw < K; ++kw) {
              const int iy = oy * S - ph + kh, ix = ox * S - pw + kw;
              if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
              acc += (double)back(w[(size_t)c * K * K + kh * K + kw]) *
                     back(x.data()[n * x.sn + c * x.sc + iy * x.sh + ix * x.sw]);
            }
          if (resid) acc += back(r.data()[n * r.sn + c * r.sc + oy * r.sh + ox * r.sw]);
          acc = act_ref(act, acc);
          const double got = back(y.data()[n * y.sn + c * y.sc + oy * y.sh + ox * y.sw]);
          const double e = std::fabs(got - acc);
          const double tol = sizeof(T) == 4 ? 1e-4 * (1 + std::fabs(acc)) : 1.6e-2 * (1 + std::fabs(acc));
          if (!(e <= tol)) {
            if (bad < 3)
              std::printf("  mismatch n%d c%d (%d,%d): got %g want %g\n", n, c, oy, ox, got, acc);
            ++bad;
          }
          max_err = std::max(max_err, e);
          max_ref = std::max(max_ref, std::fabs(acc));
        }
  // untouched elements outside the output view keep the marker (only for view layouts)
  if (bad) {
    ++g_fail;
    std::printf("FAIL T%zu N%d C%d %dx%d K%d S%d p%d,%d xl%d/%d yl%d bias%d res%d act%d: %d bad, "
                "upb %d ve %d tpu %d strips %d bands %d pitch %d\n",
                sizeof(T), N, C, H, W, K, S, ph, pw, xl.kind, xl.shift, yl.kind, bias, resid, act,
                bad, s.upb, s.ve, s.tpu, s.strips, s.bands, s.pitch);
  }
}

template <typename T, int K, int S, int R = conv::SmallTraits::kRows>
void sweep(uint32_t& seed) {
  const int sizes[][2] = {{1, 1}, {2, 3}, {7, 7}, {13, 13}, {14, 14}, {28, 28}, {29, 31}, {56, 56}};
  const int chans[] = {1, 3, 16, 5};
  int i = 0;
  for (auto& hw : sizes) {
    for (int pad = 0; pad <= K / 2 + 1; ++pad) {
      const int ph = pad, pw = (i % 3 == 0) ? K / 2 : pad;
      const int C = chans[i % 4];
      const int N = (i % 2) ? 1 : 3;
      Layout xl{i % 4, (i % 4 == 3) ? 1 + (i % 3) : 0};
      Layout yl{(i % 5 == 0) ? 1 : 0, 0};
      run_case<T, K, S, R>(N, C, hw[0], hw[1], ph, pw, xl, yl, i % 2 == 0, i % 3 == 1, i % 8,
                           seed++);
      ++i;
    }
  }
}

template <typename T, int K, int S>
void vsweep(uint32_t& seed) {
  const int sizes[][2] = {{8, 8}, {14, 14}, {16, 24}, {28, 28}, {56, 56}, {32, 64}, {112, 112}, {4, 8}};
  int i = 0;
  for (auto& hw : sizes)
    for (int pad : {K / 2, 0, 1, K / 2 + 1}) {
      run_case<T, K, S>(2, 3, hw[0], hw[1], pad, (i % 2) ? pad : K / 2, {0, 0}, {0, 0}, true, i % 3 == 0, i % 8, seed++);
      ++i;
    }
}

int main(int argc, char** argv) {
  uint32_t seed = 1;
  vsweep<float, 3, 1>(seed); vsweep<float, 3, 2>(seed); vsweep<float, 5, 1>(seed); vsweep<float, 5, 2>(seed);
  vsweep<float, 7, 1>(seed); vsweep<float, 7, 2>(seed);
  vsweep<__nv_bfloat16, 3, 1>(seed); vsweep<__nv_bfloat16, 3, 2>(seed); vsweep<__nv_bfloat16, 5, 1>(seed);
  vsweep<__nv_bfloat16, 5, 2>(seed); vsweep<__nv_bfloat16, 7, 2>(seed);
  vsweep<__half, 3, 2>(seed); vsweep<__half, 5, 1>(seed);
  std::printf("vector sweep: %d cases, %d failures\n", g_cases, g_fail);
  for (int e : {2, 4}) for (int v : {1, 2, 4, 8}) for (int st : {1, 2})
    std::printf("elem %d ve %d stride %d: %d\n", e, v, st, g_ve_hist[e][v][st]);
  sweep<float, 3, 1>(seed); sweep<float, 3, 2>(seed);
  sweep<float, 5, 1>(seed); sweep<float, 5, 2>(seed);
  sweep<float, 7, 1>(seed); sweep<float, 7, 2>(seed);
  std::printf("fp32 done: %d cases, %d failures\n", g_cases, g_fail);
  sweep<__nv_bfloat16, 3, 1>(seed); sweep<__nv_bfloat16, 3, 2>(seed);
  sweep<__nv_bfloat16, 5, 1>(seed); sweep<__nv_bfloat16, 5, 2>(seed);
  sweep<__nv_bfloat16, 7, 1>(seed); sweep<__nv_bfloat16, 7, 2>(seed);
  sweep<__half, 3, 1>(seed); sweep<__half, 3, 2>(seed);
  sweep<__half, 5, 2>(seed); sweep<__half, 7, 1>(seed);
  // 7-row strips (stride 2, filters 3 and 5: conv::small_rows)
  constexpr int kL = conv::SmallTraits::kRowsLong;
  sweep<float, 3, 2, kL>(seed); sweep<float, 5, 2, kL>(seed);
  sweep<__nv_bfloat16, 3, 2, kL>(seed); sweep<__half, 5, 2, kL>(seed);
  run_case<float, 3, 2, kL>(2, 24, 28, 28, 1, 1, {0, 0}, {0, 0}, true, false, 0, seed++);
  run_case<__nv_bfloat16, 5, 2, kL>(2, 67, 14, 14, 2, 2, {0, 0}, {0, 0}, true, true, 3, seed++);
  run_case<float, 3, 2, kL>(1, 2, 130, 257, 1, 1, {0, 0}, {0, 0}, true, false, 0, seed++);
  std::printf("7-row strips done: %d cases, %d failures\n", g_cases, g_fail);
  // the census layers, reduced batch / channels
  run_case<float, 3, 2>(1, 2, 112, 112, 1, 1, {0, 0}, {0, 0}, true, false, 0, seed++);
  run_case<__nv_bfloat16, 3, 2>(1, 2, 112, 112, 1, 1, {0, 0}, {0, 0}, true, true, 6, seed++);
  run_case<float, 5, 2>(2, 3, 56, 56, 2, 2, {0, 0}, {0, 0}, true, false, 0, seed++);
  run_case<__nv_bfloat16, 5, 2>(2, 3, 56, 56, 2, 2, {0, 0}, {0, 0}, true, false, 3, seed++);
  run_case<float, 3, 2>(2, 24, 28, 28, 1, 1, {0, 0}, {0, 0}, true, false, 0, seed++);
  run_case<__nv_bfloat16, 3, 2>(2, 24, 28, 28, 1, 1, {0, 0}, {0, 0}, true, false, 0, seed++);
  run_case<float, 3, 1>(3, 40, 14, 14, 1, 1, {0, 0}, {0, 0}, true, true, 6, seed++);
  run_case<__nv_bfloat16, 3, 1>(3, 40, 14, 14, 1, 1, {0, 0}, {0, 0}, true, false, 0, seed++);
  run_case<float, 5, 2>(2, 67, 14, 14, 2, 2, {0, 0}, {0, 0}, true, false, 0, seed++);
  run_case<__nv_bfloat16, 5, 2>(2, 67, 14, 14, 2, 2, {0, 0}, {0, 0}, true, true, 3, seed++);
  run_case<float, 5, 1>(2, 96, 7, 7, 2, 2, {0, 0}, {0, 0}, true, false, 0, seed++);
  run_case<__nv_bfloat16, 5, 1>(2, 96, 7, 7, 2, 2, {0, 0}, {0, 0}, true, true, 1, seed++);
  run_case<__half, 5, 1>(1, 96, 7, 7, 2, 2, {3, 2}, {0, 0}, true, true, 1, seed++);
  // tiles: several bands per plane, tall narrow, wide
  run_case<float, 3, 2>(1, 2, 130, 257, 1, 1, {0, 0}, {0, 0}, true, false, 0, seed++);
  run_case<float, 7, 2>(1, 2, 113, 112, 3, 3, {0, 0}, {0, 0}, true, false, 0, seed++);
  run_case<float, 5, 1>(1, 1, 300, 40, 2, 2, {0, 0}, {0, 0}, true, false, 0, seed++);
  run_case<__nv_bfloat16, 7, 2>(1, 4, 1000, 9, 3, 3, {0, 0}, {0, 0}, true, false, 0, seed++);
  run_case<float, 7, 1>(1, 2, 70, 140, 3, 0, {0, 0}, {0, 0}, true, false, 0, seed++);
  run_case<float, 5, 2>(2, 16, 35, 131, 0, 2, {0, 0}, {0, 0}, true, false, 0, seed++);
  run_case<__nv_bfloat16, 3, 1>(1, 3, 20, 256, 1, 1, {0, 0}, {0, 0}, true, false, 0, seed++);
  run_case<__nv_bfloat16, 3, 2>(1, 3, 20, 512, 1, 1, {0, 0}, {1, 0}, true, true, 2, seed++);
  run_case<float, 3, 1>(1, 3, 9, 9, 5, 4, {0, 0}, {0, 0}, true, false, 0, seed++);  // pad > K
  std::printf("all done: %d cases, %d failures\n", g_cases, g_fail);
  return g_fail != 0;
}
