// Helpers shared by the memory-bound templates: vector access with optional streaming hints, reductions.
#pragma once
#include <stdint.h>

#ifndef STREAM
#define STREAM 0  // 1: __ldcs / __stcs (evict-first: data touched once does not push the rest out of L2)
#endif

template <int N>
struct Vec {
  float v[N];
};

__device__ __forceinline__ bool aligned_to(const void* p, int bytes) {
  return (reinterpret_cast<uintptr_t>(p) & (uintptr_t)(bytes - 1)) == 0;
}

// N floats from p (aligned to N floats); STREAMING: evict-first loads (__ldcs), else read-only cached (__ldg).
template <int N, bool STREAMING = STREAM>
__device__ __forceinline__ Vec<N> load_vec(const float* p) {
  Vec<N> r;
  if (N == 4) {
    const float4* q = reinterpret_cast<const float4*>(p);
    const float4 t = STREAMING ? __ldcs(q) : __ldg(q);
    r.v[0] = t.x; r.v[1] = t.y; r.v[2] = t.z; r.v[3] = t.w;
  } else if (N == 2) {
    const float2* q = reinterpret_cast<const float2*>(p);
    const float2 t = STREAMING ? __ldcs(q) : __ldg(q);
    r.v[0] = t.x; r.v[1] = t.y;
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) r.v[i] = STREAMING ? __ldcs(p + i) : __ldg(p + i);
  }
  return r;
}

template <int N>
__device__ __forceinline__ void store_vec(float* p, const Vec<N>& r) {
  if (N == 4) {
    const float4 t = make_float4(r.v[0], r.v[1], r.v[2], r.v[3]);
    if (STREAM) __stcs(reinterpret_cast<float4*>(p), t); else *reinterpret_cast<float4*>(p) = t;
  } else if (N == 2) {
    const float2 t = make_float2(r.v[0], r.v[1]);
    if (STREAM) __stcs(reinterpret_cast<float2*>(p), t); else *reinterpret_cast<float2*>(p) = t;
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      if (STREAM) __stcs(p + i, r.v[i]); else p[i] = r.v[i];
    }
  }
}

// Elements [j, j+N) of a row of `len`: one vector load when `vec` (whole, aligned chunk), else element by element
// with `pad` past the end.
template <int N>
__device__ __forceinline__ Vec<N> load_chunk(const float* row, int j, int len, bool vec, float pad) {
  if (vec && j + N <= len) return load_vec<N>(row + j);
  Vec<N> r;
#pragma unroll
  for (int i = 0; i < N; ++i) r.v[i] = (j + i < len) ? (STREAM ? __ldcs(row + j + i) : __ldg(row + j + i)) : pad;
  return r;
}

template <int N>
__device__ __forceinline__ void store_chunk(float* row, int j, int len, bool vec, const Vec<N>& r) {
  if (vec && j + N <= len) {
    store_vec<N>(row + j, r);
    return;
  }
#pragma unroll
  for (int i = 0; i < N; ++i)
    if (j + i < len) {
      if (STREAM) __stcs(row + j + i, r.v[i]); else row[j + i] = r.v[i];
    }
}

struct SumOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
  static __device__ __forceinline__ float identity() { return 0.f; }
};
struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
  static __device__ __forceinline__ float identity() { return -INFINITY; }
};

// Reduce over groups of WIDTH consecutive lanes (WIDTH a power of two ≤ 32); every lane gets the result.
template <int WIDTH, class Op>
__device__ __forceinline__ float group_reduce(float v, Op op) {
#pragma unroll
  for (int o = WIDTH / 2; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o, WIDTH));
  return v;
}

// Reduce over all THREADS threads of the block (THREADS a multiple of 32); every thread gets the result.
// `scratch` holds THREADS/32 floats; the barrier at entry makes back-to-back calls safe.
template <int THREADS, class Op>
__device__ __forceinline__ float block_reduce(float v, Op op, float* scratch) {
  v = group_reduce<32>(v, op);
  if (THREADS == 32) return v;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < THREADS / 32 ? scratch[lane] : Op::identity();
  return group_reduce<32>(v, op);
}
