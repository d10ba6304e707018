// Hopper warpgroup MMA on tf32 operands (sm_90a): m64nNk8 with fp32 accumulators, both operands K-major from
// 128-byte swizzled shared memory (tf32 takes no transpose: B is stored N rows of K). Same descriptors and
// accumulator fragment as the 16-bit wrappers of wgmma_sm90.cuh; a k8 step of tf32 is 32 bytes, like a k16 step
// of a 16-bit type. `scale_d` 0 overwrites the accumulators (a fresh window), 1 adds to them.
#pragma once
#include "wgmma_sm90.cuh"

// d (64×N fp32 fragment) (+)= A (64×8 tf32, desc_a, K-major) · B (8×N tf32, desc_b, K-major).
template <int N>
__device__ __forceinline__ void wgmma_tf32_m64k8(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  static_assert(N == 64 || N == 128 || N == 256, "tf32 wgmma N is 64, 128 or 256 here");
  // Immediates: scale-a 1, scale-b 1 (no transpose bits: tf32 operands are K-major).
  if constexpr (N == 64) WGMMA_ASM(32, "m64n64k8.f32.tf32.tf32", "1, 1", d, desc_a, desc_b, scale_d);
  if constexpr (N == 128) WGMMA_ASM(64, "m64n128k8.f32.tf32.tf32", "1, 1", d, desc_a, desc_b, scale_d);
  if constexpr (N == 256) WGMMA_ASM(128, "m64n256k8.f32.tf32.tf32", "1, 1", d, desc_a, desc_b, scale_d);
}
