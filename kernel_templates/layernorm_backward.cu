// LayerNorm backward. In: dy, x (rows×cols), w (cols), mean, rstd (rows, from the forward pass).
// Out: dx (rows×cols), dw = Σ_rows dy·x̂, db = Σ_rows dy, with x̂ = (x - mean)·rstd and
//      dx = rstd·(g - mean(g) - x̂·mean(g·x̂)),  g = dy·w.
//   BLOCK   threads per block. A block walks RPB consecutive rows over one tile of columns; each thread owns the
//           chunks j = tile0 + (tid + t*BLOCK)*VEC, t < ITEMS, and keeps their dw/db sums in registers.
//   VEC     floats per access (scalar fall-back where cols % VEC or a pointer is unaligned)
//   ITEMS   chunks per thread: a tile is BLOCK*VEC*ITEMS columns
//   RPB     rows per block
//   SPLIT   0: one tile per row (cols <= BLOCK*VEC*ITEMS) and the row sums of g, g·x̂ reduced in the block;
//           1: the row sums come from a first launch (layernorm_backward_rowsums), tiles cover any width
//   ATOMIC  1: blocks add their dw/db sums into dw/db with atomics (zeroed first);
//           0: blocks write partial sums, a last launch (layernorm_backward_reduce) adds them up
#include "common.cuh"

#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef VEC
#define VEC 4
#endif
#ifndef ITEMS
#define ITEMS 2
#endif
#ifndef RPB
#define RPB 16
#endif
#ifndef SPLIT
#define SPLIT 1
#endif
#ifndef ATOMIC
#define ATOMIC 0
#endif
#define TILE (BLOCK * VEC * ITEMS)
static_assert(BLOCK % 32 == 0, "BLOCK is a multiple of 32");

// Row sums of g and g·x̂ (SPLIT=1): a warp per row.
extern "C" __global__ void __launch_bounds__(BLOCK)
layernorm_backward_rowsums(const float* __restrict__ dy, const float* __restrict__ x, const float* __restrict__ w,
                           const float* __restrict__ mean, const float* __restrict__ rstd,
                           float* __restrict__ rowsums, int rows, int cols) {
  const int row = blockIdx.x * (BLOCK / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= rows) return;
  const float* dyr = dy + (size_t)row * cols;
  const float* xr = x + (size_t)row * cols;
  const bool vec = cols % VEC == 0 && aligned_to(dy, 4 * VEC) && aligned_to(x, 4 * VEC) && aligned_to(w, 4 * VEC);
  const float m = mean[row], rs = rstd[row];
  float sg = 0.f, sgx = 0.f;
  for (int j = lane * VEC; j < cols; j += 32 * VEC) {
    const Vec<VEC> d = load_chunk<VEC>(dyr, j, cols, vec, 0.f);  // padding 0: contributes nothing
    const Vec<VEC> xv = load_chunk<VEC>(xr, j, cols, vec, 0.f);
    const Vec<VEC> wv = load_chunk<VEC>(w, j, cols, vec, 0.f);
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      const float g = d.v[e] * wv.v[e];
      sg += g;
      sgx += g * (xv.v[e] - m) * rs;
    }
  }
  sg = group_reduce<32>(sg, SumOp());
  sgx = group_reduce<32>(sgx, SumOp());
  if (lane == 0) {
    rowsums[2 * row] = sg;
    rowsums[2 * row + 1] = sgx;
  }
}

