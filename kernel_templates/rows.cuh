// Row kernels (softmax, LayerNorm, RMSNorm): a group of TPR threads owns one row of `cols` elements.
//   DTYPE    x and y: 0 float, 1 half, 2 bfloat16 (dtype.cuh); statistics and arithmetic are fp32
//   WDTYPE   weights and bias (LayerNorm, RMSNorm): defaults to DTYPE; 0 with a half DTYPE is mixed precision
//   BLOCK    threads per block
//   MAPPING  0: a warp per row (BLOCK/32 rows per block); 1: the whole block per row; 2: a thread-block cluster
//            of CLUSTER blocks per row (sm_90): partial statistics are exchanged through distributed shared
//            memory, so a row too long for one block's registers is still cached on chip and read once
//            3: SPLIT blocks per row in two launches (few long rows: a block per row would leave most SMs idle).
//            The family's `<name>_split_stats` launch writes each block's partial state of the row to
//            `row_partials` (fp32, [rows][SPLIT][state]); the kernel itself then merges the row's SPLIT states in
//            order (every block the same merge) and makes its own part of the output, reading that part again
//            (from L2 where the rows fit it)
//   CLUSTER  blocks per row with MAPPING 2 (2, 4, 8: portable cluster sizes)
//   SPLIT    blocks per row with MAPPING 3
//   VEC      elements per access (8 halves = 16 B; scalar fall-back where a base pointer is unaligned). Rows of
//            any length keep vector accesses: a row's chunks start `pre` elements before the row (row_pre), at
//            an aligned address, and the first and last chunk are masked
//   CACHE    1: the row stays in registers between passes (needs cols <= TPR*VEC*ITEMS); 0: re-read;
//            2: the row stays in (dynamic) shared memory, in its own dtype, copied there with cp.async: every
//            load of the row in flight at once, no registers held, read from DRAM once (ITEMS*BLOCK*VEC
//            elements per block; a cluster spreads a row over its blocks' shared memory)
//   ITEMS    chunks of VEC elements each thread holds when CACHE
// Thread `lane` of the group owns chunks j = (lane + t*TPR)*VEC, t = 0, 1, …: a warp reads contiguous memory.
#pragma once
#include "common.cuh"
#include "cp_async.cuh"

#ifndef MAPPING
#define MAPPING 0
#endif
#ifndef CACHE
#define CACHE 0
#endif
#ifndef ITEMS
#define ITEMS 8
#endif
#include "vector_tunables.cuh"
#ifndef WDTYPE
#define WDTYPE DTYPE
#endif
typedef ElemOf<WDTYPE>::type weight_t;

#ifndef CLUSTER
#define CLUSTER 2
#endif
#ifndef SPLIT
#define SPLIT 2
#endif

#if MAPPING == 0
#define TPR 32
#elif MAPPING == 1
#define TPR BLOCK
#elif MAPPING == 2
#define TPR (BLOCK * CLUSTER)
#else
#define TPR (BLOCK * SPLIT)
#endif
static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "BLOCK is a multiple of 32, at most 1024");

#if MAPPING == 2
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#include <cooperative_groups.h>
#define ROW_CLUSTER __cluster_dims__(CLUSTER, 1, 1)  // launched as usual: the cluster shape is the kernel's
#else
#error "MAPPING 2 (a cluster per row) needs sm_90"
#endif
#else
#define ROW_CLUSTER
#endif

#if MAPPING == 3
// MAPPING 3: the row kernel's last parameter, the partial states its stats launch wrote
#define ROW_SPLIT_PARAM , const float* __restrict__ row_partials
#else
#define ROW_SPLIT_PARAM
#endif

// The row this thread works on, its lane within the row's group; false when the row does not exist
// (then the whole group — a warp, the block, or the cluster — leaves together).
__device__ __forceinline__ bool my_row(int rows, int& row, int& lane) {
#if MAPPING == 2
  row = blockIdx.x / CLUSTER;
  lane = (blockIdx.x % CLUSTER) * BLOCK + threadIdx.x;  // blockIdx.x % CLUSTER is the rank in the cluster
#elif MAPPING == 3
  row = blockIdx.x / SPLIT;
  lane = (blockIdx.x % SPLIT) * BLOCK + threadIdx.x;  // blockIdx.x % SPLIT is the block's part of the row
#else
  row = blockIdx.x * (BLOCK / TPR) + threadIdx.x / TPR;
  lane = threadIdx.x % TPR;
#endif
  return row < rows;
}

