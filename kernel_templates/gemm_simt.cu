// SGEMM  C[M,N] = A[M,K] · B[K,N]   fp32, row-major, any M, N, K.
//
// Tiling: block tile BM×BN stepping BK along K → WARPS_M×WARPS_N warps, each owning a WM×WN warp tile →
// each lane owning WMITER×WNITER sub-tiles of TM×TN (the sub-tiles of a warp are WSUBM×WSUBN apart, so a
// warp's shared-memory reads of one k-row are contiguous: conflict-free 16-byte loads).
//
// Tunables (compile-time defines; the defaults below are autotune's "default configuration"):
//   BM BN BK WARPS_M WARPS_N TM TN WNITER   tile hierarchy
//   VEC       global-load width in floats (1, 2, 4); rows whose length is not a multiple fall back to scalars
//   A_TRANS   1: A tile stored transposed in shared memory (As[k][m]) so thread fragments are vector loads
//   A_PAD     floats of padding per shared-memory row of A
//   STAGES    shared-memory stages; ASYNC=0: 1 = single buffer, 2 = register-prefetch double buffer
//             ASYNC=1: 2..4-stage cp.async pipeline (sm_80+)
//   GROUP_M   blocks sweep GROUP_M tile rows before moving right (L2 reuse of B)
//   MIN_BLOCKS  __launch_bounds__ occupancy hint: ptxas caps registers so this many blocks fit on an SM
//
// Split-K (a launch choice, no define): with gridDim.z = S > 1, block z computes K tiles [z*per, (z+1)*per) of
// its output tile (per = ceil(ceil(K/BK) / S)) and C is the fp32 partial workspace [S][M][N]; the launch plan
// then runs gemm_splitk_reduce (gemm_splitk.cuh), which sums the slices in a fixed order. A split left with no
// K tile writes zeros. With S = 1 (gridDim.z = 1) C is the output and nothing else runs.
//
// Edges: every global load and store is bounds-checked; out-of-range elements load as 0. Vector paths are
// taken only where the row length is a multiple of the vector width (then every vector is aligned).
#include "cp_async.cuh"
#include "gemm_splitk.cuh"
#include "tile_raster.cuh"

#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef BK
#define BK 8
#endif
#ifndef WARPS_M
#define WARPS_M 2
#endif
#ifndef WARPS_N
#define WARPS_N 4
#endif
#ifndef TM
#define TM 4
#endif
#ifndef TN
#define TN 4
#endif
#ifndef WNITER
#define WNITER 2
#endif
#ifndef VEC
#define VEC 4
#endif
#ifndef A_TRANS
#define A_TRANS 1
#endif
#ifndef A_PAD
#define A_PAD 4
#endif
#ifndef STAGES
#define STAGES 2
#endif
#ifndef ASYNC
#define ASYNC 0
#endif
#ifndef GROUP_M
#define GROUP_M 1
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 1
#endif

#define NT (32 * WARPS_M * WARPS_N)
#define WM (BM / WARPS_M)
#define WN (BN / WARPS_N)
#define WMITER ((WM * WN) / (32 * TM * TN * WNITER))
#define WSUBM (WM / WMITER)
#define WSUBN (WN / WNITER)
#define LANES_N (WSUBN / TN)

static_assert(BM % WARPS_M == 0 && BN % WARPS_N == 0, "block tile must split into warp tiles");
static_assert(WMITER >= 1 && WMITER * 32 * TM * TN * WNITER == WM * WN, "warp tile must split into lanes");
static_assert(WM % WMITER == 0 && WN % WNITER == 0 && WSUBM % TM == 0 && WSUBN % TN == 0, "sub-tile shape");
static_assert((WSUBM / TM) * (WSUBN / TN) == 32, "a sub-tile must map onto the 32 lanes of a warp");
static_assert(VEC == 1 || VEC == 2 || VEC == 4, "VEC is 1, 2 or 4");
static_assert(BK % VEC == 0 && BN % VEC == 0, "tiles must hold whole vectors");
static_assert(TM == 1 || TM == 2 || TM % 4 == 0, "TM is 1, 2 or a multiple of 4");
static_assert(TN == 1 || TN == 2 || TN % 4 == 0, "TN is 1, 2 or a multiple of 4");
static_assert(ASYNC ? (STAGES >= 2 && STAGES <= 4) : (STAGES == 1 || STAGES == 2), "pipeline");
static_assert(A_PAD % 4 == 0, "padding keeps rows 16-byte aligned");

