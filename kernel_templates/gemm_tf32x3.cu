// GEMM on tensor cores with TF32 operands  C[M,N] = A[M,K] · B[K,N]   fp32 in/out, row-major, any M, N, K.
//
// COMPENSATE=1 (3×TF32, FP32-accurate): each fp32 operand x is split into big = tf32(x) and small = tf32(x − big),
// and C accumulates small·big + big·small + big·big (small terms first: they are added while the accumulator is
// still small; small·small, ~2^-22 of a product, is dropped). COMPENSATE=0 (1×TF32, ~1e-4 relative error):
// big·big only — the `gemm_tf32` kernel, never an fp32 answer.
//
// Splitting rounds to nearest (as cvt.rna.tf32.f32 does, in two integer operations: see `split`) rather than
// truncating with a bit mask: the residual x − big is exact in fp32 either way, but rounding halves it
// (|small| ≤ 2^-11·|x| instead of < 2^-10·|x|), and small is itself rounded to tf32 rather than truncated by
// the mma, so big + small carries x to ~2^-22 relative instead of ~2^-20.
//
// Accumulation outside the tensor core (3×TF32): the tensor core's fp32 accumulation truncates (rounds toward
// zero, and aligns the products to the accumulator's exponent: Ootomo & Yokota 2022, Fasi et al. 2021), a bias
// that grows with the accumulator (≈1e-4 relative at K = 16384 in a simulation of this kernel if the mma
// accumulated along K, against ≈2e-6 for a K-sequential FFMA kernel). So each k-step's three mma start from
// zero (the truncation is relative to one k-step's 8 products) and are added with FADD (round to nearest) into
// `acc`; every FOLD k-tiles `acc` is added into `total` (a second level: `acc` sums at most 16 k-steps, `total`
// K/(FOLD·BK) windows), which keeps the rounding of the sum along K ~10× below a K-sequential kernel's. A small
// output whose error is one element's (1×70×4099 wide-range inputs) is then reliably within 2× of SIMT's.
// 1×TF32 (COMPENSATE=0, FOLD=0): the mma accumulates along K (its operand rounding, ~1e-4, dominates).
//
// Tiling: block tile BM×BN stepping BK along K; WARPS_M×WARPS_N warps, each owning a WM×WN warp tile of
// MI×NI mma tiles (m16n8k8). A STAGES-deep cp.async ring of shared tiles:
//   As[BM][BK+4]: fragments read with ldmatrix.x4 (32-bit words as b16 pairs: matrix j, lane l gets row l/4,
//                 word l%4 — exactly the tf32 A fragment); a row stride of BK+4 words (an odd number of 16-byte
//                 chunks) puts the 8 rows of each 8×16-byte matrix in distinct banks.
//   Bs[BK][BN+8]: B fragments (k = lane%4 [+4], n = lane/4) read with vector LDS: within a warp tile the mma
//                 tiles' columns are interleaved (lane g's column of the NV consecutive tiles of a group are
//                 adjacent), so one LDS.64/128 serves NV tiles; a row stride ≡ 8 words (mod 32) makes each
//                 8-lane phase hit distinct banks. C's columns follow the same permutation (undone at the store).
//
// Tunables (compile-time defines; the defaults below are autotune's default configuration):
//   BM BN BK WARPS_M WARPS_N   tiles       STAGES  cp.async ring depth (2..5)     GROUP_M  block rasterisation
//   FOLD   k-tiles per level-1 accumulation window (0: one level)              MIN_BLOCKS  __launch_bounds__ hint
//
// Split-K (a launch choice, no define): with gridDim.z = S > 1, block z computes K tiles [z*per, (z+1)*per) of
// its output tile (per = ceil(ceil(K/BK) / S)) and C is the fp32 partial workspace [S][M][N], summed by
// gemm_splitk_reduce (gemm_splitk.cuh); a block with no K tile writes zeros. S = 1: C is the output.
//
// Edges: out-of-range elements are zero-filled by cp.async (src-size 0); rows whose length is not a multiple of 4
// floats fall back to 4-byte copies; every store is bounds-checked.
#include "cp_async.cuh"
#include "dtype.cuh"
#include "gemm_splitk.cuh"
#include "tile_raster.cuh"

#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef BK
#define BK 32
#endif
#ifndef WARPS_M
#define WARPS_M 2
#endif
#ifndef WARPS_N
#define WARPS_N 4
#endif
#ifndef STAGES
#define STAGES 4
#endif
#ifndef FOLD
#define FOLD 4
#endif
#ifndef GROUP_M
#define GROUP_M 8
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 1
#endif
#ifndef COMPENSATE
#define COMPENSATE 1
#endif

