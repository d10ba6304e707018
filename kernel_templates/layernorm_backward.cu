// LayerNorm (RMS=0) and RMSNorm (RMS=1) backward. In: dy, x (rows×cols), w (cols), mean (LayerNorm only) and
// rstd (rows, fp32, from the forward pass). Out: dx (rows×cols), dw = Σ_rows dy·x̂, db = Σ_rows dy (LayerNorm
// only), with g = dy·w and
//      LayerNorm: x̂ = (x - mean)·rstd,  dx = rstd·(g - mean(g) - x̂·mean(g·x̂))
//      RMSNorm:   x̂ = x·rstd,           dx = rstd·(g - x̂·mean(g·x̂))
//   DTYPE   dy, x, dx: 0 float, 1 half, 2 bfloat16; WDTYPE: w, dw, db (default DTYPE). Sums are fp32; the
//           partial sums of dw/db are fp32 buffers; atomics (ATOMIC=1) need fp32 dw/db.
//   BLOCK   threads per block. A block walks RPB consecutive rows over one tile of columns; each thread owns the
//           chunks j = tile0 + (tid + t*BLOCK)*VEC, t < ITEMS, and keeps their dw/db sums in registers.
//   VEC     elements per access (8 halves = 16 B) (scalar fall-back where cols % VEC or a pointer is unaligned)
//   ITEMS   chunks per thread: a tile is BLOCK*VEC*ITEMS columns
//   RPB     rows per block
//   SPLIT   0: one tile per row (cols <= BLOCK*VEC*ITEMS) and the row sums of g, g·x̂ reduced in the block;
//           1: the row sums come from a first launch (layernorm_backward_rowsums), tiles cover any width
//   ATOMIC  1: blocks add their dw/db sums into dw/db with atomics (zeroed first);
//           0: blocks write partial sums, a last launch (layernorm_backward_reduce) adds them up
#include "common.cuh"
#include "vector_tunables.cuh"

#ifndef RPB
#define RPB 16
#endif
#ifndef SPLIT
#define SPLIT 1
#endif
#ifndef ATOMIC
#define ATOMIC 0
#endif
#include "norm_backward.cuh"
#define TILE (BLOCK * VEC * ITEMS)
static_assert(!ATOMIC || WDTYPE == 0, "atomics accumulate into fp32 dw/db only");
#define DW_T float  // layernorm_backward writes fp32: dw/db themselves (ATOMIC, fp32 weights) or fp32 partials
static_assert(BLOCK % 32 == 0, "BLOCK is a multiple of 32");

// Row sums of g and g·x̂ (SPLIT=1): a warp per row.
extern "C" __global__ void __launch_bounds__(BLOCK)
layernorm_backward_rowsums(const elem_t* __restrict__ dy, const elem_t* __restrict__ x, const weight_t* __restrict__ w,
                           const float* __restrict__ mean, const float* __restrict__ rstd,
                           float* __restrict__ rowsums, int rows, int cols) {
  const int row = blockIdx.x * (BLOCK / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= rows) return;
  const elem_t* dyr = dy + (size_t)row * cols;
  const elem_t* xr = x + (size_t)row * cols;
  const int vb = (int)sizeof(elem_t) * VEC;
  const bool vec = cols % VEC == 0 && aligned_to(dy, vb) && aligned_to(x, vb) && aligned_to(w, (int)sizeof(weight_t) * VEC);
  const float m = RMS ? 0.f : mean[row], rs = rstd[row];
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
layernorm_backward(const elem_t* __restrict__ dy, const elem_t* __restrict__ x, const weight_t* __restrict__ w,
                   const float* __restrict__ mean, const float* __restrict__ rstd,
                   const float* __restrict__ rowsums, elem_t* __restrict__ dx, DW_T* __restrict__ dw,
                   DW_T* __restrict__ db, int rows, int cols) {
  __shared__ float scratch[32];
  const int vb = (int)sizeof(elem_t) * VEC;
  const bool vec = cols % VEC == 0 && aligned_to(dy, vb) && aligned_to(x, vb) &&
                   aligned_to(w, (int)sizeof(weight_t) * VEC) && aligned_to(dx, vb);
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
    const elem_t* dyr = dy + (size_t)r * cols;
    const elem_t* xr = x + (size_t)r * cols;
    const float m = RMS ? 0.f : mean[r], rs = rstd[r];
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
    sg = RMS ? 0.f : sg * inv_n;
    sgx *= inv_n;
    elem_t* dxr = dx + (size_t)r * cols;
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
        if (!RMS) atomicAdd(db + j + e, adb[t].v[e]);
#else
        dw[(size_t)blockIdx.x * cols + j + e] = adw[t].v[e];  // here dw, db are the fp32 partials
        if (!RMS) db[(size_t)blockIdx.x * cols + j + e] = adb[t].v[e];
#endif
      }
    }
  }
}

// ATOMIC=0: dw[j] = Σ_b partial_dw[b][j] (consecutive threads take consecutive columns: coalesced).
extern "C" __global__ void layernorm_backward_reduce(const float* __restrict__ pdw, const float* __restrict__ pdb,
                                                     weight_t* __restrict__ dw, weight_t* __restrict__ db,
                                                     int parts, int cols) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= cols) return;
  float sw = 0.f, sb = 0.f;
  for (int b = 0; b < parts; ++b) {
    sw += pdw[(size_t)b * cols + j];
    if (!RMS) sb += pdb[(size_t)b * cols + j];
  }
  dw[j] = from_f32<weight_t>(sw);
  if (!RMS) db[j] = from_f32<weight_t>(sb);
}