#if A_TRANS
#define A_LD (BM + A_PAD)  // As[k][m]
#define A_TILE (BK * A_LD)
#else
#define A_LD (BK + A_PAD)  // As[m][k]
#define A_TILE (BM * A_LD)
#endif
#define B_LD BN  // Bs[k][n]
#define B_TILE (BK * B_LD)
#define STAGE_FLOATS (A_TILE + B_TILE)

#define A_CHUNKS (BM * BK / VEC)  // vectors in an A tile
#define B_CHUNKS (BK * BN / VEC)
#define A_LOADS ((A_CHUNKS + NT - 1) / NT)  // vectors per thread
#define B_LOADS ((B_CHUNKS + NT - 1) / NT)

// ---- small helpers -------------------------------------------------------------------------------------
template <int N>
__device__ __forceinline__ void load_vector(float (&v)[N], const float* p) {
  if (N == 4) {
    float4 t = *reinterpret_cast<const float4*>(p);
    v[0] = t.x; v[1] = t.y; v[2] = t.z; v[3] = t.w;
  } else if (N == 2) {
    float2 t = *reinterpret_cast<const float2*>(p);
    v[0] = t.x; v[1] = t.y;
  } else {
    v[0] = *p;
  }
}

template <int N>
__device__ __forceinline__ void store_vector(float* p, const float (&v)[N]) {
  if (N == 4) {
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
  } else if (N == 2) {
    *reinterpret_cast<float2*>(p) = make_float2(v[0], v[1]);
  } else {
    *p = v[0];
  }
}

// Read VEC elements of row `row`, columns [col, col+VEC), of a rows×cols matrix with leading dimension ld.
// aligned: ld % VEC == 0, so a whole in-range vector is VEC-aligned.
__device__ __forceinline__ void load_global(float (&v)[VEC], const float* __restrict__ base, int row, int col,
                                            int rows, int cols, bool aligned) {
  const float* p = base + (size_t)row * cols + col;
  if (aligned && row < rows && col + VEC <= cols) {
    load_vector<VEC>(v, p);
  } else {
#pragma unroll
    for (int i = 0; i < VEC; ++i) v[i] = (row < rows && col + i < cols) ? p[i] : 0.f;
  }
}

#if ASYNC
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "cp.async (ASYNC=1) needs sm_80 or newer"
#endif
// Issue the copies of one (A, B) tile pair straight into shared memory.
__device__ __forceinline__ void issue_tile_async(float* As, float* Bs, const float* __restrict__ A,
                                                 const float* __restrict__ B, int M, int N, int K, int bm0,
                                                 int bn0, int k0, bool a_aligned, bool b_aligned) {
  const int tid = threadIdx.x;
  const bool a_inside = a_aligned && bm0 + BM <= M && k0 + BK <= K;  // block-uniform: no per-element checks
  const bool b_inside = b_aligned && k0 + BK <= K && bn0 + BN <= N;
#if A_TRANS
  // Transposing copy: one 4-byte cp.async per element, consecutive threads walk a row of A (coalesced).
#pragma unroll
  for (int i = 0; i < (BM * BK + NT - 1) / NT; ++i) {
    const int e = tid + i * NT;
    if ((BM * BK) % NT == 0 || e < BM * BK) {
      const int r = e / BK, c = e % BK;
      const bool ok = a_inside || ((bm0 + r < M) && (k0 + c < K));
      const float* src = ok ? A + (size_t)(bm0 + r) * K + (k0 + c) : A;
      cp_async<4>(&As[c * A_LD + r], src, ok ? 4 : 0);
    }
  }
#else
#pragma unroll
  for (int i = 0; i < A_LOADS; ++i) {
    const int e = tid + i * NT;
    if (A_CHUNKS % NT == 0 || e < A_CHUNKS) {
      const int r = e / (BK / VEC), c = (e % (BK / VEC)) * VEC;
      const int gr = bm0 + r, gc = k0 + c;
      if (a_inside) {
        cp_async<4 * VEC>(&As[r * A_LD + c], A + (size_t)gr * K + gc, 4 * VEC);
      } else if (a_aligned) {
        const int n = gr < M ? max(0, min(VEC, K - gc)) : 0;
        cp_async<4 * VEC>(&As[r * A_LD + c], n ? A + (size_t)gr * K + gc : A, 4 * n);
      } else {
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          const bool ok = gr < M && gc + j < K;
          cp_async<4>(&As[r * A_LD + c + j], ok ? A + (size_t)gr * K + gc + j : A, ok ? 4 : 0);
        }
      }
    }
  }
