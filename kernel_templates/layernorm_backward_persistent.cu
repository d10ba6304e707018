// LayerNorm (RMS=0) and RMSNorm (RMS=1) backward, the `persistent` algorithm (the `tiles` one is
// layernorm_backward.cu, whose header gives the inputs, outputs and formulas). Each row of dy and x is read from
// memory exactly once and dx written once; dw and db leave the kernel as one fp32 partial row per block, which
// layernorm_backward_finalize adds up (FUSE=0), or the kernel's last blocks do (FUSE=1, below).
//
// The grid holds a few blocks per SM (the launch plan sizes it). A block is GROUPS = BLOCK/TPR row groups of TPR
// threads (row_groups.cuh); group g of block b takes ROWS consecutive rows at a time, starting at row
// (b*GROUPS + g)*ROWS, stepping by gridDim.x*GROUPS*ROWS rows. Per step it loads its rows' dy and x (all in flight
// together), keeps them in their own dtype in registers (CACHE=1) or in shared memory (CACHE=2, cp.async), reduces
// Σg and Σg·x̂ of each row over the group, then writes dx. Thread `lane` owns columns j = (lane + t*TPR)*VEC + e
// (t < ITEMS, e < VEC) of every row: its Σdy·x̂ and Σdy stay in fp32 registers across all of the block's rows, and
// the weights in registers for the whole kernel. At the end the groups' sums are added in shared memory (in group
// order) and the block writes them once, as row blockIdx.x of the fp32 partials.
//   DTYPE, WDTYPE, RMS   as layernorm_backward.cu
//   BLOCK, TPR, VEC      row_groups.cuh (VEC: scalar fall-back where cols % VEC or a pointer is unaligned)
//   ITEMS   chunks per thread: rows of up to TPR*VEC*ITEMS columns
//   ROWS    rows a group holds at once (one reduction for all of them)
//   CACHE   1: the rows in registers; 2: in dynamic shared memory (ROWS*ITEMS*BLOCK chunks of dy, then of x)
//   STREAM  evict-first loads of dy and x, stores of dx (common.cuh)
//   BPS     blocks per SM: the launch plan's grid holds BPS blocks per SM, and ptxas fits BPS blocks' registers
//   RWARPS, RVEC  layernorm_backward_finalize: warps per block, columns per thread
//   FUSE    0: the partial rows are summed by layernorm_backward_finalize, a second launch. 1: by this kernel, in
//           the same order (the same bits). Partial row b belongs to segment b % RWARPS (the rows the finalize's
//           warp b % RWARPS adds up); the last block of a segment to finish (a ticket, last_block.cuh) sums its
//           rows in block order into the segment's first row, and the last of those sums the segments' rows in
//           segment order and writes dw (and db), RVEC columns per thread. The last block thus reads
//           parts/RWARPS + RWARPS partial rows, not all of them. Tickets: RWARPS + 1 counters the launch plan
//           zeroes before the launch (a 4-byte-per-counter memset: the workspace is not kept between calls).
// Dynamic shared memory: the row cache (CACHE=2), and with several groups the BLOCK*VEC*ITEMS floats where they
// add up their sums (the cache's space, reused): the launch plan passes the larger.
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef TPR
#define TPR 256
#endif
#ifndef VEC
#define VEC 4
#endif
#ifndef ITEMS
#define ITEMS 4
#endif
#ifndef ROWS
#define ROWS 1
#endif
#ifndef CACHE
#define CACHE 1
#endif
#ifndef BPS
#define BPS 1
#endif
#ifndef RWARPS
#define RWARPS 8
#endif
#ifndef RVEC
#define RVEC 1
#endif
#ifndef FUSE
#define FUSE 0
#endif
#include "row_groups.cuh"
#include "norm_backward.cuh"
#if FUSE
#include "last_block.cuh"
#endif

