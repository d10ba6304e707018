// GEMM  C[M,N] = A[M,K] · B[K,N]  on Hopper's warpgroup MMA (wgmma, sm_90a): float16 or bfloat16 inputs and
// output, fp32 accumulation; row-major, any M, N, K.
//
// A block computes a BM×BN tile with WG warpgroups, each owning BM/WG rows (M_TILES m64 slices) × all BN
// columns: one m64nBNk16 wgmma per slice and k16 step, operands straight from shared memory through
// descriptors (kernel_templates/wgmma_sm90.cuh: A K-major, B MN-major with the transpose bit, both swizzled
// 128 bytes so that neither the copies nor the tensor cores meet bank conflicts).
//
// Pipeline: STAGES shared-memory stages of BK = 64 (one 128-byte swizzle row of 16-bit elements), filled with
// cp.async copies (16 bytes each, placed at their swizzled position). wgmma run asynchronously, one commit group
// left in flight while the next is issued.
//   WS = 0: every thread copies and computes. Tile t is consumed at iteration t while tiles t+1 .. t+STAGES-2
//     are in flight; the stage refilled at iteration t is that of tile t-2, which every warpgroup has retired
//     (wgmma_wait<1> at the end of iteration t-1, before this iteration's block barrier).
//   WS = 1: warpgroup 0 only copies, warpgroups 1..WG only compute (WG = 2: on 56 and 224 registers); a
//     "full" mbarrier completes when the producer's copies have landed (cp.async.mbarrier.arrive), an "empty"
//     one when every consumer has retired the wgmma that read it. No block-wide barrier in the main loop.
//
// Tunables (compile-time defines; the defaults below are autotune's "default configuration"):
//   BM BN     block tile (BM = WG · 64 · M_TILES; BN one wgmma N: 64, 128, 256)
//   WG        computing warpgroups (128 threads each), splitting BM
//   WS        1: one more warpgroup, the producer (warp specialisation)
//   STAGES    shared-memory stages (3..6)
//   GROUP_M   blocks sweep GROUP_M tile rows before moving right (L2 reuse of B)
//
// Edges: copies outside the matrix are zero-filled (cp.async with source size 0). Rows whose length is not a
// multiple of 8 elements (16 bytes), or base pointers not 16-byte aligned, take element-wise guarded loads
// stored to the same swizzled places (synchronous, ragged shapes only). C is stored from registers
// (kernel_templates/wgmma_epilogue.cuh): 16-byte vectors inside, guarded pairs at the edges.

#include "cp_async.cuh"
#include "dtype.cuh"
#include "tile_raster.cuh"
#include "wgmma_sm90.cuh"
#include "wgmma_epilogue.cuh"

#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 256
#endif
#ifndef WG
#define WG 2
#endif
#ifndef STAGES
#define STAGES 4
#endif
#ifndef GROUP_M
#define GROUP_M 8
#endif
#ifndef WS
#define WS 0
#endif

#define BK 64  // one 128-byte swizzle row of a 16-bit type
#define NT (128 * (WG + WS))          // threads: WG consumer warpgroups (+ one producer with WS)
#define LOADERS (WS ? 128 : NT)        // threads issuing the copies
#define WG_ROWS (BM / WG)
#define M_TILES (WG_ROWS / 64)
#define ACC (BN / 2)                     // fp32 accumulators per thread per m64 slice
#define A_STAGE_BYTES (BM * BK * 2)      // BM rows of 128 bytes
#define B_STAGE_BYTES (BK * BN * 2)      // BN/64 panels of BK rows of 128 bytes
#define STAGE_BYTES (A_STAGE_BYTES + B_STAGE_BYTES)
#define SMEM_BYTES (STAGES * STAGE_BYTES + 1024 + 128)  // + slack to align the ring (swizzle atoms) + mbarriers
#define A_CHUNKS (BM * BK / 8)           // 16-byte chunks per stage
#define B_CHUNKS (BK * BN / 8)

