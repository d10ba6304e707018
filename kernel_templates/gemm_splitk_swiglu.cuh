// SwiGLU's activation, and split-K's end for linear_swiglu (kernel_templates/gemm_wgmma_tma.cu, GEMM_SWIGLU): each K slice z stored its gate
// and up sums as two M×N fp32 planes, partial[z][2][M][N]; C = silu(Σ gate) · Σ up, the slices added in a fixed
// order (deterministic). The template includes it under GEMM_SWIGLU: a kernel in the template, or a header reading
// that macro, would keep the GEMM templates from compiling in batches (autotune/runtime/compile_batch.py).
#pragma once
#include "dtype.cuh"
#include "gemm_splitk.cuh"

// silu(gate) · up in fp32: the epilogue's and the reduce's one formula.
__device__ __forceinline__ float swiglu(float gate, float up) { return gate / (1.f + __expf(-gate)) * up; }

extern "C" __global__ void __launch_bounds__(REDUCE_THREADS)
    gemm_splitk_swiglu(const float* __restrict__ partial, elem_t* __restrict__ C, long long mn, int splits) {
  const long long stride = (long long)gridDim.x * REDUCE_THREADS;
  for (long long i = (long long)blockIdx.x * REDUCE_THREADS + threadIdx.x; i < mn; i += stride) {
    float gate = 0.f, up = 0.f;
    for (int s = 0; s < splits; ++s) {
      gate += __ldcs(partial + 2 * s * mn + i);
      up += __ldcs(partial + (2 * s + 1) * mn + i);
    }
    C[i] = from_f32<elem_t>(swiglu(gate, up));
  }
}
