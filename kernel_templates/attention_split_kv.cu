// Split-KV attention ("flash-decoding") for short queries over a long KV sequence, fp16 / bf16, sm_80+.
//
// A decode step has B·H·ceil(seq_q/16) query tiles: far too few blocks to fill the GPU if each walked the whole KV
// sequence. So the KV tiles are split SPLITS ways (grid.x = query tiles × SPLITS), and within a block each of the
// WARPS warps walks every WARPS-th tile of its split with its own STAGES-deep cp.async ring (no block barrier
// in the loop). Per warp: S = Q·Kᵀ and O += P·V on mma.sync m16n8k16 (16 query rows, rows past seq_q are
// zeros), online softmax in registers as in attention_fa2.cu. The warps' partial states are merged through
// shared memory into one (O normalised, LSE) per split, written as fp32 to the workspace; attention_combine
// then weighs the splits by exp(lse_s − max) and writes O in the input type and the row's LSE.
//
// Layout (batch, heads, seq, HEAD_DIM), contiguous; any seq_q, seq_kv; causal aligned bottom-right (query i sees
// key j <= i + seq_kv − seq_q). Workspace: o_part (SPLITS, B·H·seq_q, HEAD_DIM), lse_part (SPLITS, B·H·seq_q).
//
// KV_GROUPED (grouped-query attention, attention_problem.cuh): a block belongs to one kv head (grid.y = kv heads)
// and its 16 query rows are taken from the kv_group·seq_q rows of all the query heads of the group, packed: row r
// is query r % seq_q of the group's query head r / seq_q. Q of (b, kv·G + j, i) is row j·seq_q + i after the
// group's first row, and so are o_part and lse_part, so the packed rows are read and written as one head's seq_q
// rows are without grouping; every K/V tile a block reads serves the whole group (a decoding step of G heads:
// one K/V read, G of the mma's 16 rows used, instead of G reads with one row each). Only the causal mask needs
// each row's own query index. Multi-head attention is the case kv_group = 1 (rows of one head, as before).
//
// COMBINE 1 (sm_90, 2 to 16 splits): the SPLITS blocks of a query tile are one thread block cluster. Each leaves
// its split's normalised state in its own shared memory (instead of the workspace); after a cluster barrier, block
// r combines the r-th contiguous share of the tile's elements from all the splits' states (distributed shared
// memory) and writes O and LSE itself: no workspace and no second launch, which is most of what a batch-1
// decoding step waits for.
//
// COMBINE 0 on sm_90: attention_combine is a programmatic dependent launch (the space's Launch.overlaps_previous).
// The split kernel lets it be scheduled from its start (griddepcontrol.launch_dependents: its blocks then wait,
// resident, in griddepcontrol.wait until every split has finished and its writes are visible), so the combine's
// launch latency is spent while the splits still read K and V.
//
// SPLITS 1 (without COMBINE): the one split is the whole row, so the block writes O and LSE itself, without a
// workspace or the combine kernel (batch 16-64 decoding fills the GPU without splitting).
//
// Tunables: SPLITS (KV splits), WARPS (warps per block, interleaved over the split's tiles), BC (keys per tile),
// STAGES (per-warp cp.async ring depth), SWIZZLE (XOR-swizzled or padded shared rows), COMBINE_THREADS (the
// combine kernel's block), COMBINE (0: the attention_combine kernel; 1: in the cluster).
// Problem constants: HEAD_DIM, CAUSAL, KV_GROUPED, DTYPE (1 fp16, 2 bf16).

#include "attention_problem.cuh"

#ifndef SPLITS
#define SPLITS 16
#endif
#ifndef WARPS
#define WARPS 4
#endif
#ifndef BC
#define BC 32
#endif
#ifndef STAGES
#define STAGES 2
#endif
#ifndef SWIZZLE
#define SWIZZLE 0
#endif
#ifndef COMBINE_THREADS
#define COMBINE_THREADS 128
#endif
#ifndef COMBINE
#define COMBINE 0
#endif
#ifndef DTYPE
#define DTYPE 1  // float16: the template compiles without defines
#endif
#if DTYPE == 0
#error "attention_split_kv is a tensor-core kernel: DTYPE must be 1 (float16) or 2 (bfloat16)"
#endif

