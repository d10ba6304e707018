// GEMM  C[M,N] = A[M,K] · B[K,N]  the Hopper way (sm_90a): TMA loads, a producer warpgroup, consumer warpgroups
// on wgmma, and a persistent grid; row-major. Two operand schemes:
//   DTYPE = 1, 2 (float16, bfloat16): 16-bit operands, fp32 accumulation, C in the input type.
//   DTYPE = 0 (float32 at FP32 accuracy, 3×TF32): a pre-pass (kernel_templates/gemm_tf32_split.cuh) splits A
//     into big + small tf32 parts (M×K) and B into transposed big + small parts (N×K: tf32 wgmma reads B
//     K-major); the main loop accumulates small·big + big·small + big·big on tf32 wgmma. The tensor cores'
//     fp32 accumulation truncates (see kernel_templates/gemm_tf32x3.cu), so it runs only over a window of FOLD
//     k-tiles, started from zero, and each window is added to a register total with FADD (round to nearest).
//
// Roles (warp specialisation): warpgroup 0 is the producer, whose one elected thread issues the bulk tensor
// copies (kernel_templates/tma_sm90.cuh) of each k-tile into a STAGES-deep shared-memory ring; a "full" mbarrier
// per stage completes when the copy engine has written the stage's bytes, an "empty" one when every consumer
// thread has retired the wgmma that read it. Warpgroups 1..WG are consumers (setmaxnreg moves the producer's
// registers to them). No block-wide barrier after the set-up.
//
// Persistent grid: gridDim.x blocks (about one per SM) walk the output tiles t = blockIdx.x, + gridDim.x, …,
// rasterised GROUP_M tile rows at a time so that blocks running together share B (and A) in L2. The ring runs on
// across tiles, so the producer fetches the next tile while the consumers store this one.
//   PINGPONG = 0 (cooperative): both consumers work on one BM×BN tile, each on BM/WG rows.
//   PINGPONG = 1: consumers take turns, tile by tile, each on a whole BM×BN tile, so that one's main loop runs
//     while the other stores its tile and the tensor cores do not wait for the epilogue. An "order" mbarrier per
//     consumer passes the turn when a main loop has issued its last wgmma: besides alternating the main loops,
//     this keeps a consumer from waiting on a stage's "full" barrier passes ahead of the ring (a parity wait
//     cannot tell pass p from pass p + 2).
//
// Clusters (CLUSTER_M = 2): two blocks of a cluster compute vertically adjacent tiles (same columns), so they
// need the same B tile: each block copies half of its 64-column panels and multicasts them into both blocks'
// shared memory. A stage is then free only when the consumers of both blocks have retired it: consumer warps
// arrive on the "empty" barriers of both. Halves the B traffic from L2.
//
// Operand layouts in shared memory are those of kernel_templates/gemm_wgmma.cu (A K-major, B MN-major with the
// transpose bit, 128-byte swizzle), which is exactly what TMA writes with CU_TENSOR_MAP_SWIZZLE_128B for boxes
// whose inner extent is 64 elements (128 bytes): A as one box of 64 (k) × BM (rows), B as BN/64 boxes of 64
// (columns) × BK (k). 3×TF32: every operand K-major, rows of 32 fp32 (128 bytes): a stage holds A big, A small
// (boxes of 32 × BM), B big, B small (32 × BN). The host side (autotune/spaces/gemm_wgmma_tma.py,
// gemm_wgmma_tf32x3.py) describes these tensor maps.
//
// Layouts (16-bit only; the gemm_nt, gemm_tn and linear families, autotune/spaces/gemm_layouts.py):
//   B_K_MAJOR = 1: B is stored N×K (C = A·Bᵀ, nn.Linear's weight). wgmma's natural B layout: the stage holds B as
//     BN rows of 64 k (128-byte swizzled), copied in boxes of 64 k × 64 rows that land at the same byte offsets as
//     the MN-major panels, so the ring, the cluster split and the stage size are unchanged; wgmma reads B
//     without the transpose bit, a k16 step adding 32 bytes like A's.
//   A_MN_MAJOR = 1: A is stored K×M (C = Aᵀ·B, a weight's gradient). The stage holds A as BM/64 panels of 64 rows
//     (m) × BK k-rows, as B's MN-major panels, and wgmma reads A with the transpose bit.
//   GEMM_BIAS = 1: C += bias[col] (a length-N vector of the element type), added in fp32 before the rounding to
//     the element type; with split-K the reduce's output gets gemm_bias_add (kernel_templates/gemm_layout.cuh).
//     3×TF32 takes the bias too; it meets the other layouts in its split pre-pass (both workspaces K-major).
//   GEMM_GELU = 1 with GEMM_BIAS: linear_gelu's epilogue. The sum with the bias is stored to `pre` (what the
//     backward differentiates at), then C = gelu_tanh of the stored value, read back by the consumer that stored it
//     (kernel_templates/gelu.cuh); split, the reduce's output gets gemm_bias_gelu instead.
//   GEMM_SWIGLU = 1 with B_K_MAJOR (linear_swiglu, Llama's MLP): B stored 2N×K holds the gate rows, then the up
//     rows, and C (M×N) = silu(A·B[:N]ᵀ) · A·B[N:]ᵀ. A tile's B stage takes BN/2 gate rows in its first half of
//     64-row boxes and the same BN/2 up rows in the second (the one tensor map, at row N on), so gate column c
//     and up column c sit BN/2 accumulator columns apart, in the same thread (the fragment repeats every 8
//     columns): the epilogue multiplies them in fp32 and stores a BN/2-wide tile. Gate boxes past N read up rows,
//     into columns that are never stored. Split-K (decoding: a few rows, too few tiles for the SMs) stores the
//     slice's gate and up sums as two planes, partial[z][2][M][N], and gemm_splitk_swiglu adds the slices up
//     before the product. No stream-K.
//
// Split-K (a launch choice, no define): with gridDim.z = S > 1, the blocks of z-slice z walk the tiles over
// k-tiles [z·per, (z+1)·per) and store fp32 partial tiles to out = partial[z][M][N]; gemm_splitk_reduce
// (kernel_templates/gemm_splitk.cuh) then sums the slices in a fixed order into C. An empty slice stores zeros.
//
// Stream-K (STREAM_K = 1; 16-bit, no cluster, no split-K): the blocks share the tiles' k-tiles evenly instead
// (kernel_templates/stream_k.cuh); a tile's pieces meet in the kernel through the workspace sk_partial (one
// BM×BN fp32 slot per block) and sk_flags (one per block, zeroed before the launch). Either way a block walks
// pieces of work: tile t over k-tiles [kb, ke) (`Walk`).
//
// Edges: boxes reaching past M, N or K are zero-filled by the copy engine, so ragged M, N, K need no code here;
// C is stored from registers with guards (kernel_templates/wgmma_epilogue.cuh). TMA needs 16-byte aligned bases
// and row strides: K and N multiples of 8 (the space's constraints; other shapes take another algorithm).
//
// Tunables (compile-time defines; the defaults below are autotune's "default configuration"):
//   BM BN     tile rows and columns (cooperative: BM = WG · 64 · M_TILES; ping-pong: BM = 64 · M_TILES)
//   WG        consumer warpgroups (1 or 2)
//   PINGPONG  0 cooperative, 1 ping-pong (needs WG = 2)
//   STAGES    shared-memory stages of BK = 64 (16-bit) or 32 (tf32) elements: 128-byte rows
//   FOLD      3×TF32 only: k-tiles per accumulation window of the tensor cores (see above)
//   GROUP_M   tile rows swept before moving right
//   CLUSTER_M 1, or 2: blocks in clusters of two along M sharing B by TMA multicast

