// LayerNorm forward over each row (x, y: DTYPE; w, b: WDTYPE; mean, rstd and all arithmetic: fp32): y = (x - mean) * rstd * w + b, rstd = 1 / sqrt(var + eps); writes mean, rstd.
// Row mapping, vector width, register caching: see rows.cuh. STREAM: streaming loads/stores (common.cuh).
//   STATS  0: two passes (mean, then the mean of squared deviations)
//          1: Welford (one pass; per-thread mean and M2, merged with Chan's formula)
//          2: one pass of E[(x-K)^2] - E[x-K]^2 with K = the row's first element: the shift keeps constant
//             and offset rows exact, where the unshifted E[x^2] - E[x]^2 cancels catastrophically
#include "rows.cuh"

#ifndef STATS
#define STATS 0
#endif

// Welford states (n, mean, M2) of two parts of a row, as one (Chan et al.).
__device__ __forceinline__ State<3> merge_welford(State<3> a, State<3> b) {
  const float n = a.f[0] + b.f[0];
  if (n == 0.f) return a;
  const float d = b.f[1] - a.f[1], f = b.f[0] / n;
  return {{n, a.f[1] + d * f, a.f[2] + b.f[2] + d * d * a.f[0] * f}};
}

extern "C" __global__ void __launch_bounds__(BLOCK) ROW_CLUSTER
layernorm(const elem_t* __restrict__ x, const weight_t* __restrict__ w, const weight_t* __restrict__ b,
          elem_t* __restrict__ y, float* __restrict__ mean_out, float* __restrict__ rstd_out, int rows, int cols,
          float eps) {
  __shared__ float scratch[96];
  ROW_START(x, y, rows, cols);
  const int wb = (int)sizeof(weight_t) * VEC;
  const bool wvec = vec && pre == 0 && aligned_to(w, wb) && aligned_to(b, wb);  // w[j] aligned where x's chunk is
  RowCache rc;
  cache_row(rc, xr, cols, lane, vec, pre, 0.f);
  const float n = (float)cols;
  float mean, var;
#if STATS == 0
  float s = 0.f;
  for_chunks(rc, xr, cols, lane, vec, pre, 0.f, [&](int, const Vec<VEC>& v) {
#pragma unroll
    for (int e = 0; e < VEC; ++e) s += v.v[e];  // padding 0
  });
  mean = row_reduce(s, SumOp(), scratch) / n;
  float q = 0.f;
  for_chunks(rc, xr, cols, lane, vec, pre, 0.f, [&](int j, const Vec<VEC>& v) {
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      const float d = v.v[e] - mean;
      q += (unsigned)(j + e) < (unsigned)cols ? d * d : 0.f;
    }
  });
  var = row_reduce(q, SumOp(), scratch) / n;
#elif STATS == 1
  float wn = 0.f, wmean = 0.f, wm2 = 0.f;
  for_chunks(rc, xr, cols, lane, vec, pre, 0.f, [&](int j, const Vec<VEC>& v) {
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      if ((unsigned)(j + e) < (unsigned)cols) {
        wn += 1.f;
        const float d = v.v[e] - wmean;
        wmean += d / wn;
        wm2 += d * (v.v[e] - wmean);
      }
    }
  });
  const State<3> all = row_combine<3>(State<3>{{wn, wmean, wm2}}, merge_welford, State<3>{{0.f, 0.f, 0.f}}, scratch);
  mean = all.f[1];
  var = all.f[2] / n;
#else
  const float k = load_one(xr);
  float s1 = 0.f, s2 = 0.f;
  for_chunks(rc, xr, cols, lane, vec, pre, 0.f, [&](int j, const Vec<VEC>& v) {
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      const float d = (unsigned)(j + e) < (unsigned)cols ? v.v[e] - k : 0.f;
      s1 += d;
      s2 += d * d;
    }
  });
  // Both sums in one exchange: one set of barriers instead of two (the block waits on each)
  const State<2> sums = row_combine<2>(State<2>{{s1, s2}}, [](State<2> a, State<2> b) {
    return State<2>{{a.f[0] + b.f[0], a.f[1] + b.f[1]}};
  }, State<2>{{0.f, 0.f}}, scratch);
  s1 = sums.f[0] / n;
  s2 = sums.f[1] / n;
  mean = k + s1;
  var = fmaxf(s2 - s1 * s1, 0.f);
#endif
  const float rstd = rsqrtf(var + eps);
  for_chunks(rc, xr, cols, lane, vec, pre, 0.f, [&](int j, const Vec<VEC>& v) {
    const Vec<VEC> wv = load_chunk<VEC>(w, j, cols, wvec, 0.f);
    const Vec<VEC> bv = load_chunk<VEC>(b, j, cols, wvec, 0.f);
    Vec<VEC> r;
#pragma unroll
    for (int e = 0; e < VEC; ++e) r.v[e] = (v.v[e] - mean) * rstd * wv.v[e] + bv.v[e];
    store_chunk<VEC>(yr, j, cols, vec, r);
  });
  if (lane == 0) {
    mean_out[row] = mean;
    rstd_out[row] = rstd;
  }
}