constexpr int kGroups = BLOCK / TPR;
constexpr int kSums = RMS ? 1 : 2;  // per row: Σg·x̂ (and Σg)
constexpr int kScratch = TPR > 32 ? kGroups * 2 * kSums * ROWS * (TPR / 32) : 1;

extern __shared__ __align__(16) unsigned char dyn_smem[];

// Row k's chunk t of this thread in the shared-memory cache: dy's chunks first, then x's.
__device__ __forceinline__ elem_t* cache_slot(int array, int k, int t) {
  return reinterpret_cast<elem_t*>(dyn_smem) + ((size_t)((array * ROWS + k) * ITEMS + t) * BLOCK + threadIdx.x) * VEC;
}

template <bool VECTOR>
__device__ __forceinline__ void backward_rows(const elem_t* __restrict__ dy, const elem_t* __restrict__ x,
                                              const weight_t* __restrict__ w, const float* __restrict__ mean,
                                              const float* __restrict__ rstd, elem_t* __restrict__ dx,
                                              float* __restrict__ pdw, float* __restrict__ pdb, int rows, int cols,
                                              float* scratch) {
  constexpr int STRIDE = TPR * VEC;  // from one chunk of a thread to its next
  const int group = threadIdx.x / TPR, lane = threadIdx.x % TPR;
  const int j0 = lane * VEC;  // the thread's chunk t starts at column j0 + t*STRIDE
  const float inv_n = 1.f / (float)cols;
  Chunk<weight_t> wc[ITEMS];
  float adw[ITEMS][VEC], adb[ITEMS][VEC];
#pragma unroll
  for (int t = 0; t < ITEMS; ++t) {
    if (j0 + t * STRIDE < cols) wc[t] = load_raw<VECTOR, false>(w + j0 + t * STRIDE, cols - j0 - t * STRIDE);
    else wc[t].zero();
#pragma unroll
    for (int e = 0; e < VEC; ++e) adw[t][e] = adb[t][e] = 0.f;
  }
  const unsigned step = gridDim.x * kGroups * ROWS;
  int parity = 0;
  // Group-uniform. Unsigned: r0 + step < 2^32 never wraps, where an int could pass INT_MAX.
  for (unsigned r0u = (blockIdx.x * kGroups + group) * ROWS; r0u < (unsigned)rows; r0u += step, parity ^= 1) {
    const int r0 = (int)r0u;
    const unsigned zero = r0u >> 31;  // r0 >= 0
#if CACHE == 1
    Chunk<elem_t> cdy[ROWS][ITEMS], cx[ROWS][ITEMS];
#endif
    float m[ROWS], rs[ROWS];
#pragma unroll
    for (int k = 0; k < ROWS; ++k) {  // every load of the step in flight before the first is used
      const int r = r0 + k;
      const bool valid = r < rows;
      m[k] = valid && !RMS ? __ldg(mean + r) : 0.f;
      rs[k] = valid ? __ldg(rstd + r) : 0.f;
#if CACHE == 1
      const size_t at = (size_t)r * cols + j0;
#pragma unroll
      for (int t = 0; t < ITEMS; ++t) {
        if (valid && j0 + t * STRIDE < cols) {
          cdy[k][t] = load_raw<VECTOR, STREAM>(dy + at + t * STRIDE, cols - j0 - t * STRIDE);
          cx[k][t] = load_raw<VECTOR, STREAM>(x + at + t * STRIDE, cols - j0 - t * STRIDE);
        } else {
          cdy[k][t].zero();
          cx[k][t].zero();
        }
      }
#endif
    }
#if CACHE == 2
    // cp.async copies hold no registers; the scalar fall-back's loads do, so it copies one chunk at a time.
    auto stage = [&](int k, int t) {
      const int j = j0 + t * STRIDE;
      if (r0 + k < rows && j < cols) {
        const size_t at = (size_t)(r0 + k) * cols + j;
        stage_chunk<VECTOR>(cache_slot(0, k, t), dy + at, cols - j);
        stage_chunk<VECTOR>(cache_slot(1, k, t), x + at, cols - j);
      }
    };
    if constexpr (VECTOR) {
#pragma unroll
      for (int k = 0; k < ROWS; ++k)
#pragma unroll
        for (int t = 0; t < ITEMS; ++t) stage(k, t);
    } else {
#pragma unroll 1
      for (int c = 0; c < ROWS * ITEMS; ++c) stage(c / ITEMS, c % ITEMS);
    }
#endif
#if CACHE == 2
    cp_async_wait_all();  // each thread reads back only the chunks it copied: no barrier
#endif
    // dy and x of row k's chunk t (zeros for chunks past the row and rows past the end: they add nothing).
    auto chunk = [&](int k, int t, Chunk<elem_t>& d, Chunk<elem_t>& xv) {
#if CACHE == 1
      d = cdy[k][t];
      xv = cx[k][t];
#else
      if (r0 + k < rows && j0 + t * STRIDE < cols) {
        d = read_chunk(cache_slot(0, k, t));
        xv = read_chunk(cache_slot(1, k, t));
      } else {
        d.zero();
        xv.zero();
      }
#endif
    };
    float s[kSums * ROWS];
#pragma unroll
    for (int k = 0; k < ROWS; ++k) {
      float sg = 0.f, sgx = 0.f;
#pragma unroll
      for (int t = 0; t < ITEMS; ++t) {
        Chunk<elem_t> d, xv;
        chunk(k, t, d, xv);
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          const float xh = (xv[e] - m[k]) * rs[k], g = d[e] * wc[t][e];
          sg += g;
          sgx += g * xh;
          adw[t][e] += d[e] * xh;
          adb[t][e] += d[e];
        }
      }
      s[kSums * k] = sgx;
      if (!RMS) s[kSums * k + 1] = sg;
    }
    group_sum<kSums * ROWS>(s, scratch, group, parity);
    // Across the reduction, hold the half chunks and weights as loaded, not as fp32 (row_groups.cuh, forget), and
    // read the shared-memory cache again.
#pragma unroll
    for (int t = 0; t < ITEMS; ++t) {
      forget(wc[t], zero);
#if CACHE == 1
#pragma unroll
      for (int k = 0; k < ROWS; ++k) {
        forget(cdy[k][t], zero);
        forget(cx[k][t], zero);
      }
#endif
    }
#if CACHE == 2
    asm volatile("" ::: "memory");
#endif
#pragma unroll
    for (int k = 0; k < ROWS; ++k) {
      const int r = r0 + k;
      if (r >= rows) break;
      const float b = s[kSums * k] * inv_n, a = RMS ? 0.f : s[kSums * k + 1] * inv_n;
      elem_t* dxl = dx + (size_t)r * cols + j0;
#pragma unroll
      for (int t = 0; t < ITEMS; ++t) {
        if (j0 + t * STRIDE >= cols) continue;
        Chunk<elem_t> d, xv;
        chunk(k, t, d, xv);
        Vec<VEC> o;
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          const float xh = (xv[e] - m[k]) * rs[k];
          o.v[e] = rs[k] * (d[e] * wc[t][e] - a - xh * b);
        }
        if (VECTOR) {
          store_vec<VEC>(dxl + t * STRIDE, o);
        } else {
#pragma unroll
          for (int e = 0; e < VEC; ++e)
            if (e < cols - j0 - t * STRIDE) store_one(dxl + t * STRIDE + e, o.v[e]);
        }
      }
    }
  }
  // The block's sums: its groups' added in shared memory (in group order), each chunk written by one thread.
  const bool fvec = VECTOR && aligned_to(pdw, 4 * VEC) && aligned_to(pdb, 4 * VEC);
  auto write = [&](const float (&acc)[ITEMS][VEC], float* out) {
#if TPR == BLOCK
#pragma unroll
    for (int t = 0; t < ITEMS; ++t) {
      const int j = (lane + t * TPR) * VEC;
      if (j < cols) {
        Vec<VEC> v;
#pragma unroll
        for (int e = 0; e < VEC; ++e) v.v[e] = acc[t][e];
        store_chunk<VEC>(out, j, cols, fvec, v);
      }
    }
#else
    float* sums = reinterpret_cast<float*>(dyn_smem);  // [group][t][e][lane]: a warp's accesses hit 32 banks
    __syncthreads();  // the row cache (CACHE=2), or the previous array's sums, is read
#pragma unroll
    for (int t = 0; t < ITEMS; ++t)
#pragma unroll
      for (int e = 0; e < VEC; ++e) sums[((group * ITEMS + t) * VEC + e) * TPR + lane] = acc[t][e];
    __syncthreads();
    for (int c = threadIdx.x; c < TPR * ITEMS; c += BLOCK) {
      const int t = c / TPR, l = c % TPR, j = c * VEC;
      if (j >= cols) continue;
      Vec<VEC> v;
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        float total = 0.f;
#pragma unroll
        for (int g = 0; g < kGroups; ++g) total += sums[((g * ITEMS + t) * VEC + e) * TPR + l];
        v.v[e] = total;
      }
      store_chunk<VEC>(out, j, cols, fvec, v);
    }