#include "dtype.cuh"
#include "gemm_splitk.cuh"
#include "tile_raster.cuh"
#include "tma_sm90.cuh"
#include "wgmma_epilogue.cuh"
#include "wgmma_sm90.cuh"

#define TF32X3 (DTYPE == 0)
#if TF32X3
#include "gemm_tf32_split.cuh"
#include "wgmma_tf32_sm90.cuh"
#endif

#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 256
#endif
#ifndef WG
#define WG 2
#endif
#ifndef PINGPONG
#define PINGPONG 0
#endif
#ifndef STAGES
#define STAGES 4
#endif
#ifndef GROUP_M
#define GROUP_M 8
#endif
#ifndef CLUSTER_M
#define CLUSTER_M 1
#endif
// The operand layouts (wgmma_sm90.cuh takes its transpose bits from them).
#ifndef A_MN_MAJOR
#define A_MN_MAJOR 0
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
#define TILE_N (GEMM_SWIGLU ? BN / 2 : BN)  // output columns of a tile
// GELU in this kernel's epilogue: with the bias. Alone, GEMM_GELU asks only for gemm_bias_gelu beside the kernel
// (the padded algorithm's step after its product).
#define GELU_EPILOGUE (GEMM_BIAS && GEMM_GELU)
#define GELU_BARRIER 4  // named barriers 4 and 5: a consumer's own (stream-K's are 1..3)
#ifndef STREAM_K
#define STREAM_K 0
#endif
#if STREAM_K
#include "stream_k.cuh"
#endif
#if GEMM_BIAS
#include "gemm_layout.cuh"
#endif
#if GEMM_GELU  // linear_gelu: its epilogue (with the bias) or the step after the product (alone)
#include "gelu.cuh"
#include "gemm_bias_gelu.cuh"
#endif
#if GEMM_SWIGLU  // the activation, and split-K's end: the slices' gate and up planes added up first
#include "gemm_splitk_swiglu.cuh"
#endif