#endif
#pragma unroll
  for (int i = 0; i < B_LOADS; ++i) {
    const int e = tid + i * NT;
    if (B_CHUNKS % NT == 0 || e < B_CHUNKS) {
      const int r = e / (BN / VEC), c = (e % (BN / VEC)) * VEC;
      const int gr = k0 + r, gc = bn0 + c;
      if (b_inside) {
        cp_async<4 * VEC>(&Bs[r * B_LD + c], B + (size_t)gr * N + gc, 4 * VEC);
      } else if (b_aligned) {
        const int n = gr < K ? max(0, min(VEC, N - gc)) : 0;
        cp_async<4 * VEC>(&Bs[r * B_LD + c], n ? B + (size_t)gr * N + gc : B, 4 * n);
      } else {
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          const bool ok = gr < K && gc + j < N;
          cp_async<4>(&Bs[r * B_LD + c + j], ok ? B + (size_t)gr * N + gc + j : B, ok ? 4 : 0);
        }
      }
    }
  }
}
#endif  // ASYNC

// Global → registers for one (A, B) tile pair (synchronous pipelines).
struct Staging {
  float a[A_LOADS][VEC];
  float b[B_LOADS][VEC];
};

// Interior tiles (wholly in range, rows aligned: a block-uniform test) take unchecked vector loads; edge tiles
// check every element.
__device__ __forceinline__ void load_tile(Staging& st, const float* __restrict__ A, const float* __restrict__ B,
                                          int M, int N, int K, int bm0, int bn0, int k0, bool a_aligned,
                                          bool b_aligned) {
  const int tid = threadIdx.x;
  const bool a_inside = a_aligned && bm0 + BM <= M && k0 + BK <= K;
  const bool b_inside = b_aligned && k0 + BK <= K && bn0 + BN <= N;
#pragma unroll
  for (int i = 0; i < A_LOADS; ++i) {
    const int e = tid + i * NT;
    if (A_CHUNKS % NT == 0 || e < A_CHUNKS) {
      const int r = e / (BK / VEC), c = (e % (BK / VEC)) * VEC;
      if (a_inside) {
        load_vector<VEC>(st.a[i], A + (size_t)(bm0 + r) * K + (k0 + c));
      } else {
        load_global(st.a[i], A, bm0 + r, k0 + c, M, K, a_aligned);
      }
    }
  }
#pragma unroll
  for (int i = 0; i < B_LOADS; ++i) {
    const int e = tid + i * NT;
    if (B_CHUNKS % NT == 0 || e < B_CHUNKS) {
      const int r = e / (BN / VEC), c = (e % (BN / VEC)) * VEC;
      if (b_inside) {
        load_vector<VEC>(st.b[i], B + (size_t)(k0 + r) * N + (bn0 + c));
      } else {
        load_global(st.b[i], B, k0 + r, bn0 + c, K, N, b_aligned);
      }
    }
  }
}

// Registers → shared memory.
__device__ __forceinline__ void store_tile(const Staging& st, float* As, float* Bs) {
  const int tid = threadIdx.x;
#pragma unroll
  for (int i = 0; i < A_LOADS; ++i) {
    const int e = tid + i * NT;
    if (A_CHUNKS % NT == 0 || e < A_CHUNKS) {
      const int r = e / (BK / VEC), c = (e % (BK / VEC)) * VEC;
#if A_TRANS
#pragma unroll
      for (int j = 0; j < VEC; ++j) As[(c + j) * A_LD + r] = st.a[i][j];
#else
      store_vector<VEC>(&As[r * A_LD + c], st.a[i]);
#endif
    }
  }
#pragma unroll
  for (int i = 0; i < B_LOADS; ++i) {
    const int e = tid + i * NT;
    if (B_CHUNKS % NT == 0 || e < B_CHUNKS) {
      const int r = e / (BN / VEC), c = (e % (BN / VEC)) * VEC;
      store_vector<VEC>(&Bs[r * B_LD + c], st.b[i]);
    }
  }
}

