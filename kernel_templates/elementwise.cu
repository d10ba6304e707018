// Elementwise out = f(x [, y]) over n elements of DTYPE (float, half, bfloat16; fp32 arithmetic).
//   OP      0 add (x + y), 1 relu, 2 sigmoid, 3 gelu (exact, with erf: torch's default; computed with erfc)
//   BLOCK   threads per block
//   VEC     elements per load (1, 2, 4, 8: 8 halves = 16 B); falls back to scalars when any pointer is not VEC-aligned
//   ITEMS   vectors per thread per step (independent loads in flight)
//   GRID_STRIDE  1: a fixed grid (BLOCKS_PER_SM per SM, chosen on the host) strides over the data;
//                0: one step per thread, the grid covers n
//   STREAM  1: streaming loads/stores (__ldcs/__stcs)
#include "common.cuh"

#ifndef OP
#define OP 1
#endif
#ifndef ITEMS
#define ITEMS 1
#endif
#include "vector_tunables.cuh"
#ifndef GRID_STRIDE
#define GRID_STRIDE 0
#endif

__device__ __forceinline__ float apply(float a, float b) {
#if OP == 0
  return a + b;
#elif OP == 1
  return fmaxf(a, 0.f);
#elif OP == 2
  return 1.f / (1.f + __expf(-a));
#else
  // 0.5·a·(1 + erf(a/√2)) written with erfc: 1 + erf cancels for negative a (at a = -3 only ~4 of its 24 bits
  // survive), erfc(-a/√2) does not.
  return 0.5f * a * erfcf(-a * 0.70710678118654752f);
#endif
}

template <int N>
__device__ __forceinline__ void process(const elem_t* __restrict__ x, const elem_t* __restrict__ y,
                                        elem_t* __restrict__ out, long long i) {
  const Vec<N> a = load_vec<N>(x + i * N);
#if OP == 0
  const Vec<N> b = load_vec<N>(y + i * N);
#endif
  Vec<N> r;
#pragma unroll
  for (int k = 0; k < N; ++k) {
#if OP == 0
    r.v[k] = apply(a.v[k], b.v[k]);
#else
    r.v[k] = apply(a.v[k], 0.f);
#endif
  }
  store_vec<N>(out + i * N, r);
}

// Vectors [0, nvec) of width N: each thread takes ITEMS of them per step, consecutive threads adjacent ones.
template <int N>
__device__ __forceinline__ void sweep(const elem_t* __restrict__ x, const elem_t* __restrict__ y,
                                      elem_t* __restrict__ out, long long nvec) {
  const long long step = (long long)gridDim.x * BLOCK * ITEMS;
  long long base = (long long)blockIdx.x * BLOCK * ITEMS + threadIdx.x;
  do {
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
      const long long i = base + (long long)k * BLOCK;
      if (i < nvec) process<N>(x, y, out, i);
    }
    base += step;
  } while (GRID_STRIDE && base < nvec);
}

extern "C" __global__ void __launch_bounds__(BLOCK)
elementwise(const elem_t* __restrict__ x, const elem_t* __restrict__ y, elem_t* __restrict__ out, long long n) {
  const int vb = (int)sizeof(elem_t) * VEC;
  const bool vec = aligned_to(x, vb) && aligned_to(out, vb)
#if OP == 0
                   && aligned_to(y, vb)
#endif
      ;
  if (vec) {
    const long long nvec = n / VEC;
    sweep<VEC>(x, y, out, nvec);
    // The tail (n % VEC elements): the first threads of the grid.
    const long long t = (long long)blockIdx.x * BLOCK + threadIdx.x;
    if (t < n - nvec * VEC) process<1>(x, y, out, nvec * VEC + t);
  } else {
    // Unaligned pointers: scalars; the host sized the grid for VEC-wide steps, so stride here always.
    const long long stride = (long long)gridDim.x * BLOCK;
    for (long long i = (long long)blockIdx.x * BLOCK + threadIdx.x; i < n; i += stride) process<1>(x, y, out, i);
  }
}