#if TF32X3
#if !defined(FOLD)  // the algorithm's default is in gemm_wgmma_tf32x3.cu
#define FOLD 2
#endif
#define BK 32                               // one 128-byte swizzle row of fp32
#define A_TILE_BYTES (BM * 128)             // one of A big, A small
#define B_TILE_BYTES (BN * 128)             // one of B big, B small (N rows of BK)
#define STAGE_BYTES (2 * (A_TILE_BYTES + B_TILE_BYTES))
#define B_BOXES 2                           // B big, B small
#define ACC_SETS 2                          // the tensor cores' window and its FADD total
#define WINDOW_STARTS(kt) ((kt) % FOLD == 0)
#else
#define BK 64                               // one 128-byte swizzle row of a 16-bit type
#define A_TILE_BYTES (BM * BK * 2)
#define B_PANEL_BYTES (BK * 128)            // 64 columns × BK k-rows
#define STAGE_BYTES (A_TILE_BYTES + BK * BN * 2)
#define B_BOXES (BN / 64)
#define ACC_SETS 1
#define WINDOW_STARTS(kt) false
#endif
#define NT (128 * (WG + 1))                 // consumers + the producer warpgroup
#define CONSUMER_ROWS (PINGPONG ? BM : BM / WG)
#define M_TILES (CONSUMER_ROWS / 64)
#define ACC (BN / 2)                        // fp32 accumulators per thread per m64 slice
#define SMEM_BYTES (STAGES * STAGE_BYTES + 1024 + 16 * STAGES + 16)  // + alignment slack + mbarriers
#define CONSUMER_WARPS (PINGPONG ? 4 : 4 * WG)  // warps that read one stage
#define EMPTY_ARRIVALS (CONSUMER_WARPS * CLUSTER_M)  // one per warp of each block reading it

