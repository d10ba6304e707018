// Reduction of n elements of DTYPE (float, half, bfloat16) to one fp32 value: sum or max, accumulated in fp32.
//   OP          0 sum, 1 max
//   BLOCK       threads per block
//   VEC         elements per load (8 halves = 16 B) (scalar fall-back where x is not aligned)
//   ITEMS       vectors per thread per step (independent loads in flight)
//   TREE        0: warp shuffles, then one warp over the warps' results; 1: classic shared-memory halving tree
//   TWO_PASS    0: each block folds its result into out with an atomic; 1: blocks write partials, and a
//               second single-block launch reduces them
//   (the grid: BLOCKS_PER_SM per SM, chosen on the host; blocks stride over the data)
#include "common.cuh"
#include "vector_tunables.cuh"

#ifndef OP
#define OP 0
#endif
#ifndef TREE
#define TREE 0
#endif
#ifndef TWO_PASS
#define TWO_PASS 0
#endif

#if OP == 0
typedef SumOp Op;
#else
typedef MaxOp Op;
#endif

__device__ __forceinline__ float reduce_block(float v) {
  __shared__ float scratch[BLOCK];
  Op op;
#if TREE
  scratch[threadIdx.x] = v;
  __syncthreads();
#pragma unroll
  for (int s = BLOCK / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) scratch[threadIdx.x] = op(scratch[threadIdx.x], scratch[threadIdx.x + s]);
    __syncthreads();
  }
  return scratch[0];
#else
  return block_reduce<BLOCK>(v, op, scratch);
#endif
}

// max over floats with integer atomics: non-negative floats order like signed ints, negative ones reversed
// like unsigned ints (out starts at -inf).
__device__ __forceinline__ void atomic_fold(float* out, float v) {
#if OP == 0
  atomicAdd(out, v);
#else
  if (v >= 0.f) atomicMax(reinterpret_cast<int*>(out), __float_as_int(v));
  else atomicMin(reinterpret_cast<unsigned int*>(out), __float_as_uint(v));
#endif
}

extern "C" __global__ void reduce_init(float* __restrict__ out) { out[0] = Op::identity(); }

extern "C" __global__ void __launch_bounds__(BLOCK)
reduce_main(const elem_t* __restrict__ x, long long n, float* __restrict__ out, float* __restrict__ partials) {
  Op op;
  float acc = Op::identity();
  if (aligned_to(x, (int)sizeof(elem_t) * VEC)) {
    const long long nvec = n / VEC;
    const long long step = (long long)gridDim.x * BLOCK * ITEMS;
    for (long long base = (long long)blockIdx.x * BLOCK * ITEMS + threadIdx.x; base < nvec; base += step) {
      Vec<VEC> v[ITEMS];
#pragma unroll
      for (int k = 0; k < ITEMS; ++k) {  // all loads first: ITEMS×VEC floats in flight per thread
        const long long i = base + (long long)k * BLOCK;
        if (i < nvec) v[k] = load_vec<VEC>(x + i * VEC);
        else {
#pragma unroll
          for (int e = 0; e < VEC; ++e) v[k].v[e] = Op::identity();
        }
      }
#pragma unroll
      for (int k = 0; k < ITEMS; ++k)
#pragma unroll
        for (int e = 0; e < VEC; ++e) acc = op(acc, v[k].v[e]);
    }
    const long long t = (long long)blockIdx.x * BLOCK + threadIdx.x;
    if (t < n - nvec * VEC) acc = op(acc, load_one(x + nvec * VEC + t));
  } else {
    for (long long i = (long long)blockIdx.x * BLOCK + threadIdx.x; i < n; i += (long long)gridDim.x * BLOCK)
      acc = op(acc, load_one(x + i));
  }
  acc = reduce_block(acc);
  if (threadIdx.x == 0) {
#if TWO_PASS
    partials[blockIdx.x] = acc;
#else
    atomic_fold(out, acc);
#endif
  }
}

// Second pass: one block folds the partials of the first.
extern "C" __global__ void __launch_bounds__(BLOCK)
reduce_final(const float* __restrict__ partials, int count, float* __restrict__ out) {
  Op op;
  float acc = Op::identity();
  for (int i = threadIdx.x; i < count; i += BLOCK) acc = op(acc, partials[i]);
  acc = reduce_block(acc);
  if (threadIdx.x == 0) out[0] = acc;
}
