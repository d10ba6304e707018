// HGEMM  C[M,N] = A[M,K] · B[K,N]   float16 or bfloat16 in and out, fp32 accumulation, row-major, any M, N, K.
// Tensor cores through mma.sync.aligned.m16n8k16 (sm_80+), fed by ldmatrix from a multistage cp.async pipeline.
//
// Tiling: block tile BM×BN stepping BK along K → (BM/WM)×(BN/WN) warps, each owning a WM×WN warp tile of
// (WM/16)×(WN/8) mma tiles; each BK-deep stage is BK/16 mma k-steps.
//
// Tunables (compile-time defines; the defaults below are autotune's "default configuration"):
//   BM BN BK WM WN   tile hierarchy (WM, WN multiples of 16; BK 32 or 64)
//   STAGES           cp.async pipeline depth, 2..5 (STAGES-1 tiles in flight while one is computed)
//   SWIZZLE          shared-memory layout: 1 XOR-swizzled 16-byte chunks (ldmatrix and cp.async stores both
//                    bank-conflict free), 0 rows padded by 16 bytes (ldmatrix conflict free; the stores of 64-byte
//                    rows, BK = 32 or BN = 32, see 2-way conflicts)
//   SPLIT_K          K split over gridDim.z blocks: 1 writes C; >1 writes fp32 partial tiles to the workspace,
//                    summed by gemm_splitk_reduce (gemm_splitk.cuh)
//   GROUP_M          blocks sweep GROUP_M tile rows before moving right (L2 reuse of B)
//   DOUBLE_FRAGS     1: two fragment sets, k-step s+1's loaded (ldmatrix) while k-step s's mmas issue, across
//                    stage boundaries too; 0: one set (fewer registers; other warps hide the ldmatrix latency)
//   MIN_BLOCKS       __launch_bounds__ occupancy hint: ptxas caps registers so this many blocks fit an SM
//
// Edges: every copy is predicated; out-of-range chunks are zero-filled (cp.async src-size 0), so ragged M, N and
// K add zeros. A row is copied in 16-byte chunks only where its length is a multiple of 8 elements (then every
// chunk is aligned); otherwise (odd N or K) that operand's chunks are gathered element by element (a run-time,
// block-uniform choice). C is written in pairs where N is even, else element by element.
#include "cp_async.cuh"
#include "dtype.cuh"
#include "gemm_splitk.cuh"
#include "mma_sm80.cuh"
#include "tile_raster.cuh"

#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 256
#endif
#ifndef BK
#define BK 32
#endif
#ifndef WM
#define WM 64
#endif
#ifndef WN
#define WN 64
#endif
#ifndef STAGES
#define STAGES 4
#endif
#ifndef SWIZZLE
#define SWIZZLE 1
#endif
#ifndef SPLIT_K
#define SPLIT_K 1
#endif
#ifndef GROUP_M
#define GROUP_M 8
#endif
#ifndef DOUBLE_FRAGS
#define DOUBLE_FRAGS 0
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 1
#endif

#define WARPS_M (BM / WM)
#define WARPS_N (BN / WN)
#define NT (32 * WARPS_M * WARPS_N)
#define MI (WM / 16)  // mma tiles along M per warp
#define NI (WN / 8)   // mma tiles along N per warp
#define KSTEPS (BK / 16)
#define A_CPR (BK / 8)  // 16-byte chunks per shared-memory row of A (BM rows of BK)
#define B_CPR (BN / 8)  // ... of B (BK rows of BN)
#if SWIZZLE
#define A_STAGE (BM * BK)  // elements
#define B_STAGE (BK * BN)
#else
#define A_STAGE (BM * (BK + 8))
#define B_STAGE (BK * (BN + 8))
#endif

static_assert(DTYPE == 1 || DTYPE == 2, "mma GEMM takes float16 (DTYPE 1) or bfloat16 (DTYPE 2)");
static_assert(BM % WM == 0 && BN % WN == 0, "block tile must split into warp tiles");
static_assert(WM % 16 == 0 && WN % 16 == 0, "warp tile must be a multiple of 16x16 (ldmatrix x4)");
static_assert(BK == 32 || BK == 64, "BK is 32 or 64 (at least two k-steps: the fragment prefetch needs them)");
static_assert(BN % 32 == 0, "BN is a multiple of 32 (whole 64-byte swizzle lines)");
static_assert(STAGES >= 2 && STAGES <= 5, "STAGES is 2..5");
static_assert(NT <= 1024, "at most 32 warps per block");
static_assert(MI * NI * 4 <= 128, "at most 128 fp32 accumulators per thread (WM*WN <= 4096)");
static_assert(SPLIT_K >= 1 && GROUP_M >= 1 && MIN_BLOCKS >= 1, "SPLIT_K, GROUP_M and MIN_BLOCKS are positive");

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "mma.sync m16n8k16 with bf16, ldmatrix and cp.async need sm_80 or newer"
#endif