#define NT (32 * WARPS)
#define WRITES_OUTPUT (COMBINE || SPLITS == 1)  // the kernel writes O and LSE (else the splits' states)
#define KT (HEAD_DIM / 16)
#define DN (HEAD_DIM / 8)
#define SN (BC / 8)

static_assert(HEAD_DIM % 16 == 0 && HEAD_DIM >= 32 && HEAD_DIM <= 256, "HEAD_DIM is a multiple of 16 in [32, 256]");
static_assert(BC % 16 == 0 && BC >= 16, "BC is a multiple of 16");
static_assert(STAGES >= 1 && STAGES <= 4, "STAGES is 1..4");
static_assert(SPLITS >= 1, "SPLITS >= 1");
// 16 is past the portable cluster size: the runtime opts the kernel in (Driver.prepare).
static_assert(COMBINE == 0 || (SPLITS >= 2 && SPLITS <= 16), "COMBINE 1: the 2 to 16 splits are one cluster");
static_assert(COMBINE == 0 || (16 * HEAD_DIM) % SPLITS == 0, "COMBINE 1: the splits share the tile's elements evenly");

#include "attention_mma.cuh"
#include "online_softmax.cuh"

static_assert(DN * 4 + SN * 8 + KT * 4 <= 128, "register tiles would spill");  // measured with ptxas

#if KV_GROUPED
#define QUERY(row) ((row) % seq_q)  // a packed row's position in the sequence (its query index)
#else
#define QUERY(row) (row)
#endif

#if COMBINE
#include "tma_sm90.cuh"  // cluster_sync, cluster_ctarank
#define SPLIT_CLUSTER __cluster_dims__(SPLITS, 1, 1)  // a query tile's splits: consecutive blocks along x

// fp32 at shared address `addr` of cluster block `rank`.
__device__ __forceinline__ float ld_cluster_f32(uint32_t addr, uint32_t rank) {
  uint32_t remote;
  float v;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(addr), "r"(rank));
  asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(remote) : "memory");
  return v;
}
#else
#define SPLIT_CLUSTER
#endif

// COMBINE 0: each split's (O normalised, LSE) into the fp32 workspace (out0 = o_part, out1 = lse_part), for
// attention_combine. COMBINE 1, or one split: O (the input type) and LSE themselves (out0 = O, out1 = LSE).
#if WRITES_OUTPUT
#define SPLIT_OUTPUTS elem_t* __restrict__ O, float* __restrict__ LSE
#else
#define SPLIT_OUTPUTS float* __restrict__ o_part, float* __restrict__ lse_part
#endif

