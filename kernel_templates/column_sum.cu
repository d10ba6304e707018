// Column sums of an M×N row-major matrix of DTYPE (float, half, bfloat16): the bias gradient of a Linear layer,
// dbias[n] = Σ_m dC[m][n] (OP 0), or, fused with the backward of a tanh-GELU (OP 1), dpre = dy · gelu_tanh'(pre)
// (fp32, rounded once to DTYPE) and dbias[n] = Σ_m dpre[m][n] summed over the fp32 values before rounding.
// Deterministic (no atomics), every sum in fp32 and in a fixed order:
//   column_sum           grid (ceil(N / (32·VEC)), SPLITS), WARPS warps. Block (x, y) owns the strip of 32·VEC
//                        columns from x·32·VEC (a warp spans it, VEC consecutive columns per lane) and the rows
//                        [y·ROWS_PER_BLOCK, (y+1)·ROWS_PER_BLOCK); warp w adds rows w, w + WARPS, ... in turn into
//                        VEC fp32 sums per lane, the warps' sums are added in warp order through shared memory, and
//                        the block writes them to row y of the fp32 workspace partials (SPLITS × N).
//   column_sum_finalize  one thread per column adds the SPLITS partial rows in row order, rounds once, writes dbias.
//   OP              0 bias_grad (reads dC), 1 gelu_bias_grad (reads dy and pre, writes dpre)
//   VEC             columns per lane (16 B at most): one vector access where N % VEC == 0 and every pointer is
//                   VEC-aligned, else VEC scalar accesses (still VEC·kUnroll loads in flight per lane)
//   WARPS           warps per block
//   ROWS_PER_BLOCK  rows per block: SPLITS = ceil(M / ROWS_PER_BLOCK), the launch plan's grid.y (≤ 65535)
#include "common.cuh"

#ifndef OP
#define OP 0
#endif
#ifndef VEC
#define VEC 4
#endif
#ifndef WARPS
#define WARPS 8
#endif
#ifndef ROWS_PER_BLOCK
#define ROWS_PER_BLOCK 128
#endif

constexpr int kStrip = 32 * VEC;  // columns per block
// Rows a warp loads before it adds any: 64 B per lane in flight (4 rows of dC, or 2 rows of dy and pre, 16 B each);
// with the rule default's 2–3 blocks of 8 warps per SM that is 32–48 KB per SM, what an H100/H200 SM needs to keep
// its share of HBM busy. GELU's 2 rows hold it to 64 registers at VEC=8 halves (4 rows took 128: 2 blocks per SM).
constexpr int kUnroll = OP == 1 ? 2 : 4;
constexpr int kFinalUnroll = 8;  // partial rows the finalize loads before it adds them (in order)

#if OP == 1
#include "gelu.cuh"  // gelu_tanh_grad
#endif

// This lane's VEC column sums over the block's rows (and, OP 1, dpre of those rows). VECTOR: 16-byte (VEC-wide)
// accesses; else element by element. Columns at or past N read as 0 and are not written.
template <bool VECTOR>
__device__ __forceinline__ void lane_sums(const elem_t* __restrict__ x, const elem_t* __restrict__ pre,
                                          elem_t* __restrict__ dpre, int rows, int cols, float (&acc)[VEC]) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int j = blockIdx.x * kStrip + lane * VEC;
  const int first = blockIdx.y * ROWS_PER_BLOCK;
  const int end = min(rows, first + ROWS_PER_BLOCK);  // first + ROWS_PER_BLOCK ≤ 65535·1024: no overflow
  // VECTOR: N % VEC == 0, so a lane's VEC columns lie wholly inside the row (j < cols) and one access takes them.
  auto load = [&](const elem_t* row) {
    return VECTOR ? load_vec<VEC>(row + j) : load_chunk<VEC>(row, j, cols, false, 0.f);
  };
