// RMSNorm forward over each row (x, y: DTYPE; w: WDTYPE; fp32 arithmetic): y = x * rsqrt(mean(x^2) + eps) * w.
// Row mapping, vector width, register caching: see rows.cuh. STREAM: streaming loads/stores (common.cuh).
#include "rows.cuh"

// The sum of squares of the row's chunks this thread owns.
__device__ __forceinline__ float sum_of_squares(const RowCache& rc, const elem_t* xr, int cols, int lane, bool vec,
                                                int pre) {
  float ss = 0.f;
  for_chunks(rc, xr, cols, lane, vec, pre, 0.f, [&](int, const Vec<VEC>& v) {
#pragma unroll
    for (int e = 0; e < VEC; ++e) ss += v.v[e] * v.v[e];  // padding 0
  });
  return ss;
}

#if MAPPING == 3
// The split mapping's first launch: each block's sum of squares of its part of the row.
extern "C" __global__ void __launch_bounds__(BLOCK)
rmsnorm_split_stats(const elem_t* __restrict__ x, float* __restrict__ partials, int rows, int cols) {
  __shared__ float scratch[32];
  ROW_START_READ(x, rows, cols);
  RowCache rc;
  cache_row(rc, xr, cols, lane, vec, pre, 0.f);
  split_publish<1>(State<1>{{row_reduce(sum_of_squares(rc, xr, cols, lane, vec, pre), SumOp(), scratch)}},
                   partials, row);
}
#endif

extern "C" __global__ void __launch_bounds__(BLOCK) ROW_CLUSTER
rmsnorm(const elem_t* __restrict__ x, const weight_t* __restrict__ w, elem_t* __restrict__ y, int rows, int cols,
        float eps ROW_SPLIT_PARAM) {
  [[maybe_unused]] __shared__ float scratch[32];
  ROW_START(x, y, rows, cols);
#if MAPPING == 3  // the row's sum from its parts' (rmsnorm_split_stats), before this part's own loads
  const float ss = split_gather<1>(row_partials, row, merge_sum, State<1>{{0.f}}).f[0];
#endif
  const bool wvec = vec && pre == 0 && aligned_to(w, (int)sizeof(weight_t) * VEC);  // w[j] aligned with x's chunk
  RowCache rc;
  cache_row(rc, xr, cols, lane, vec, pre, 0.f);
#if MAPPING != 3
  const float ss = row_reduce(sum_of_squares(rc, xr, cols, lane, vec, pre), SumOp(), scratch);
#endif
  const float rstd = rsqrtf(ss / (float)cols + eps);
  for_chunks(rc, xr, cols, lane, vec, pre, 0.f, [&](int j, const Vec<VEC>& v) {
    const Vec<VEC> wv = load_chunk<VEC>(w, j, cols, wvec, 0.f);
    Vec<VEC> r;
#pragma unroll
    for (int e = 0; e < VEC; ++e) r.v[e] = v.v[e] * rstd * wv.v[e];
    store_chunk<VEC>(yr, j, cols, vec, r);
  });
}
