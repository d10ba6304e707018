// Histogram of n int32 values into `bins` bins: out[b] = base[b] + #{i : values[i] == b}.
// Values outside [0, bins) — negative or too large — are dropped: they count in no bin and nothing is written for
// them (one unsigned comparison: a negative value converts to a huge unsigned one).
//   BLOCK       threads per block
//   VEC         values per load (int4 / int2 / int; scalar fall-back where values is not aligned)
//   ITEMS       vectors per thread per step (loads in flight)
//   SMEM        1: each block counts into bins privatised in shared memory, then adds its non-zero bins to out
//               (bins * REPLICAS * 4 B of dynamic shared memory); 0: every value is a global atomic
//   REPLICAS    copies of the shared bins per block (warp w counts into copy w % REPLICAS): less contention
//               where values crowd into few bins
//   (the grid: BLOCKS_PER_SM per SM, chosen on the host; blocks stride over the data)
#include "common.cuh"
#include "vector_tunables.cuh"

#ifndef SMEM
#define SMEM 1
#endif
#ifndef REPLICAS
#define REPLICAS 1
#endif
static_assert(VEC == 1 || VEC == 2 || VEC == 4, "VEC is 1, 2 or 4 ints");
static_assert(SMEM || REPLICAS == 1, "replicas are copies of the shared-memory bins");

template <int N>
struct IntVec {
  int v[N];
};

template <int N>
__device__ __forceinline__ IntVec<N> load_ints(const int* p) {
  IntVec<N> r;
  if (N == 4) {
    const int4 t = __ldcs(reinterpret_cast<const int4*>(p));  // read once: evict first
    r.v[0] = t.x; r.v[1] = t.y; r.v[2] = t.z; r.v[3] = t.w;
  } else if (N == 2) {
    const int2 t = __ldcs(reinterpret_cast<const int2*>(p));
    r.v[0] = t.x; r.v[1] = t.y;
  } else {
    r.v[0] = __ldcs(p);
  }
  return r;
}

extern "C" __global__ void histogram_init(const int* __restrict__ base, int* __restrict__ out, int bins) {
  for (int b = blockIdx.x * blockDim.x + threadIdx.x; b < bins; b += gridDim.x * blockDim.x) out[b] = base[b];
}

extern "C" __global__ void __launch_bounds__(BLOCK)
histogram(const int* __restrict__ values, long long n, int* __restrict__ out, int bins) {
#if SMEM
  extern __shared__ int counts[];  // REPLICAS copies of the bins
  for (int b = threadIdx.x; b < bins * REPLICAS; b += BLOCK) counts[b] = 0;
  __syncthreads();
  int* mine = counts + (threadIdx.x / 32 % REPLICAS) * bins;
#define COUNT(v) atomicAdd(mine + (v), 1)
#else
#define COUNT(v) atomicAdd(out + (v), 1)
#endif
  const unsigned ubins = (unsigned)bins;
  const long long step = (long long)gridDim.x * BLOCK * ITEMS;
  if (aligned_to(values, 4 * VEC)) {
    const long long nvec = n / VEC;
    for (long long base = (long long)blockIdx.x * BLOCK * ITEMS + threadIdx.x; base < nvec; base += step) {
      IntVec<VEC> v[ITEMS];
#pragma unroll
      for (int k = 0; k < ITEMS; ++k) {  // all loads first
        const long long i = base + (long long)k * BLOCK;
        if (i < nvec) v[k] = load_ints<VEC>(values + i * VEC);
        else {
#pragma unroll
          for (int e = 0; e < VEC; ++e) v[k].v[e] = -1;  // out of range: dropped
        }
      }
#pragma unroll
      for (int k = 0; k < ITEMS; ++k)
#pragma unroll
        for (int e = 0; e < VEC; ++e)
          if ((unsigned)v[k].v[e] < ubins) COUNT(v[k].v[e]);
    }
    const long long t = (long long)blockIdx.x * BLOCK + threadIdx.x;
    if (t < n - nvec * VEC) {
      const int v = values[nvec * VEC + t];
      if ((unsigned)v < ubins) COUNT(v);
    }
  } else {
    for (long long i = (long long)blockIdx.x * BLOCK + threadIdx.x; i < n; i += (long long)gridDim.x * BLOCK) {
      const int v = values[i];
      if ((unsigned)v < ubins) COUNT(v);
    }
  }
#if SMEM
  __syncthreads();
  for (int b = threadIdx.x; b < bins; b += BLOCK) {
    int c = 0;
#pragma unroll
    for (int r = 0; r < REPLICAS; ++r) c += counts[r * bins + b];
    if (c) atomicAdd(out + b, c);
  }
#endif
}
