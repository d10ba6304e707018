// GEMM of few rows (decoding, small batches), C[M,N] = A[M,K] · B, on Hopper (sm_90a): a stream of the weight B
// through TMA into wgmma, the K slices of a tile summed in a thread block cluster.
//
// The product is computed transposed, Cᵀ = Bᵀ·Aᵀ: wgmma's M (64 rows per instruction) runs along B's N and its N
// (8 to 128) along A's few rows, so no tensor-core row is wasted on rows A does not have (a 64-row tile of A at 16
// rows computes four times the product it needs). The time is B's bytes: the kernel keeps STAGES k-tiles of the
// weight in flight per block and splits K so that about two blocks run per SM.
//
// Roles: warpgroups 0..WG-1 are consumers, each owning SLICES m64 slices (64 rows of Bᵀ = 64 columns of C) of the
// block's BN; the warp after them is the producer, whose lane 0 issues the bulk tensor copies of each k-tile (64 k)
// into a STAGES-deep ring: BN rows of the weight (PLANES times: SwiGLU's gate rows, then its up rows) and BM rows
// of A. A "full" mbarrier per stage completes on the copies' bytes, an "empty" one when each consumer warp has
// retired the wgmma that read it.
//
// Grid: (⌈N/BN⌉, ⌈M/BM⌉, SPLIT_K). With SPLIT_K > 1 the z blocks of a tile are one cluster (1, 1, SPLIT_K), each
// over k-tiles [z·per, (z+1)·per). Every block writes its fp32 tile to its own shared memory; after a cluster
// barrier, block z sums its share of the tile's elements over the SPLIT_K blocks' copies (distributed shared memory,
// in rank order: the same bits whichever block finishes first) and stores them. No workspace, no second launch.
//
// Operands in shared memory (kernel_templates/wgmma_sm90.cuh's descriptors, 128-byte swizzle, as TMA writes them):
//   B_K_MAJOR = 1 (B stored N×K: nn.Linear's weight): Bᵀ's rows are B's rows, K-major: one box of 64 k × BN rows,
//     row r at r·128; a k16 step adds 32 bytes. wgmma reads it without the transpose bit.
//   B_K_MAJOR = 0 (B stored K×N): Bᵀ is MN-major: BN/64 boxes of 64 columns × 64 k-rows, panel p at p·8 KB (one
//     m64 slice each); a k16 step adds 2048 bytes; wgmma reads it with the transpose bit.
//   A (M×K, K-major) is wgmma's B operand: one box of 64 k × BM rows; a k16 step adds 32 bytes; no transpose.
// Accumulators (m64nBM fragment): warp w of a consumer owns Bᵀ rows 16w..16w+15 of each slice, lane l the rows
// 16w + l/4 (+8) and the A rows 8j + 2(l%4) + {0,1}: d[4j + 2h + e] = Cᵀ[16w + l/4 + 8h][8j + 2(l%4) + e].
//
// Epilogues: GEMM_BIAS adds bias[n] (linear); GEMM_GELU with it (linear_gelu) stores the sum as `pre`, then C =
// gelu_tanh of the rounded pre (as gemm_wgmma_tma.cu's epilogue); GEMM_SWIGLU (linear_swiglu: B stored 2N×K, gate
// rows then up rows) computes the gate and up sums of the same columns in two accumulator planes and stores
// silu(gate)·up. They apply to the sum of the slices, in fp32, rounded once.
//
// Edges: boxes past M, N, K are zero-filled by the copy engine; stores are guarded. TMA strides rows of whole
// 16 bytes: K (and N where B is stored K×N) multiples of 8 (the space's `unfit`).
//
// Tunables (compile-time defines; the defaults below are autotune's "default configuration"):
//   BM       A rows per tile: wgmma's N (8, 16, 32, 64 or 128)
//   BN       columns of C per tile (64, 128 or 256): WG consumers × SLICES m64 slices
//   WG       consumer warpgroups (1 or 2)
//   STAGES   k-tiles in flight (2..8)
//   SPLIT_K  K slices, the blocks of a cluster (1..8)

#include "dtype.cuh"
#include "tma_sm90.cuh"
#include "wgmma_asm_narrow.cuh"
#include "wgmma_epilogue.cuh"
#include "wgmma_sm90.cuh"

