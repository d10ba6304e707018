// GELU in its tanh form (GPT-2's, torch's approximate="tanh") and its derivative, in fp32, for a GEMM epilogue
// (linear_gelu) and the backward that meets it (gelu_bias_grad, kernel_templates/column_sum.cu). Written through
// 1 + tanh(u) = 2·σ(2u), which is exact algebra and cancels nowhere (0.5·x·(1 + tanhf(u)) loses the low bits of
// 1 + t for x ≲ −3), in a few instructions: one exp, one reciprocal.
//   gelu(x)  = x·s,  s = σ(2u) = 1 / (1 + e^{−2u}),  u = √(2/π) · (x + 0.044715·x³)
//   gelu'(x) = s + x·s·(1 − s) · 2√(2/π) · (1 + 3·0.044715·x²),  1 − s = e^{−2u}·s
// A 16-bit output takes __expf and a fast divide (a few 1e-7 relative before its 2^-9 or 2^-11 rounding); fp32
// takes expf and an IEEE divide, to keep fp32 accuracy.
#pragma once
#include <stdint.h>

#include "dtype.cuh"

#define GELU_SQRT_2_OVER_PI 0.7978845608028654f
#define GELU_CUBIC 0.044715f

// s = σ(2u) for u = √(2/π)·x·(1 + 0.044715·x²), and 1 − s taken as e^{−2u}·s (1 − s itself would cancel where
// s → 1); e^{−2u} → 0 gives s = 1.
__device__ __forceinline__ float gelu_sigmoid(float x, float& one_minus) {
  const float two_u = 2.f * GELU_SQRT_2_OVER_PI * x * (1.f + GELU_CUBIC * x * x);
  // e^{−2u} held below 1e30: s is then 1e-30 where it underflows (x ≲ −9, GELU ≈ 0 either way), and 1 − s = e·s
  // stays 1, not ∞·0.
#if DTYPE == 0
  const float e = fminf(expf(-two_u), 1e30f), s = 1.f / (1.f + e);
#else
  const float e = fminf(__expf(-two_u), 1e30f), s = __fdividef(1.f, 1.f + e);
#endif
  one_minus = e * s;
  return s;
}

__device__ __forceinline__ float gelu_tanh(float x) {
  float one_minus;
  return x * gelu_sigmoid(x, one_minus);
}

__device__ __forceinline__ float gelu_tanh_grad(float x) {
  float one_minus;
  const float s = gelu_sigmoid(x, one_minus);
  return s + x * s * one_minus * (2.f * GELU_SQRT_2_OVER_PI) * (1.f + 3.f * GELU_CUBIC * x * x);
}

// C = gelu_tanh(pre) over rows [row0, row0 + ROWS) × columns [col0, col0 + COLS) that the THREADS threads of
// named barrier `bar` (thread t of them) have just stored to pre. Read back after the barrier, so that the
// accumulators are dead by then (holding them through a second store spilled at 128 per thread), and GELU is taken
// of the rounded value, as torch's GELU after a Linear takes it. 16-byte vectors where the rows allow, CHUNK of
// them loaded before any is used: the reads come back from L2, and one at a time each would wait its whole trip.
template <int ROWS, int COLS, int THREADS>
__device__ __forceinline__ void gelu_from_pre(const elem_t* __restrict__ pre, elem_t* __restrict__ C, int M, int N,
                                              int row0, int col0, int bar, int t) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(bar), "n"(THREADS) : "memory");
  constexpr int V = 16 / sizeof(elem_t), PER_ROW = COLS / V, ITERS = ROWS * PER_ROW / THREADS;
  // The largest of 8, 6, 4, 3, 2, 1 that divides ITERS (64×192 tiles: 12 vectors a thread).
  constexpr int CHUNK = ITERS % 8 == 0 ? 8 : ITERS % 6 == 0 ? 6 : ITERS % 4 == 0 ? 4 : ITERS % 3 == 0 ? 3
                        : ITERS % 2 == 0 ? 2 : 1;
  static_assert(COLS % V == 0 && (ROWS * PER_ROW) % THREADS == 0 && ITERS % CHUNK == 0, "whole vectors per thread");
  const bool vectors = N % V == 0 && (reinterpret_cast<uintptr_t>(pre) & 15) == 0 &&
                       (reinterpret_cast<uintptr_t>(C) & 15) == 0 && col0 % V == 0;
  if (vectors) {
#pragma unroll
    for (int c0 = 0; c0 < ITERS; c0 += CHUNK) {
      uint4 v[CHUNK];
      size_t at[CHUNK];
      bool in[CHUNK];
#pragma unroll
      for (int k = 0; k < CHUNK; ++k) {
        const int i = t + (c0 + k) * THREADS, row = row0 + i / PER_ROW, col = col0 + (i % PER_ROW) * V;
        in[k] = row < M && col < N;  // N and col multiples of V: a vector lies wholly inside or outside
        at[k] = (size_t)row * N + col;
        if (in[k]) v[k] = *reinterpret_cast<const uint4*>(pre + at[k]);
      }
#pragma unroll
      for (int k = 0; k < CHUNK; ++k) {
        if (!in[k]) continue;
        elem_t* e = reinterpret_cast<elem_t*>(&v[k]);
#pragma unroll
        for (int j = 0; j < V; ++j) e[j] = from_f32<elem_t>(gelu_tanh(to_f32(e[j])));
        *reinterpret_cast<uint4*>(C + at[k]) = v[k];
      }
    }
    return;
  }
  for (int i = t; i < ROWS * COLS; i += THREADS) {
    const int row = row0 + i / COLS, col = col0 + i % COLS;
    if (row < M && col < N) {
      const size_t at = (size_t)row * N + col;
      C[at] = from_f32<elem_t>(gelu_tanh(to_f32(pre[at])));
    }
  }
}
