// Hopper's tensor memory accelerator (TMA, sm_90): bulk tensor copies from global to shared memory described by
// a tensor map, completing on an mbarrier as a count of bytes.
//
// The tensor map is built on the host (cuTensorMapEncodeTiled, autotune/runtime/launch_plan.py) and passed by
// value as a `const __grid_constant__ TmaDesc` kernel parameter: its generic address is what the copy instruction
// takes.
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

// ---- clusters (thread block clusters of sm_90) -------------------------------------------------------------
__device__ __forceinline__ uint32_t cluster_ctarank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}

// Every thread of the cluster arrives and waits: orders mbarrier initialisation before peers use the barriers,
// and keeps a block alive while a peer may still copy into its shared memory or arrive on its barriers.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}

// Arrive on the mbarrier at the same shared offset as `bar` in cluster block `rank` (which may be this one).
// Default semantics (release at CTA scope), as CUTLASS's ClusterBarrier::arrive: a consumer releases a stage after
// wgmma.wait_group has retired the reads, so nothing needs ordering beyond the CTA. `.release.cluster` made ptxas
// put MEMBAR.ALL.GPU before every arrive, once per k-tile per warp
// (docs/results/2026-11-26b/cluster_multicast_review.md).
__device__ __forceinline__ void mbar_arrive_cluster(uint32_t bar, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(bar), "r"(rank));
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(remote) : "memory");
}

// tma_load_2d into the same shared offset of every cluster block in `mask`, each block's mbarrier at `bar`'s
// offset receiving the bytes it got.
__device__ __forceinline__ void tma_load_2d_multicast(uint32_t dst, const TmaDesc* desc, int c0, int c1,
                                                      uint32_t bar, uint16_t mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(desc)), "r"(c0), "r"(c1), "r"(bar), "h"(mask)
      : "memory");
}
