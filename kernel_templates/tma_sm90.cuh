// Hopper's tensor memory accelerator (TMA, sm_90): bulk tensor copies from global to shared memory described by
// a tensor map, completing on an mbarrier as a count of bytes.
//
// The tensor map is built on the host (cuTensorMapEncodeTiled, autotune/launch_plan.py) and passed by value as a
// `const __grid_constant__ TmaDesc` kernel parameter: its generic address is what the copy instruction takes.
// Coordinates are in elements, innermost dimension first; a box reaching past the tensor's edge is zero-filled
// (and still counts its whole size in bytes towards the mbarrier's transaction count).
#pragma once
#include <stdint.h>

// CUtensorMap (cuda.h) is 128 opaque bytes, 64-byte aligned; declared here so that templates need not include
// cuda.h (a few tenths of a second of every compile).
struct alignas(64) TmaDesc {
  unsigned long long opaque[16];
};

__device__ __forceinline__ void tma_prefetch_desc(const TmaDesc* desc) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(desc)) : "memory");
}

// Arrive on `bar` and add `bytes` to the transactions its current phase waits for.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

// Makes mbarrier initialisation visible to the async proxy (the copy engine signals them).
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// Box at (c0, c1) (c0 innermost) of a 2-D tensor map into shared address `dst`, completing on `bar`.
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const TmaDesc* desc, int c0, int c1, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
          dst),
      "l"(reinterpret_cast<uint64_t>(desc)), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}