// ---- shared-memory layout --------------------------------------------------------------------------------
// Element offset of 16-byte chunk c of row r in a tile with CPR chunks per row. Swizzled: within each 128-byte
// line (8 chunks) the chunk index is XORed with the line's row (CPR >= 8) or line number (CPR = 4, two rows per
// line), so the 8 rows one ldmatrix phase reads, at one logical chunk, land in 8 distinct bank groups.
template <int CPR>
__device__ __forceinline__ int tile_offset(int r, int c) {
#if SWIZZLE
  if constexpr (CPR >= 8) {
    return (r * CPR + (c ^ (r & 7))) * 8;
  } else {
    const int line = r / (8 / CPR);
    return (line * 8 + (((r % (8 / CPR)) * CPR + c) ^ (line & 7))) * 8;
  }
#else
  return r * (CPR * 8 + 8) + c * 8;  // a 16-byte pad per row: consecutive rows start 1 bank group apart
#endif
}

// ---- global → shared ---------------------------------------------------------------------------------------
// 8 elements of a row from column col on: one 16-byte copy (zero-filled where the chunk is out of range) when
// rows are 16-byte aligned (`vec`), else a guarded element-by-element gather stored as one 16-byte chunk.
template <bool VEC>
__device__ __forceinline__ void copy_chunk(unsigned dst_s, const elem_t* __restrict__ base, int row, int col,
                                           int rows, int cols) {
  if constexpr (VEC) {
    const bool ok = row < rows && col < cols;  // cols % 8 == 0: an in-range chunk is whole
    cp_async16_l2_128(dst_s, ok ? base + (size_t)row * cols + col : base, ok ? 16 : 0);
  } else {
    // Raw 16-bit patterns (0 is +0.0 in both types), packed two per word: no local-memory array.
    const unsigned short* p = reinterpret_cast<const unsigned short*>(base) + (size_t)row * cols + col;
    unsigned w[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const unsigned lo = (row < rows && col + 2 * j < cols) ? p[2 * j] : 0u;
      const unsigned hi = (row < rows && col + 2 * j + 1 < cols) ? p[2 * j + 1] : 0u;
      w[j] = lo | (hi << 16);
    }
    asm volatile("st.shared.v4.u32 [%0], {%1,%2,%3,%4};\n" ::"r"(dst_s), "r"(w[0]), "r"(w[1]), "r"(w[2]),
                 "r"(w[3]));
  }
}

// ROWS rows of CPR 16-byte chunks each, from row r0 and column c0 of a rows×cols matrix, into the tile at shared
// address dst_s (chunks placed by tile_offset).
template <bool VEC, int ROWS, int CPR>
__device__ __forceinline__ void copy_tile(unsigned dst_s, const elem_t* __restrict__ src, int r0, int c0, int rows,
                                          int cols) {
  constexpr int CHUNKS = ROWS * CPR;
#pragma unroll
  for (int i = 0; i < (CHUNKS + NT - 1) / NT; ++i) {
    const int e = threadIdx.x + i * NT;
    if (CHUNKS % NT == 0 || e < CHUNKS) {
      const int r = e / CPR, c = e % CPR;
      const int off = tile_offset<CPR>(r, c);
      copy_chunk<VEC>(dst_s + 2 * off, src, r0 + r, c0 + 8 * c, rows, cols);
    }
  }
}

// One stage: the A tile at shared address sa_s, the B tile at sb_s.
template <bool VEC>
__device__ __forceinline__ void load_stage(unsigned sa_s, unsigned sb_s, const elem_t* __restrict__ A,
                                           const elem_t* __restrict__ B, int M, int N, int K, int bm0, int bn0,
                                           int k0) {
  copy_tile<VEC, BM, A_CPR>(sa_s, A, bm0, k0, M, K);
  copy_tile<VEC, BK, B_CPR>(sb_s, B, k0, bn0, K, N);
}

// ---- shared → fragments ------------------------------------------------------------------------------------
struct Frags {
  unsigned a[MI][4];
  unsigned b[NI][2];
};

// Per-thread ldmatrix offsets (bytes within a stage), computed once: A at k-step ks for mma row-tile 0, B at k-step
// 0 for n-tile pair p. Moving 16 rows down adds a constant in every layout (the swizzle repeats every 8 rows, or
// 8 lines), so the K loop addresses fragments as one of these plus an immediate.
#if SWIZZLE
#define A_ROWS16_BYTES (2 * 16 * BK)
#define B_ROWS16_BYTES (2 * 16 * BN)
#else
#define A_ROWS16_BYTES (2 * 16 * (BK + 8))
#define B_ROWS16_BYTES (2 * 16 * (BN + 8))
#endif
struct FragOffsets {
  unsigned a[KSTEPS];
  unsigned b[NI / 2];
};