// The start the forward row kernels share (softmax, layernorm, rmsnorm over x → y): declares this thread's `row`
// and `lane` (the kernel returns where its row does not exist), the row's `xr` and `yr`, `vec` (x and y both take
// VEC-wide accesses) and the row's chunk offset `pre` (row_pre). A macro, not a function, so that these stay the
// kernel's own locals: a struct of them, or a helper filling them by reference, changed the PTX of 37 of 390
// configurations (docs/results/2026-11-28/dups_rows_attempt.md).
#define ROW_START(x, y, rows, cols)                                                                \
  int row, lane;                                                                                   \
  if (!my_row(rows, row, lane)) return;                                                            \
  const elem_t* xr = (x) + (size_t)row * (cols);                                                   \
  elem_t* yr = (y) + (size_t)row * (cols);                                                         \
  const bool vec = aligned_to(x, (int)sizeof(elem_t) * VEC) && aligned_to(y, (int)sizeof(elem_t) * VEC); \
  const int pre = row_pre(row, cols, vec)

// ROW_START for the split mapping's stats launch, which reads x and writes no y.
#define ROW_START_READ(x, rows, cols)                                                              \
  int row, lane;                                                                                   \
  if (!my_row(rows, row, lane)) return;                                                            \
  const elem_t* xr = (x) + (size_t)row * (cols);                                                   \
  const bool vec = aligned_to(x, (int)sizeof(elem_t) * VEC);                                       \
  const int pre = row_pre(row, cols, vec)

#if MAPPING == 2
// Combine the blocks' results of a cluster: each block publishes its value in shared memory, every thread reads
// all CLUSTER of them in rank order (so every block gets the very same bits). The second barrier keeps a block
// from overwriting its slot for the next exchange while another still reads it.
template <int N, class Merge>
__device__ __forceinline__ void cluster_merge(float (&v)[N], Merge merge) {
  __shared__ float slot[N];
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  if (threadIdx.x == 0) {
#pragma unroll
    for (int i = 0; i < N; ++i) slot[i] = v[i];
  }
  cluster.sync();
  float acc[N];
  const float* first = cluster.map_shared_rank(slot, 0);
#pragma unroll
  for (int i = 0; i < N; ++i) acc[i] = first[i];
#pragma unroll
  for (int r = 1; r < CLUSTER; ++r) {
    const float* other = cluster.map_shared_rank(slot, r);
    float b[N];
#pragma unroll
    for (int i = 0; i < N; ++i) b[i] = other[i];
    merge(acc, b);
  }
  cluster.sync();
#pragma unroll
  for (int i = 0; i < N; ++i) v[i] = acc[i];
}
#endif

template <class Op>
__device__ __forceinline__ float row_reduce(float v, Op op, float* scratch) {
#if MAPPING == 0
  return group_reduce<32>(v, op);
#elif MAPPING == 1 || MAPPING == 3
  return block_reduce<BLOCK>(v, op, scratch);  // split: the block's part (the stats launch publishes it)
#else
  float a[1] = {block_reduce<BLOCK>(v, op, scratch)};
  cluster_merge<1>(a, [&](float (&x)[1], const float (&y)[1]) { x[0] = op(x[0], y[0]); });
  return a[0];
#endif
}

// The chunks of a row this thread owns: f(j, chunk) for each, from the register cache or from memory.
// Elements past the end of the row read as `pad`; f must mask them where pad is not neutral.
struct RowCache {
#if CACHE == 1
  Vec<VEC> c[ITEMS];
#endif
};

#if CACHE == 2
// Thread (t, threadIdx.x)'s t-th chunk lives at slot t*BLOCK + threadIdx.x: each thread reads back only what it
// copied itself, so waiting for its own copies (cp.async.wait_all) is enough, with no block barrier.
extern __shared__ __align__(16) unsigned char row_smem[];

template <class T>
__device__ __forceinline__ T* row_slot(int t) {
  return reinterpret_cast<T*>(row_smem) + (size_t)(t * BLOCK + threadIdx.x) * VEC;
}

// VEC elements of T from shared memory (aligned to VEC elements) as fp32.
template <class T>
__device__ __forceinline__ Vec<VEC> load_slot(const T* p) {
  constexpr int BYTES = VEC * (int)sizeof(T);
  typedef typename Raw<(BYTES < 16 ? BYTES : 16)>::type R;
  R raw[BYTES / sizeof(R)];
  const R* q = reinterpret_cast<const R*>(p);
#pragma unroll
  for (int i = 0; i < (int)(BYTES / sizeof(R)); ++i) raw[i] = q[i];
  const T* e = reinterpret_cast<const T*>(raw);
  Vec<VEC> r;
#pragma unroll
  for (int i = 0; i < VEC; ++i) r.v[i] = to_f32(e[i]);
  return r;
}
#endif

// How far before the row its first chunk starts: the row's offset (in elements) past an aligned address, when the
// base pointer is aligned (`vec`); then every chunk but the first and the last is one aligned vector access.
__device__ __forceinline__ int row_pre(int row, int cols, bool vec) {
  return vec ? (int)(((size_t)row * cols) % VEC) : 0;
}

