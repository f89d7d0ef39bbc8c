// Reductions on the CPU: the reference kernels (an odometer over the reduced dims, blocked
// float sums, reproducible chunking of a single long output).
#include "reduce/cpu.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/dispatch.h"

namespace gpukern {
namespace {

struct CpuSum {
  template <typename A>
  A operator()(A a, A b) const {
    return a + b;
  }
  template <typename A>
  static A identity() {
    return A(0);
  }
};
struct CpuMax {
  template <typename A>
  A operator()(A a, A b) const {
    return (a != a || a > b) ? a : b;
  }
  template <typename A>
  static A identity() {
    return -std::numeric_limits<A>::infinity();
  }
};
struct CpuMin {
  template <typename A>
  A operator()(A a, A b) const {
    return (a != a || a < b) ? a : b;
  }
  template <typename A>
  static A identity() {
    return std::numeric_limits<A>::infinity();
  }
};

// Reduced elements [r0, r1) of one output, walked with an odometer over the reduced dims. Float
// sums are accumulated in blocks of kBlock elements (partial sum per block, then the blocks), which
// keeps the rounding error near (kBlock + R / kBlock) ulp instead of R ulp.
template <typename T, typename A, typename Op>
A cpu_reduce_range(const T* base, const ReduceLayout& L, int64_t r0, int64_t r1, Op op) {
  constexpr int64_t kBlock = 1024;
  int64_t idx[ReduceLayout::kMaxDims];
  int64_t off = 0;
  {
    int64_t t = r0;
    for (int d = L.nr - 1; d >= 0; --d) {
      idx[d] = t % L.rsize[d];
      t /= L.rsize[d];
      off += idx[d] * L.rstride[d];
    }
  }
  const int inner = L.nr - 1;
  const int64_t inner_size = L.rsize[inner];
  const int64_t inner_stride = L.rstride[inner];
  A total = Op::template identity<A>();
  A part = Op::template identity<A>();
  int64_t in_part = 0;
  int64_t r = r0;
  while (r < r1) {
    const int64_t count = std::min(inner_size - idx[inner], r1 - r);
    for (int64_t j = 0; j < count; ++j) {
      part = op(part, static_cast<A>(base[off + j * inner_stride]));
      if (++in_part == kBlock) {
        total = op(total, part);
        part = Op::template identity<A>();
        in_part = 0;
      }
    }
    r += count;
    idx[inner] += count;
    off += count * inner_stride;
    for (int d = inner; d > 0 && idx[d] == L.rsize[d]; --d) {
      off -= L.rsize[d] * L.rstride[d];
      idx[d] = 0;
      ++idx[d - 1];
      off += L.rstride[d - 1];
    }
  }
  return op(total, part);
}

template <typename A>
void cpu_store(const at::Tensor& out, int64_t o, A v) {
  switch (out.scalar_type()) {
    case at::kFloat:
      out.data_ptr<float>()[o] = static_cast<float>(v);
      break;
    case at::kDouble:
      out.data_ptr<double>()[o] = static_cast<double>(v);
      break;
    case at::kHalf:
      out.data_ptr<at::Half>()[o] = static_cast<at::Half>(static_cast<float>(v));
      break;
    case at::kBFloat16:
      out.data_ptr<at::BFloat16>()[o] = static_cast<at::BFloat16>(static_cast<float>(v));
      break;
    case at::kLong:
      out.data_ptr<int64_t>()[o] = static_cast<int64_t>(v);
      break;
    default:
      TORCH_CHECK(false, "gpukern: unexpected reduction output dtype ", out.scalar_type());
  }
}

// One output per task when there are many; a single output is split into fixed chunks of R
// (independent of the thread count) combined in order, so results are reproducible.
template <typename T, typename A, typename Op>
void cpu_reduce(const at::Tensor& x, const at::Tensor& out, const ReduceLayout& L, Op op,
                double scale) {
  const T* xp = x.data_ptr<T>();
  auto finish = [&](int64_t o, A v) {
    if (scale != 1.0) v = static_cast<A>(v * static_cast<A>(scale));
    cpu_store<A>(out, o, v);
  };
  constexpr int64_t kChunk = 1 << 15;
  if (L.n_out == 1 && L.R > kChunk) {
    const int64_t nchunks = (L.R + kChunk - 1) / kChunk;
    std::vector<A> parts(static_cast<size_t>(nchunks));
    at::parallel_for(0, nchunks, 1, [&](int64_t b, int64_t e) {
      for (int64_t c = b; c < e; ++c) {
        parts[c] = cpu_reduce_range<T, A, Op>(xp, L, c * kChunk, std::min(L.R, (c + 1) * kChunk),
                                              op);
      }
    });
    A v = Op::template identity<A>();
    for (auto p : parts) v = op(v, p);
    finish(0, v);
    return;
  }
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(L.R, 1));
  at::parallel_for(0, L.n_out, grain, [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) {
      const T* base = xp + offset_of(o, L.nk, L.ksize, L.kstride);
      finish(o, cpu_reduce_range<T, A, Op>(base, L, 0, L.R, op));
    }
  });
}

}  // namespace

void reduce_cpu(const ReduceLayout& L, ReduceKind kind, const at::Tensor& x,
                const at::Tensor& out) {
  const auto st = x.scalar_type();
  if (at::isIntegralType(st, /*includeBool=*/true)) {
    switch (st) {
      case at::kBool:
        return cpu_reduce<bool, int64_t>(x, out, L, CpuSum{}, 1.0);
      case at::kByte:
        return cpu_reduce<uint8_t, int64_t>(x, out, L, CpuSum{}, 1.0);
      case at::kChar:
        return cpu_reduce<int8_t, int64_t>(x, out, L, CpuSum{}, 1.0);
      case at::kShort:
        return cpu_reduce<int16_t, int64_t>(x, out, L, CpuSum{}, 1.0);
      case at::kInt:
        return cpu_reduce<int32_t, int64_t>(x, out, L, CpuSum{}, 1.0);
      case at::kLong:
        return cpu_reduce<int64_t, int64_t>(x, out, L, CpuSum{}, 1.0);
      // Unsigned: summed modulo 2^64 in int64, as torch.sum (which casts them to int64 first).
      case at::kUInt16:
        return cpu_reduce<uint16_t, int64_t>(x, out, L, CpuSum{}, 1.0);
      case at::kUInt32:
        return cpu_reduce<uint32_t, int64_t>(x, out, L, CpuSum{}, 1.0);
      case at::kUInt64:
        return cpu_reduce<uint64_t, int64_t>(x, out, L, CpuSum{}, 1.0);
      default:
        TORCH_CHECK(false, "gpukern::sum: unsupported integer dtype ", st);
    }
  }
  GK_DISPATCH_FLOAT_CPU(st, kind_name(kind), [&] {
    using A = cpu_acc_t<scalar_t>;
    switch (kind) {
      case ReduceKind::kSum:
        cpu_reduce<scalar_t, A>(x, out, L, CpuSum{}, 1.0);
        break;
      case ReduceKind::kMean:
        cpu_reduce<scalar_t, A>(x, out, L, CpuSum{}, 1.0 / static_cast<double>(L.R));
        break;
      case ReduceKind::kMax:
        cpu_reduce<scalar_t, A>(x, out, L, CpuMax{}, 1.0);
        break;
      case ReduceKind::kMin:
        cpu_reduce<scalar_t, A>(x, out, L, CpuMin{}, 1.0);
        break;
    }
  });
}

}  // namespace gpukern