static_assert(DTYPE == 1 || DTYPE == 2, "wgmma GEMM takes float16 (DTYPE=1) or bfloat16 (DTYPE=2)");
static_assert(WG == 1 || WG == 2, "one or two warpgroups");
static_assert(BM % (64 * WG) == 0 && M_TILES >= 1, "BM must split into m64 slices per warpgroup");
static_assert(M_TILES <= 2, "at most two m64 slices per warpgroup (four spill the copy addresses)");
static_assert(BN == 64 || BN == 128 || BN == 256, "BN is one wgmma N: 64, 128 or 256");
static_assert(M_TILES * ACC <= 128, "at most 128 fp32 accumulators per thread (beyond, ptxas spills)");
static_assert(STAGES >= 3 && STAGES <= 6, "3..6 stages (one stage is held by the wgmma in flight)");
static_assert(SMEM_BYTES <= 232448, "shared memory beyond the sm_90 limit of 227 KB per block");
static_assert(A_CHUNKS % LOADERS == 0 && B_CHUNKS % LOADERS == 0, "every loading thread copies whole chunks");
static_assert(WS == 0 || WS == 1, "WS: 0 all threads copy and compute, 1 a producer warpgroup copies");

// ---- copies ------------------------------------------------------------------------------------------------
// Swizzled byte offsets of 16-byte chunk (row, chunk) within a stage's A tile and B tile.
__device__ __forceinline__ uint32_t a_offset(int r, int c) { return r * 128 + ((c ^ (r & 7)) << 4); }
__device__ __forceinline__ uint32_t b_offset(int k, int cn) {
  return (cn >> 3) * (BK * 128) + k * 128 + (((cn & 7) ^ (k & 7)) << 4);
}

// Eight elements of row `row`, columns [col, col+8), of a rows×cols matrix, zero outside (unaligned rows).
__device__ __forceinline__ uint4 load8_guarded(const elem_t* __restrict__ base, int row, int col, int rows,
                                               int cols) {
  union {
    uint4 v;
    unsigned short h[8];
  } u;
  const unsigned short* p = reinterpret_cast<const unsigned short*>(base) + (size_t)row * cols + col;
#pragma unroll
  for (int j = 0; j < 8; ++j) u.h[j] = (row < rows && col + j < cols) ? p[j] : (unsigned short)0;
  return u.v;
}

// Loading thread tid copies, per stage, A chunks (row tid/8 + i·A_ROWS_STEP, chunk tid%8) and B chunks (k-row
// tid/B_CPR + i·B_ROWS_STEP, chunk tid%B_CPR): eight (resp. B_CPR) consecutive threads read one contiguous row
// segment, and the chunk column, hence most of the swizzle, is fixed per thread.
#define A_ROWS_STEP (LOADERS / 8)
#define B_CPR (BN / 8)  // chunks per k-row of B
#define B_ROWS_STEP (LOADERS / B_CPR)
static_assert(LOADERS % B_CPR == 0, "a pass of the loading threads covers whole k-rows of B");
// Where registers are scarce (the producer warpgroup under setmaxnreg; a single warpgroup that copies besides
// holding up to 128 accumulators) the copy loop recomputes addresses rather than keep them live (no spills).
constexpr int kCopyUnroll = (WS || WG == 1) ? 1 : 64;

