// RMSNorm forward over each row: y = x * rsqrt(mean(x^2) + eps) * w.
// Row mapping, vector width, register caching: see rows.cuh. STREAM: streaming loads/stores (common.cuh).
#include "rows.cuh"

extern "C" __global__ void __launch_bounds__(BLOCK)
rmsnorm(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y, int rows, int cols,
        float eps) {
  __shared__ float scratch[32];
  int row, lane;
  if (!my_row(rows, row, lane)) return;
  const float* xr = x + (size_t)row * cols;
  float* yr = y + (size_t)row * cols;
  const bool vec = cols % VEC == 0 && aligned_to(x, 4 * VEC) && aligned_to(y, 4 * VEC) && aligned_to(w, 4 * VEC);
  RowCache rc;
  cache_row(rc, xr, cols, lane, vec, 0.f);
  float ss = 0.f;
  for_chunks(rc, xr, cols, lane, vec, 0.f, [&](int, const Vec<VEC>& v) {
#pragma unroll
    for (int e = 0; e < VEC; ++e) ss += v.v[e] * v.v[e];  // padding 0
  });
  const float rstd = rsqrtf(row_reduce(ss, SumOp(), scratch) / (float)cols + eps);
  for_chunks(rc, xr, cols, lane, vec, 0.f, [&](int j, const Vec<VEC>& v) {
    const Vec<VEC> wv = load_chunk<VEC>(w, j, cols, vec, 0.f);
    Vec<VEC> r;
#pragma unroll
    for (int e = 0; e < VEC; ++e) r.v[e] = v.v[e] * rstd * wv.v[e];
    store_chunk<VEC>(yr, j, cols, vec, r);
  });
}
