// Dot product of two vectors of n elements of DTYPE (float, half, bfloat16) into one fp32 value, fp32 sums.
//   BLOCK       threads per block
//   VEC         elements per load (8 halves = 16 B; scalar fall-back where x or y is not aligned)
//   ITEMS       vectors per thread per step (independent loads in flight)
//   TWO_PASS    0: each block adds its sum into out with an atomic (out zeroed first); 1: blocks write partials,
//               a second single-block launch adds them up (a fixed order: the same inputs give the same bits)
//   (the grid: BLOCKS_PER_SM per SM, chosen on the host; blocks stride over the data)
#include "common.cuh"
#include "vector_tunables.cuh"

#ifndef TWO_PASS
#define TWO_PASS 0
#endif

extern "C" __global__ void __launch_bounds__(BLOCK)
dot_main(const elem_t* __restrict__ x, const elem_t* __restrict__ y, long long n, float* __restrict__ out,
         float* __restrict__ partials) {
  __shared__ float scratch[32];
  float acc = 0.f;
  const int vb = (int)sizeof(elem_t) * VEC;
  if (aligned_to(x, vb) && aligned_to(y, vb)) {
    const long long nvec = n / VEC;
    const long long step = (long long)gridDim.x * BLOCK * ITEMS;
    for (long long base = (long long)blockIdx.x * BLOCK * ITEMS + threadIdx.x; base < nvec; base += step) {
      Vec<VEC> a[ITEMS], b[ITEMS];
#pragma unroll
      for (int k = 0; k < ITEMS; ++k) {  // all loads first
        const long long i = base + (long long)k * BLOCK;
        if (i < nvec) {
          a[k] = load_vec<VEC>(x + i * VEC);
          b[k] = load_vec<VEC>(y + i * VEC);
        } else {
#pragma unroll
          for (int e = 0; e < VEC; ++e) a[k].v[e] = b[k].v[e] = 0.f;
        }
      }
#pragma unroll
      for (int k = 0; k < ITEMS; ++k)
#pragma unroll
        for (int e = 0; e < VEC; ++e) acc = fmaf(a[k].v[e], b[k].v[e], acc);
    }
    const long long t = (long long)blockIdx.x * BLOCK + threadIdx.x;
    if (t < n - nvec * VEC) acc = fmaf(load_one(x + nvec * VEC + t), load_one(y + nvec * VEC + t), acc);
  } else {
    for (long long i = (long long)blockIdx.x * BLOCK + threadIdx.x; i < n; i += (long long)gridDim.x * BLOCK)
      acc = fmaf(load_one(x + i), load_one(y + i), acc);
  }
  acc = block_reduce<BLOCK>(acc, SumOp(), scratch);
  if (threadIdx.x == 0) {
#if TWO_PASS
    partials[blockIdx.x] = acc;
#else
    atomicAdd(out, acc);
#endif
  }
}

// Second pass: one block adds the partials of the first.
extern "C" __global__ void __launch_bounds__(BLOCK)
dot_final(const float* __restrict__ partials, int count, float* __restrict__ out) {
  __shared__ float scratch[32];
  float acc = 0.f;
  for (int i = threadIdx.x; i < count; i += BLOCK) acc += partials[i];
  acc = block_reduce<BLOCK>(acc, SumOp(), scratch);
  if (threadIdx.x == 0) out[0] = acc;
}