// The copies of k-tile k0 into the stage at shared address `stage` (generic pointer `stage_ptr`).
// ALIGNED: rows are whole 16-byte chunks (K, N multiples of 8, bases 16-byte aligned): cp.async, zero-filled
// outside; else element-wise guarded loads and 16-byte shared stores.
template <bool ALIGNED>
__device__ __forceinline__ void load_tile(uint32_t stage, char* stage_ptr, const elem_t* __restrict__ A,
                                          const elem_t* __restrict__ B, int M, int N, int K, int bm0, int bn0,
                                          int k0) {
  const int tid = threadIdx.x;
  const int ar = tid >> 3, ac = tid & 7;
  const int br = tid / B_CPR, bc = tid % B_CPR;
#pragma unroll kCopyUnroll
  for (int i = 0; i < A_CHUNKS / LOADERS; ++i) {
    const int r = ar + i * A_ROWS_STEP;
    const int gr = bm0 + r, gc = k0 + ac * 8;
    if (ALIGNED) {
      const bool ok = gr < M && gc < K;  // K % 8 == 0: a chunk is wholly inside or wholly outside
      cp_async16(stage + a_offset(r, ac), ok ? A + (size_t)gr * K + gc : A, ok ? 16 : 0);
    } else {
      *reinterpret_cast<uint4*>(stage_ptr + a_offset(r, ac)) = load8_guarded(A, gr, gc, M, K);
    }
  }
#pragma unroll kCopyUnroll
  for (int i = 0; i < B_CHUNKS / LOADERS; ++i) {
    const int r = br + i * B_ROWS_STEP;
    const int gr = k0 + r, gc = bn0 + bc * 8;
    if (ALIGNED) {
      const bool ok = gr < K && gc < N;
      cp_async16(stage + A_STAGE_BYTES + b_offset(r, bc), ok ? B + (size_t)gr * N + gc : B, ok ? 16 : 0);
    } else {
      *reinterpret_cast<uint4*>(stage_ptr + A_STAGE_BYTES + b_offset(r, bc)) = load8_guarded(B, gr, gc, K, N);
    }
  }
}

__device__ __forceinline__ void load_stage(bool aligned, int k_tile, uint32_t ring, char* ring_ptr,
                                           const elem_t* __restrict__ A, const elem_t* __restrict__ B, int M,
                                           int N, int K, int bm0, int bn0) {
  const int s = k_tile % STAGES;
  if (aligned) {
    load_tile<true>(ring + s * STAGE_BYTES, ring_ptr + s * STAGE_BYTES, A, B, M, N, K, bm0, bn0, k_tile * BK);
  } else {
    load_tile<false>(ring + s * STAGE_BYTES, ring_ptr + s * STAGE_BYTES, A, B, M, N, K, bm0, bn0, k_tile * BK);
  }
}

// The wgmma of one stage (at shared address `stage`) for consumer warpgroup cw: its WG_ROWS rows of A times all BN
// columns of B, into acc; issued asynchronously as one commit group.
__device__ __forceinline__ void mma_stage(float (&acc)[M_TILES][ACC], uint32_t stage, int cw) {
  const uint32_t a_base = stage + cw * (WG_ROWS * 128);
  const uint32_t b_base = stage + A_STAGE_BYTES;
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < BK / 16; ++kk) {
    const uint64_t db = sw128_desc(b_base + kk * 2048, BK * 128, 1024);
#pragma unroll
    for (int m = 0; m < M_TILES; ++m) {
      const uint64_t da = sw128_desc(a_base + m * 64 * 128 + kk * 32, 16, 1024);
      wgmma_m64k16<BN>(acc[m], da, db);
    }
  }
  wgmma_commit();
}

extern "C" __global__ void __launch_bounds__(NT, 1)
gemm_wgmma(const elem_t* __restrict__ A, const elem_t* __restrict__ B, elem_t* __restrict__ C, int M, int N,
           int K) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t raw = smem_u32(smem_raw);
  const uint32_t ring = (raw + 1023) & ~1023u;  // descriptors assume 1024-byte aligned swizzle atoms
  char* ring_ptr = reinterpret_cast<char*>(smem_raw) + (ring - raw);

  // This block's tile, sweeping GROUP_M tile rows at a time so that concurrent blocks share B tiles.
  int bm0, bn0;
  block_tile_origin<BM, BN, GROUP_M>(M, N, bm0, bn0);

  const int wg = threadIdx.x / 128;
  // Block-uniform: one copy path per problem (the element-wise one for ragged rows only).
  const bool aligned = (K % 8) == 0 && (N % 8) == 0 && ((reinterpret_cast<uintptr_t>(A) |
                                                         reinterpret_cast<uintptr_t>(B)) & 15) == 0;
  const int k_tiles = (K + BK - 1) / BK;

