// Hopper warpgroup MMA (wgmma, sm_90a only) for 16-bit inputs: shared-memory matrix descriptors over 128-byte
// swizzled tiles, the async fences, and m64nNk16 wrappers with fp32 accumulators.
//
// Operand layouts (both read from shared memory, each tile 1024-byte aligned):
//   A, K-major (a row of A holds 64 consecutive k = 128 bytes): row r at r*128, its 16-byte chunk c stored at
//      chunk c ^ (r % 8). The descriptor: SBO = 1024 (next 8 rows), LBO unused (the k16 slice lies inside the
//      128-byte row), and a k16 step adds 32 bytes to the start address (the hardware swizzles absolute address
//      bits 4-6 with bits 7-9, so an offset start inside an aligned atom still finds its chunks).
//   B, MN-major (row-major K×N, consumed with the transpose bit): 64-column panels of BK rows, panel p at
//      p * BK*128; in a panel, k-row r at r*128 with chunk c (8 columns) at c ^ (r % 8). The descriptor:
//      LBO = panel stride (next 64 columns), SBO = 1024 (next 8 k-rows); a k16 step adds 2048 bytes.
// Accumulator fragment of m64nN (per warpgroup): warp w of the group owns rows 16w..16w+15; lane l holds,
// for each 8-column group j, d[4j+0..1] = row 16w + l/4, columns 8j + 2(l%4) + {0,1}, and d[4j+2..3] = the
// same columns 8 rows below.
#pragma once
#include <stdint.h>

#include "wgmma_asm.cuh"

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ != 900 || !defined(__CUDA_ARCH_FEAT_SM90_ALL))
#error "wgmma needs the sm_90a target (-gencode=arch=compute_90a,code=sm_90a)"
#endif

#if DTYPE == 2
#define WGMMA_AB "bf16"
#else
#define WGMMA_AB "f16"
#endif

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Descriptor of a 128-byte-swizzled operand starting at shared address `addr` (bytes; LBO, SBO in bytes).
__device__ __forceinline__ uint64_t sw128_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  uint64_t d = 0;
  d |= (uint64_t)((addr & 0x3FFFF) >> 4);
  d |= (uint64_t)((lbo & 0x3FFFF) >> 4) << 16;
  d |= (uint64_t)((sbo & 0x3FFFF) >> 4) << 32;
  d |= (uint64_t)1 << 62;  // swizzle mode 1: 128-byte
  return d;
}

// Orders this warpgroup's register accesses before the wgmma that follow (accumulators written or read since).
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Makes this thread's ordinary (and cp.async) shared-memory writes visible to the async proxy (wgmma reads).
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// mbarriers (shared::cta, 8 bytes each): a producer/consumer ring without block-wide barriers.
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// The arrival happens when this thread's cp.async issued so far have landed (counts as one arrival: noinc).
__device__ __forceinline__ void mbar_arrive_cp_async(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
// Wait until the phase of parity `parity` has completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}

// Per-warpgroup register budgets (sm_90a; the kernel needs a register cap at entry: __launch_bounds__(n, 1)).
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N)); }
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N)); }

// The immediates after the predicate: scale-a 1, scale-b 1, then the transpose bits of A and B, from the operand
// layouts a template is compiled with: A_MN_MAJOR (A stored K×M), B_K_MAJOR (B stored N×K). By default A is
// K-major (bit 0) and B MN-major (bit 1). Chosen here from the compile defines alone, so that configurations of a
// template can share one translation unit (autotune/runtime/compile_batch.py).
#if defined(A_MN_MAJOR) && A_MN_MAJOR && defined(B_K_MAJOR) && B_K_MAJOR
#define WGMMA_16_IMMEDIATES "1, 1, 1, 0"
#elif defined(A_MN_MAJOR) && A_MN_MAJOR
#define WGMMA_16_IMMEDIATES "1, 1, 1, 1"
#elif defined(B_K_MAJOR) && B_K_MAJOR
#define WGMMA_16_IMMEDIATES "1, 1, 0, 0"
#else
#define WGMMA_16_IMMEDIATES "1, 1, 0, 1"
#endif

// d (64×N fp32 fragment) += A (64×16, desc_a) · B (16×N, desc_b), in the layouts WGMMA_16_IMMEDIATES names.
template <int N>
__device__ __forceinline__ void wgmma_m64k16(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b) {
  static_assert(N == 64 || N == 128 || N == 192 || N == 256, "wgmma N is 64, 128, 192 or 256 here");
  if constexpr (N == 64)
    WGMMA_ASM(32, "m64n64k16.f32." WGMMA_AB "." WGMMA_AB, WGMMA_16_IMMEDIATES, d, desc_a, desc_b, 1);
  if constexpr (N == 128)
    WGMMA_ASM(64, "m64n128k16.f32." WGMMA_AB "." WGMMA_AB, WGMMA_16_IMMEDIATES, d, desc_a, desc_b, 1);
  if constexpr (N == 192)
    WGMMA_ASM(96, "m64n192k16.f32." WGMMA_AB "." WGMMA_AB, WGMMA_16_IMMEDIATES, d, desc_a, desc_b, 1);
  if constexpr (N == 256)
    WGMMA_ASM(128, "m64n256k16.f32." WGMMA_AB "." WGMMA_AB, WGMMA_16_IMMEDIATES, d, desc_a, desc_b, 1);
}