#define NT (32 * WARPS_M * WARPS_N)
#define WM (BM / WARPS_M)
#define WN (BN / WARPS_N)
#define MI (WM / 16)  // mma tiles along M in a warp tile
#define NI (WN / 8)   // mma tiles along N
#define NV (NI < 4 ? NI : 4)  // mma tiles whose B fragments one vector LDS reads
#define A_LD (BK + 4)
#define B_LD (BN + 8)
#define A_TILE (BM * A_LD)
#define B_TILE (BK * B_LD)
#define STAGE_FLOATS (A_TILE + B_TILE)

static_assert(DTYPE == 0, "tf32 tensor-core GEMM takes float32 operands");
static_assert(BM % WARPS_M == 0 && BN % WARPS_N == 0, "block tile must split into warp tiles");
static_assert(WM % 16 == 0 && WN % 8 == 0, "warp tile must be a whole number of m16n8 mma tiles");
static_assert(NI == 1 || NI == 2 || NI == 4, "mma tiles along N: 1, 2 or 4 (wider warp tiles spill)");
static_assert(BK % 8 == 0, "BK must be a multiple of the mma K (8)");
static_assert(STAGES >= 2 && STAGES <= 5, "cp.async ring of 2..5 stages");
static_assert(COMPENSATE == 0 || COMPENSATE == 1, "COMPENSATE is 0 or 1");
static_assert(FOLD >= 0, "FOLD is 0 (one level) or k-tiles per level-1 window");
static_assert(COMPENSATE == 0 || (FOLD >= 1 && FOLD * BK <= 128),
              "3xTF32 folds its level-1 sum at least every 128 elements of K");

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "tf32 mma.sync and cp.async need sm_80 or newer"
#endif

// ---- primitives ----------------------------------------------------------------------------------------
// x → (big, small), x ≈ big + small to ~2^-22 relative. big = x rounded to tf32 (round half away from zero on
// the magnitude bits: add half a tf32 ulp, clear the 13 low bits), an exact tf32 value, so x − big is exact in
// fp32. small gets the half ulp added but keeps its low bits: the mma reads tf32 operands by ignoring the 13 low
// bits (truncation), which completes the rounding. Two integer operations per part where cvt.rna.tf32.f32
// compiles to five (it also tests for inf/NaN, which these inputs are not required to avoid: an inf or NaN
// input still gives inf or NaN, only NaN payloads may change).
__device__ __forceinline__ void split(float x, unsigned& big, unsigned& small) {
  big = (__float_as_uint(x) + 0x1000u) & 0xffffe000u;
#if COMPENSATE
  small = __float_as_uint(x - __uint_as_float(big)) + 0x1000u;
#endif
}

__device__ __forceinline__ void mma_tf32(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const float* p) {
  unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}

// ---- global → shared ------------------------------------------------------------------------------------
// A ROWS×COLS tile (COLS a multiple of 4) of a rows×cols row-major matrix, from (r0, c0), into shared memory
// with row stride LD, by cp.async. Interior tiles with aligned rows (a block-uniform test, so the branch is
// taken once per tile, not per chunk) copy 16 bytes per chunk unchecked; edge tiles zero-fill what lies
// outside; unaligned rows copy 4 bytes at a time.
template <int ROWS, int COLS, int LD>
__device__ __forceinline__ void copy_tile(float* dst, const float* __restrict__ src, int rows, int cols, int r0,
                                          int c0, bool aligned) {
  constexpr int CHUNKS = ROWS * COLS / 4, PER_THREAD = (CHUNKS + NT - 1) / NT;
  const int tid = threadIdx.x;
  if (aligned && r0 + ROWS <= rows && c0 + COLS <= cols) {
#pragma unroll
    for (int i = 0; i < PER_THREAD; ++i) {
      const int e = tid + i * NT;
      if (CHUNKS % NT == 0 || e < CHUNKS) {
        const int r = e / (COLS / 4), c = (e % (COLS / 4)) * 4;
        cp_async<16>(dst + r * LD + c, src + (size_t)(r0 + r) * cols + (c0 + c), 16);
      }
    }
  } else if (aligned) {
#pragma unroll
    for (int i = 0; i < PER_THREAD; ++i) {
      const int e = tid + i * NT;
      if (CHUNKS % NT == 0 || e < CHUNKS) {
        const int r = e / (COLS / 4), c = (e % (COLS / 4)) * 4;
        const int gr = r0 + r, gc = c0 + c;
        const int n = gr < rows ? max(0, min(4, cols - gc)) : 0;
        cp_async<16>(dst + r * LD + c, n ? src + (size_t)gr * cols + gc : src, 4 * n);
      }
    }
  } else {
#pragma unroll 1
    for (int i = 0; i < PER_THREAD; ++i) {
      const int e = tid + i * NT;
      if (CHUNKS % NT == 0 || e < CHUNKS) {
        const int r = e / (COLS / 4), c = (e % (COLS / 4)) * 4;
        const int gr = r0 + r, gc = c0 + c;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const bool ok = gr < rows && gc + j < cols;
          cp_async<4>(dst + r * LD + c + j, ok ? src + (size_t)gr * cols + gc + j : src, ok ? 4 : 0);
        }
      }
    }
  }
}

