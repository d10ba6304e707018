// Warp-level tensor-core primitives of sm_80 for 16-bit inputs (DTYPE 1 float16, 2 bfloat16), shared by the
// mma.sync GEMM (gemm_mma.cu) and the tensor-core attention templates (attention_mma.cuh): ldmatrix of 8×8 b16
// matrices from shared memory, mma.sync m16n8k16 with fp32 accumulation, and fp32 pairs packed into one 32-bit
// operand register.
#pragma once
#include <stdint.h>

#include "dtype.cuh"

static_assert(DTYPE == 1 || DTYPE == 2, "the m16n8k16 wrappers take float16 (DTYPE 1) or bfloat16 (DTYPE 2)");

// Four 8×8 matrices; lane l gives the shared address of row l % 8 of matrix l / 8 and receives a 32-bit piece of
// each (r[j] from matrix j). The .trans form delivers the matrices transposed.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

// d += a·b, m16n8k16, fp32 accumulation.
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if DTYPE == 1
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

// Two fp32 values rounded to the input type, packed as one 32-bit register (lo in the lower half: the lower
// column, or the lower address).
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
#if DTYPE == 1
  __half2 h = __floats2half2_rn(lo, hi);
#else
  __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
#endif
  return *reinterpret_cast<uint32_t*>(&h);
}
