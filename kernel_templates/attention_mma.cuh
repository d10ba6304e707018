// What the tensor-core attention templates share: shared-tile addressing (padded or XOR-swizzled 16-byte chunks),
// the cp.async tile copy, and exp2; with the primitives of cp_async.cuh and mma_sm80.cuh (ldmatrix, mma.sync
// m16n8k16 with fp32 accumulation, packing of fp32 pairs to the input type).
// The including template defines HEAD_DIM, SWIZZLE and DTYPE (1 fp16, 2 bf16) first.
#pragma once
#include <stdint.h>

#include "cp_async.cuh"
#include "dtype.cuh"
#include "mma_sm80.cuh"

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

// 2^x with denormal results flushed to zero (ex2.approx.ftz: one MUFU op; a weight below 2^-126 is nothing).
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Copy rows [row0, row0 + rows) of a (seq, HEAD_DIM) matrix into a shared tile; rows at or past `seq` zero-fill.
// THREADS threads take part (`me` is this one's index among them); a constant trip count, fully unrolled.
template <int ROWS, int THREADS>
__device__ __forceinline__ void load_tile(uint32_t tile, const elem_t* __restrict__ base, int row0, int seq, int me) {
  constexpr int TOTAL = ROWS * CHUNKS;
#pragma unroll
  for (int it = 0; it < (TOTAL + THREADS - 1) / THREADS; ++it) {
    const int i = me + it * THREADS;
    if (TOTAL % THREADS == 0 || i < TOTAL) {
      const int r = i / CHUNKS, c = i % CHUNKS;
      const bool in = row0 + r < seq;
      const elem_t* src = base + (size_t)(in ? row0 + r : 0) * HEAD_DIM + c * 8;
      cp_async16(tile + tile_offset(r, c), src, in ? 16 : 0);
    }
  }
}
