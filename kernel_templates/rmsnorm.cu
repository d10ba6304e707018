// RMSNorm forward over each row (x, y: DTYPE; w: WDTYPE; fp32 arithmetic): y = x * rsqrt(mean(x^2) + eps) * w.
// Row mapping, vector width, register caching: see rows.cuh. STREAM: streaming loads/stores (common.cuh).
#include "rows.cuh"

extern "C" __global__ void __launch_bounds__(BLOCK) ROW_CLUSTER
rmsnorm(const elem_t* __restrict__ x, const weight_t* __restrict__ w, elem_t* __restrict__ y, int rows, int cols,
        float eps) {
  __shared__ float scratch[32];
  ROW_START(x, y, rows, cols);
  const bool wvec = vec && pre == 0 && aligned_to(w, (int)sizeof(weight_t) * VEC);  // w[j] aligned with x's chunk
  RowCache rc;
  cache_row(rc, xr, cols, lane, vec, pre, 0.f);
  float ss = 0.f;
  for_chunks(rc, xr, cols, lane, vec, pre, 0.f, [&](int, const Vec<VEC>& v) {
#pragma unroll
    for (int e = 0; e < VEC; ++e) ss += v.v[e] * v.v[e];  // padding 0
  });
  const float rstd = rsqrtf(row_reduce(ss, SumOp(), scratch) / (float)cols + eps);
  for_chunks(rc, xr, cols, lane, vec, pre, 0.f, [&](int j, const Vec<VEC>& v) {
    const Vec<VEC> wv = load_chunk<VEC>(w, j, cols, wvec, 0.f);
    Vec<VEC> r;
#pragma unroll
    for (int e = 0; e < VEC; ++e) r.v[e] = v.v[e] * rstd * wv.v[e];
    store_chunk<VEC>(yr, j, cols, vec, r);
  });
}