// acc += As · Bs over one BK-deep tile.
__device__ __forceinline__ void compute_tile(float (&acc)[WMITER * TM][WNITER * TN], const float* As,
                                             const float* Bs, int m_base, int n_base) {
#pragma unroll
  for (int k = 0; k < BK; ++k) {
    float ra[WMITER * TM];
    float rb[WNITER * TN];
#pragma unroll
    for (int wm = 0; wm < WMITER; ++wm) {
      const int m = m_base + wm * WSUBM;
#if A_TRANS
      if (TM % 4 == 0) {
#pragma unroll
        for (int i = 0; i < TM; i += 4) {
          float4 t = *reinterpret_cast<const float4*>(&As[k * A_LD + m + i]);
          ra[wm * TM + i] = t.x; ra[wm * TM + i + 1] = t.y; ra[wm * TM + i + 2] = t.z; ra[wm * TM + i + 3] = t.w;
        }
      } else {
#pragma unroll
        for (int i = 0; i < TM; ++i) ra[wm * TM + i] = As[k * A_LD + m + i];
      }
#else
#pragma unroll
      for (int i = 0; i < TM; ++i) ra[wm * TM + i] = As[(m + i) * A_LD + k];
#endif
    }
#pragma unroll
    for (int wn = 0; wn < WNITER; ++wn) {
      const int n = n_base + wn * WSUBN;
      if (TN % 4 == 0) {
#pragma unroll
        for (int j = 0; j < TN; j += 4) {
          float4 t = *reinterpret_cast<const float4*>(&Bs[k * B_LD + n + j]);
          rb[wn * TN + j] = t.x; rb[wn * TN + j + 1] = t.y; rb[wn * TN + j + 2] = t.z; rb[wn * TN + j + 3] = t.w;
        }
      } else if (TN == 2) {
        float2 t = *reinterpret_cast<const float2*>(&Bs[k * B_LD + n]);
        rb[wn * TN] = t.x; rb[wn * TN + 1] = t.y;
      } else {
        rb[wn * TN] = Bs[k * B_LD + n];
      }
    }
#pragma unroll
    for (int i = 0; i < WMITER * TM; ++i)
#pragma unroll
      for (int j = 0; j < WNITER * TN; ++j) acc[i][j] = fmaf(ra[i], rb[j], acc[i][j]);
  }
}

extern "C" __global__ void __launch_bounds__(NT, MIN_BLOCKS)
sgemm(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M, int N, int K) {
  extern __shared__ float4 smem_f4[];  // float4: 16-byte alignment for vector and cp.async stores
  float* smem = reinterpret_cast<float*>(smem_f4);

  // This block's tile, sweeping GROUP_M tile rows at a time so that concurrent blocks share B tiles.
  int bm0, bn0;
  block_tile_origin<BM, BN, GROUP_M>(M, N, bm0, bn0);

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int warp_m = warp / WARPS_N, warp_n = warp % WARPS_N;
  const int lane_m = lane / LANES_N, lane_n = lane % LANES_N;
  const int m_base = warp_m * WM + lane_m * TM;  // within the block tile, first sub-tile
  const int n_base = warp_n * WN + lane_n * TN;

  const bool a_aligned = (K % VEC) == 0;
  const bool b_aligned = (N % VEC) == 0;
  // This block's share of the K tiles (all of them without split-K); its partial slice of the workspace.
  int kt0, k_tiles;
  splitk_tiles<BK>(K, kt0, k_tiles);
  C += (size_t)blockIdx.z * M * N;

  float acc[WMITER * TM][WNITER * TN];
#pragma unroll
  for (int i = 0; i < WMITER * TM; ++i)
#pragma unroll
    for (int j = 0; j < WNITER * TN; ++j) acc[i][j] = 0.f;

#if ASYNC
  // STAGES-deep cp.async ring: tile t lives in stage t % STAGES. One barrier per tile: after it, every thread
  // has finished computing tile t-1, whose stage is the one refilled with tile t+STAGES-1.
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < k_tiles) {
      float* st = smem + s * STAGE_FLOATS;
      issue_tile_async(st, st + A_TILE, A, B, M, N, K, bm0, bn0, (kt0 + s) * BK, a_aligned, b_aligned);
    }
    cp_async_commit();
  }
  for (int t = 0; t < k_tiles; ++t) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    const int next = t + STAGES - 1;
    if (next < k_tiles) {
      float* st = smem + (next % STAGES) * STAGE_FLOATS;
      issue_tile_async(st, st + A_TILE, A, B, M, N, K, bm0, bn0, (kt0 + next) * BK, a_aligned, b_aligned);
    }
    cp_async_commit();
    const float* cur = smem + (t % STAGES) * STAGE_FLOATS;
    compute_tile(acc, cur, cur + A_TILE, m_base, n_base);
  }
