// What the tensor-core attention templates share: shared-tile addressing (padded or XOR-swizzled 16-byte chunks),
// cp.async, ldmatrix, mma.sync m16n8k16 (fp32 accumulation) and packing of fp32 pairs to the input type.
// The including template defines HEAD_DIM, SWIZZLE and DTYPE (1 fp16, 2 bf16) first.
#pragma once
#include <stdint.h>

#include "dtype.cuh"

#define CHUNKS (HEAD_DIM / 8)                    // 16-byte chunks per row
#define ROW (SWIZZLE ? HEAD_DIM : HEAD_DIM + 8)  // elements per shared-memory row

static_assert(!SWIZZLE || CHUNKS % 8 == 0, "SWIZZLE needs HEAD_DIM a multiple of 64");

// Byte offset of 16-byte chunk c of row r in a tile.
__device__ __forceinline__ uint32_t tile_offset(int r, int c) {
#if SWIZZLE
  return (uint32_t)(r * ROW + ((c ^ (r & 7)) * 8)) * 2u;
#else
  return (uint32_t)(r * ROW + c * 8) * 2u;
#endif
}

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global → shared; src_bytes 0 zero-fills (rows past the end of the sequence).
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

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

// Two fp32 values rounded to the input type, packed as one 32-bit A-operand register (lower column first).
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
#if DTYPE == 1
  __half2 h = __floats2half2_rn(lo, hi);
#else
  __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
#endif
  return *reinterpret_cast<uint32_t*>(&h);
}

// Copy rows [row0, row0 + rows) of a (seq, HEAD_DIM) matrix into a shared tile; rows at or past `seq` zero-fill.
// THREADS threads take part (`me` is this one's index among them).
template <int ROWS, int THREADS>
__device__ __forceinline__ void load_tile(uint32_t tile, const elem_t* __restrict__ base, int row0, int seq, int me) {
#pragma unroll
  for (int i = me; i < ROWS * CHUNKS; i += THREADS) {
    const int r = i / CHUNKS, c = i % CHUNKS;
    const bool in = row0 + r < seq;
    const elem_t* src = base + (size_t)(in ? row0 + r : 0) * HEAD_DIM + c * 8;
    cp_async16(tile + tile_offset(r, c), src, in ? 16 : 0);
  }
}