#ifndef BM
#define BM 16
#endif
#ifndef BN
#define BN 128
#endif
#ifndef WG
#define WG 1
#endif
#ifndef STAGES
#define STAGES 6
#endif
#ifndef SPLIT_K
#define SPLIT_K 4
#endif
#ifndef B_K_MAJOR
#define B_K_MAJOR 0
#endif
#ifndef GEMM_BIAS
#define GEMM_BIAS 0
#endif
#ifndef GEMM_GELU
#define GEMM_GELU 0
#endif
#ifndef GEMM_SWIGLU
#define GEMM_SWIGLU 0
#endif
#if GEMM_GELU
#include "gelu.cuh"
#endif
#if GEMM_SWIGLU
#include "gemm_splitk_swiglu.cuh"
#endif

#define SKINNY_BK 64                                // k per stage: one 128-byte swizzle row of a 16-bit type
#define PLANES (GEMM_SWIGLU ? 2 : 1)                // weight row sets per tile (SwiGLU: gate, up)
#define SLICES (BN / (64 * WG))                     // m64 slices per consumer
#define W_BYTES (PLANES * BN * 128)                 // a stage's weight rows (or panels)
#define STAGE_BYTES (W_BYTES + BM * 128)            // + A's rows
#define RED_STRIDE (BN + 4)                         // fp32 per row of the reduction tile: 4 lanes of a quad on 4 banks
#define RED_BYTES (PLANES * BM * RED_STRIDE * 4)    // the block's fp32 tile, in the ring once the ring is drained
#define RING_BYTES (STAGES * STAGE_BYTES > RED_BYTES ? STAGES * STAGE_BYTES : RED_BYTES)
#define NT (128 * WG + 32)                          // consumers + the producer warp
#define SMEM_BYTES (RING_BYTES + 1024 + 16 * STAGES)  // + alignment slack + mbarriers

static_assert(DTYPE == 1 || DTYPE == 2, "16-bit operands (float16, bfloat16)");
static_assert(BM == 8 || BM == 16 || BM == 32 || BM == 64 || BM == 128, "BM is one wgmma N: 8, 16, 32, 64 or 128");
static_assert(PLANES * SLICES * BM / 2 <= 128, "at most 128 fp32 accumulators per thread (more spill)");
static_assert(WG == 1 || WG == 2, "one or two consumer warpgroups");
static_assert(SLICES == 1 || SLICES == 2, "BN: one or two m64 slices per consumer");
static_assert(STAGES >= 2 && STAGES <= 8, "2..8 stages");
static_assert(SPLIT_K >= 1 && SPLIT_K <= 8, "1..8 K slices: a portable cluster");
static_assert(!GEMM_SWIGLU || (B_K_MAJOR && !GEMM_BIAS), "SwiGLU: B stored 2N×K, no bias");
static_assert(!GEMM_GELU || GEMM_BIAS, "GELU follows the bias (linear_gelu)");
static_assert(SMEM_BYTES <= 232448, "shared memory beyond the sm_90 limit of 227 KB per block");

#if B_K_MAJOR
#define SKINNY_IMMEDIATES "1, 1, 0, 0"  // Bᵀ K-major, A K-major
#else
#define SKINNY_IMMEDIATES "1, 1, 1, 0"  // Bᵀ MN-major (the transpose bit), A K-major
#endif

// d (64 × BM fp32 fragment) += W (64 × 16 of Bᵀ, desc_w) · Aᵀ (16 × BM, desc_a).
__device__ __forceinline__ void wgmma_skinny(float (&d)[BM / 2], uint64_t desc_w, uint64_t desc_a) {
  if constexpr (BM == 8)
    WGMMA_ASM(4, "m64n8k16.f32." WGMMA_AB "." WGMMA_AB, SKINNY_IMMEDIATES, d, desc_w, desc_a, 1);
  if constexpr (BM == 16)
    WGMMA_ASM(8, "m64n16k16.f32." WGMMA_AB "." WGMMA_AB, SKINNY_IMMEDIATES, d, desc_w, desc_a, 1);
  if constexpr (BM == 32)
    WGMMA_ASM(16, "m64n32k16.f32." WGMMA_AB "." WGMMA_AB, SKINNY_IMMEDIATES, d, desc_w, desc_a, 1);
  if constexpr (BM == 64)
    WGMMA_ASM(32, "m64n64k16.f32." WGMMA_AB "." WGMMA_AB, SKINNY_IMMEDIATES, d, desc_w, desc_a, 1);
  if constexpr (BM == 128)
    WGMMA_ASM(64, "m64n128k16.f32." WGMMA_AB "." WGMMA_AB, SKINNY_IMMEDIATES, d, desc_w, desc_a, 1);
}

