// Split-K for the GEMM templates. With gridDim.z = S > 1, block z of a GEMM kernel covers K elements
// [z*k_chunk, min(K, (z+1)*k_chunk)) and writes its fp32 partial tile to partial[z][M][N] (workspace of
// S*M*N floats); gemm_splitk_reduce then sums the S slices in a fixed order (deterministic) and writes C in the
// output type. With S = 1 the GEMM kernel writes C itself and this kernel is not launched.
#pragma once
#include "dtype.cuh"

#ifndef REDUCE_THREADS
#define REDUCE_THREADS 256
#endif

// This block's share of the ceil(K / TILE_K) k-tiles, split evenly over gridDim.z: tiles [kt0, kt0 + k_tiles)
// (all of them with one split; none, k_tiles = 0, for a split left without any).
template <int TILE_K>
__device__ __forceinline__ void splitk_tiles(int K, int& kt0, int& k_tiles) {
  const int all_tiles = (K + TILE_K - 1) / TILE_K;
  const int per_split = (all_tiles + gridDim.z - 1) / gridDim.z;
  kt0 = blockIdx.z * per_split;
  k_tiles = max(0, min(all_tiles, kt0 + per_split) - kt0);
}

extern "C" __global__ void __launch_bounds__(REDUCE_THREADS)
    gemm_splitk_reduce(const float* __restrict__ partial, elem_t* __restrict__ C, long long mn, int splits) {
  const long long stride = (long long)gridDim.x * REDUCE_THREADS;
  for (long long i = (long long)blockIdx.x * REDUCE_THREADS + threadIdx.x; i < mn; i += stride) {
    float acc = 0.f;
    for (int s = 0; s < splits; ++s) acc += __ldcs(partial + (long long)s * mn + i);
    C[i] = from_f32<elem_t>(acc);
  }
}