#endif
  };
  write(adw, pdw + (size_t)blockIdx.x * cols);
  if (!RMS) write(adb, pdb + (size_t)blockIdx.x * cols);
}

#if FUSE
// FUSE=1: the finalize's sums, in its order. Called by every block after it wrote its partial rows (pdw, pdb: the
// first of them); tickets[1 + s] counts segment s's blocks, tickets[0] the segments summed. A thread takes RVEC
// columns of dw (then of db) at a time; its additions run in the order layernorm_backward_finalize's with the same
// RWARPS: segment s is warp s's sum there (0 plus the rows s, s + RWARPS, ... in turn), and dw[j] is 0 plus the
// segments' sums in turn. A segment with no block (parts < RWARPS) adds +0 there, and nothing here: the same bits,
// as a sum started at +0 is never -0.
constexpr int kArrays = RMS ? 1 : 2;  // dw (and db)

__device__ __forceinline__ void finalize_in_kernel(float* pdw, float* pdb, weight_t* dw, weight_t* db,
                                                   unsigned int* tickets, int cols) {
  const int parts = gridDim.x, seg = blockIdx.x % RWARPS;
  const int chunks = (cols + RVEC - 1) / RVEC;  // per array
  const bool vec = cols % RVEC == 0 && aligned_to(pdw, 4 * RVEC) && aligned_to(pdb, 4 * RVEC);
  if (!last_to_arrive(tickets + 1 + seg, (parts - 1 - seg) / RWARPS + 1)) return;
  for (int c = threadIdx.x; c < kArrays * chunks; c += BLOCK) {
    float* p = c < chunks ? pdw : pdb;
    const int j = (c < chunks ? c : c - chunks) * RVEC;
    Vec<RVEC> acc;
#pragma unroll
    for (int e = 0; e < RVEC; ++e) acc.v[e] = 0.f;
#pragma unroll 4
    for (int b = seg; b < parts; b += RWARPS) {
      const Vec<RVEC> v = ld_cg<RVEC>(p + (size_t)b * cols, j, cols, vec);
#pragma unroll
      for (int e = 0; e < RVEC; ++e) acc.v[e] += v.v[e];
    }
    st_cg<RVEC>(p + (size_t)seg * cols, j, cols, vec, acc);  // row `seg` is read above by this thread alone
  }
  const int segments = parts < RWARPS ? parts : RWARPS;
  if (!last_to_arrive(tickets, segments)) return;
  for (int c = threadIdx.x; c < kArrays * chunks; c += BLOCK) {
    const float* p = c < chunks ? pdw : pdb;
    weight_t* out = c < chunks ? dw : db;
    const int j = (c < chunks ? c : c - chunks) * RVEC;
    Vec<RVEC> total;
#pragma unroll
    for (int e = 0; e < RVEC; ++e) total.v[e] = 0.f;
#pragma unroll 4
    for (int s = 0; s < segments; ++s) {
      const Vec<RVEC> v = ld_cg<RVEC>(p + (size_t)s * cols, j, cols, vec);
#pragma unroll
      for (int e = 0; e < RVEC; ++e) total.v[e] += v.v[e];
    }
    store_chunk<RVEC>(out, j, cols, vec && aligned_to(out, (int)sizeof(weight_t) * RVEC), total);
  }
}
#endif