extern "C" __global__ void __launch_bounds__(NT, 1) SPLIT_CLUSTER
    attention_split_kv(const elem_t* __restrict__ Q, const elem_t* __restrict__ K, const elem_t* __restrict__ V,
                       SPLIT_OUTPUTS, int seq_q, int seq_kv, float scale_log2 KV_GROUP_PARAM) {
  extern __shared__ __align__(128) unsigned char smem[];
#if !WRITES_OUTPUT && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");  // attention_combine may be scheduled now
#endif
  constexpr uint32_t TILE_BYTES = BC * ROW * 2;
  const uint32_t q_tile = smem_addr(smem);
  const uint32_t ring_base = q_tile + 16 * ROW * 2;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int split = blockIdx.x % SPLITS;
  const int q0 = (blockIdx.x / SPLITS) * 16;  // the tile's first (packed) row
  const size_t head = (size_t)blockIdx.z * gridDim.y + blockIdx.y;  // the kv head (and its group's first rows)
  const int rows_q = seq_q * kv_group;                              // query rows of the group, packed
  const elem_t* Qh = Q + head * rows_q * HEAD_DIM;
  const elem_t* Kh = K + head * seq_kv * HEAD_DIM;
  const elem_t* Vh = V + head * seq_kv * HEAD_DIM;
  const int offset = seq_kv - seq_q;
  // The earliest query of the tile's rows and one past its latest (causal: the keys the tile needs).
#if KV_GROUPED
  const int last = min(q0 + 16, rows_q) - 1;
  const bool spans = last / seq_q != q0 / seq_q;  // rows of two query heads: every query index in between
  const int q_first = spans ? 0 : QUERY(q0), q_end = spans ? seq_q : QUERY(last) + 1;
#else
  const int q_first = q0, q_end = q0 + 16;
#endif

  int kv_end = seq_kv;
  if (CAUSAL) kv_end = min(seq_kv, q_end + offset);
  // Tiles of the whole sequence are dealt out to the splits in contiguous runs.
  const int n_tiles = (seq_kv + BC - 1) / BC;
  const int per_split = (n_tiles + SPLITS - 1) / SPLITS;
  const int t_begin = split * per_split;
  const int t_end = min(min(n_tiles, t_begin + per_split), (kv_end + BC - 1) / BC);
  // This warp's tiles: t_begin + warp, + WARPS, ...
  const int mine = t_end > t_begin + warp ? (t_end - t_begin - warp + WARPS - 1) / WARPS : 0;
  const uint32_t ring = ring_base + warp * (STAGES * 2 * TILE_BYTES);

  load_tile<16, NT>(q_tile, Qh, q0, rows_q, threadIdx.x);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();

  const int a_row = lane % 16, a_chunk = lane / 16;
  const int k_row = (lane % 8) + 8 * (lane / 16), k_chunk = (lane / 8) % 2;
  const int v_row = (lane % 8) + 8 * ((lane / 8) % 2), v_chunk = lane / 16;
  uint32_t qf[KT][4];
#pragma unroll
  for (int kk = 0; kk < KT; ++kk) ldmatrix_x4(qf[kk], q_tile + tile_offset(a_row, 2 * kk + a_chunk));

  float o[DN][4];
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
#pragma unroll
  for (int n = 0; n < DN; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < mine) {
      const int tile = t_begin + warp + s * WARPS;
      load_tile<BC, 32>(ring + (2 * s) * TILE_BYTES, Kh, tile * BC, seq_kv, lane);
      load_tile<BC, 32>(ring + (2 * s + 1) * TILE_BYTES, Vh, tile * BC, seq_kv, lane);
    }
    cp_async_commit();
  }

  for (int i = 0; i < mine; ++i) {
    cp_async_wait<(STAGES >= 2 ? STAGES - 2 : 0)>();  // tile i has landed (see attention_fa2.cu)
    __syncwarp();
    if (STAGES > 1) {
      const int next = i + STAGES - 1;
      if (next < mine) {
        const int slot = next % STAGES, tile = t_begin + warp + next * WARPS;
        load_tile<BC, 32>(ring + (2 * slot) * TILE_BYTES, Kh, tile * BC, seq_kv, lane);
        load_tile<BC, 32>(ring + (2 * slot + 1) * TILE_BYTES, Vh, tile * BC, seq_kv, lane);
      }
      cp_async_commit();
    } else {
      const int tile = t_begin + warp + i * WARPS;
      load_tile<BC, 32>(ring, Kh, tile * BC, seq_kv, lane);
      load_tile<BC, 32>(ring + TILE_BYTES, Vh, tile * BC, seq_kv, lane);
      cp_async_commit();
      cp_async_wait<0>();
      __syncwarp();
    }
    const int slot = STAGES > 1 ? i % STAGES : 0;
    const uint32_t k_tile = ring + (2 * slot) * TILE_BYTES, v_tile = k_tile + TILE_BYTES;
    const int kv0 = (t_begin + warp + i * WARPS) * BC;

    float s[SN][4];
#pragma unroll
    for (int n = 0; n < SN; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < KT; ++kk)
#pragma unroll
      for (int n = 0; n < SN; n += 2) {
        uint32_t b[4];
        ldmatrix_x4(b, k_tile + tile_offset(n * 8 + k_row, 2 * kk + k_chunk));
        mma16816(s[n], qf[kk], b[0], b[1]);
        mma16816(s[n + 1], qf[kk], b[2], b[3]);
      }
    if (kv0 + BC > seq_kv || (CAUSAL && kv0 + BC - 1 > q_first + offset)) {
#pragma unroll
      for (int n = 0; n < SN; ++n)
#pragma unroll
        for (int x = 0; x < 4; ++x) {
          const int col = kv0 + n * 8 + 2 * t + (x & 1);
          const int row = q0 + g + 8 * (x >> 1);
          if (col >= seq_kv || (CAUSAL && col > QUERY(row) + offset)) s[n][x] = -INFINITY;
        }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float mx = -INFINITY;
#pragma unroll
      for (int n = 0; n < SN; ++n) mx = fmaxf(mx, fmaxf(s[n][2 * h], s[n][2 * h + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      float m_use;
      const float alpha = online_max(m[h], mx * scale_log2, m_use, [](float x) { return fast_exp2(x); });
      float sum = 0.f;
#pragma unroll
      for (int n = 0; n < SN; ++n) {
        s[n][2 * h] = fast_exp2(fmaf(s[n][2 * h], scale_log2, -m_use));
        s[n][2 * h + 1] = fast_exp2(fmaf(s[n][2 * h + 1], scale_log2, -m_use));
        sum += s[n][2 * h] + s[n][2 * h + 1];
      }
      l[h] = l[h] * alpha + sum;
#pragma unroll
      for (int n = 0; n < DN; ++n) {
        o[n][2 * h] *= alpha;
        o[n][2 * h + 1] *= alpha;
      }
    }
#pragma unroll
    for (int kk = 0; kk < BC / 16; ++kk) {
      uint32_t p[4];
      p[0] = pack2(s[2 * kk][0], s[2 * kk][1]);
      p[1] = pack2(s[2 * kk][2], s[2 * kk][3]);
      p[2] = pack2(s[2 * kk + 1][0], s[2 * kk + 1][1]);
      p[3] = pack2(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
      for (int n = 0; n < DN; n += 2) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, v_tile + tile_offset(kk * 16 + v_row, n + v_chunk));
        mma16816(o[n], p, b[0], b[1]);
        mma16816(o[n + 1], p, b[2], b[3]);
      }
    }
  }
  cp_async_wait<0>();

  // Merge the warps' states through shared memory (the rings are free once every warp is past its loop).
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
  }
  __syncthreads();
  float* cm = reinterpret_cast<float*>(smem + 16 * ROW * 2);  // [WARPS][16] running max (log2 units)
  float* cl = cm + WARPS * 16;                                  // [WARPS][16] sum
  float* co = cl + WARPS * 16;                                  // [WARPS][16][HEAD_DIM] unnormalised O
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = g + 8 * h;
    if (t == 0) {
      cm[warp * 16 + r] = m[h];
      cl[warp * 16 + r] = l[h];
    }
#pragma unroll
    for (int n = 0; n < DN; ++n) {
      co[(warp * 16 + r) * HEAD_DIM + n * 8 + 2 * t] = o[n][2 * h];
      co[(warp * 16 + r) * HEAD_DIM + n * 8 + 2 * t + 1] = o[n][2 * h + 1];
    }
  }
  __syncthreads();
  const float LN2 = 0.6931471805599453f;
