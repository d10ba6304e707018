// linear_gelu's step after a product whose kernel has no GELU epilogue (autotune/spaces/gemm_layouts.py): the
// templates include it under GEMM_GELU (a header reading that macro would keep the GEMM templates from compiling
// in batches, autotune/runtime/compile_batch.py).
#pragma once
#include "dtype.cuh"
#include "gelu.cuh"

// linear_gelu's epilogue where the product's kernel has none (or after a split-K reduce): pre = C + bias, then
// C = gelu_tanh(pre) of the rounded pre, as the fused epilogue takes it (kernel_templates/gemm_wgmma_tma.cu).
extern "C" __global__ void __launch_bounds__(256)
    gemm_bias_gelu(elem_t* __restrict__ C, const elem_t* __restrict__ bias, elem_t* __restrict__ pre, long long mn,
                   int N) {
  const long long stride = (long long)gridDim.x * 256;
  for (long long i = (long long)blockIdx.x * 256 + threadIdx.x; i < mn; i += stride) {
    const elem_t x = from_f32<elem_t>(to_f32(C[i]) + to_f32(bias[i % N]));
    pre[i] = x;
    C[i] = from_f32<elem_t>(gelu_tanh(to_f32(x)));
  }
}