static_assert(DTYPE == 0 || DTYPE == 1 || DTYPE == 2, "float32 (3xTF32), float16 or bfloat16");
static_assert(WG == 1 || WG == 2, "one or two consumer warpgroups");
static_assert(PINGPONG == 0 || WG == 2, "ping-pong needs two consumers");
static_assert(CONSUMER_ROWS % 64 == 0 && M_TILES >= 1 && M_TILES <= 2, "a consumer owns one or two m64 slices");
static_assert(BM <= 256, "a TMA box has at most 256 rows");
static_assert(BN == 64 || BN == 128 || BN == 192 || BN == 256, "BN is one wgmma N");
static_assert(!TF32X3 || BN != 192, "tf32 wgmma N is 64, 128 or 256 here");
static_assert(ACC_SETS * M_TILES * ACC <= 192, "at most 192 fp32 accumulators per consumer thread");
#if TF32X3
static_assert(FOLD >= 1 && FOLD <= 16, "FOLD: 1..16 k-tiles per window");
#endif
static_assert(!STREAM_K || (!TF32X3 && CLUSTER_M == 1), "stream-K: 16-bit operands, no cluster");
static_assert(STAGES >= 2 && STAGES <= 8, "2..8 stages");
static_assert(SMEM_BYTES <= 232448, "shared memory beyond the sm_90 limit of 227 KB per block");
static_assert(CLUSTER_M == 1 || CLUSTER_M == 2, "clusters of one or two blocks along M");
// 3×TF32 meets the other layouts in its split pre-pass (which writes both operands K-major), not here.
static_assert(!TF32X3 || (!A_MN_MAJOR && !B_K_MAJOR), "3xTF32 reads the pre-pass's K-major workspaces only");
static_assert(!GEMM_SWIGLU || (B_K_MAJOR && !GEMM_BIAS && !TF32X3 && !STREAM_K && (BN == 128 || BN == 256)),
              "SwiGLU: 16-bit B stored 2N×K, no bias, no stream-K, BN 128 or 256 (whole 64-row boxes per half)");

// Registers per thread after setmaxnreg (multiples of 8). setmaxnreg only moves registers within what the block
// was given at launch (384 threads at 168 each = 64512), so 128·(PRODUCER + WG·CONSUMER) ≤ 64512: a split asking
// for more (32/240 is 65536) waits in setmaxnreg.inc forever.
#if WG == 2 && ACC_SETS * M_TILES * ACC > 128
#define PRODUCER_REGS 24
#define CONSUMER_REGS 240
#elif WG == 2
#define PRODUCER_REGS 40
#define CONSUMER_REGS 232
#endif

// Cluster tile t of the persistent walk (CLUSTER_M tiles stacked along M) → the first row and column of this
// block's tile (`rank` within the cluster), GROUP_M cluster-tile rows at a time.
__device__ __forceinline__ void tile_origin(int t, int rows_m, int tiles_n, uint32_t rank, int& bm0, int& bn0) {
  int row, col;
  grouped_tile<GROUP_M>(t, rows_m, tiles_n, row, col);
  bn0 = col * TILE_N;
  bm0 = (row * CLUSTER_M + (int)rank) * BM;
}

// This block's pieces of work, in order: tile t over k-tiles [kb, ke). Without stream-K, every gridDim.x-th
// (cluster) tile from this block's over the K slice of blockIdx.z.
struct Walk {
#if STREAM_K
  StreamKRange range;
  __device__ __forceinline__ Walk(int tiles, int k_all) : range(tiles, k_all, blockIdx.x, gridDim.x) {}
  __device__ __forceinline__ bool next(int& t, int& kb, int& ke) { return range.next(t, kb, ke); }
#else
  int tile, step, tiles, kb0, ke0;
  __device__ __forceinline__ Walk(int tiles_, int k_all)
      : tile(blockIdx.x / CLUSTER_M), step(gridDim.x / CLUSTER_M), tiles(tiles_) {
    const int per = (k_all + gridDim.z - 1) / gridDim.z;
    kb0 = min(k_all, (int)blockIdx.z * per);
    ke0 = min(k_all, kb0 + per);
  }
  __device__ __forceinline__ bool next(int& t, int& kb, int& ke) {
    if (tile >= tiles) return false;
    t = tile;
    tile += step;
    kb = kb0;
    ke = ke0;
    return true;
  }
#endif
};

