// GEMV for the GEMM family: C = A·B row-major where M == 1 or N == 1 (batch-1 inference), inputs and output in
// elem_t (dtype.cuh), accumulation in fp32. A GEMM tile wastes all but one of its rows there; these kernels are
// bound by reading the matrix operand once.
//
//   gemv_rows  (N == 1)  C[m] = Σ_k A[m,k]·B[k]: KTHREADS consecutive threads share a row and walk its K range
//                        (coalesced, VEC elements per load), then reduce by shuffles (shared memory past a warp).
//   gemv_cols  (M == 1)  C[n] = Σ_k A[k]·B[k,n]: each thread owns VEC consecutive columns; KTHREADS rows of
//                        threads split the K range (stride KTHREADS) and are combined in shared memory.
//
// Tunables (defaults below are the space's default configuration):
//   BLOCK     threads per block
//   KTHREADS  threads that share one output's K loop (a power of two ≤ BLOCK)
//   VEC       elements per load (VEC·sizeof(elem_t) ≤ 16 bytes); scalar fall-back where rows are unaligned
//   UNROLL    independent loads in flight per thread
//   STREAM    1: the matrix operand is read with __ldcs (evict-first: read once, it does not evict the vector)
// Split-K (a launch choice): gridDim.y = S > 1 slices of K write fp32 partials partial[s][M·N], summed in a fixed
// order by gemm_splitk_reduce (gemm_splitk.cuh); with S = 1 the kernel writes C.
#include <stdint.h>

#include "gemm_splitk.cuh"

#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef KTHREADS
#define KTHREADS 32
#endif
#ifndef VEC
#define VEC 4
#endif
#ifndef UNROLL
#define UNROLL 2
#endif
#ifndef STREAM
#define STREAM 0
#endif

static_assert(KTHREADS >= 1 && KTHREADS <= BLOCK && (KTHREADS & (KTHREADS - 1)) == 0, "KTHREADS: 2^i <= BLOCK");
static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "BLOCK: whole warps");
static_assert(VEC == 1 || VEC == 2 || VEC == 4 || VEC == 8, "VEC is 1, 2, 4 or 8");
static_assert(VEC * sizeof(elem_t) <= 16, "a vector load is at most 16 bytes");
static_assert(UNROLL >= 1 && UNROLL <= 8, "UNROLL");

#define VBYTES (VEC * (int)sizeof(elem_t))

__device__ __forceinline__ bool aligned_to(const void* p, int bytes) {
  return (reinterpret_cast<uintptr_t>(p) & (uintptr_t)(bytes - 1)) == 0;
}

__device__ __forceinline__ float bits_to_f32(unsigned b) {
#if DTYPE == 0
  return __uint_as_float(b);
#elif DTYPE == 1
  return __half2float(__ushort_as_half((unsigned short)b));
#else
  return __bfloat162float(__ushort_as_bfloat16((unsigned short)b));
#endif
}

template <class T, bool STREAMING>
__device__ __forceinline__ T ld(const T* p) {
  return STREAMING ? __ldcs(p) : __ldg(p);
}

// VEC elements at p (aligned to VBYTES) as floats: one load of VBYTES bytes.
template <bool STREAMING>
__device__ __forceinline__ void load_vec(float (&out)[VEC], const elem_t* p) {
  unsigned w[(VBYTES + 3) / 4];
  if (VBYTES == 16) {
    const uint4 t = ld<uint4, STREAMING>(reinterpret_cast<const uint4*>(p));
    w[0] = t.x; w[1 % ((VBYTES + 3) / 4)] = t.y; w[2 % ((VBYTES + 3) / 4)] = t.z; w[3 % ((VBYTES + 3) / 4)] = t.w;
  } else if (VBYTES == 8) {
    const uint2 t = ld<uint2, STREAMING>(reinterpret_cast<const uint2*>(p));
    w[0] = t.x; w[1 % ((VBYTES + 3) / 4)] = t.y;
  } else if (VBYTES == 4) {
    w[0] = ld<unsigned, STREAMING>(reinterpret_cast<const unsigned*>(p));
  } else {
    w[0] = ld<unsigned short, STREAMING>(reinterpret_cast<const unsigned short*>(p));
  }
#pragma unroll
  for (int i = 0; i < VEC; ++i)
    out[i] = sizeof(elem_t) == 4 ? bits_to_f32(w[i % ((VBYTES + 3) / 4)])
                                 : bits_to_f32((w[(i / 2) % ((VBYTES + 3) / 4)] >> (16 * (i % 2))) & 0xffffu);
}

// Elements [j, j+VEC) of a row of `len` elements: one vector load when `vec` and whole, else checked scalars.
template <bool STREAMING>
__device__ __forceinline__ void load_chunk(float (&out)[VEC], const elem_t* row, int j, int len, bool vec) {
  if (vec && j + VEC <= len) {
    load_vec<STREAMING>(out, row + j);
  } else {
#pragma unroll
    for (int i = 0; i < VEC; ++i) out[i] = j + i < len ? to_f32(row[j + i]) : 0.f;
  }
}

// Where a result goes: C in the output type, or this split's fp32 slice of the workspace.
__device__ __forceinline__ void write_out(elem_t* C, float* partial, long long mn, long long i, float v) {
  if (gridDim.y > 1) {
    partial[(long long)blockIdx.y * mn + i] = v;
  } else {
    C[i] = from_f32<elem_t>(v);
  }
}