#if WS
  // Warp-specialised: warpgroup 0 copies, warpgroups 1..WG compute. full[s] completes when the producer's
  // 128 threads' copies of a stage have landed; empty[s] when every consumer thread has retired the wgmma that
  // read it. Consumer warpgroup c owns rows c·WG_ROWS of the tile.
  const uint32_t full_bar = ring + STAGES * STAGE_BYTES, empty_bar = full_bar + 8 * STAGES;
  if (threadIdx.x == 0) {
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(full_bar + 8 * s, 128);
      mbar_init(empty_bar + 8 * s, 128 * WG);
    }
  }
  __syncthreads();
  if (wg == 0) {
#if WG == 2
    setmaxnreg_dec<56>();  // leaves 2 × 128 × 224 registers to the consumers
#endif
    for (int t = 0; t < k_tiles; ++t) {
      const int s = t % STAGES;
      if (t >= STAGES) mbar_wait(empty_bar + 8 * s, ((t / STAGES) - 1) & 1);
      load_stage(aligned, t, ring, ring_ptr, A, B, M, N, K, bm0, bn0);
      if (aligned) {
        mbar_arrive_cp_async(full_bar + 8 * s);
      } else {
        fence_proxy_async();  // the element-wise path wrote with ordinary stores
        mbar_arrive(full_bar + 8 * s);
      }
    }
    cp_async_wait_all();  // exit with no copy of this thread in flight
  } else {  // the roles are the two branches of one if/else: ptxas then honours setmaxnreg
#if WG == 2
    setmaxnreg_inc<224>();
#endif
    const int cw = wg - 1;
    float acc[M_TILES][ACC];  // declared past setmaxnreg: the entry region runs under the 168-register cap
    zero_fragments<M_TILES, BN>(acc);
    for (int t = 0; t < k_tiles; ++t) {
      const int s = t % STAGES;
      mbar_wait(full_bar + 8 * s, (t / STAGES) & 1);
      fence_proxy_async();  // the copies (generic proxy) before the tensor cores' reads (async proxy)
      mma_stage(acc, ring + s * STAGE_BYTES, cw);
      wgmma_wait<1>();  // the wgmma of tile t-1 have retired: release its stage
      if (t > 0) mbar_arrive(empty_bar + 8 * ((t - 1) % STAGES));
    }
    wgmma_wait<0>();
    store_fragments<M_TILES, BN>(acc, C, M, N, bm0 + cw * WG_ROWS, bn0);
  }
#else
  const int cw = wg;
  float acc[M_TILES][ACC];
  zero_fragments<M_TILES, BN>(acc);
#pragma unroll
  for (int s = 0; s < STAGES - 2; ++s) {
    if (s < k_tiles) load_stage(aligned, s, ring, ring_ptr, A, B, M, N, K, bm0, bn0);
    cp_async_commit();
  }

  for (int t = 0; t < k_tiles; ++t) {
    cp_async_wait<STAGES - 3>();  // this thread's copies of tile t have landed
    fence_proxy_async();          // ... and are visible to the tensor cores (async proxy)
    __syncthreads();              // ... everyone's; and every warpgroup has retired the wgmma of tile t-2

    const int s = t % STAGES;
    mma_stage(acc, ring + s * STAGE_BYTES, cw);

    const int next = t + STAGES - 2;  // into the stage of tile t-2
    if (next < k_tiles) load_stage(aligned, next, ring, ring_ptr, A, B, M, N, K, bm0, bn0);
    cp_async_commit();
    wgmma_wait<1>();
  }
  wgmma_wait<0>();
  store_fragments<M_TILES, BN>(acc, C, M, N, bm0 + cw * WG_ROWS, bn0);
#endif
}