template <class T>
__device__ __forceinline__ void cache_row(RowCache& rc, const T* row, int cols, int lane, bool vec, int pre,
                                          float pad) {
#if CACHE == 1
#pragma unroll
  for (int t = 0; t < ITEMS; ++t) {
    const int j = (lane + t * TPR) * VEC - pre;
    if (j < cols) rc.c[t] = load_chunk<VEC>(row, j, cols, vec, pad);
  }
#elif CACHE == 2
#pragma unroll
  for (int t = 0; t < ITEMS; ++t) {
    const int j = (lane + t * TPR) * VEC - pre;
    if (j < cols) {
      T* slot = row_slot<T>(t);
      if (vec && j >= 0 && j + VEC <= cols) {
        cp_async_bytes<VEC * (int)sizeof(T)>(slot, row + j);
      } else {  // the row's first and last chunk, or an unaligned row: element by element (pad applied on read)
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          if (j + e >= 0 && j + e < cols) slot[e] = row[j + e];
        }
      }
    }
  }
  cp_async_wait_all();
#endif
}

template <class T, class F>
__device__ __forceinline__ void for_chunks(const RowCache& rc, const T* row, int cols, int lane, bool vec, int pre,
                                           float pad, F f) {
#if CACHE == 1
#pragma unroll
  for (int t = 0; t < ITEMS; ++t) {
    const int j = (lane + t * TPR) * VEC - pre;
    if (j < cols) f(j, rc.c[t]);
  }
#elif CACHE == 2
#pragma unroll
  for (int t = 0; t < ITEMS; ++t) {
    const int j = (lane + t * TPR) * VEC - pre;
    if (j < cols) {
      Vec<VEC> v = load_slot<T>(row_slot<T>(t));
      if (j < 0 || j + VEC > cols) {
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          if (j + e < 0 || j + e >= cols) v.v[e] = pad;
        }
      }
      f(j, v);
    }
  }
#else
  for (int j = lane * VEC - pre; j < cols; j += TPR * VEC) f(j, load_chunk<VEC>(row, j, cols, vec, pad));
#endif
}

// Merge per-thread states of N floats across the row's group (a warp, or the block) with an associative
// `merge`; every thread gets the result. `identity` fills lanes past the block's warps; `scratch` holds 32*N
// floats. For states a single float cannot carry: (max, sum of exponentials), Welford's (n, mean, M2).
template <int N>
struct State {
  float f[N];
};

template <int N, class Merge>
__device__ __forceinline__ State<N> warp_combine(State<N> a, Merge merge) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    State<N> b;
#pragma unroll
    for (int i = 0; i < N; ++i) b.f[i] = __shfl_xor_sync(0xffffffffu, a.f[i], o);
    a = merge(a, b);
  }
  return a;
}

template <int N, class Merge>
__device__ __forceinline__ State<N> row_combine(State<N> a, Merge merge, State<N> identity, float* scratch) {
  a = warp_combine<N>(a, merge);
#if MAPPING >= 1
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) {
#pragma unroll
    for (int i = 0; i < N; ++i) scratch[i * 32 + warp] = a.f[i];
  }
  __syncthreads();
  if (lane < BLOCK / 32) {
#pragma unroll
    for (int i = 0; i < N; ++i) a.f[i] = scratch[i * 32 + lane];
  } else {
    a = identity;
  }
  a = warp_combine<N>(a, merge);
#endif
#if MAPPING == 2
  cluster_merge<N>(a.f, [&](float (&x)[N], const float (&y)[N]) {
    State<N> p, q;
#pragma unroll
    for (int i = 0; i < N; ++i) { p.f[i] = x[i]; q.f[i] = y[i]; }
    p = merge(p, q);
#pragma unroll
    for (int i = 0; i < N; ++i) x[i] = p.f[i];
  });
#endif
  return a;
}

#if MAPPING == 3
__device__ __forceinline__ State<1> merge_sum(State<1> a, State<1> b) { return State<1>{{a.f[0] + b.f[0]}}; }

// The stats launch's end: thread 0 writes the block's state of its part of the row (combined over the block).
template <int N>
__device__ __forceinline__ void split_publish(State<N> s, float* partials, int row) {
  if (threadIdx.x == 0) {
    float* p = partials + ((size_t)row * SPLIT + blockIdx.x % SPLIT) * N;
#pragma unroll
    for (int i = 0; i < N; ++i) p[i] = s.f[i];
  }
}

// The row's state from its SPLIT parts' (written by the stats launch): each warp's lane l merges parts l, l + 32,
// … in order, then the warp combines its lanes. `identity` must merge as a no-op (a part with no elements
// publishes it too).
template <int N, class Merge>
__device__ __forceinline__ State<N> split_gather(const float* partials, int row, Merge merge, State<N> identity) {
  State<N> a = identity;
  const float* p = partials + (size_t)row * SPLIT * N;
  for (int part = threadIdx.x % 32; part < SPLIT; part += 32) {
    State<N> b;
#pragma unroll
    for (int i = 0; i < N; ++i) b.f[i] = p[part * N + i];
    a = merge(a, b);
  }
  return warp_combine<N>(a, merge);
}
#endif
