// Tickets on counters in global memory, for kernels whose blocks each write a partial result that one of them
// then combines, in place of a second launch: the block that takes the last ticket of a counter is the last of
// its blocks to finish, and sees every partial they wrote.
//   * A counter must read 0 before the launch (the launch plan zeroes it: workspaces are not kept between calls);
//     the last ticket's block resets it to 0, so a counter kept across launches stays valid without a memset.
//   * Partials written by other blocks of the same launch must be read through L2 (__ldcg / ld_cg below): the
//     non-coherent read-only path (__ldg, ld.global.nc) may serve bytes from before they were written.
//   * One-dimensional blocks (threadIdx.x alone names a thread).
#pragma once
#include "common.cuh"

// Every thread of the block calls it, after its last store of the partials; true in every thread of the block
// whose ticket is the `arrivals`-th on `counter`. The ordering is that of cooperative groups' grid barrier: the
// block's threads meet at a barrier (their stores before it), one thread fences (release: the stores the barrier
// ordered before it are visible device-wide before its ticket is), takes the ticket and fences again (acquire:
// the last block's later loads see what every earlier ticket released); a second barrier hands the answer to the
// block.
__device__ __forceinline__ bool last_to_arrive(unsigned int* counter, unsigned int arrivals) {
  __shared__ bool last;
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    const unsigned int ticket = atomicAdd(counter, 1u);
    __threadfence();
    last = ticket == arrivals - 1;
    if (last) *counter = 0u;  // every block has taken its ticket: nothing else touches the counter this launch
  }
  __syncthreads();
  return last;
}

// N floats at p + j (p + j aligned to 4*N bytes when `vec`; else element by element, 0 past `len`), through L2.
template <int N>
__device__ __forceinline__ Vec<N> ld_cg(const float* p, int j, int len, bool vec) {
  Vec<N> r;
  if (vec && j + N <= len) {
    if constexpr (N == 4) {
      const float4 v = __ldcg(reinterpret_cast<const float4*>(p + j));
      r.v[0] = v.x, r.v[1] = v.y, r.v[2] = v.z, r.v[3] = v.w;
    } else if constexpr (N == 2) {
      const float2 v = __ldcg(reinterpret_cast<const float2*>(p + j));
      r.v[0] = v.x, r.v[1] = v.y;
    } else {
      static_assert(N == 1, "1, 2 or 4 floats");
      r.v[0] = __ldcg(p + j);
    }
    return r;
  }
#pragma unroll
  for (int i = 0; i < N; ++i) r.v[i] = j + i < len ? __ldcg(p + j + i) : 0.f;
  return r;
}

// N floats to p + j (as ld_cg), cached in L2 only: another block reads them back from there.
template <int N>
__device__ __forceinline__ void st_cg(float* p, int j, int len, bool vec, const Vec<N>& r) {
  if (vec && j + N <= len) {
    if constexpr (N == 4) {
      __stcg(reinterpret_cast<float4*>(p + j), make_float4(r.v[0], r.v[1], r.v[2], r.v[3]));
    } else if constexpr (N == 2) {
      __stcg(reinterpret_cast<float2*>(p + j), make_float2(r.v[0], r.v[1]));
    } else {
      __stcg(p + j, r.v[0]);
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < N; ++i)
    if (j + i < len) __stcg(p + j + i, r.v[i]);
}