#if COMBINE
  float* so = co + WARPS * 16 * HEAD_DIM;  // [16][HEAD_DIM] this split's normalised O, then [16] its LSE
  float* slse = so + 16 * HEAD_DIM;
#endif
  for (int i = threadIdx.x; i < 16 * HEAD_DIM; i += NT) {
    const int r = i / HEAD_DIM, d = i % HEAD_DIM;
    if (q0 + r >= rows_q) break;  // rows only grow with i
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) mx = fmaxf(mx, cm[w * 16 + r]);
#if COMBINE
    float *o_out = so + i, *lse_out = slse + r;
#elif SPLITS == 1
    elem_t* o_elem = O + (head * rows_q + q0 + r) * HEAD_DIM + d;  // rounded as the combine kernel rounds it
    float o_value, *o_out = &o_value, *lse_out = LSE + head * rows_q + q0 + r;
#else
    const size_t row = (size_t)split * gridDim.z * gridDim.y * rows_q + head * rows_q + q0 + r;
    float *o_out = o_part + row * HEAD_DIM + d, *lse_out = lse_part + row;
#endif
    if (mx == -INFINITY) {  // this split holds no key this row sees
      *o_out = 0.f;
      if (d == 0) *lse_out = -INFINITY;
#if !COMBINE && SPLITS == 1
      *o_elem = from_f32<elem_t>(0.f);
#endif
      continue;
    }
    float sum = 0.f, acc = 0.f;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) {
      const float scale = fast_exp2(cm[w * 16 + r] - mx);
      sum += cl[w * 16 + r] * scale;
      acc += co[(w * 16 + r) * HEAD_DIM + d] * scale;
    }
    *o_out = acc / sum;
    if (d == 0) *lse_out = (mx + __log2f(sum)) * LN2;
