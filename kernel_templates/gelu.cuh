// GELU in its tanh form (GPT-2's, torch's approximate="tanh") and its derivative, in fp32, for a GEMM epilogue
// (linear_gelu) and the backward that meets it (gelu_bias_grad, kernel_templates/column_sum.cu). tanhf, as torch's
// own tanh-GELU takes it, not tanh.approx: an fp32 output keeps fp32 accuracy. (For x ≲ −4, 1 + t and 1 − t²
// cancel: the relative error of gelu' grows there, its absolute error stays tiny, as in torch's formula.)
#pragma once
#include <stdint.h>

#include "dtype.cuh"

#define GELU_SQRT_2_OVER_PI 0.7978845608028654f
#define GELU_CUBIC 0.044715f

__device__ __forceinline__ float gelu_tanh(float x) {
  const float u = GELU_SQRT_2_OVER_PI * (x + GELU_CUBIC * x * x * x);
  return 0.5f * x * (1.f + tanhf(u));
}

__device__ __forceinline__ float gelu_tanh_grad(float x) {
  const float x2 = x * x;
  const float t = tanhf(GELU_SQRT_2_OVER_PI * x * (1.f + GELU_CUBIC * x2));
  return 0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * GELU_SQRT_2_OVER_PI * (1.f + 3.f * GELU_CUBIC * x2);
}

// C = gelu_tanh(pre) over rows [row0, row0 + ROWS) × columns [col0, col0 + COLS) that the `threads` threads of
// named barrier `bar` (thread t of them) have just stored to pre. Read back after the barrier, so that the
// accumulators are dead by then (holding them through a second store spilled at 128 per thread), and GELU is taken
// of the rounded value, as torch's GELU after a Linear takes it. 16-byte vectors where the rows allow.
template <int ROWS, int COLS>
__device__ __forceinline__ void gelu_from_pre(const elem_t* __restrict__ pre, elem_t* __restrict__ C, int M, int N,
                                              int row0, int col0, int bar, int threads, int t) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(bar), "r"(threads) : "memory");
  constexpr int V = 16 / sizeof(elem_t);
  static_assert(COLS % V == 0, "whole vectors per tile row");
  const bool vectors = N % V == 0 && (reinterpret_cast<uintptr_t>(pre) & 15) == 0 &&
                       (reinterpret_cast<uintptr_t>(C) & 15) == 0 && col0 % V == 0;
  if (vectors) {
    for (int i = t; i < ROWS * (COLS / V); i += threads) {
      const int row = row0 + i / (COLS / V), col = col0 + (i % (COLS / V)) * V;
      if (row >= M || col >= N) continue;  // N and col multiples of V: a vector lies wholly inside or outside
      const size_t at = (size_t)row * N + col;
      uint4 v = *reinterpret_cast<const uint4*>(pre + at);
      elem_t* e = reinterpret_cast<elem_t*>(&v);
#pragma unroll
      for (int j = 0; j < V; ++j) e[j] = from_f32<elem_t>(gelu_tanh(to_f32(e[j])));
      *reinterpret_cast<uint4*>(C + at) = v;
    }
    return;
  }
  for (int i = t; i < ROWS * COLS; i += threads) {
    const int row = row0 + i / COLS, col = col0 + i % COLS;
    if (row < M && col < N) {
      const size_t at = (size_t)row * N + col;
      C[at] = from_f32<elem_t>(gelu_tanh(to_f32(pre[at])));
    }
  }
}