#pragma unroll
  for (int e = 0; e < VEC; ++e) acc[e] = 0.f;
  if (j >= cols) return;  // lanes past the last column (the last strip only); they still join the block's barrier
  for (int r0 = first + warp; r0 < end; r0 += WARPS * kUnroll) {
    Vec<VEC> v[kUnroll];
#if OP == 1
    Vec<VEC> p[kUnroll];
#endif
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {  // every load of the step before the first addition
      const int r = r0 + u * WARPS;
      if (r < end) {  // rows past the block's are neither read nor added (the next loop stops before them)
        v[u] = load(x + (size_t)r * cols);
#if OP == 1
        p[u] = load(pre + (size_t)r * cols);
#endif
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int r = r0 + u * WARPS;
      if (r >= end) break;
#if OP == 1
#pragma unroll
      for (int e = 0; e < VEC; ++e) v[u].v[e] *= gelu_tanh_grad(p[u].v[e]);
      if (VECTOR) store_vec<VEC>(dpre + (size_t)r * cols + j, v[u]);
      else store_chunk<VEC>(dpre + (size_t)r * cols, j, cols, false, v[u]);
#endif
#pragma unroll
      for (int e = 0; e < VEC; ++e) acc[e] += v[u].v[e];  // the fp32 values, before any rounding
    }
  }
}

extern "C" __global__ void __launch_bounds__(32 * WARPS)
column_sum(const elem_t* __restrict__ x,
#if OP == 1
           const elem_t* __restrict__ pre, elem_t* __restrict__ dpre,
#endif
           float* __restrict__ partials, int rows, int cols) {
#if OP == 0
  const elem_t* pre = nullptr;
  elem_t* dpre = nullptr;
#endif
  __shared__ __align__(16) float sums[WARPS][kStrip];  // [warp][column of the strip]
  const int vb = (int)sizeof(elem_t) * VEC;
  const bool vec = cols % VEC == 0 && aligned_to(x, vb) &&
                   (OP == 0 || (aligned_to(pre, vb) && aligned_to(dpre, vb)));
  float acc[VEC];
  if (vec) lane_sums<true>(x, pre, dpre, rows, cols, acc);
  else lane_sums<false>(x, pre, dpre, rows, cols, acc);
  // A lane's VEC sums in one access of up to 16 B (two for VEC = 8: 2-way bank conflicts, once per block), then
  // each column of the strip read by one thread, consecutive threads consecutive columns (conflict-free).
  Vec<VEC> mine;
#pragma unroll
  for (int e = 0; e < VEC; ++e) mine.v[e] = acc[e];
  store_vec<VEC, false>(&sums[threadIdx.x / 32][(threadIdx.x % 32) * VEC], mine);
  __syncthreads();
  float* out = partials + (size_t)blockIdx.y * cols;
  for (int c = threadIdx.x; c < kStrip; c += 32 * WARPS) {
    const int j = blockIdx.x * kStrip + c;
    if (j >= cols) break;
    float total = 0.f;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) total += sums[w][c];  // warp order: the same bits every run
    out[j] = total;
  }
}

// dbias[j] = Σ_s partials[s][j], s in order (the partials were written by the previous launch). One thread per
// column: consecutive threads read consecutive columns of each partial row.
extern "C" __global__ void column_sum_finalize(const float* __restrict__ partials, elem_t* __restrict__ dbias,
                                               int splits, int cols) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= cols) return;
  const float* p = partials + j;
  float acc = 0.f;
  int s = 0;
  for (; s + kFinalUnroll <= splits; s += kFinalUnroll) {
    float v[kFinalUnroll];
#pragma unroll
    for (int k = 0; k < kFinalUnroll; ++k) v[k] = p[(size_t)(s + k) * cols];  // loads in flight together
#pragma unroll
    for (int k = 0; k < kFinalUnroll; ++k) acc += v[k];
  }
  for (; s < splits; ++s) acc += p[(size_t)s * cols];
  store_one(dbias + j, acc);
}