__device__ __forceinline__ FragOffsets frag_offsets(int wm0, int wn0, int lane) {
  FragOffsets o;
#pragma unroll
  for (int ks = 0; ks < KSTEPS; ++ks)
    // x4: matrices (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15) = a0..a3.
    o.a[ks] = 2 * tile_offset<A_CPR>(wm0 + (lane & 15), ks * 2 + (lane >> 4));
#pragma unroll
  for (int p = 0; p < NI / 2; ++p)
    // x4.trans: (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15), (k 8-15, n 8-15) = b0, b1 of two n8 tiles.
    o.b[p] = 2 * (A_STAGE + tile_offset<B_CPR>(lane & 15, (wn0 + p * 16) / 8 + (lane >> 4)));
  return o;
}

// The A and B fragments of k-step ks of the stage at shared address st_s.
__device__ __forceinline__ void load_frags(Frags& f, unsigned st_s, const FragOffsets& o, int ks) {
#pragma unroll
  for (int mi = 0; mi < MI; ++mi) ldmatrix_x4(f.a[mi], st_s + o.a[ks] + mi * A_ROWS16_BYTES);
#pragma unroll
  for (int p = 0; p < NI / 2; ++p) {
    unsigned t[4];
    ldmatrix_x4_trans(t, st_s + o.b[p] + ks * B_ROWS16_BYTES);
    f.b[2 * p][0] = t[0];
    f.b[2 * p][1] = t[1];
    f.b[2 * p + 1][0] = t[2];
    f.b[2 * p + 1][1] = t[3];
  }
}

__device__ __forceinline__ void mma_step(float (&acc)[MI][NI][4], const Frags& f) {
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int j = 0; j < NI; ++j) {
      const int ni = (mi & 1) ? NI - 1 - j : j;  // serpentine: consecutive mmas share a B fragment
      mma16816(acc[mi][ni], f.a[mi], f.b[ni][0], f.b[ni][1]);
    }
}

// The K loop of one block: acc += A[bm0.., k tiles kt0..kt0+ktiles) · B[.., bn0..]. VEC: rows of both operands
// are 16-byte aligned (N and K multiples of 8): every chunk is one cp.async; else chunks are gathered.
template <bool VEC>
__device__ __forceinline__ void mainloop(float (&acc)[MI][NI][4], unsigned smem_s, const elem_t* __restrict__ A,
                                         const elem_t* __restrict__ B, int M, int N, int K, int bm0, int bn0,
                                         int kt0, int ktiles, int wm0, int wn0, int lane) {
  // This block's k-tile `tile` into ring stage `stage`.
  auto load_tile = [&](int stage, int tile) {
    const unsigned st = smem_s + 2 * stage * (A_STAGE + B_STAGE);
    load_stage<VEC>(st, st + 2 * A_STAGE, A, B, M, N, K, bm0, bn0, (kt0 + tile) * BK);
  };
  // Refill stage ws (the caller knows no warp still reads it) with tile t+STAGES-1; returns the next stage to
  // write (by value, not a reference: that keeps the generated code as it was). One commit group either way,
  // which the wait counts rely on.
  auto refill = [&](int t, int ws) {
    const int next = t + STAGES - 1;
    if (next < ktiles) load_tile(ws, next);
    cp_async_commit();
    return ws == STAGES - 1 ? 0 : ws + 1;
  };
  // Tile t lives in stage t % STAGES. Prologue: tiles 0..STAGES-2 in flight (one commit group each).
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < ktiles) load_tile(s, s);
    cp_async_commit();
  }
  cp_async_wait<STAGES - 2>();
  __syncthreads();
  const FragOffsets fo = frag_offsets(wm0, wn0, lane);

#if DOUBLE_FRAGS
  // Fragments of k-step s+1 are loaded while the mmas of k-step s issue, across stage boundaries too.
  Frags frag[2];
  int read_stage = 0, write_stage = STAGES - 1;
  load_frags(frag[0], smem_s, fo, 0);
  for (int t = 0; t < ktiles; ++t) {
#pragma unroll
    for (int ks = 0; ks < KSTEPS; ++ks) {
      if (ks == KSTEPS - 1) {
        // Tile t+1 has landed (groups: STAGES-1 + t+1 committed, at most STAGES-2 pending) and, past the
        // barrier, every warp has read its last fragments of tile t-1's stage, the one refilled next round.
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        read_stage = read_stage == STAGES - 1 ? 0 : read_stage + 1;
      }
      const unsigned st_s = smem_s + 2 * read_stage * (A_STAGE + B_STAGE);
      load_frags(frag[(ks + 1) & 1], st_s, fo, (ks + 1) % KSTEPS);
      // Refill the stage of tile t-1 (free since the barrier of the previous round) with tile t+STAGES-1.
      if (ks == 0) write_stage = refill(t, write_stage);
      mma_step(acc, frag[ks & 1]);
    }
  }