#elif STAGES == 2
  // Register-prefetch double buffering: tile t+1 is in flight from global memory while tile t is computed.
  Staging st;
  if (k_tiles > 0) {
    load_tile(st, A, B, M, N, K, bm0, bn0, kt0 * BK, a_aligned, b_aligned);
    store_tile(st, smem, smem + A_TILE);
  }
  __syncthreads();
  for (int t = 0; t < k_tiles; ++t) {
    const bool more = t + 1 < k_tiles;
    if (more) load_tile(st, A, B, M, N, K, bm0, bn0, (kt0 + t + 1) * BK, a_aligned, b_aligned);
    const float* cur = smem + (t & 1) * STAGE_FLOATS;
    compute_tile(acc, cur, cur + A_TILE, m_base, n_base);
    if (more) {
      float* nxt = smem + ((t + 1) & 1) * STAGE_FLOATS;
      store_tile(st, nxt, nxt + A_TILE);
    }
    __syncthreads();
  }
#else
  // Single buffer: load, barrier, compute, barrier.
  Staging st;
  for (int t = 0; t < k_tiles; ++t) {
    load_tile(st, A, B, M, N, K, bm0, bn0, (kt0 + t) * BK, a_aligned, b_aligned);
    store_tile(st, smem, smem + A_TILE);
    __syncthreads();
    compute_tile(acc, smem, smem + A_TILE, m_base, n_base);
    __syncthreads();
  }
#endif

  // Epilogue: vector stores where the row length allows, scalar otherwise; every store bounds-checked.
  const bool c_vec4 = (N % 4) == 0;
  const bool c_vec2 = (N % 2) == 0;
#pragma unroll
  for (int wm = 0; wm < WMITER; ++wm) {
#pragma unroll
    for (int i = 0; i < TM; ++i) {
      const int row = bm0 + m_base + wm * WSUBM + i;
      if (row >= M) continue;
      float* crow = C + (size_t)row * N;
#pragma unroll
      for (int wn = 0; wn < WNITER; ++wn) {
        const int col0 = bn0 + n_base + wn * WSUBN;
        const float* a = acc[wm * TM + i] + wn * TN;
        if (TN % 4 == 0) {
#pragma unroll
          for (int j = 0; j < TN; j += 4) {
            const int col = col0 + j;
            if (c_vec4 && col + 4 <= N) {
              *reinterpret_cast<float4*>(crow + col) = make_float4(a[j], a[j + 1], a[j + 2], a[j + 3]);
            } else {
#pragma unroll
              for (int jj = 0; jj < 4; ++jj)
                if (col + jj < N) crow[col + jj] = a[j + jj];
            }
          }
        } else if (TN == 2) {
          if (c_vec2 && col0 + 2 <= N) {
            *reinterpret_cast<float2*>(crow + col0) = make_float2(a[0], a[1]);
          } else {
            if (col0 < N) crow[col0] = a[0];
            if (col0 + 1 < N) crow[col0 + 1] = a[1];
          }
        } else {
          if (col0 < N) crow[col0] = a[0];
        }
      }
    }
  }
}