// The copies of k-tile k0 (elements) of the tile at (n0, m0) into `stage`, completing on `full`.
__device__ __forceinline__ void load_skinny_stage(const TmaDesc* w, const TmaDesc* a, uint32_t stage, uint32_t full,
                                                  int k0, int n0, int m0, int N) {
#if B_K_MAJOR
#pragma unroll
  for (int p = 0; p < PLANES; ++p) tma_load_2d(stage + p * BN * 128, w, k0, p * N + n0, full);  // up rows at N
#else
#pragma unroll
  for (int j = 0; j < BN / 64; ++j) tma_load_2d(stage + j * 8192, w, n0 + 64 * j, k0, full);
#endif
  tma_load_2d(stage + W_BYTES, a, k0, m0, full);
}

// One stage's wgmma for consumer `cw`'s slices.
__device__ __forceinline__ void mma_skinny_stage(float (&acc)[PLANES][SLICES][BM / 2], uint32_t stage, int cw) {
#pragma unroll
  for (int kk = 0; kk < SKINNY_BK / 16; ++kk) {
    const uint64_t da = sw128_desc(stage + W_BYTES + kk * 32, 16, 1024);
#pragma unroll
    for (int p = 0; p < PLANES; ++p)
#pragma unroll
      for (int s = 0; s < SLICES; ++s) {
        const int slice = cw * SLICES + s;
#if B_K_MAJOR
        const uint64_t dw = sw128_desc(stage + p * BN * 128 + slice * 64 * 128 + kk * 32, 16, 1024);
#else
        const uint64_t dw = sw128_desc(stage + slice * 8192 + kk * 2048, 8192, 1024);
#endif
        wgmma_skinny(acc[p][s], dw, da);
      }
  }
}

// Four consecutive elements of a row from fp32 (`vec`: one 8-byte store where all four are inside N).
__device__ __forceinline__ void store_four(elem_t* __restrict__ dst, const float (&v)[4], bool vec, int left) {
  if (vec && left >= 4) {
    *reinterpret_cast<uint2*>(dst) = make_uint2(pack2(v[0], v[1]), pack2(v[2], v[3]));
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i)
      if (i < left) dst[i] = from_f32<elem_t>(v[i]);
  }
}

// fp32 at shared address `addr` of cluster block `rank` (this block's own where SPLIT_K is 1).
__device__ __forceinline__ float4 ld_tile4(uint32_t addr, uint32_t rank) {
  float4 v;
#if SPLIT_K > 1
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(addr), "r"(rank));
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(remote)
               : "memory");
#else
  asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(addr)
               : "memory");
#endif
  return v;
}

#if SPLIT_K > 1
#define SKINNY_CLUSTER __cluster_dims__(1, 1, SPLIT_K)
#else
#define SKINNY_CLUSTER
#endif

extern "C" __global__ void __launch_bounds__(NT, 1) SKINNY_CLUSTER
gemm_wgmma_skinny(const __grid_constant__ TmaDesc tmap_w, const __grid_constant__ TmaDesc tmap_a,
                  elem_t* __restrict__ C,
#if GEMM_BIAS
                  const elem_t* __restrict__ bias,
#endif
#if GEMM_GELU
                  elem_t* __restrict__ pre,
#endif
                  int M, int N, int K) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t raw = smem_u32(smem_raw);
  const uint32_t ring = (raw + 1023) & ~1023u;  // swizzle atoms and TMA boxes want 1024-byte alignment
  const uint32_t full_bar = ring + RING_BYTES, empty_bar = full_bar + 8 * STAGES;
  const int n0 = blockIdx.x * BN, m0 = blockIdx.y * BM;
  const int k_all = (K + SKINNY_BK - 1) / SKINNY_BK, per = (k_all + SPLIT_K - 1) / SPLIT_K;
  const int kb = min(k_all, (int)blockIdx.z * per), k_tiles = min(k_all, kb + per) - kb;

  if (threadIdx.x == 0) {
    tma_prefetch_desc(&tmap_w);
    tma_prefetch_desc(&tmap_a);
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(full_bar + 8 * s, 1);  // the producer's arrive.expect_tx; then the copies' bytes
      mbar_init(empty_bar + 8 * s, 4 * WG);  // one arrival per consumer warp
    }
    fence_mbarrier_init();
  }
  __syncthreads();

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float acc[PLANES][SLICES][BM / 2];
#pragma unroll
  for (int p = 0; p < PLANES; ++p)
#pragma unroll
    for (int s = 0; s < SLICES; ++s)
