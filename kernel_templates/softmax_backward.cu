// Softmax backward over each row of a rows×cols matrix (y, dy, dx: DTYPE; fp32 arithmetic): dx = y * (dy - Σ dy·y),
// y being the forward's output.
// Row mapping and vector width: see rows.cuh. CACHE 1 keeps both rows (y and dy) in registers between the dot
// product and the write (2 × ITEMS × VEC fp32 values per thread); CACHE 0 reads them again (from L2 where the rows
// fit it). MAPPING 3 splits the dot product over blocks: `softmax_backward_split_stats` publishes each block's part.
#include "rows.cuh"

#if CACHE == 2
#error "softmax_backward keeps y and dy in registers (CACHE=1) or reads them again (CACHE=0)"
#endif

// Σ dy·y over the chunks of the row this thread owns (padding reads 0).
__device__ __forceinline__ float dot_part(const RowCache& ry, const RowCache& rd, const elem_t* yr, const elem_t* dyr,
                                          int cols, int lane, bool vec, int pre) {
  float s = 0.f;
#if CACHE == 1
#pragma unroll
  for (int t = 0; t < ITEMS; ++t) {
    if ((lane + t * TPR) * VEC - pre < cols) {
#pragma unroll
      for (int e = 0; e < VEC; ++e) s += ry.c[t].v[e] * rd.c[t].v[e];
    }
  }
#else
  for (int j = lane * VEC - pre; j < cols; j += TPR * VEC) {
    const Vec<VEC> a = load_chunk<VEC>(yr, j, cols, vec, 0.f), b = load_chunk<VEC>(dyr, j, cols, vec, 0.f);
#pragma unroll
    for (int e = 0; e < VEC; ++e) s += a.v[e] * b.v[e];
  }
#endif
  return s;
}

// The row's start: y's, dy's (and dx's) rows, whether all take VEC-wide accesses, the chunk offset (row_pre).
#define BACKWARD_ROW_START(aligned)                                                                \
  int row, lane;                                                                                   \
  if (!my_row(rows, row, lane)) return;                                                            \
  const size_t base = (size_t)row * cols;                                                          \
  const elem_t* yr = y + base;                                                                     \
  const elem_t* dyr = dy + base;                                                                   \
  const bool vec = (aligned);                                                                      \
  const int pre = row_pre(row, cols, vec)
#define ALIGNED(p) aligned_to(p, (int)sizeof(elem_t) * VEC)

#if MAPPING == 3
// The split mapping's first launch: each block's Σ dy·y over its part of the row.
extern "C" __global__ void __launch_bounds__(BLOCK)
softmax_backward_split_stats(const elem_t* __restrict__ y, const elem_t* __restrict__ dy, float* __restrict__ partials,
                             int rows, int cols) {
  __shared__ float scratch[32];
  BACKWARD_ROW_START(ALIGNED(y) && ALIGNED(dy));
  RowCache ry, rd;
  cache_row(ry, yr, cols, lane, vec, pre, 0.f);
  cache_row(rd, dyr, cols, lane, vec, pre, 0.f);
  split_publish<1>(State<1>{{row_reduce(dot_part(ry, rd, yr, dyr, cols, lane, vec, pre), SumOp(), scratch)}},
                   partials, row);
}
#endif

extern "C" __global__ void __launch_bounds__(BLOCK) ROW_CLUSTER
softmax_backward(const elem_t* __restrict__ y, const elem_t* __restrict__ dy, elem_t* __restrict__ dx, int rows,
                 int cols ROW_SPLIT_PARAM) {
  [[maybe_unused]] __shared__ float scratch[32];
  BACKWARD_ROW_START(ALIGNED(y) && ALIGNED(dy) && ALIGNED(dx));
  elem_t* dxr = dx + base;
#if MAPPING == 3  // the row's Σ dy·y from its parts' (softmax_backward_split_stats), before this part's loads
  const float dot = split_gather<1>(row_partials, row, merge_sum, State<1>{{0.f}}).f[0];
#endif
  RowCache ry, rd;
  cache_row(ry, yr, cols, lane, vec, pre, 0.f);
  cache_row(rd, dyr, cols, lane, vec, pre, 0.f);
#if MAPPING != 3
  const float dot = row_reduce(dot_part(ry, rd, yr, dyr, cols, lane, vec, pre), SumOp(), scratch);
#endif
#if CACHE == 1
#pragma unroll
  for (int t = 0; t < ITEMS; ++t) {
    const int j = (lane + t * TPR) * VEC - pre;
    if (j < cols) {
      Vec<VEC> r;
#pragma unroll
      for (int e = 0; e < VEC; ++e) r.v[e] = ry.c[t].v[e] * (rd.c[t].v[e] - dot);
      store_chunk<VEC>(dxr, j, cols, vec, r);
    }
  }
#else
  for (int j = lane * VEC - pre; j < cols; j += TPR * VEC) {
    const Vec<VEC> a = load_chunk<VEC>(yr, j, cols, vec, 0.f), b = load_chunk<VEC>(dyr, j, cols, vec, 0.f);
    Vec<VEC> r;
#pragma unroll
    for (int e = 0; e < VEC; ++e) r.v[e] = a.v[e] * (b.v[e] - dot);
    store_chunk<VEC>(dxr, j, cols, vec, r);
  }
#endif
}
