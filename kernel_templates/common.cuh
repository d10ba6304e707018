// Helpers shared by the memory-bound templates: vector access of float/half/bfloat16 with optional streaming hints
// (values arrive and leave as fp32), reductions.
#pragma once
#include <stdint.h>

#include "dtype.cuh"

#ifndef STREAM
#define STREAM 0  // 1: __ldcs / __stcs (evict-first: data touched once does not push the rest out of L2)
#endif

template <int N>
struct Vec {
  float v[N];  // always fp32: arithmetic and statistics never run in half precision
};

// The element type of a DTYPE code (autotune/dtypes.py): a second operand may differ from elem_t (e.g. fp32
// LayerNorm weights with fp16 x, as mixed-precision training keeps them).
template <int CODE> struct ElemOf;
template <> struct ElemOf<0> { typedef float type; };
#if HALF_TYPES
template <> struct ElemOf<1> { typedef __half type; };
template <> struct ElemOf<2> { typedef __nv_bfloat16 type; };
#endif

__device__ __forceinline__ bool aligned_to(const void* p, int bytes) {
  return (reinterpret_cast<uintptr_t>(p) & (uintptr_t)(bytes - 1)) == 0;
}

// A raw integer type of BYTES bytes: loads and stores move bits; conversion to fp32 happens in registers.
template <int BYTES> struct Raw;
template <> struct Raw<32> { typedef uint4 type; };  // wider than one access: two 16-byte ones
template <> struct Raw<16> { typedef uint4 type; };
template <> struct Raw<8> { typedef uint2 type; };
template <> struct Raw<4> { typedef unsigned int type; };
template <> struct Raw<2> { typedef unsigned short type; };

// N elements of T from p (aligned to N elements, or to 16 bytes when wider) as fp32: accesses of up to 16 bytes
// (8 halves, 4 floats); STREAMING: evict-first loads (__ldcs), else read-only cached (__ldg).
template <int N, bool STREAMING = STREAM, class T>
__device__ __forceinline__ Vec<N> load_vec(const T* p) {
  constexpr int BYTES = N * (int)sizeof(T);
  constexpr int PIECE = BYTES < 16 ? BYTES : 16;
  typedef typename Raw<PIECE>::type R;
  R raw[BYTES / PIECE];
  const R* q = reinterpret_cast<const R*>(p);
#pragma unroll
  for (int i = 0; i < BYTES / PIECE; ++i) raw[i] = STREAMING ? __ldcs(q + i) : __ldg(q + i);
  const T* e = reinterpret_cast<const T*>(raw);
  Vec<N> r;
#pragma unroll
  for (int i = 0; i < N; ++i) r.v[i] = to_f32(e[i]);
  return r;
}

// N fp32 values rounded (to nearest even) to T and stored at p (aligned as for load_vec).
template <int N, bool STREAMING = STREAM, class T>
__device__ __forceinline__ void store_vec(T* p, const Vec<N>& r) {
  constexpr int BYTES = N * (int)sizeof(T);
  constexpr int PIECE = BYTES < 16 ? BYTES : 16;
  typedef typename Raw<PIECE>::type R;
  R raw[BYTES / PIECE];
  T* e = reinterpret_cast<T*>(raw);
#pragma unroll
  for (int i = 0; i < N; ++i) e[i] = from_f32<T>(r.v[i]);
  R* q = reinterpret_cast<R*>(p);
#pragma unroll
  for (int i = 0; i < BYTES / PIECE; ++i) {
    if (STREAMING) __stcs(q + i, raw[i]); else q[i] = raw[i];
  }
}

template <bool STREAMING = STREAM, class T>
__device__ __forceinline__ float load_one(const T* p) { return load_vec<1, STREAMING>(p).v[0]; }

template <bool STREAMING = STREAM, class T>
__device__ __forceinline__ void store_one(T* p, float v) { store_vec<1, STREAMING>(p, Vec<1>{{v}}); }

// Elements [j, j+N) of a row of `len`: one vector load when `vec` (row + j aligned) and the chunk lies inside the
// row, else element by element with `pad` outside [0, len) (j may be negative: see rows.cuh, row_pre).
template <int N, class T>
__device__ __forceinline__ Vec<N> load_chunk(const T* row, int j, int len, bool vec, float pad) {
  if (vec && j >= 0 && j + N <= len) return load_vec<N>(row + j);
  Vec<N> r;
#pragma unroll
  for (int i = 0; i < N; ++i) r.v[i] = (unsigned)(j + i) < (unsigned)len ? load_one(row + j + i) : pad;
  return r;
}

template <int N, class T>
__device__ __forceinline__ void store_chunk(T* row, int j, int len, bool vec, const Vec<N>& r) {
  if (vec && j >= 0 && j + N <= len) {
    store_vec<N>(row + j, r);
    return;
  }
#pragma unroll
  for (int i = 0; i < N; ++i)
    if ((unsigned)(j + i) < (unsigned)len) store_one(row + j + i, r.v[i]);
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