// One (A, B) tile pair of the k-tile starting at k0.
__device__ __forceinline__ void issue_tile(float* As, float* Bs, const float* __restrict__ A,
                                           const float* __restrict__ B, int M, int N, int K, int bm0, int bn0,
                                           int k0, bool a_aligned, bool b_aligned) {
  copy_tile<BM, BK, A_LD>(As, A, M, K, bm0, k0, a_aligned);
  copy_tile<BK, BN, B_LD>(Bs, B, K, N, k0, bn0, b_aligned);
}

// Physical column, within the warp tile, of logical column c (0..7) of mma tile j: tiles are interleaved in
// groups of NV so that lane g's columns of a group's tiles are adjacent.
__device__ __forceinline__ int warp_col(int j, int c) { return (j / NV) * (8 * NV) + c * NV + (j % NV); }

// ---- tensor-core work on one shared tile pair ------------------------------------------------------------
__device__ __forceinline__ void compute_tile(float (&acc)[MI][NI][4], const float* As, const float* Bs,
                                             int warp_m0, int warp_n0, int lane) {
  const int g = lane >> 2, t = lane & 3;
  // ldmatrix.x4 row addresses: lanes 0-7 matrix 0 (rows 0-7, k 0-3), 8-15 matrix 1 (rows 8-15, k 0-3),
  // 16-23 matrix 2 (rows 0-7, k 4-7), 24-31 matrix 3 (rows 8-15, k 4-7): registers a0..a3 of the fragment.
  const float* a_base = As + (warp_m0 + (lane & 15)) * A_LD + (lane >> 4) * 4;
  const float* b_base = Bs + t * B_LD + warp_n0 + g * NV;
#pragma unroll
  for (int kk = 0; kk < BK; kk += 8) {
    unsigned b_big[NI][2], b_small[NI][2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // k = t, then k = t + 4
#pragma unroll
      for (int jg = 0; jg < NI / NV; ++jg) {
        const float* p = b_base + (kk + 4 * h) * B_LD + jg * 8 * NV;
        float v[NV];
        if constexpr (NV == 4) {
          const float4 q = *reinterpret_cast<const float4*>(p);
          v[0] = q.x; v[1] = q.y; v[2] = q.z; v[3] = q.w;
        } else if constexpr (NV == 2) {
          const float2 q = *reinterpret_cast<const float2*>(p);
          v[0] = q.x; v[1] = q.y;
        } else {
          v[0] = *p;
        }
#pragma unroll
        for (int jv = 0; jv < NV; ++jv) split(v[jv], b_big[jg * NV + jv][h], b_small[jg * NV + jv][h]);
      }
    }
#pragma unroll
    for (int i = 0; i < MI; ++i) {
      unsigned raw[4], a_big[4], a_small[4];
      ldmatrix_x4(raw, a_base + i * 16 * A_LD + kk);
#pragma unroll
      for (int r = 0; r < 4; ++r) split(__uint_as_float(raw[r]), a_big[r], a_small[r]);
#pragma unroll
      for (int j = 0; j < NI; ++j) {
#if COMPENSATE
        float d[4] = {0.f, 0.f, 0.f, 0.f};  // this k-step's products only: truncation relative to them
        mma_tf32(d, a_small, b_big[j]);
        mma_tf32(d, a_big, b_small[j]);
        mma_tf32(d, a_big, b_big[j]);
#pragma unroll
        for (int r = 0; r < 4; ++r) acc[i][j][r] += d[r];
#else
        mma_tf32(acc[i][j], a_big, b_big[j]);
#endif
      }
    }
  }
}

// f(i, j, r) for each of this thread's accumulators: element r of mma tile (i, j) of its warp tile.
template <class F>
__device__ __forceinline__ void for_each_accumulator(F f) {
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < NI; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) f(i, j, r);
}

