// Softmax over each row of a rows×cols matrix (float, half or bfloat16: DTYPE; fp32 arithmetic): y = exp(x - max) / sum(exp(x - max)).
// Row mapping, vector width and register caching: see rows.cuh.
//   ONLINE  0: three passes (max, sum of exponentials, write); 1: one pass for max and sum together (the
//           running sum is rescaled when the maximum grows), then the write
// -inf entries give 0; large values do not overflow (every exponent is ≤ 0).
#include "rows.cuh"

#ifndef ONLINE
#define ONLINE 0
#endif

// (max, sum of exp(x - max)) of two parts of a row, as one.
__device__ __forceinline__ State<2> merge_max_sum(State<2> a, State<2> b) {
  const float m = fmaxf(a.f[0], b.f[0]);
  if (m == -INFINITY) return {{m, 0.f}};  // both empty so far (all -inf)
  return {{m, a.f[1] * __expf(a.f[0] - m) + b.f[1] * __expf(b.f[0] - m)}};
}

__device__ __forceinline__ void online_add(float& m, float& s, float v) {
  // Branch-light (a data-dependent branch per element made ptxas spill): rescale to the new maximum.
  const float mn = fmaxf(m, v);
  if (mn != -INFINITY) {  // still all -inf: nothing to add
    s = s * __expf(m - mn) + __expf(v - mn);  // m = -inf: s = 0 and exp(-inf) = 0
    m = mn;
  }
}

extern "C" __global__ void __launch_bounds__(BLOCK) ROW_CLUSTER
softmax(const elem_t* __restrict__ x, elem_t* __restrict__ y, int rows, int cols) {
  __shared__ float scratch[64];
  ROW_START(x, y, rows, cols);
  RowCache rc;
  cache_row(rc, xr, cols, lane, vec, pre, -INFINITY);

#if ONLINE
  float m0 = -INFINITY, s0 = 0.f;  // plain floats: a struct captured by reference would live on the stack
  for_chunks(rc, xr, cols, lane, vec, pre, -INFINITY, [&](int, const Vec<VEC>& v) {
#pragma unroll
    for (int e = 0; e < VEC; ++e) online_add(m0, s0, v.v[e]);  // padding is -inf: adds nothing
  });
  const State<2> ms = row_combine<2>(State<2>{{m0, s0}}, merge_max_sum, State<2>{{-INFINITY, 0.f}}, scratch);
  const float m = ms.f[0], inv = 1.f / ms.f[1];
#else
  float m = -INFINITY;
  for_chunks(rc, xr, cols, lane, vec, pre, -INFINITY, [&](int, const Vec<VEC>& v) {
#pragma unroll
    for (int e = 0; e < VEC; ++e) m = fmaxf(m, v.v[e]);
  });
  m = row_reduce(m, MaxOp(), scratch);
  float s = 0.f;
  for_chunks(rc, xr, cols, lane, vec, pre, -INFINITY, [&](int, const Vec<VEC>& v) {
#pragma unroll
    for (int e = 0; e < VEC; ++e) s += __expf(v.v[e] - m);  // padding: exp(-inf) = 0
  });
  const float inv = 1.f / row_reduce(s, SumOp(), scratch);
#endif
  for_chunks(rc, xr, cols, lane, vec, pre, -INFINITY, [&](int j, const Vec<VEC>& v) {
    Vec<VEC> r;
#pragma unroll
    for (int e = 0; e < VEC; ++e) r.v[e] = __expf(v.v[e] - m) * inv;
    store_chunk<VEC>(yr, j, cols, vec, r);
  });
}