// The copies of k-tile k0 (elements) of this block's tile into `stage`, completing on `full`. B boxes are split
// among the blocks of a cluster, each multicasting its share into all of them.
struct Maps {
  const TmaDesc* a;
  const TmaDesc* b;
#if TF32X3
  const TmaDesc* a_small;
  const TmaDesc* b_small;
#endif
};

__device__ __forceinline__ void load_stage(const Maps& maps, uint32_t stage, uint32_t full, int k0, int bm0, int bn0,
                                           uint32_t rank, int N) {
#if A_MN_MAJOR
#pragma unroll
  for (int p = 0; p < BM / 64; ++p) tma_load_2d(stage + p * B_PANEL_BYTES, maps.a, bm0 + 64 * p, k0, full);
#else
  tma_load_2d(stage, maps.a, k0, bm0, full);
#endif
#if TF32X3
  tma_load_2d(stage + A_TILE_BYTES, maps.a_small, k0, bm0, full);
#endif
#pragma unroll
  for (int p = 0; p < B_BOXES; ++p) {
#if TF32X3
    const uint32_t dst = stage + 2 * A_TILE_BYTES + p * B_TILE_BYTES;
    const TmaDesc* map = p ? maps.b_small : maps.b;
    const int c0 = k0, c1 = bn0;
#else
    const uint32_t dst = stage + A_TILE_BYTES + p * B_PANEL_BYTES;  // K-major: rows 64p.. of B, same bytes
    const TmaDesc* map = maps.b;
#if GEMM_SWIGLU  // gate rows bn0.. in the first half of the boxes, up rows N + bn0.. in the second
    const int c0 = k0, c1 = p < B_BOXES / 2 ? bn0 + 64 * p : N + bn0 + 64 * (p - B_BOXES / 2);
#else
    const int c0 = B_K_MAJOR ? k0 : bn0 + 64 * p, c1 = B_K_MAJOR ? bn0 + 64 * p : k0;
#endif
#endif
#if CLUSTER_M > 1
    if (p % CLUSTER_M == (int)rank) tma_load_2d_multicast(dst, map, c0, c1, full, (1u << CLUSTER_M) - 1);
#else
    tma_load_2d(dst, map, c0, c1, full);
#endif
  }
}

// One stage's wgmma into `acc` for this consumer's rows (row0 within the tile). 3×TF32: `fresh` starts the
// window from zero.
__device__ __forceinline__ void mma_stage(float (&acc)[M_TILES][ACC], uint32_t stage, int row0, bool fresh) {
#if TF32X3
  const uint32_t a_big = stage + row0 * 128, a_small = a_big + A_TILE_BYTES;
  const uint32_t b_big = stage + 2 * A_TILE_BYTES, b_small = b_big + B_TILE_BYTES;
#pragma unroll
  for (int kk = 0; kk < BK / 8; ++kk) {
    const uint64_t db = sw128_desc(b_big + kk * 32, 16, 1024), db_small = sw128_desc(b_small + kk * 32, 16, 1024);
#pragma unroll
    for (int m = 0; m < M_TILES; ++m) {
      const uint64_t da = sw128_desc(a_big + m * 64 * 128 + kk * 32, 16, 1024);
      const uint64_t da_small = sw128_desc(a_small + m * 64 * 128 + kk * 32, 16, 1024);
      wgmma_tf32_m64k8<BN>(acc[m], da_small, db, (fresh && kk == 0) ? 0 : 1);  // small terms first
      wgmma_tf32_m64k8<BN>(acc[m], da, db_small, 1);
      wgmma_tf32_m64k8<BN>(acc[m], da, db, 1);
    }
  }
#else
  // Row r of a K-major operand at r·128 bytes, a k16 step 32 bytes on; an MN-major one in panels of 64 columns
  // (8 KB: 64 k-rows of 128 bytes), a k16 step 2048 bytes on. Either way consumer rows row0.. start at row0·128.
  const uint32_t a_base = stage + row0 * 128, b_base = stage + A_TILE_BYTES;
#pragma unroll
  for (int kk = 0; kk < BK / 16; ++kk) {
#if B_K_MAJOR
    const uint64_t db = sw128_desc(b_base + kk * 32, 16, 1024);
#else
    const uint64_t db = sw128_desc(b_base + kk * 2048, B_PANEL_BYTES, 1024);
#endif
#pragma unroll
    for (int m = 0; m < M_TILES; ++m) {
#if A_MN_MAJOR
      const uint64_t da = sw128_desc(a_base + m * B_PANEL_BYTES + kk * 2048, B_PANEL_BYTES, 1024);
#else
      const uint64_t da = sw128_desc(a_base + m * 64 * 128 + kk * 32, 16, 1024);
#endif
      wgmma_m64k16<BN>(acc[m], da, db);
    }
  }
#endif
}

