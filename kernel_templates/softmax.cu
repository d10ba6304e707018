// Softmax over each row of a rows×cols float matrix: y = exp(x - max) / sum(exp(x - max)).
// Row mapping, vector width and register caching: see rows.cuh.
//   ONLINE  0: three passes (max, sum of exponentials, write); 1: one pass for max and sum together (the
//           running sum is rescaled when the maximum grows), then the write
// -inf entries give 0; large values do not overflow (every exponent is ≤ 0).
#include "rows.cuh"

#ifndef ONLINE
#define ONLINE 0
#endif

struct MaxSum {
  float m, s;
};

__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return {m, 0.f};  // both empty so far (all -inf)
  return {m, a.s * __expf(a.m - m) + b.s * __expf(b.m - m)};
}

__device__ __forceinline__ void online_add(float& m, float& s, float v) {
  // Branch-light (a data-dependent branch per element made ptxas spill): rescale to the new maximum.
  const float mn = fmaxf(m, v);
  if (mn != -INFINITY) {  // still all -inf: nothing to add
    s = s * __expf(m - mn) + __expf(v - mn);  // m = -inf: s = 0 and exp(-inf) = 0
    m = mn;
  }
}

__device__ __forceinline__ MaxSum row_merge(MaxSum a, float* scratch) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    MaxSum b{__shfl_xor_sync(0xffffffffu, a.m, o), __shfl_xor_sync(0xffffffffu, a.s, o)};
    a = merge(a, b);
  }
#if MAPPING == 1
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) {
    scratch[warp] = a.m;
    scratch[32 + warp] = a.s;
  }
  __syncthreads();
  a = lane < BLOCK / 32 ? MaxSum{scratch[lane], scratch[32 + lane]} : MaxSum{-INFINITY, 0.f};
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    MaxSum b{__shfl_xor_sync(0xffffffffu, a.m, o), __shfl_xor_sync(0xffffffffu, a.s, o)};
    a = merge(a, b);
  }
#endif
  return a;
}

extern "C" __global__ void __launch_bounds__(BLOCK)
softmax(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  __shared__ float scratch[64];
  int row, lane;
  if (!my_row(rows, row, lane)) return;
  const float* xr = x + (size_t)row * cols;
  float* yr = y + (size_t)row * cols;
  const bool vec = cols % VEC == 0 && aligned_to(x, 4 * VEC) && aligned_to(y, 4 * VEC);
  RowCache rc;
  cache_row(rc, xr, cols, lane, vec, -INFINITY);

#if ONLINE
  float m0 = -INFINITY, s0 = 0.f;  // plain floats: a struct captured by reference would live on the stack
  for_chunks(rc, xr, cols, lane, vec, -INFINITY, [&](int, const Vec<VEC>& v) {
#pragma unroll
    for (int e = 0; e < VEC; ++e) online_add(m0, s0, v.v[e]);  // padding is -inf: adds nothing
  });
  const MaxSum ms = row_merge(MaxSum{m0, s0}, scratch);
  const float m = ms.m, inv = 1.f / ms.s;
#else
  float m = -INFINITY;
  for_chunks(rc, xr, cols, lane, vec, -INFINITY, [&](int, const Vec<VEC>& v) {
#pragma unroll
    for (int e = 0; e < VEC; ++e) m = fmaxf(m, v.v[e]);
  });
  m = row_reduce(m, MaxOp(), scratch);
  float s = 0.f;
  for_chunks(rc, xr, cols, lane, vec, -INFINITY, [&](int, const Vec<VEC>& v) {
#pragma unroll
    for (int e = 0; e < VEC; ++e) s += __expf(v.v[e] - m);  // padding: exp(-inf) = 0
  });
  const float inv = 1.f / row_reduce(s, SumOp(), scratch);
#endif
  for_chunks(rc, xr, cols, lane, vec, -INFINITY, [&](int j, const Vec<VEC>& v) {
    Vec<VEC> r;
#pragma unroll
    for (int e = 0; e < VEC; ++e) r.v[e] = __expf(v.v[e] - m) * inv;
    store_chunk<VEC>(yr, j, cols, vec, r);
  });
}