#else
  // One fragment set: other warps' mmas hide this warp's ldmatrix latency (fewer registers).
  int read_stage = 0, write_stage = STAGES - 1;
  for (int t = 0; t < ktiles; ++t) {
    // Refill the stage of tile t-1 (every warp is past the barrier that follows its last read) with tile
    // t+STAGES-1.
    write_stage = refill(t, write_stage);
    const unsigned st_s = smem_s + 2 * read_stage * (A_STAGE + B_STAGE);
#pragma unroll
    for (int ks = 0; ks < KSTEPS; ++ks) {
      Frags f;
      load_frags(f, st_s, fo, ks);
      mma_step(acc, f);
    }
    // Tile t+1 has landed (STAGES + t groups committed, at most STAGES-2 pending); past the barrier every warp
    // is done reading tile t.
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    read_stage = read_stage == STAGES - 1 ? 0 : read_stage + 1;
  }
#endif
  cp_async_wait<0>();  // nothing may be left writing shared memory when the block exits
}

// `out`: C (elem_t, SPLIT_K = 1) or the fp32 partial workspace [SPLIT_K][M][N].
extern "C" __global__ void __launch_bounds__(NT, MIN_BLOCKS)
gemm_mma(const elem_t* __restrict__ A, const elem_t* __restrict__ B, void* __restrict__ out, int M, int N, int K) {
  extern __shared__ uint4 smem_u4[];
  const unsigned smem_s = static_cast<unsigned>(__cvta_generic_to_shared(smem_u4));

  // This block's tile, sweeping GROUP_M tile rows at a time so that concurrent blocks share B tiles.
  int bm0, bn0;
  block_tile_origin<BM, BN, GROUP_M>(M, N, bm0, bn0);

  // This block's share of the K tiles (split-K): tiles [kt0, kt0 + ktiles).
  const int k_tiles_all = (K + BK - 1) / BK;
  const int per_split = (k_tiles_all + SPLIT_K - 1) / SPLIT_K;
  const int kt0 = blockIdx.z * per_split;
  const int ktiles = max(0, min(k_tiles_all, kt0 + per_split) - kt0);

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm0 = (warp / WARPS_N) * WM, wn0 = (warp % WARPS_N) * WN;

  float acc[MI][NI][4];
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[mi][ni][q] = 0.f;

  if ((K % 8) == 0 && (N % 8) == 0) {
    mainloop<true>(acc, smem_s, A, B, M, N, K, bm0, bn0, kt0, ktiles, wm0, wn0, lane);
  } else {
    mainloop<false>(acc, smem_s, A, B, M, N, K, bm0, bn0, kt0, ktiles, wm0, wn0, lane);
  }

  // Epilogue. Accumulator q of mma tile (mi, ni): row g (+8 for q >= 2), columns 2t, 2t+1 (g = lane/4, t = lane%4).
  const int g = lane >> 2, tq = lane & 3;
  const bool pairs = (N % 2) == 0;  // then (row*N + even col) is even: 4-/8-byte aligned pair stores
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = bm0 + wm0 + mi * 16 + g + 8 * h;
      if (row >= M) continue;
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) {
        const int col = bn0 + wn0 + ni * 8 + 2 * tq;
        const float x = acc[mi][ni][2 * h], y = acc[mi][ni][2 * h + 1];
#if SPLIT_K > 1
        float* p = reinterpret_cast<float*>(out) + ((size_t)blockIdx.z * M + row) * N + col;
        if (pairs && col + 1 < N) {
          *reinterpret_cast<float2*>(p) = make_float2(x, y);
        } else {
          if (col < N) p[0] = x;
          if (col + 1 < N) p[1] = y;
        }
#else
        elem_t* p = reinterpret_cast<elem_t*>(out) + (size_t)row * N + col;
        if (pairs && col + 1 < N) {
          *reinterpret_cast<unsigned*>(p) = pack2(x, y);
        } else {
          if (col < N) p[0] = from_f32<elem_t>(x);
          if (col + 1 < N) p[1] = from_f32<elem_t>(y);
        }
#endif
      }
    }
}