#if CLUSTER_M > 1
#define CLUSTER_DIMS __cluster_dims__(CLUSTER_M, 1, 1)
#else
#define CLUSTER_DIMS
#endif

extern "C" __global__ void __launch_bounds__(NT, 1) CLUSTER_DIMS
gemm_wgmma_tma(const __grid_constant__ TmaDesc tmap_a, const __grid_constant__ TmaDesc tmap_b,
#if TF32X3
               const __grid_constant__ TmaDesc tmap_a_small, const __grid_constant__ TmaDesc tmap_b_small,
#endif
               void* __restrict__ out,
#if GEMM_BIAS
               const elem_t* __restrict__ bias,
#endif
#if GELU_EPILOGUE
               elem_t* __restrict__ pre,
#endif
               int M, int N, int K
#if STREAM_K
               , float* __restrict__ sk_partial, int* __restrict__ sk_flags
#endif
               ) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t raw = smem_u32(smem_raw);
  const uint32_t ring = (raw + 1023) & ~1023u;  // swizzle atoms and TMA boxes want 1024-byte alignment
  const uint32_t full_bar = ring + STAGES * STAGE_BYTES, empty_bar = full_bar + 8 * STAGES;
  const uint32_t order_bar = empty_bar + 8 * STAGES;  // ping-pong: consumer c may start a main loop

  // The walk is over cluster tiles (CLUSTER_M tiles stacked along M), one cluster per CLUSTER_M blocks.
  const int rows_m = (M + BM * CLUSTER_M - 1) / (BM * CLUSTER_M), tiles_n = (N + TILE_N - 1) / TILE_N;
  const int tiles = rows_m * tiles_n;
  const uint32_t rank = CLUSTER_M > 1 ? cluster_ctarank() : 0;
  const int k_all = (K + BK - 1) / BK;
  const int wg = threadIdx.x / 128;

#if TF32X3
  const Maps maps = {&tmap_a, &tmap_b, &tmap_a_small, &tmap_b_small};
#else
  const Maps maps = {&tmap_a, &tmap_b};
#endif
  if (threadIdx.x == 0) {
    tma_prefetch_desc(&tmap_a);
    tma_prefetch_desc(&tmap_b);
#if TF32X3
    tma_prefetch_desc(&tmap_a_small);
    tma_prefetch_desc(&tmap_b_small);
#endif
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(full_bar + 8 * s, 1);  // the producer's arrive.expect_tx; then the copies' bytes
      mbar_init(empty_bar + 8 * s, EMPTY_ARRIVALS);
    }
    mbar_init(order_bar, 128);
    mbar_init(order_bar + 8, 128);
    fence_mbarrier_init();
  }
#if CLUSTER_M > 1
  cluster_sync();  // the peer's barriers are initialised before anything multicasts into them
#else
  __syncthreads();
