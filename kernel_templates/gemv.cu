// GEMV  y[M] = A[M×N] · x[N], row-major A, any M, N; A, x, y of DTYPE (float, half, bfloat16), fp32 sums.
//   BLOCK   threads per block
//   TPR     threads per row: 4, 8, 16 (sub-warp), 32 (a warp), 64…BLOCK (several warps, combined in shared
//           memory); a block covers BLOCK/TPR rows
//   VEC     elements per load (8 halves = 16 B) (scalar fall-back where N % VEC or a pointer is unaligned)
//   ACCS    independent accumulators per thread: more loads in flight
//   STREAM_A  1: A is read with __ldcs (evict-first: read once, it does not push x out of the caches)
#include "common.cuh"

#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef TPR
#define TPR 32
#endif
#ifndef VEC
#define VEC 4
#endif
#ifndef ACCS
#define ACCS 2
#endif
#ifndef STREAM_A
#define STREAM_A 0
#endif
#define ROWS (BLOCK / TPR)
static_assert(TPR <= BLOCK && BLOCK % TPR == 0 && (TPR < 32 || TPR % 32 == 0), "row groups tile the block");

extern "C" __global__ void __launch_bounds__(BLOCK)
sgemv(const elem_t* __restrict__ A, const elem_t* __restrict__ x, elem_t* __restrict__ y, int M, int N) {
  const int group = threadIdx.x / TPR, lane = threadIdx.x % TPR;
  const int row = blockIdx.x * ROWS + group;
  const bool vec = N % VEC == 0 && aligned_to(A, (int)sizeof(elem_t) * VEC) && aligned_to(x, (int)sizeof(elem_t) * VEC);
  float acc[ACCS];
#pragma unroll
  for (int a = 0; a < ACCS; ++a) acc[a] = 0.f;
  if (row < M) {  // no early return: row groups wider than a warp meet at a barrier below
    const elem_t* ar = A + (size_t)row * N;
    int j = lane * VEC;
    if (vec) {
      for (; j + (ACCS - 1) * TPR * VEC < N; j += ACCS * TPR * VEC) {
        Vec<VEC> av[ACCS], xv[ACCS];
#pragma unroll
        for (int a = 0; a < ACCS; ++a) {  // all loads first
          av[a] = load_vec<VEC, STREAM_A>(ar + j + a * TPR * VEC);
          xv[a] = load_vec<VEC, false>(x + j + a * TPR * VEC);
        }
#pragma unroll
        for (int a = 0; a < ACCS; ++a)
#pragma unroll
          for (int e = 0; e < VEC; ++e) acc[a] = fmaf(av[a].v[e], xv[a].v[e], acc[a]);
      }
    }
    for (; j < N; j += TPR * VEC) {  // the rest (all of it when not vectorised): element by element
      const Vec<VEC> av = load_chunk<VEC>(ar, j, N, vec, 0.f);
      const Vec<VEC> xv = load_chunk<VEC>(x, j, N, vec, 0.f);
#pragma unroll
      for (int e = 0; e < VEC; ++e) acc[0] = fmaf(av.v[e], xv.v[e], acc[0]);
    }
  }
  float s = 0.f;
#pragma unroll
  for (int a = 0; a < ACCS; ++a) s += acc[a];
#if TPR <= 32
  s = group_reduce<TPR>(s, SumOp());
#else
  __shared__ float partial[BLOCK / 32];
  s = group_reduce<32>(s, SumOp());
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = s;
  __syncthreads();
  if (lane == 0) {
    s = 0.f;
#pragma unroll
    for (int w = 0; w < TPR / 32; ++w) s += partial[group * (TPR / 32) + w];
  }
#endif
  if (lane == 0 && row < M) store_one(y + row, s);
}