extern "C" __global__ void __launch_bounds__(BLOCK)
layernorm_backward(const float* __restrict__ dy, const float* __restrict__ x, const float* __restrict__ w,
                   const float* __restrict__ mean, const float* __restrict__ rstd,
                   const float* __restrict__ rowsums, float* __restrict__ dx, float* __restrict__ dw,
                   float* __restrict__ db, int rows, int cols) {
  __shared__ float scratch[32];
  const bool vec = cols % VEC == 0 && aligned_to(dy, 4 * VEC) && aligned_to(x, 4 * VEC) &&
                   aligned_to(w, 4 * VEC) && aligned_to(dx, 4 * VEC);
  const int tile0 = blockIdx.y * TILE;
  const int row0 = blockIdx.x * RPB;
  const float inv_n = 1.f / (float)cols;
  Vec<VEC> adw[ITEMS], adb[ITEMS], wv[ITEMS];
#pragma unroll
  for (int t = 0; t < ITEMS; ++t) {
    const int j = tile0 + (threadIdx.x + t * BLOCK) * VEC;
    wv[t] = load_chunk<VEC>(w, j, cols, vec, 0.f);
#pragma unroll
    for (int e = 0; e < VEC; ++e) adw[t].v[e] = adb[t].v[e] = 0.f;
  }
  const int row_end = min(row0 + RPB, rows);
  for (int r = row0; r < row_end; ++r) {  // block-uniform: every thread takes part in every reduction
    const float* dyr = dy + (size_t)r * cols;
    const float* xr = x + (size_t)r * cols;
    const float m = mean[r], rs = rstd[r];
    Vec<VEC> g[ITEMS], xh[ITEMS];
    float sg = 0.f, sgx = 0.f;
#pragma unroll
    for (int t = 0; t < ITEMS; ++t) {
      const int j = tile0 + (threadIdx.x + t * BLOCK) * VEC;
      const Vec<VEC> d = load_chunk<VEC>(dyr, j, cols, vec, 0.f);  // past the end: dy = 0 adds nothing
      const Vec<VEC> xv = load_chunk<VEC>(xr, j, cols, vec, 0.f);
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        xh[t].v[e] = (xv.v[e] - m) * rs;
        g[t].v[e] = d.v[e] * wv[t].v[e];
        sg += g[t].v[e];
        sgx += g[t].v[e] * xh[t].v[e];
        adw[t].v[e] += d.v[e] * xh[t].v[e];
        adb[t].v[e] += d.v[e];
      }
    }
#if SPLIT
    sg = rowsums[2 * r];
    sgx = rowsums[2 * r + 1];
#else
    sg = block_reduce<BLOCK>(sg, SumOp(), scratch);
    sgx = block_reduce<BLOCK>(sgx, SumOp(), scratch);
#endif
    sg *= inv_n;
    sgx *= inv_n;
    float* dxr = dx + (size_t)r * cols;
#pragma unroll
    for (int t = 0; t < ITEMS; ++t) {
      const int j = tile0 + (threadIdx.x + t * BLOCK) * VEC;
      if (j < cols) {
        Vec<VEC> o;
#pragma unroll
        for (int e = 0; e < VEC; ++e) o.v[e] = rs * (g[t].v[e] - sg - xh[t].v[e] * sgx);
        store_chunk<VEC>(dxr, j, cols, vec, o);
      }
    }
  }
#pragma unroll
  for (int t = 0; t < ITEMS; ++t) {
    const int j = tile0 + (threadIdx.x + t * BLOCK) * VEC;
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      if (j + e < cols) {
#if ATOMIC
        atomicAdd(dw + j + e, adw[t].v[e]);
        atomicAdd(db + j + e, adb[t].v[e]);
#else
        dw[(size_t)blockIdx.x * cols + j + e] = adw[t].v[e];  // here dw, db are the partials
        db[(size_t)blockIdx.x * cols + j + e] = adb[t].v[e];
#endif
      }
    }
  }
}

// ATOMIC=0: dw[j] = Σ_b partial_dw[b][j] (consecutive threads take consecutive columns: coalesced).
extern "C" __global__ void layernorm_backward_reduce(const float* __restrict__ pdw, const float* __restrict__ pdb,
                                                     float* __restrict__ dw, float* __restrict__ db, int parts,
                                                     int cols) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= cols) return;
  float sw = 0.f, sb = 0.f;
  for (int b = 0; b < parts; ++b) {
    sw += pdw[(size_t)b * cols + j];
    sb += pdb[(size_t)b * cols + j];
  }
  dw[j] = sw;
  db[j] = sb;
}