#endif

  if (wg == 0) {
#ifdef PRODUCER_REGS
    setmaxnreg_dec<PRODUCER_REGS>();
#endif
    if (threadIdx.x == 0) {
      uint32_t it = 0;  // k-tiles issued so far: stage it % STAGES, pass it / STAGES
      Walk walk(tiles, k_all);
      for (int t, kb, ke; walk.next(t, kb, ke);) {
        int bm0, bn0;
        tile_origin(t, rows_m, tiles_n, rank, bm0, bn0);
        for (int kt = kb; kt < ke; ++kt, ++it) {
          const uint32_t s = it % STAGES, pass = it / STAGES;
          mbar_wait(empty_bar + 8 * s, (pass & 1) ^ 1);  // the first pass finds every stage free
          const uint32_t stage = ring + s * STAGE_BYTES, full = full_bar + 8 * s;
          mbar_arrive_expect_tx(full, STAGE_BYTES);  // every box, whichever block of the cluster copies it
          load_stage(maps, stage, full, kt * BK, bm0, bn0, rank, N);
        }
      }
    }
  } else {  // the roles are the two branches of one if/else: ptxas then honours setmaxnreg
#ifdef CONSUMER_REGS
    setmaxnreg_inc<CONSUMER_REGS>();
#endif
    const int cw = wg - 1, lane = threadIdx.x % 32;
    uint32_t it = 0;
    int local = 0;  // this block's tiles so far
    // A warp releases a stage once its wgmma have retired: lane r arrives on cluster block r's barrier.
    auto release = [&](uint32_t s) {
      if (lane < CLUSTER_M) {
        if (CLUSTER_M > 1) mbar_arrive_cluster(empty_bar + 8 * s, lane);
        else mbar_arrive(empty_bar + 8 * s);
      }
    };
    Walk walk(tiles, k_all);
    for (int t, kb, ke; walk.next(t, kb, ke); ++local) {
      const int k_tiles = ke - kb;
      if (PINGPONG && (local % WG) != cw) {  // the other consumer's piece: skip its k-tiles in the ring
        it += k_tiles;
        continue;
      }
      if (PINGPONG) {  // this consumer's n-th tile (n = local / 2) waits for the other's main loop before it
        const int n = local / 2;
        if (cw == 1) mbar_wait(order_bar + 8, n & 1);
        else if (n > 0) mbar_wait(order_bar, (n - 1) & 1);
      }
      int bm0, bn0;
      tile_origin(t, rows_m, tiles_n, rank, bm0, bn0);
      const int row0 = PINGPONG ? 0 : cw * CONSUMER_ROWS;  // this consumer's rows within the tile
      float acc[M_TILES][ACC];  // 3×TF32: the tensor cores' window, added to `total` at its end
#if TF32X3
      float total[M_TILES][ACC];
      zero_fragments<M_TILES, BN>(total);
#else
      zero_fragments<M_TILES, BN>(acc);
#endif
      uint32_t previous = 0;
      bool pending = false;  // the stage `previous` waits for its release
      for (int kt = 0; kt < k_tiles; ++kt, ++it) {
        const uint32_t s = it % STAGES;
        mbar_wait(full_bar + 8 * s, (it / STAGES) & 1);
        wgmma_fence();
        mma_stage(acc, ring + s * STAGE_BYTES, row0, WINDOW_STARTS(kt));
        wgmma_commit();
#if TF32X3
        if ((kt + 1) % FOLD == 0 || kt + 1 == k_tiles) {  // the window ends: wait for it, add it up
          if (pending) {  // free the previous stage as soon as its wgmma retire: the producer refills it meanwhile
            wgmma_wait<1>();
            release(previous);
          }
          wgmma_wait<0>();
          release(s);
          pending = false;
#pragma unroll
          for (int m = 0; m < M_TILES; ++m)
#pragma unroll
            for (int j = 0; j < ACC; ++j) total[m][j] += acc[m][j];
          continue;
        }
#endif
        wgmma_wait<1>();  // the wgmma of the previous k-tile have retired: its stage is free
        if (pending) release(previous);
        previous = s;
        pending = true;
      }
      if (PINGPONG) mbar_arrive(order_bar + 8 * (cw ^ 1));  // every wgmma issued: the other's turn
      wgmma_wait<0>();
      if (pending) release(previous);
#if STREAM_K
      {  // the consumers of this piece: both (cooperative, each its rows' fragments) or this one (ping-pong)
        const int group = PINGPONG ? 128 : 128 * WG, i = PINGPONG ? threadIdx.x % 128 : threadIdx.x - 128;
        if (!stream_k_meet(acc, sk_partial, sk_flags, BM * BN, t, kb, ke, tiles, k_all, group, PINGPONG ? 2 + cw : 1, i))
          continue;  // published: a later block finishes the tile
      }
#endif
#if TF32X3
      float* dst = static_cast<float*>(out) + (size_t)blockIdx.z * M * N;  // C, or this slice's partial
#if GEMM_BIAS
      if (gridDim.z == 1) add_bias<M_TILES, BN>(total, bias, N, bn0);
#endif
#if GELU_EPILOGUE
      if (gridDim.z == 1) {
        store_fragments_f32<M_TILES, BN>(total, pre, M, N, bm0 + row0, bn0);
        gelu_from_pre<CONSUMER_ROWS, BN, 128>(pre, dst, M, N, bm0 + row0, bn0, GELU_BARRIER + cw, threadIdx.x % 128);
        continue;
      }
#endif
      store_fragments_f32<M_TILES, BN>(total, dst, M, N, bm0 + row0, bn0);
#else
      if (gridDim.z == 1) {
#if GEMM_BIAS
        add_bias<M_TILES, BN>(acc, bias, N, bn0);
#endif
#if GELU_EPILOGUE
        store_fragments<M_TILES, BN>(acc, pre, M, N, bm0 + row0, bn0);
        gelu_from_pre<CONSUMER_ROWS, BN, 128>(pre, static_cast<elem_t*>(out), M, N, bm0 + row0, bn0, GELU_BARRIER + cw,
                                              threadIdx.x % 128);
#elif GEMM_SWIGLU
        float activated[M_TILES][ACC / 2];  // gate column c at acc[.][i], its up column at acc[.][i + ACC/2]
#pragma unroll
        for (int m = 0; m < M_TILES; ++m)
#pragma unroll
          for (int i = 0; i < ACC / 2; ++i) activated[m][i] = swiglu(acc[m][i], acc[m][i + ACC / 2]);
        store_fragments<M_TILES, BN / 2>(activated, static_cast<elem_t*>(out), M, N, bm0 + row0, bn0);
#else
        store_fragments<M_TILES, BN>(acc, static_cast<elem_t*>(out), M, N, bm0 + row0, bn0);
#endif
      } else {
#if GEMM_SWIGLU  // this slice's gate and up sums, each an M×N plane (see the top)
        float gate[M_TILES][ACC / 2], up[M_TILES][ACC / 2];
#pragma unroll
        for (int m = 0; m < M_TILES; ++m)
#pragma unroll
          for (int i = 0; i < ACC / 2; ++i) {
            gate[m][i] = acc[m][i];
            up[m][i] = acc[m][i + ACC / 2];
          }
        float* planes = static_cast<float*>(out) + (size_t)blockIdx.z * 2 * M * N;
        store_fragments_f32<M_TILES, BN / 2>(gate, planes, M, N, bm0 + row0, bn0);
        store_fragments_f32<M_TILES, BN / 2>(up, planes + (size_t)M * N, M, N, bm0 + row0, bn0);
#else
        float* partial = static_cast<float*>(out) + (size_t)blockIdx.z * M * N;
        store_fragments_f32<M_TILES, BN>(acc, partial, M, N, bm0 + row0, bn0);
#endif
      }
#endif
    }
  }
#if CLUSTER_M > 1
  cluster_sync();  // no block leaves while its peer may still multicast into it or arrive on its barriers
#endif
}