extern "C" __global__ void __launch_bounds__(BLOCK, BPS)
layernorm_backward_persistent(const elem_t* __restrict__ dy, const elem_t* __restrict__ x,
                              const weight_t* __restrict__ w, const float* __restrict__ mean,
                              const float* __restrict__ rstd, elem_t* __restrict__ dx, float* __restrict__ pdw,
                              float* __restrict__ pdb, int rows, int cols
#if FUSE
                              , unsigned int* __restrict__ tickets, weight_t* __restrict__ dw,
                              weight_t* __restrict__ db
#endif
) {
  __shared__ float scratch[kScratch];  // the row groups' reductions (row_groups.cuh, group_sum)
  const int vb = (int)sizeof(elem_t) * VEC;
  const bool vec = cols % VEC == 0 && aligned_to(dy, vb) && aligned_to(x, vb) && aligned_to(dx, vb) &&
                   aligned_to(w, (int)sizeof(weight_t) * VEC);
  if (vec) {
    backward_rows<true>(dy, x, w, mean, rstd, dx, pdw, pdb, rows, cols, scratch);
  } else {
    backward_rows<false>(dy, x, w, mean, rstd, dx, pdw, pdb, rows, cols, scratch);
  }
#if FUSE
  finalize_in_kernel(pdw, pdb, dw, db, tickets, cols);
#endif
}