#pragma unroll
      for (int j = 0; j < BM / 2; ++j) acc[p][s][j] = 0.f;

  if (warp == 4 * WG) {  // the producer
    if (lane == 0) {
      for (int i = 0; i < k_tiles; ++i) {
        const uint32_t s = i % STAGES, pass = i / STAGES;
        mbar_wait(empty_bar + 8 * s, (pass & 1) ^ 1);  // the first pass finds every stage free
        const uint32_t full = full_bar + 8 * s;
        mbar_arrive_expect_tx(full, STAGE_BYTES);
        load_skinny_stage(&tmap_w, &tmap_a, ring + s * STAGE_BYTES, full, (kb + i) * SKINNY_BK, n0, m0, N);
      }
    }
  } else {  // consumer warpgroup cw
    const int cw = warp / 4;
    uint32_t previous = 0;
    bool pending = false;  // the stage `previous` waits for its release
    for (int i = 0; i < k_tiles; ++i) {
      const uint32_t s = i % STAGES;
      mbar_wait(full_bar + 8 * s, (i / STAGES) & 1);
      wgmma_fence();
      mma_skinny_stage(acc, ring + s * STAGE_BYTES, cw);
      wgmma_commit();
      wgmma_wait<1>();  // the previous k-tile's wgmma have retired: its stage is free
      if (pending && lane == 0) mbar_arrive(empty_bar + 8 * previous);
      previous = s;
      pending = true;
    }
    wgmma_wait<0>();
  }
  __syncthreads();  // every wgmma has retired and every copy landed: the ring holds the reduction tile now

  // This block's fp32 tile, red[p][m][n] (m: A's rows, n: C's columns of the tile), from the fragments.
  if (warp < 4 * WG) {
    const int cw = warp / 4, w = warp % 4, q = lane % 4;
#pragma unroll
    for (int p = 0; p < PLANES; ++p)
#pragma unroll
      for (int s = 0; s < SLICES; ++s)
#pragma unroll
        for (int j = 0; j < BM / 8; ++j)
#pragma unroll
          for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const int n = (cw * SLICES + s) * 64 + 16 * w + lane / 4 + 8 * h, m = 8 * j + 2 * q + e;
              const uint32_t at = ring + 4 * ((p * BM + m) * RED_STRIDE + n);
              asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(at), "f"(acc[p][s][4 * j + 2 * h + e]) : "memory");
            }
  }
#if SPLIT_K > 1
  cluster_sync();  // every block's tile is written (release) and visible to its peers (acquire)
  const uint32_t rank = cluster_ctarank();
#else
  __syncthreads();
  const uint32_t rank = 0;
#endif

  // Block `rank` finishes every SPLIT_K-th group of 4 columns: the slices' sums in rank order, then the epilogue.
  const bool vec = (N % 4) == 0 && (reinterpret_cast<uintptr_t>(C) & 7) == 0;
#if GEMM_GELU
  const bool vec_pre = (N % 4) == 0 && (reinterpret_cast<uintptr_t>(pre) & 7) == 0;  // its own array's alignment
#endif
  for (int g = rank * NT + threadIdx.x; g < BM * BN / 4; g += SPLIT_K * NT) {
    const int m = (4 * g) / BN, n = (4 * g) % BN, row = m0 + m, col = n0 + n;
    if (row >= M || col >= N) continue;
    float v[PLANES][4];
#pragma unroll
    for (int p = 0; p < PLANES; ++p) {
      const uint32_t at = ring + 4 * ((p * BM + m) * RED_STRIDE + n);
      float4 sum = ld_tile4(at, 0);
#pragma unroll
      for (int z = 1; z < SPLIT_K; ++z) {
        const float4 x = ld_tile4(at, z);
        sum.x += x.x, sum.y += x.y, sum.z += x.z, sum.w += x.w;
      }
      v[p][0] = sum.x, v[p][1] = sum.y, v[p][2] = sum.z, v[p][3] = sum.w;
    }
    float out[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      out[i] = v[0][i];
#if GEMM_BIAS
      if (col + i < N) out[i] += to_f32(bias[col + i]);
#endif
#if GEMM_SWIGLU
      out[i] = swiglu(out[i], v[1][i]);
#endif
    }
    const size_t at = (size_t)row * N + col;
#if GEMM_GELU
#pragma unroll
    for (int i = 0; i < 4; ++i) out[i] = to_f32(from_f32<elem_t>(out[i]));  // pre as stored
    store_four(pre + at, out, vec_pre, N - col);
#pragma unroll
    for (int i = 0; i < 4; ++i) out[i] = gelu_tanh(out[i]);
#endif
    store_four(C + at, out, vec, N - col);
  }
#if SPLIT_K > 1
  cluster_sync();  // no block leaves while a peer may still read its tile
#endif
}
