// Softmax over each row of a rows×cols matrix (float, half or bfloat16: DTYPE; fp32 arithmetic): y = exp(x - max) / sum(exp(x - max)).
// Row mapping, vector width and register caching: see rows.cuh.
//   ONLINE  0: three passes (max, sum of exponentials, write); 1: one pass for max and sum together (the
//           running sum is rescaled when the maximum grows), then the write; MAPPING 3 (a row split over
//           blocks) needs ONLINE=1: its stats launch publishes one (max, sum) per block
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

// Adds a chunk to the running (max m, sum s): the chunk's own maximum first, so that the sum is rescaled once per
// chunk (VEC + 1 exponentials, not 2 VEC as element by element).
__device__ __forceinline__ void online_add(float& m, float& s, const Vec<VEC>& v) {
  float cm = v.v[0];
#pragma unroll
  for (int e = 1; e < VEC; ++e) cm = fmaxf(cm, v.v[e]);
  const float mn = fmaxf(m, cm);
  if (mn != -INFINITY) {  // still all -inf (padding included): nothing to add
    float add = 0.f;
#pragma unroll
    for (int e = 0; e < VEC; ++e) add += __expf(v.v[e] - mn);  // exp(-inf) = 0
    s = s * __expf(m - mn) + add;  // m = -inf: s = 0 and exp(-inf) = 0
    m = mn;
  }
}

// (max, sum of exp(x - max)) of the row's chunks this thread's group owns, in one pass.
__device__ __forceinline__ State<2> online_max_sum(const RowCache& rc, const elem_t* xr, int cols, int lane, bool vec,
                                                   int pre, float* scratch) {
  float m0 = -INFINITY, s0 = 0.f;  // plain floats: a struct captured by reference would live on the stack
  for_chunks(rc, xr, cols, lane, vec, pre, -INFINITY, [&](int, const Vec<VEC>& v) { online_add(m0, s0, v); });
  return row_combine<2>(State<2>{{m0, s0}}, merge_max_sum, State<2>{{-INFINITY, 0.f}}, scratch);
}

#if MAPPING == 3
static_assert(ONLINE, "MAPPING 3 (a row split over blocks) publishes one state per block: ONLINE=1");

// The split mapping's first launch: each block's (max, sum) of its part of the row.
extern "C" __global__ void __launch_bounds__(BLOCK)
softmax_split_stats(const elem_t* __restrict__ x, float* __restrict__ partials, int rows, int cols) {
  __shared__ float scratch[64];
  ROW_START_READ(x, rows, cols);
  RowCache rc;
  cache_row(rc, xr, cols, lane, vec, pre, -INFINITY);
  split_publish<2>(online_max_sum(rc, xr, cols, lane, vec, pre, scratch), partials, row);
}
#endif

extern "C" __global__ void __launch_bounds__(BLOCK) ROW_CLUSTER
softmax(const elem_t* __restrict__ x, elem_t* __restrict__ y, int rows, int cols ROW_SPLIT_PARAM) {
  [[maybe_unused]] __shared__ float scratch[64];
  ROW_START(x, y, rows, cols);
#if MAPPING == 3  // the row's (max, sum) from its parts' (softmax_split_stats), before this part's own loads (after
                  // them, ptxas spilled at 32 chunks per thread)
  const State<2> ms = split_gather<2>(row_partials, row, merge_max_sum, State<2>{{-INFINITY, 0.f}});
#endif
  RowCache rc;
  cache_row(rc, xr, cols, lane, vec, pre, -INFINITY);

#if MAPPING == 3
  const float m = ms.f[0], inv = 1.f / ms.f[1];
#elif ONLINE
  const State<2> ms = online_max_sum(rc, xr, cols, lane, vec, pre, scratch);
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