// dw[j] = Σ_p pdw[p][j] (blockIdx.y = 1: db from pdb). A block of RWARPS warps covers 32*RVEC columns: each warp
// reads them from every RWARPS-th partial row (one coalesced access per row), then warp 0 adds the warps' sums in
// warp order (the same order every run) and writes them in the weights' dtype.
extern "C" __global__ void __launch_bounds__(32 * RWARPS)
layernorm_backward_finalize(const float* __restrict__ pdw, const float* __restrict__ pdb, weight_t* __restrict__ dw,
                            weight_t* __restrict__ db, int parts, int cols) {
  __shared__ float part[RWARPS][32 * RVEC + 1];
  const bool second = !RMS && blockIdx.y == 1;
  const float* p = second ? pdb : pdw;
  weight_t* out = second ? db : dw;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int j = (blockIdx.x * 32 + lane) * RVEC;
  const bool vec = cols % RVEC == 0 && aligned_to(p, 4 * RVEC);
  float acc[RVEC];
#pragma unroll
  for (int e = 0; e < RVEC; ++e) acc[e] = 0.f;
  if (j < cols) {
#pragma unroll 4
    for (int b = warp; b < parts; b += RWARPS) {
      const Vec<RVEC> v = load_chunk<RVEC>(p + (size_t)b * cols, j, cols, vec, 0.f);
#pragma unroll
      for (int e = 0; e < RVEC; ++e) acc[e] += v.v[e];
    }
  }
#pragma unroll
  for (int e = 0; e < RVEC; ++e) part[warp][lane * RVEC + e] = acc[e];
  __syncthreads();
  if (warp == 0 && j < cols) {
    Vec<RVEC> v;
#pragma unroll
    for (int e = 0; e < RVEC; ++e) {
      float total = 0.f;
#pragma unroll
      for (int q = 0; q < RWARPS; ++q) total += part[q][lane * RVEC + e];
      v.v[e] = total;
    }
    store_chunk<RVEC>(out, j, cols, vec && aligned_to(out, (int)sizeof(weight_t) * RVEC), v);
  }
}