// ---- N == 1: one row per KTHREADS threads ---------------------------------------------------------------
extern "C" __global__ void __launch_bounds__(BLOCK)
gemv_rows(const elem_t* __restrict__ A, const elem_t* __restrict__ B, elem_t* __restrict__ C,
          float* __restrict__ partial, int M, int N, int K) {
  constexpr int ROWS = BLOCK / KTHREADS;
  const int group = threadIdx.x / KTHREADS, lane = threadIdx.x % KTHREADS;
  const int row = blockIdx.x * ROWS + group;
  // This split's K range, whole vectors (k0 a multiple of VEC).
  const int vecs = (K + VEC - 1) / VEC;
  const int chunk = ((vecs + gridDim.y - 1) / gridDim.y) * VEC;
  const int k0 = blockIdx.y * chunk, k1 = min(K, k0 + chunk);
  const bool vec = K % VEC == 0 && aligned_to(A, VBYTES) && aligned_to(B, VBYTES);

  float acc[UNROLL];
#pragma unroll
  for (int u = 0; u < UNROLL; ++u) acc[u] = 0.f;
  if (row < M) {  // no early return: groups wider than a warp meet at a barrier below
    const elem_t* a = A + (size_t)row * K;
    int j = k0 + lane * VEC;
    constexpr int STEP = KTHREADS * VEC;
    if (vec) {
      for (; j + (UNROLL - 1) * STEP < k1; j += UNROLL * STEP) {
        float av[UNROLL][VEC], bv[UNROLL][VEC];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {  // every load first: UNROLL in flight
          load_vec<STREAM>(av[u], a + j + u * STEP);
          load_vec<false>(bv[u], B + j + u * STEP);
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u)
#pragma unroll
          for (int e = 0; e < VEC; ++e) acc[u] = fmaf(av[u][e], bv[u][e], acc[u]);
      }
    }
    for (; j < k1; j += STEP) {  // the rest (all of it where unaligned): checked against this split's end
      float av[VEC], bv[VEC];
      load_chunk<STREAM>(av, a, j, k1, vec);
      load_chunk<false>(bv, B, j, k1, vec);
#pragma unroll
      for (int e = 0; e < VEC; ++e) acc[0] = fmaf(av[e], bv[e], acc[0]);
    }
  }
  float s = 0.f;
#pragma unroll
  for (int u = 0; u < UNROLL; ++u) s += acc[u];
  constexpr int WIDTH = KTHREADS < 32 ? KTHREADS : 32;
#pragma unroll
  for (int o = WIDTH / 2; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o, WIDTH);
#if KTHREADS > 32
  __shared__ float warp_sums[BLOCK / 32];
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = s;
  __syncthreads();
  if (lane == 0) {
    s = 0.f;
#pragma unroll
    for (int w = 0; w < KTHREADS / 32; ++w) s += warp_sums[group * (KTHREADS / 32) + w];
  }
#endif
  if (lane == 0 && row < M) write_out(C, partial, (long long)M, row, s);
}

// ---- M == 1: VEC columns per thread, KTHREADS thread rows along K ---------------------------------------
extern "C" __global__ void __launch_bounds__(BLOCK)
gemv_cols(const elem_t* __restrict__ A, const elem_t* __restrict__ B, elem_t* __restrict__ C,
          float* __restrict__ partial, int M, int N, int K) {
  constexpr int CT = BLOCK / KTHREADS;  // column threads
  constexpr int COLS = CT * VEC;        // columns of the block
  const int tx = threadIdx.x % CT, krow = threadIdx.x / CT;
  const int col0 = blockIdx.x * COLS + tx * VEC;
  const int chunk = (K + gridDim.y - 1) / gridDim.y;
  const int k0 = blockIdx.y * chunk, k1 = min(K, k0 + chunk);
  const bool vec = N % VEC == 0 && aligned_to(B, VBYTES);

  float acc[VEC];
#pragma unroll
  for (int e = 0; e < VEC; ++e) acc[e] = 0.f;
  int k = k0 + krow;
  for (; k + (UNROLL - 1) * KTHREADS < k1; k += UNROLL * KTHREADS) {
    float bv[UNROLL][VEC], av[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      av[u] = to_f32(A[k + u * KTHREADS]);
      load_chunk<STREAM>(bv[u], B + (size_t)(k + u * KTHREADS) * N, col0, N, vec);
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u)
#pragma unroll
      for (int e = 0; e < VEC; ++e) acc[e] = fmaf(av[u], bv[u][e], acc[e]);
  }
  for (; k < k1; k += KTHREADS) {
    float bv[VEC];
    const float av = to_f32(A[k]);
    load_chunk<STREAM>(bv, B + (size_t)k * N, col0, N, vec);
#pragma unroll
    for (int e = 0; e < VEC; ++e) acc[e] = fmaf(av, bv[e], acc[e]);
  }
#if KTHREADS > 1
  // Combine the KTHREADS partial sums of each column (fixed order: deterministic).
  __shared__ float sums[KTHREADS][COLS + 1];
#pragma unroll
  for (int e = 0; e < VEC; ++e) sums[krow][tx * VEC + e] = acc[e];
  __syncthreads();
  for (int c = threadIdx.x; c < COLS; c += BLOCK) {
    float s = 0.f;
#pragma unroll 8
    for (int r = 0; r < KTHREADS; ++r) s += sums[r][c];
    const int col = blockIdx.x * COLS + c;
    if (col < N) write_out(C, partial, (long long)N, col, s);
  }
#else
#pragma unroll
  for (int e = 0; e < VEC; ++e)
    if (col0 + e < N) write_out(C, partial, (long long)N, col0 + e, acc[e]);
#endif
}
