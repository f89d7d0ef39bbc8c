#pragma once
// Tensor-memory-accelerator primitives (sm_90+), torch-free: shared-memory mbarriers, tiled
// tensor loads (cp.async.bulk.tensor) described by a CUtensorMap the host encoded
// (cuTensorMapEncodeTiled), and plain contiguous bulk copies (cp.async.bulk) both ways.
// Out-of-bounds box elements land as zeros, so a stencil's halo and padding cost nothing. Every
// function compiles on older architectures to a trap (the host only chooses TMA kernels on sm_90+).
#include <cuda.h>

#include <cstdint>

namespace gpukern {
namespace tma {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define GK_TMA_ASM(...) asm volatile(__VA_ARGS__)
#else
#define GK_TMA_ASM(...) __trap()
#endif

// One barrier expecting `count` arrivals per phase.
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  GK_TMA_ASM("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

// Makes initialised barriers visible to the async proxy (the TMA unit); a block barrier follows.
__device__ __forceinline__ void fence_mbar_init() {
  GK_TMA_ASM("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// Orders this thread's earlier generic-proxy shared-memory accesses before later async-proxy
// ones (a TMA refill of a slot the block just read or wrote).
__device__ __forceinline__ void fence_proxy_async() {
  GK_TMA_ASM("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// A 4-byte shared store where `pred`, kept in program order with the inline-asm shared accesses
// around it (ldmatrix, bulk copies): the compiler does not move it across them.
__device__ __forceinline__ void st_shared_b32_if(uint32_t addr, uint32_t v, bool pred) {
  GK_TMA_ASM(
      "{\n .reg .pred p;\n setp.ne.u32 p, %2, 0;\n @p st.shared.b32 [%0], %1;\n}\n" ::"r"(addr),
      "r"(v), "r"(static_cast<uint32_t>(pred))
      : "memory");
}

// One arrival that also announces `bytes` of transactions the phase must wait for.
__device__ __forceinline__ void arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  GK_TMA_ASM("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
             : "memory");
}

// One arrival with no transactions (a phase that carries no copy).
__device__ __forceinline__ void arrive(uint32_t bar) {
  GK_TMA_ASM("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

// Whether the barrier's phase with the given parity has completed (no waiting; acquire when
// it has).
__device__ __forceinline__ bool test_parity(uint32_t bar, uint32_t parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  uint32_t done = 0;
  asm volatile(
      "{\n.reg .pred p;\nmbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
#else
  __trap();
  return false;
#endif
}

// Spins until the barrier's phase with the given parity has completed.
__device__ __forceinline__ void wait_parity(uint32_t bar, uint32_t parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
#else
  __trap();
#endif
}

// The box at coordinates (c0 innermost .. c3) of a 4-D map into shared memory at dst (128-byte
// aligned), completing `box bytes` of transactions on bar.
__device__ __forceinline__ void load_4d(uint32_t dst, const CUtensorMap* map, int c0, int c1,
                                        int c2, int c3, uint32_t bar) {
  GK_TMA_ASM(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
      : "memory");
}

// `bytes` contiguous bytes (a multiple of 16; src and dst 16-byte aligned) from global memory
// into shared memory at dst, completing that many bytes of transactions on bar.
__device__ __forceinline__ void load_bulk(uint32_t dst, const void* src, uint32_t bytes,
                                          uint32_t bar) {
  GK_TMA_ASM(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
      ::"r"(dst), "l"(reinterpret_cast<uint64_t>(src)), "r"(bytes), "r"(bar)
      : "memory");
}

// `bytes` contiguous bytes (a multiple of 16; both 16-byte aligned) from shared memory at src to
// global memory, in this thread's current bulk group (the writes to src must be ordered before
// it: fence_proxy_async, then the threads' barrier).
__device__ __forceinline__ void store_bulk(void* dst, uint32_t src, uint32_t bytes) {
  GK_TMA_ASM("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(
                 reinterpret_cast<uint64_t>(dst)),
             "r"(src), "r"(bytes)
             : "memory");
}
// Closes this thread's current bulk group.
__device__ __forceinline__ void bulk_commit() {
  GK_TMA_ASM("cp.async.bulk.commit_group;\n" ::: "memory");
}
// Waits until at most kPending of this thread's bulk groups still read their shared sources.
template <int kPending>
__device__ __forceinline__ void bulk_wait_read() {
  GK_TMA_ASM("cp.async.bulk.wait_group.read %0;\n" ::"n"(kPending) : "memory");
}

// Waits until this thread's bulk groups but the newest kPending are complete: their writes to
// global memory are done (the proxy fence after it orders them before this thread's own).
template <int kPending>
__device__ __forceinline__ void bulk_wait() {
  GK_TMA_ASM("cp.async.bulk.wait_group %0;\n" ::"n"(kPending) : "memory");
}
// Orders this thread's async-proxy accesses (all state spaces) with its generic ones after it.
__device__ __forceinline__ void fence_proxy_async_all() {
  GK_TMA_ASM("fence.proxy.async;\n" ::: "memory");
}

// Adds 1 to a shared counter and returns its previous value, with acquire-release ordering at
// block scope: the block's threads that arrived before saw their reads of a slot ordered before
// the last arrival, which then refills it (after fence_proxy_async).
__device__ __forceinline__ uint32_t count_arrival(uint32_t counter) {
  uint32_t old = 0;
  GK_TMA_ASM("atom.acq_rel.cta.shared::cta.add.u32 %0, [%1], 1;\n"
             : "=r"(old)
             : "r"(counter)
             : "memory");
  return old;
}
#undef GK_TMA_ASM

}  // namespace tma
}  // namespace gpukern
