// LayerNorm forward over each row (x, y: DTYPE; w, b: WDTYPE; mean, rstd and all arithmetic: fp32): y = (x - mean) * rstd * w + b, rstd = 1 / sqrt(var + eps); writes mean, rstd.
// Row mapping, vector width, register caching: see rows.cuh. STREAM: streaming loads/stores (common.cuh).
//   STATS  0: two passes (mean, then the mean of squared deviations)
//          1: Welford (one pass; per-thread mean and M2, merged with Chan's formula)
//          2: one pass of E[(x-K)^2] - E[x-K]^2 with K = the row's first element: the shift keeps constant
//             and offset rows exact, where the unshifted E[x^2] - E[x]^2 cancels catastrophically
//          MAPPING 3 (a row split over blocks) needs STATS 1 or 2: its stats launch publishes one state per block
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

// The shift of STATS 2's sums: the row's first element (STATS 1 takes none).
__device__ __forceinline__ float ln_shift(const elem_t* xr) { return STATS == 2 ? load_one(xr) : 0.f; }

#if STATS == 1
#define LN_STATE 3
__device__ __forceinline__ State<3> ln_merge(State<3> a, State<3> b) { return merge_welford(a, b); }

// Welford's (n, mean, M2) over the row's chunks this thread's group owns.
__device__ __forceinline__ State<3> ln_state(const RowCache& rc, const elem_t* xr, int cols, int lane, bool vec,
                                             int pre, float* scratch, float) {
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
  return row_combine<3>(State<3>{{wn, wmean, wm2}}, merge_welford, State<3>{{0.f, 0.f, 0.f}}, scratch);
}

__device__ __forceinline__ void ln_moments(const State<3>& all, float, float n, float& mean, float& var) {
  mean = all.f[1];
  var = all.f[2] / n;
}
#elif STATS == 2
#define LN_STATE 2
__device__ __forceinline__ State<2> ln_merge(State<2> a, State<2> b) {
  return State<2>{{a.f[0] + b.f[0], a.f[1] + b.f[1]}};
}

// The sums of (x - k) and (x - k)^2 over the row's chunks this thread's group owns (k: the row's first element).
__device__ __forceinline__ State<2> ln_state(const RowCache& rc, const elem_t* xr, int cols, int lane, bool vec,
                                             int pre, float* scratch, float k) {
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
  return row_combine<2>(State<2>{{s1, s2}}, ln_merge, State<2>{{0.f, 0.f}}, scratch);
}

__device__ __forceinline__ void ln_moments(const State<2>& sums, float k, float n, float& mean, float& var) {
  const float s1 = sums.f[0] / n, s2 = sums.f[1] / n;
  mean = k + s1;
  var = fmaxf(s2 - s1 * s1, 0.f);
}
#endif

#if MAPPING == 3
static_assert(STATS != 0, "MAPPING 3 (a row split over blocks) publishes one state per block: STATS 1 or 2");

// The split mapping's first launch: each block's state of its part of the row.
extern "C" __global__ void __launch_bounds__(BLOCK)
layernorm_split_stats(const elem_t* __restrict__ x, float* __restrict__ partials, int rows, int cols) {
  __shared__ float scratch[96];
  ROW_START_READ(x, rows, cols);
  const float k = ln_shift(xr);  // before the row's loads (after them, ptxas spilled 8 bytes)
  RowCache rc;
  cache_row(rc, xr, cols, lane, vec, pre, 0.f);
  split_publish<LN_STATE>(ln_state(rc, xr, cols, lane, vec, pre, scratch, k), partials, row);
}
#endif

extern "C" __global__ void __launch_bounds__(BLOCK) ROW_CLUSTER
layernorm(const elem_t* __restrict__ x, const weight_t* __restrict__ w, const weight_t* __restrict__ b,
          elem_t* __restrict__ y, float* __restrict__ mean_out, float* __restrict__ rstd_out, int rows, int cols,
          float eps ROW_SPLIT_PARAM) {
  [[maybe_unused]] __shared__ float scratch[96];
  ROW_START(x, y, rows, cols);
#if MAPPING == 3  // the row's state from its parts' (layernorm_split_stats), before this part's own loads
  const State<LN_STATE> split = split_gather<LN_STATE>(row_partials, row, ln_merge, State<LN_STATE>{});
#endif
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
#else
  const float k = ln_shift(xr);
#if MAPPING == 3
  const State<LN_STATE> st = split;
#else
  const State<LN_STATE> st = ln_state(rc, xr, cols, lane, vec, pre, scratch, k);
#endif
  ln_moments(st, k, n, mean, var);
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
