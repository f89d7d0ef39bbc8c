// The igemm path's NHWC views and conversions (conv/igemm/nhwc.h).
#include "conv/igemm/nhwc.h"

#if defined(GPUKERN_WITH_CUDA) && defined(GPUKERN_WITH_CUTLASS)
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/core/StorageImpl.h>

#include <algorithm>
#include <iterator>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "conv/igemm/forms.h"
#include "conv/layout.h"
#include "conv/vendor.h"

namespace gpukern {
namespace igemm_forms {

// The (sn, sh, sw) strides of a [N, C, H, W] view t when it can be read or written in place as
// NHWC (channels unit-stride, the other strides and the base 16-byte aligned, each stride at
// least the packed one, as CUTLASS's ConvProblemShape assumes); a size-1 dim's stride, never
// stepped, is replaced by the packed one. Empty when t must be copied.
std::optional<std::array<int64_t, 3>> nhwc_strides(const at::Tensor& t) {
  const int64_t align = kTmaBytes / static_cast<int64_t>(t.element_size());
  if (t.stride(1) != 1 || reinterpret_cast<uintptr_t>(t.const_data_ptr()) % kTmaBytes != 0) {
    return std::nullopt;
  }
  const int64_t sw = t.size(3) == 1 ? t.size(1) : t.stride(3);
  const int64_t sh = t.size(2) == 1 ? t.size(3) * sw : t.stride(2);
  const int64_t sn = t.size(0) == 1 ? t.size(2) * sh : t.stride(0);
  if (sw % align != 0 || sh % align != 0 || sn % align != 0) return std::nullopt;
  if (sw < t.size(1) || sh < t.size(3) * sw || sn < t.size(2) * sh) return std::nullopt;
  return std::array<int64_t, 3>{sn, sh, sw};
}

// t itself when NHWC-usable with C channels, else one conversion into a packed channels_last
// tensor with the channels zero-padded to a multiple of c_multiple (conv/layout.h: a tiled
// transpose, not t.contiguous(ChannelsLast), which keeps a misaligned channels_last view as is
// and permutes NCHW at a fraction of the bandwidth).
// Whether as_nhwc gives t itself.
bool nhwc_in_place(const at::Tensor& t, int64_t c_multiple) {
  return t.size(1) % c_multiple == 0 && nhwc_strides(t).has_value();
}

at::Tensor as_nhwc(const at::Tensor& t, int64_t c_multiple) {
  if (nhwc_in_place(t, c_multiple)) return t;
  return to_nhwc(t, c_multiple);
}

// The filter as as_nhwc makes it, remembered per filter tensor: a model's weights do not change
// from call to call, and converting an NCHW [O, C, KH, KW] filter to OHWI on every call cost
// 2.9-3.5 us for ResNet-50's 64 -> 64 3x3 filter and 8.9-9.0 us for its 512 -> 512 one on an
// H100 (benchmarks/profile_layers.py), as long as a small layer's convolution.
// An entry is the converted copy of one view of one storage (storage, offset, sizes, strides,
// dtype, data pointer) at one version of its version counter, made on one stream: an in-place
// update of the weight bumps the version, `.data =` or `set_` changes the storage or pointer, a
// freed storage fails the weak reference (which also keeps its address from being reused by a
// new storage while the entry lives), and a call on another stream converts again (the copy's
// readiness is ordered on its own stream only). Not cached: inference tensors (no version
// counter: created under torch.inference_mode, their in-place updates are invisible) and calls
// made while the stream is being captured into a CUDA graph (the conversion is then only
// recorded, not run), nor while the conv race times gpukern's side (conv/vendor.h: it times what a
// graph replay costs). Copies of freed weights are dropped at the next insertion. Bounded
// (kMaxFilters entries, kMaxFilterBytes of copies; a full cache starts over); thread-safe.
// convert(): the conversion itself (to_nhwc(w, c_multiple) on some stream), called where the
// cache has no copy.
template <class Convert>
at::Tensor cached_filter(const at::Tensor& w, int64_t c_multiple, Convert&& convert) {
  constexpr size_t kMaxFilters = 256;
  constexpr int64_t kMaxFilterBytes = int64_t{256} << 20;
  if (w.is_inference()) return convert();
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream(w.device().index()).stream();
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess ||
      capture != cudaStreamCaptureStatusNone || conv_race_timing_ours()) {
    (void)cudaGetLastError();
    return convert();
  }
  // What a copy is of (every field but the version).
  struct View {
    int64_t offset;
    std::vector<int64_t> sizes, strides;
    at::ScalarType dtype;
    const void* data;
    int64_t c_multiple;
    cudaStream_t stream;
    bool operator==(const View& o) const {
      return offset == o.offset && sizes == o.sizes && strides == o.strides &&
             dtype == o.dtype && data == o.data && c_multiple == o.c_multiple &&
             stream == o.stream;
    }
  };
  struct Entry {
    c10::weak_intrusive_ptr<c10::StorageImpl> storage;
    View view;
    uint32_t version;
    at::Tensor converted;
  };
  static std::mutex mu;
  static std::unordered_map<const c10::StorageImpl*, std::vector<Entry>> cache;
  static int64_t bytes = 0;
  const c10::StorageImpl* impl = w.storage().unsafeGetStorageImpl();
  const View view{w.storage_offset(), w.sizes().vec(), w.strides().vec(), w.scalar_type(),
                  w.const_data_ptr(), c_multiple, stream};
  const uint32_t version = w.unsafeGetTensorImpl()->version_counter().current_version();
  {
    const std::lock_guard<std::mutex> lock(mu);
    const auto it = cache.find(impl);
    if (it != cache.end()) {
      for (const Entry& e : it->second) {
        if (!e.storage.expired() && e.view == view && e.version == version) return e.converted;
      }
    }
  }
  at::Tensor converted = convert();
  auto nbytes = [](const at::Tensor& t) {
    return t.numel() * static_cast<int64_t>(t.element_size());
  };
  const std::lock_guard<std::mutex> lock(mu);
  // Dropped: copies of freed storages (their memory goes back at once, not when the cache fills)
  // and an older version of this view.
  size_t entries = 0;
  for (auto it = cache.begin(); it != cache.end();) {
    auto& list = it->second;
    list.erase(std::remove_if(list.begin(), list.end(),
                              [&](const Entry& e) {
                                const bool drop = e.storage.expired() ||
                                                  (it->first == impl && e.view == view);
                                if (drop) bytes -= nbytes(e.converted);
                                return drop;
                              }),
               list.end());
    entries += list.size();
    it = list.empty() ? cache.erase(it) : std::next(it);
  }
  if (entries >= kMaxFilters || bytes + nbytes(converted) > kMaxFilterBytes) {
    cache.clear();
    bytes = 0;
  }
  cache[impl].push_back(Entry{w.storage().getWeakStorageImpl(), view, version, converted});
  bytes += nbytes(converted);
  return converted;
}

at::Tensor cached_nhwc_filter(const at::Tensor& w, int64_t c_multiple) {
  if (nhwc_in_place(w, c_multiple)) return w;
  return cached_filter(w, c_multiple, [&] { return to_nhwc(w, c_multiple); });
}

std::pair<at::Tensor, at::Tensor> nhwc_operands(const at::Tensor& x, const at::Tensor& w,
                                                int64_t x_multiple, int64_t w_multiple) {
  if (nhwc_in_place(x, x_multiple)) return {x, cached_nhwc_filter(w, w_multiple)};
  if (nhwc_in_place(w, w_multiple)) return {to_nhwc(x, x_multiple), w};
  at::Tensor xc;
  const at::Tensor wc = cached_filter(w, w_multiple, [&] {
    // Fork: the filter's conversion on a pool stream, x's on the current one; join before the
    // caller's kernel. Both results are allocated on the current stream (to_nhwc's overload),
    // so their memory is ordered by it alone.
    const c10::DeviceIndex dev = x.device().index();
    const at::cuda::CUDAStream cur = at::cuda::getCurrentCUDAStream(dev);
    const at::cuda::CUDAStream side = at::cuda::getStreamFromPool(false, dev);
    at::cuda::CUDAEvent fork, join;
    fork.record(cur);
    fork.block(side);
    at::Tensor converted = to_nhwc(w, w_multiple, side.stream());
    join.record(side);
    xc = to_nhwc(x, x_multiple);
    join.block(cur);
    return converted;
  });
  if (!xc.defined()) xc = to_nhwc(x, x_multiple);  // the filter was a cached copy
  return {xc, wc};
}

}  // namespace igemm_forms
}  // namespace gpukern

#endif  // GPUKERN_WITH_CUDA && GPUKERN_WITH_CUTLASS
