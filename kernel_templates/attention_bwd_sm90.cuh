// Hopper (sm_90a) pieces of the FlashAttention-3 style backward (kernel_templates/attention_backward_fa3.cu) that
// attention_sm90.cuh lacks: a plain bulk copy completing on an mbarrier, the transposing stmatrix, and the two
// wgmma loops over 64-column panels of 128-byte-swizzled tiles.
#pragma once
#include <stdint.h>

#include "attention_sm90.cuh"

// `bytes` (a multiple of 16; src and dst 16-byte aligned) global → shared, completing on `bar` as transaction bytes.
__device__ __forceinline__ void bulk_load(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
               "l"(reinterpret_cast<uint64_t>(src)), "r"(bytes), "r"(bar)
               : "memory");
}

// The fp32 box at `src` (shared memory, laid out as the map's swizzle) added into global memory by the copy engine:
// elements outside the tensor (rows past its end) are skipped. One bulk group per `bulk_commit`.
__device__ __forceinline__ void tma_reduce_add_3d(const void* desc, uint32_t src, int c0, int c1, int c2) {
  asm volatile("cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.tile.bulk_group [%0, {%2, %3, %4}], [%1];\n" ::"l"(
                   reinterpret_cast<uint64_t>(desc)),
               "r"(src), "r"(c0), "r"(c1), "r"(c2)
               : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// Until at most N bulk groups of this thread still read their shared-memory source (READ) or run at all.
template <int N, bool READ>
__device__ __forceinline__ void bulk_wait() {
  if constexpr (READ)
    asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
  else
    asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
}

// Four 8×8 matrices of 16-bit pairs, stored transposed: lane l's register i holds row l/4, columns 2(l%4), +1 of
// matrix i; memory row k of matrix i (the address lane 8i + k gives) receives the matrix's column k.
__device__ __forceinline__ void stmatrix_x4_trans(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r0),
               "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}

// acc (64×N) = A·Bᵀ over K: A (64 rows) and B (N rows) K-major in 64-column panels of a_panel / b_panel bytes
// (a k16 step: +32 bytes inside a panel, the next panel every 4 steps). Starts a fresh accumulation.
template <int N, int K>
__device__ __forceinline__ void wgmma_ss_panels(float (&acc)[N / 2], uint32_t a, uint32_t a_panel, uint32_t b,
                                                uint32_t b_panel) {
  const uint64_t da = sw128_desc(a, 16, 1024), db = sw128_desc(b, 16, 1024);
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) {  // start addresses step inside descriptors (address bits 4..17)
    const uint32_t in_panel = (kk % 4) * 32;
    wgmma_qk<N>(acc, da + ((kk / 4 * a_panel + in_panel) >> 4), db + ((kk / 4 * b_panel + in_panel) >> 4), kk > 0);
  }
}

// acc (64×N) += A·B over K: A in registers (a[4kk..4kk+3] per k16 step: a packed accumulator of 64×K), B (K rows ×
// N columns) MN-major in 64-column panels of b_panel bytes (a k16 step: +16 rows = 2048 bytes).
template <int N, int K>
__device__ __forceinline__ void wgmma_rs_panels(float (&acc)[N / 2], const uint32_t (&a)[K / 4], uint32_t b,
                                                uint32_t b_panel) {
  const uint64_t db = sw128_desc(b, b_panel, 1024);
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) wgmma_pv<N>(acc, a[4 * kk], a[4 * kk + 1], a[4 * kk + 2], a[4 * kk + 3],
                                                  db + ((kk * 2048) >> 4));
}