extern "C" __global__ void __launch_bounds__(NT, MIN_BLOCKS)
gemm_tf32(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M, int N, int K) {
  extern __shared__ float4 smem_f4[];  // float4: 16-byte alignment for cp.async and ldmatrix
  float* smem = reinterpret_cast<float*>(smem_f4);

  // This block's tile, sweeping GROUP_M tile rows at a time so that concurrent blocks share B tiles.
  int bm0, bn0;
  block_tile_origin<BM, BN, GROUP_M>(M, N, bm0, bn0);

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int warp_m0 = (warp / WARPS_N) * WM, warp_n0 = (warp % WARPS_N) * WN;

  // 16-byte copies need every row to start 16-byte aligned.
  const bool a_aligned = (K % 4) == 0;
  const bool b_aligned = (N % 4) == 0;
  // This block's share of the K tiles (all of them without split-K) and its slice of the partial workspace.
  int kt0, k_tiles;
  splitk_tiles<BK>(K, kt0, k_tiles);
  C += (size_t)blockIdx.z * M * N;

  float acc[MI][NI][4];
#if FOLD
  float total[MI][NI][4];
#endif
  for_each_accumulator([&](int i, int j, int r) {
    acc[i][j][r] = 0.f;
#if FOLD
    total[i][j][r] = 0.f;
#endif
  });

  // STAGES-deep cp.async ring: tile t lives in stage t % STAGES. One barrier per tile: after it, every thread
  // has finished computing tile t-1, whose stage is the one refilled with tile t+STAGES-1.
#pragma unroll 1
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < k_tiles) {
      float* st = smem + s * STAGE_FLOATS;
      issue_tile(st, st + A_TILE, A, B, M, N, K, bm0, bn0, (kt0 + s) * BK, a_aligned, b_aligned);
    }
    cp_async_commit();
  }
  for (int t = 0; t < k_tiles; ++t) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    const int next = t + STAGES - 1;
    if (next < k_tiles) {
      float* st = smem + (next % STAGES) * STAGE_FLOATS;
      issue_tile(st, st + A_TILE, A, B, M, N, K, bm0, bn0, (kt0 + next) * BK, a_aligned, b_aligned);
    }
    cp_async_commit();
    const float* cur = smem + (t % STAGES) * STAGE_FLOATS;
    compute_tile(acc, cur, cur + A_TILE, warp_m0, warp_n0, lane);
#if FOLD
    if (FOLD == 1 || (t + 1) % FOLD == 0 || t + 1 == k_tiles) {
      for_each_accumulator([&](int i, int j, int r) {
        total[i][j][r] += acc[i][j][r];
        acc[i][j][r] = 0.f;
      });
    }
#endif
  }
  cp_async_wait<0>();  // nothing may be in flight into shared memory when the block exits

#if FOLD
  float (&out)[MI][NI][4] = total;
#else
  float (&out)[MI][NI][4] = acc;
#endif
  // Epilogue. Lane (g, t) holds, for rows g and g+8 of each mma row tile, logical columns 2t and 2t+1 of each
  // mma tile j: physical columns warp_col(j, 2t) and warp_col(j, 2t+1), i.e. 2·NV adjacent columns per group.
  const int g = lane >> 2, t4 = lane & 3;
  const bool c_vec = (N % 4) == 0;
#pragma unroll
  for (int i = 0; i < MI; ++i) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = bm0 + warp_m0 + i * 16 + g + 8 * h;
      if (row >= M) continue;
      float* crow = C + (size_t)row * N;
#pragma unroll
      for (int jg = 0; jg < NI / NV; ++jg) {
        float v[2 * NV];
#pragma unroll
        for (int jv = 0; jv < NV; ++jv) {
          v[jv] = out[i][jg * NV + jv][2 * h];
          v[NV + jv] = out[i][jg * NV + jv][2 * h + 1];
        }
        const int col0 = bn0 + warp_n0 + warp_col(jg * NV, 2 * t4);  // first of the 2·NV adjacent columns
        bool stored = false;
        if constexpr (NV >= 2) {
          if (c_vec && col0 + 2 * NV <= N) {
#pragma unroll
            for (int q = 0; q < 2 * NV; q += 4)
              *reinterpret_cast<float4*>(crow + col0 + q) = make_float4(v[q], v[q + 1], v[q + 2], v[q + 3]);
            stored = true;
          }
        } else {
          if (N % 2 == 0 && col0 + 2 <= N) {
            *reinterpret_cast<float2*>(crow + col0) = make_float2(v[0], v[1]);
            stored = true;
          }
        }
        if (!stored) {
#pragma unroll
          for (int q = 0; q < 2 * NV; ++q)
            if (col0 + q < N) crow[col0 + q] = v[q];
        }
      }
    }
  }
}
