#pragma once
// Torch-free sm_80+ device helpers shared by the kernels: asynchronous global -> shared copies
// (cp.async), 8x8 shared-memory matrix loads (ldmatrix), the tensor-core multiply-adds
// mma.m16n8k16 (16-bit) and mma.m16n8k8 (TF32) with float accumulators, and the packing of 16-bit
// results.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace gpukern {

// Copies kBytes (4, 8 or 16) from gmem to smem asynchronously, or zero-fills them when !valid
// (gmem is then not read but must still be a valid address expression).
template <int kBytes>
__device__ __forceinline__ void cp_async_zfill(void* smem, const void* gmem, bool valid) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int src_bytes = valid ? kBytes : 0;  // 0: the kBytes are zero-filled, nothing is read
  if constexpr (kBytes == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem),
                 "r"(src_bytes)
                 : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(dst), "l"(gmem),
                 "n"(kBytes), "r"(src_bytes)
                 : "memory");
  }
}
// An unconditional 4-byte copy to the shared address dst (as __cvta_generic_to_shared gives it):
// loops over consecutive copies step one 32-bit shared address and one global pointer.
__device__ __forceinline__ void cp_async4(unsigned dst, const void* gmem) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(dst), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
// Waits until at most kPending of this thread's committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// Four 8x8 matrices of 16-bit elements from shared memory: lane i gives the address of row i % 8
// of matrix i / 8 (16 contiguous, 16-byte aligned bytes); r[j] is then matrix j's fragment:
// lane l holds elements 2 (l % 4) and 2 (l % 4) + 1 of its row l / 4.
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned smem_row_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_row_addr));
}
// The same from a generic pointer to the lane's row.
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* smem_row) {
  ldmatrix_x4(r, static_cast<unsigned>(__cvta_generic_to_shared(smem_row)));
}

// Two floats rounded to T and packed (one conversion instruction for 16-bit types).
template <typename T>
__device__ __forceinline__ unsigned reg_pack2(float a, float b) {
  if constexpr (std::is_same<T, __nv_bfloat16>::value) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<const unsigned*>(&h);
  } else {
    const __half2 h = __floats2half2_rn(a, b);
    return *reinterpret_cast<const unsigned*>(&h);
  }
}

// d = A * B + c, A 16x16 (row-major fragments a0..a3), B 16x8 (column fragments b0, b1), T = __half
// or __nv_bfloat16, float accumulators. Fragment layout (PTX ISA, mma.m16n8k16 .f16/.bf16), lane
// (g = lane / 4, t = lane % 4):
//   a0 = A[g][2t..2t+1], a1 = A[g+8][2t..2t+1], a2 = A[g][2t+8..2t+9], a3 = A[g+8][2t+8..2t+9]
//   b0 = B[2t..2t+1][g],  b1 = B[2t+8..2t+9][g];  d0,d1 = D[g][2t..2t+1], d2,d3 = D[g+8][...]
// (the lower k or column in the lower 16 bits of each register).
template <typename T>
__device__ __forceinline__ void mma_16816(float (&d)[4], unsigned a0, unsigned a1, unsigned a2,
                                          unsigned a3, unsigned b0, unsigned b1,
                                          const float (&c)[4]) {
  static_assert(std::is_same<T, __half>::value || std::is_same<T, __nv_bfloat16>::value,
                "16-bit types only");
  if constexpr (std::is_same<T, __half>::value) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%10,%11,%12,%13};"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "f"(c[0]), "f"(c[1]),
          "f"(c[2]), "f"(c[3]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%10,%11,%12,%13};"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "f"(c[0]), "f"(c[1]),
          "f"(c[2]), "f"(c[3]));
  }
}
// d += A * B.
template <typename T>
__device__ __forceinline__ void mma_16816(float (&d)[4], unsigned a0, unsigned a1, unsigned a2,
                                          unsigned a3, unsigned b0, unsigned b1) {
  const float c[4] = {d[0], d[1], d[2], d[3]};
  mma_16816<T>(d, a0, a1, a2, a3, b0, b1, c);
}

// fp32 bits rounded for a TF32 operand: + half a TF32 unit in the last place (bit 12). Where the
// tensor core takes the upper 19 bits (10 mantissa bits) this is cvt.rna.tf32.f32's
// round-half-away-from-zero; CUDA leaves the precision bits used to the hardware (at least 10),
// and with more of them the operand is still within half a TF32 unit of the fp32 value. One
// integer add instead of a conversion per operand register.
__device__ __forceinline__ unsigned tf32_round_bits(unsigned fp32_bits) {
  return fp32_bits + 0x1000u;
}

// d += A * B, TF32 operands (tf32_round_bits), float accumulators: mma.m16n8k8. Fragments (PTX
// ISA, mma.m16n8k8 .tf32), lane (g = lane / 4, t = lane % 4):
//   a0 = A[g][t], a1 = A[g+8][t], a2 = A[g][t+4], a3 = A[g+8][t+4]
//   b0 = B[t][g],  b1 = B[t+4][g];  d0,d1 = D[g][2t..2t+1], d2,d3 = D[g+8][2t..2t+1]
__device__ __forceinline__ void mma_1688_tf32(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                              unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

}  // namespace gpukern
