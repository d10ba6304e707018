// Persistent row kernels: a block of BLOCK threads is BLOCK/TPR groups of TPR threads, each group owning one row
// at a time and walking many rows; a thread keeps its chunks of a row in their own dtype (raw bits, converted to
// fp32 where used), in registers or in shared memory, between the passes over the row.
//   TPR    threads per row group: 32 (a warp), or several warps, up to BLOCK (the whole block). With several
//          multi-warp groups per block, each group synchronises on its own named barrier (1 + group index), so
//          BLOCK/TPR <= 15 there (barrier 0 is __syncthreads)
//   VEC    elements per chunk (a 16-byte access at most)
// Thread `lane` of a group owns chunks j = (lane + t*TPR)*VEC, t = 0, 1, …: a warp reads contiguous memory, and a
// thread's columns are the same in every row (what per-column sums across rows need).
#pragma once
#include "common.cuh"

#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef TPR
#define TPR 32
#endif
#ifndef VEC
#define VEC 4
#endif
static_assert(TPR % 32 == 0 && BLOCK % TPR == 0 && BLOCK <= 1024, "TPR: a multiple of 32 dividing BLOCK");
static_assert(TPR == 32 || TPR == BLOCK || BLOCK / TPR <= 15, "a named barrier per multi-warp group: 15 at most");

// VEC elements of T as loaded (raw bits: a half chunk costs half the registers of its fp32 values).
template <class T>
struct Chunk {
  static constexpr int BYTES = VEC * (int)sizeof(T);
  static constexpr int PIECE = BYTES < 16 ? BYTES : 16;
  typedef typename Raw<PIECE>::type R;
  R r[BYTES / PIECE];
  __device__ __forceinline__ float operator[](int e) const { return to_f32(reinterpret_cast<const T*>(r)[e]); }
  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int i = 0; i < BYTES / PIECE; ++i) r[i] = R();
  }
};

// Forget what a half chunk holds: XOR it with `zero` (0 at run time, unknown to the compiler, and different in each
// loop iteration so that nothing is hoisted). Values converted from the chunk before are not reused after, so
// ptxas keeps the chunk itself (a register per two halves) rather than its fp32 values, and converts it again
// where it is used. fp32 chunks are left alone: there the two are the same registers.
template <class T>
__device__ __forceinline__ void forget(Chunk<T>& c, unsigned zero) {
  if (sizeof(T) != 2) return;
  if (Chunk<T>::BYTES >= 4) {
    unsigned* w = reinterpret_cast<unsigned*>(c.r);
#pragma unroll
    for (int i = 0; i < Chunk<T>::BYTES / 4; ++i) w[i] ^= zero;
  } else {
    unsigned short* h = reinterpret_cast<unsigned short*>(c.r);
    h[0] ^= (unsigned short)zero;
  }
}

// The chunk at p, `left` elements before the end of its row (callers address chunk t as the lane's first chunk plus
// the constant t*TPR*VEC: no register per chunk address). VECTOR: one access (VEC <= left, p aligned), else element
// by element with zeros past the end; STREAMING: evict-first loads (data read once).
template <bool VECTOR, bool STREAMING, class T>
__device__ __forceinline__ Chunk<T> load_raw(const T* p, int left) {
  Chunk<T> c;
  if (VECTOR) {
    const typename Chunk<T>::R* q = reinterpret_cast<const typename Chunk<T>::R*>(p);
#pragma unroll
    for (int i = 0; i < Chunk<T>::BYTES / Chunk<T>::PIECE; ++i) c.r[i] = STREAMING ? __ldcs(q + i) : __ldg(q + i);
  } else {
    T* e = reinterpret_cast<T*>(c.r);
#pragma unroll
    for (int i = 0; i < VEC; ++i) e[i] = i < left ? p[i] : from_f32<T>(0.f);
  }
  return c;
}

// Copy the chunk at p (as load_raw) into shared memory at `slot` (VEC elements, aligned like a chunk): VECTOR with
// one cp.async of 4, 8 or 16 bytes (in flight until cp_async_wait_all), else element by element, zeros past the end.
template <bool VECTOR, class T>
__device__ __forceinline__ void stage_chunk(T* slot, const T* p, int left) {
  if (VECTOR) {
    constexpr int BYTES = VEC * (int)sizeof(T);
    static_assert(BYTES == 4 || BYTES == 8 || BYTES == 16, "cp.async copies 4, 8 or 16 bytes");
    const unsigned s = (unsigned)__cvta_generic_to_shared(slot);
    if (BYTES == 16) {
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(p) : "memory");
    } else {
      asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(s), "l"(p), "n"(BYTES) : "memory");
    }
  } else {
#pragma unroll
    for (int i = 0; i < VEC; ++i) slot[i] = i < left ? p[i] : from_f32<T>(0.f);
  }
}

__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

// A chunk back from shared memory (what stage_chunk put there).
template <class T>
__device__ __forceinline__ Chunk<T> read_chunk(const T* slot) {
  Chunk<T> c;
  const typename Chunk<T>::R* q = reinterpret_cast<const typename Chunk<T>::R*>(slot);
#pragma unroll
  for (int i = 0; i < Chunk<T>::BYTES / Chunk<T>::PIECE; ++i) c.r[i] = q[i];
  return c;
}

// The barrier of one row group: the block's with a single group, else named barrier 1 + group over TPR threads.
__device__ __forceinline__ void group_sync(int group) {
#if TPR == BLOCK
  __syncthreads();
#else
  asm volatile("bar.sync %0, %1;\n" ::"r"(group + 1), "n"(TPR) : "memory");
#endif
}

// Sum K values over the TPR threads of a row group; every thread of the group gets the very same bits (butterfly
// shuffles, then each warp adds the group's warp sums in the same lanes). `scratch` holds 2*K*(TPR/32) floats
// per group (unused for a warp per row); `parity` alternates between calls, so one barrier per call suffices: a
// warp writes half p again only after every warp of its group has passed the barrier of the call in between.
template <int K>
__device__ __forceinline__ void group_sum(float (&s)[K], float* scratch, int group, int parity) {
#pragma unroll
  for (int i = 0; i < K; ++i) s[i] = group_reduce<32>(s[i], SumOp());
#if TPR > 32
  constexpr int WARPS = TPR / 32;
  float* half = scratch + (group * 2 + parity) * K * WARPS;
  const int lane = threadIdx.x % 32, warp = (threadIdx.x % TPR) / 32;
  if (lane == 0) {
#pragma unroll
    for (int i = 0; i < K; ++i) half[i * WARPS + warp] = s[i];
  }
  group_sync(group);
#pragma unroll
  for (int i = 0; i < K; ++i) s[i] = group_reduce<32>(lane < WARPS ? half[i * WARPS + lane] : 0.f, SumOp());
#endif
}