#if !COMBINE && SPLITS == 1
    *o_elem = from_f32<elem_t>(o_value);
#endif
  }
#if COMBINE
  // Every split's state is in its block's shared memory (release) and visible to the cluster (acquire); block
  // `rank` then combines its contiguous share of the tile's elements as attention_combine does.
  cluster_sync();
  constexpr int SHARE = 16 * HEAD_DIM / SPLITS;
  const int rank = (int)cluster_ctarank();
  const uint32_t so_s = smem_addr(so), slse_s = smem_addr(slse);
  for (int i = rank * SHARE + threadIdx.x; i < (rank + 1) * SHARE; i += NT) {
    const int r = i / HEAD_DIM, d = i % HEAD_DIM;
    if (q0 + r >= rows_q) break;
    float lse_s[SPLITS], mx = -INFINITY;
#pragma unroll
    for (int sp = 0; sp < SPLITS; ++sp) {
      lse_s[sp] = ld_cluster_f32(slse_s + 4 * r, sp);
      mx = fmaxf(mx, lse_s[sp]);
    }
    float sum = 0.f, acc = 0.f;
#pragma unroll
    for (int sp = 0; sp < SPLITS; ++sp) {
      const float w = __expf(lse_s[sp] - mx);  // 0 for empty splits (−inf)
      sum += w;
      acc += w * ld_cluster_f32(so_s + 4 * i, sp);
    }
    const size_t row = head * rows_q + q0 + r;
    O[row * HEAD_DIM + d] = from_f32<elem_t>(acc / sum);
    if (d == 0) LSE[row] = mx + __logf(sum);
  }
  cluster_sync();  // no block leaves while a peer may still read its state
#endif
}

#if !WRITES_OUTPUT
// O[row, d] = Σ_s w_s·o_part[s, row, d] / Σ_s w_s, w_s = exp(lse_part[s, row] − max_s lse_part); LSE likewise.
extern "C" __global__ void __launch_bounds__(COMBINE_THREADS)
    attention_combine(const float* __restrict__ o_part, const float* __restrict__ lse_part, elem_t* __restrict__ O,
                      float* __restrict__ LSE, int rows) {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");  // every split written (a no-op in a plain launch)
#endif
  const long long total = (long long)rows * HEAD_DIM;
  for (long long i = (long long)blockIdx.x * COMBINE_THREADS + threadIdx.x; i < total;
       i += (long long)gridDim.x * COMBINE_THREADS) {
    const int row = (int)(i / HEAD_DIM), d = (int)(i % HEAD_DIM);
    // Unrolled whole, every split's LSE and O is loaded at once: one memory latency, not one per split (a
    // batch-1 decoding step waits for this kernel).
    float lse[SPLITS], part[SPLITS], mx = -INFINITY;
#pragma unroll
    for (int s = 0; s < SPLITS; ++s) {
      lse[s] = lse_part[(size_t)s * rows + row];
      part[s] = o_part[((size_t)s * rows + row) * HEAD_DIM + d];
    }
#pragma unroll
    for (int s = 0; s < SPLITS; ++s) mx = fmaxf(mx, lse[s]);
    float sum = 0.f, acc = 0.f;
#pragma unroll
    for (int s = 0; s < SPLITS; ++s) {
      const float w = __expf(lse[s] - mx);  // 0 for empty splits (−inf)
      sum += w;
      acc += w * part[s];
    }
    O[i] = from_f32<elem_t>(acc / sum);
    if (d == 0) LSE[row] = mx + __logf(sum);
  }
}
#endif
