// FlashAttention-3 style backward for Hopper (sm_90a only), fp16 / bf16: TMA loads by a producer warpgroup, two
// consumer warpgroups on wgmma (docs/results/2026-11-26b/design_fa3_backward.md; this is its first version, v0).
//
//   P = exp(Q·Kᵀ·scale − LSE)   dV = Pᵀ·dO   dP = dO·Vᵀ   dS = P∘(dP − Δ), Δ = rowsum(dO∘O)
//   dQ = dS·K·scale   dK = dSᵀ·Q·scale                                         (scale = 1/√HEAD_DIM)
//
// Inputs as attention_backward.cu (fa2) takes them: Q, O, dO (B, H, seq_q, HEAD_DIM), K, V (B, HKV, seq_kv,
// HEAD_DIM) in the input type, LSE (B, H, seq_q) fp32 natural log; causal aligned bottom-right (query i sees key j
// iff j <= i + seq_kv − seq_q; the space refuses seq_q > seq_kv). Grouped-query attention (KV_GROUPED: H = HKV ·
// kv_group, attention_problem.cuh): a block streams the m_blocks of each of its kv head's kv_group query heads in
// turn, so dK and dV sum over the group in registers and are stored once; multi-head attention is kv_group 1.
//
// Kernels, in launch order (SQr = seq_q rounded up to a multiple of BM):
//   attention_bwd_fa3_prep  per (head, row < SQr): delta = Δ (0 past seq_q), lse2 = LSE·log2e (+inf past seq_q,
//                           so that P = 0 there; an LSE of −inf stored as 0), both fp32 (B, H, SQr), padded so that
//                           every m_block's BM values are one 16-byte aligned bulk copy; the fp32 dQ accumulator
//                           (B, H, seq_q, HEAD_DIM, row-major) zeroed.
//   attention_bwd_fa3       a block of 384 threads owns BN = 128 keys of one kv head (grid (ceil(seq_kv / 128),
//                           HKV, B)):
//     warpgroup 0, producer: one thread copies K and V once, then per query head of the group and m_block (BM
//       query rows; causal: from the first that sees the block's keys) Q with its lse2 into a Q_STAGES ring and dO
//       with its delta into a DO_STAGES ring (TMA through the forward's 3-D tensor maps, 128-byte swizzle; the
//       statistics by a bulk copy on the same mbarrier). setmaxnreg gives its registers to the consumers.
//     warpgroups 1 and 2, consumers: warpgroup w owns keys 64w..64w+63 of the block. Per m_block:
//       Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ on wgmma (both operands K-major in shared memory, N = BM),
//       Pᵀ = exp2(Sᵀ·scale·log2e − lse2) (masked on the diagonal and past seq_kv), rounded into registers,
//       dV += Pᵀ·dO (A from registers, dO MN-major), dSᵀ = Pᵀ∘(dPᵀ − Δ), rounded, dK += dSᵀ·Q (likewise),
//       dS (this warpgroup's 64 keys) written to shared memory transposed by stmatrix, then dQ += dS·K over
//       these 64 keys in m64n64 pieces, each added into the accumulator by fp32 atomics (float2, sm_90); or
//       (DQ_MODE 1) staged in shared memory and added by the copy engine's reduce-adds; or (DQ_MODE 2) after a
//       barrier of both consumers, dQ over the block's 128 keys from both dS panels, one m64n64 piece per
//       consumer, staged and reduced likewise: half the traffic into the accumulator (add_dq_bulk).
//     dK·scale and dV stored from registers (wgmma_epilogue.cuh).
//   attention_bwd_dq_store  dQ = accumulator·scale in the input type (attention_bwd_passes.cuh, as fa2's).
//
// v0 simplifications against the design (its step 1): dQ by register atomics or by a bulk reduce that a consumer
// thread issues (DQ_MODE 1 and 2; no writer warp); in modes 0 and 1 split between the two consumer warpgroups by
// keys (each multiplies its own dS panel by its own 64 keys of K), so no warpgroup waits for the other's dS, and one
// dS buffer per warpgroup (its previous dQ product has retired before it is overwritten); mode 2 keeps two dS
// stages instead, so that one barrier per m_block suffices; the masked m_blocks run in the same loop as the others.
//
// Barriers (mbarriers, count = arrivals): kv_full 1 + K's and V's bytes; q_full[s], do_full[s] 1 + the tile's
// bytes + BM·4; q_empty[s], do_empty[s] 8 (lane 0 of each consumer warp, once every wgmma that read the stage has
// retired). A stage's n-th use waits full with parity (n / STAGES) & 1, the producer waits empty with the other
// parity. Named barriers 1 and 2 (128 threads): warpgroup w's dS panel is written before its dQ wgmma reads it;
// with DQ_MODE 1 or 2 also its staging buffer, free before it is written and written before the reduce-adds read
// it. Named barrier 3 (256 threads, DQ_MODE 2): both dS panels of the m_block are written.
//
// Tunables (the defaults below are autotune's default configuration):
//   BM         query rows per streamed tile (the N of Sᵀ and dPᵀ, the K of dV and dK)
//   Q_STAGES   depth of the Q + lse2 ring
//   DO_STAGES  depth of the dO + delta ring
//   DQ_MODE    0: dQ pieces added by the consumers' fp32 atomics; 1: staged in shared memory and added by TMA
//              reduce-adds (tmap_dq over the accumulator as (HEAD_DIM, seq_q, B·H) fp32, boxes of 32 × 64); 2: as
//              1, over the block's 128 keys, one m64n64 piece per consumer (BM 64 at HEAD_DIM 128: a column panel
//              each; BM 128 at HEAD_DIM 64: 64 rows each)
//   BLOCK_ORDER 0: blockIdx.x is the key block, y the kv head, z the batch (grid (ceil(seq_kv / 128), HKV, B));
//              1: blockIdx.x runs over (key block, batch · kv head) with the heads fastest (grid (ceil(seq_kv / 128)
//              · B · HKV)), so that blocks are dispatched key block by key block across every head: under a causal
//              mask the first key blocks have the most query rows, so every head's heaviest blocks go first and the
//              last wave holds light ones (longest first), where order 0 starts the heaviest blocks of later heads
//              only after the first heads' blocks free their SMs
// Problem constants (fixed by the shape): HEAD_DIM (64, 128), CAUSAL, DTYPE (1 fp16, 2 bf16).

#include "attention_problem.cuh"
#include "half_dtype.cuh"
#include "attention_bwd_sm90.cuh"
#include "dtype.cuh"
#include "wgmma_epilogue.cuh"
#include "attention_bwd_passes.cuh"  // after wgmma_epilogue.cuh (pack2): row_delta, attention_bwd_dq_store

#ifndef BM
#define BM 64
#endif
#ifndef Q_STAGES
#define Q_STAGES 2
#endif
#ifndef DO_STAGES
#define DO_STAGES 2
#endif
#ifndef DQ_MODE
#define DQ_MODE 0
#endif
#ifndef BLOCK_ORDER
#define BLOCK_ORDER 0
#endif


#define BN 128                  // keys per block: two consumer warpgroups of 64
#define NT 384                  // a producer and two consumer warpgroups
#define PANELS (HEAD_DIM / 64)  // 64-column panels of every tile in shared memory
#define KV_PANEL (BN * 128)
#define Q_PANEL (BM * 128)
#define KV_BYTES (PANELS * KV_PANEL)  // K or V
#define Q_BYTES (PANELS * Q_PANEL)    // a stage of Q or dO
#define DS_PANEL (BM * 128)           // one warpgroup's dS: BM query rows × its 64 keys
#define DS_STAGES (DQ_MODE == 2 ? 2 : 1)  // mode 2: the other consumer may still read the last m_block's panels
#define STAT_BYTES (BM * 4)           // a stage's lse2 or delta
#define DQ_STAGE (DQ_MODE ? 64 * 64 * 4 : 0)  // one warpgroup's staged m64n64 fp32 piece of dQ: two 32-column boxes
#define BARRIERS (1 + 2 * Q_STAGES + 2 * DO_STAGES)
#define SMEM_BYTES                                                                                             \
  (1024 + 2 * KV_BYTES + (Q_STAGES + DO_STAGES) * (Q_BYTES + STAT_BYTES) + 2 * DS_STAGES * DS_PANEL + \
   2 * DQ_STAGE + 8 * BARRIERS)
#define PREP_ROWS 32  // rows per block of attention_bwd_fa3_prep (8 threads a row)

static_assert(HEAD_DIM == 64 || HEAD_DIM == 128, "HEAD_DIM is 64 or 128");
static_assert(BM == 64 || BM == 128, "BM is 64 or 128 query rows");
static_assert(Q_STAGES >= 2 && Q_STAGES <= 3, "Q_STAGES is 2 or 3");
static_assert(DO_STAGES >= 1 && DO_STAGES <= Q_STAGES, "DO_STAGES is 1..Q_STAGES");
static_assert(DQ_MODE >= 0 && DQ_MODE <= 2, "DQ_MODE is 0 (atomics), 1 or 2 (reduce-adds)");
static_assert(BLOCK_ORDER == 0 || BLOCK_ORDER == 1, "BLOCK_ORDER is 0 (head by head) or 1 (key block by key block)");
static_assert(DQ_MODE != 2 || BM * HEAD_DIM == 8192, "DQ_MODE 2: one m64n64 piece per consumer (BM·HEAD_DIM 8192)");
static_assert(SMEM_BYTES <= 232448, "shared memory beyond the sm_90 limit of 227 KB per block");
// Sᵀ and dPᵀ (BM/2 each) and dK and dV (HEAD_DIM/2 each) per consumer thread, under its 240 registers
// (autotune/spaces/attention_backward_fa3.py, MAX_TILE_REGISTERS).
static_assert(BM + HEAD_DIM <= 192, "Sᵀ, dPᵀ, dK and dV tiles would spill");

#define PRODUCER_REGS 24  // 128·(24 + 2·240) = 64512 = 384 threads × 168, the block's allocation
#define CONSUMER_REGS 240

constexpr float LOG2E = 1.4426950408889634f;

// The first m_block whose queries see keys from n0 on (causal: query i sees keys up to i + seq_kv − seq_q); the
// producer and the consumers walk the same range through this one function.
__device__ __forceinline__ int first_mblock(int n0, int seq_q, int seq_kv) {
  return CAUSAL ? max(0, n0 - (seq_kv - seq_q)) / BM : 0;
}

extern "C" __global__ void __launch_bounds__(8 * PREP_ROWS)
    attention_bwd_fa3_prep(const elem_t* __restrict__ O, const elem_t* __restrict__ dO, const float* __restrict__ LSE,
                           float* __restrict__ delta, float* __restrict__ lse2, float* __restrict__ dq_acc, int seq_q,
                           int rows) {  // rows: heads · SQr
  const int row = blockIdx.x * PREP_ROWS + threadIdx.x / 8, part = threadIdx.x % 8;
  const int sqr = (seq_q + BM - 1) / BM * BM, head = row / sqr, r = row - head * sqr;
  const bool in = row < rows && r < seq_q;
  const int src = head * seq_q + r;  // as fa2: rows of every head below 2^31
  const float sum = row_delta<true>(O, dO, dq_acc, src, in, part);
  if (row < rows && part == 0) {
    const float lse = in ? LSE[src] : 0.f;
    delta[row] = in ? sum : 0.f;
    lse2[row] = !in ? INFINITY : (lse == -INFINITY ? 0.f : lse * LOG2E);
  }
}

// ---- producer ------------------------------------------------------------------------------------------------
// m_block m (rows m·BM..) of query head ``head``'s Q or dO, with its statistics, into stage j % STAGES of a ring
// (j: the ring's use count, over the group's heads).
template <int STAGES>
__device__ __forceinline__ void load_rows(uint32_t tiles, uint32_t stats, uint32_t full, uint32_t empty,
                                          const TmaDesc* map, const float* stat_src, int j, int m, int head) {
  const int s = j % STAGES;
  mbar_wait(empty + 8 * s, ((j / STAGES) & 1) ^ 1);  // the first pass finds every stage free
  mbar_arrive_expect_tx(full + 8 * s, Q_BYTES + STAT_BYTES);
#pragma unroll
  for (int p = 0; p < PANELS; ++p)
    tma_load_3d(tiles + s * Q_BYTES + p * Q_PANEL, map, 64 * p, m * BM, head, full + 8 * s);
  bulk_load(stats + s * STAT_BYTES, stat_src, STAT_BYTES, full + 8 * s);
}

// ---- consumer pieces -----------------------------------------------------------------------------------------
// Accumulator element i of a thread: row g + 8·((i >> 1) & 1) of its warp's 16, column 8·(i >> 2) + 2t + (i & 1).
#define HALF(i) (((i) >> 1) & 1)

template <int N>
__device__ __forceinline__ void pack_pairs(uint32_t (&p)[N / 2], const float (&x)[N]) {
#pragma unroll
  for (int i = 0; i < N / 2; ++i) p[i] = pack2(x[2 * i], x[2 * i + 1]);
}

// acc (64×N) += Aᵀ·B as one wgmma group, A the 16-bit pairs `packed` (Sᵀ-shaped, 64 × K); B as in
// wgmma_rs_panels. The register fences keep the packing and acc's earlier uses on this side of the asynchronous
// read. Until the group retires nothing may touch `packed` (the PTX ISA: undefined behaviour).
template <int N, int K>
__device__ __forceinline__ void wgmma_from_regs(float (&acc)[N / 2], uint32_t (&packed)[K / 4], uint32_t b,
                                                uint32_t b_panel) {
  fence_regs(packed);
  fence_regs(acc);
  wgmma_fence();
  wgmma_rs_panels<N, K>(acc, packed, b, b_panel);
  wgmma_commit();
}

// f(x, stat) for each element x of this thread's Sᵀ-shaped accumulator (64 keys × BM queries), stat = the entry of
// its query column in `stats` (shared memory, read as a float2 per 8-column group).
template <class F>
__device__ __forceinline__ void per_column(const float* stats, int t, F f) {
#pragma unroll
  for (int j = 0; j < BM / 8; ++j) {
    const float2 c = *reinterpret_cast<const float2*>(stats + 8 * j + 2 * t);
#pragma unroll
    for (int x = 0; x < 4; ++x) f(4 * j + x, (x & 1) ? c.y : c.x);
  }
}

__device__ __forceinline__ const float* smem_floats(const unsigned char* smem_raw, uint32_t addr) {
  return reinterpret_cast<const float*>(smem_raw + (addr - smem_u32(smem_raw)));
}

// dSᵀ (this thread's fragment of 64 keys × BM queries, packed) into the warpgroup's dS panel as rows of queries
// (128-byte swizzle: chunk c of row r at chunk c ^ (r % 8)). stmatrix x4 jj takes query columns 16jj..16jj+15:
// matrix i = (8-column group 2jj + i/2, key half i%2), whose transposed rows are 8 queries × 8 keys (one chunk).
__device__ __forceinline__ void store_ds(uint32_t panel, const uint32_t (&ds)[BM / 4], int warp, int lane) {
  const int chunk = 2 * warp + ((lane >> 3) & 1);
#pragma unroll
  for (int jj = 0; jj < BM / 16; ++jj) {
    const int r = 16 * jj + 8 * (lane >> 4) + (lane & 7);
    stmatrix_x4_trans(panel + r * 128 + ((chunk ^ (lane & 7)) << 4), ds[4 * jj], ds[4 * jj + 1], ds[4 * jj + 2],
                      ds[4 * jj + 3]);
  }
}

// Issues one wgmma group: acc (the m64n64 piece of dQ at rows 64·mr, columns 64·nc) = dS · K over KEY_PANELS panels
// of 64 keys: dS from the panels at `ds` (DS_PANEL apart, query rows, K-major), K from `k` (key rows of each
// 64-column panel, KV_PANEL apart).
template <int KEY_PANELS>
__device__ __forceinline__ void dq_piece_mma(float (&acc)[32], uint32_t ds, uint32_t k, int mr, int nc) {
#pragma unroll
  for (int i = 0; i < 32; ++i) acc[i] = 0.f;
  const uint64_t db = sw128_desc(k + nc * KV_PANEL, KV_PANEL, 1024);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 4 * KEY_PANELS; ++kk) {
    const uint64_t da = sw128_desc(ds + (kk / 4) * DS_PANEL + mr * 64 * 128, 16, 1024);
    wgmma_m64k16<64>(acc, da + ((32 * (kk % 4)) >> 4), db + ((2048 * kk) >> 4));
  }
  wgmma_commit();
}

// This warpgroup's share of dQ for the m_block at q0: dS (BM queries × its 64 keys, panel ds_w) · K (its 64 keys ×
// HEAD_DIM, from k_w), m64n64 pieces each added into the row-major fp32 accumulator of the head by float2 atomics.
// Returns with every wgmma of this warpgroup retired.
__device__ __forceinline__ void add_dq(float* __restrict__ dq_head, uint32_t ds_w, uint32_t k_w, int q0, int seq_q,
                                       int warp, int g, int t) {
#pragma unroll
  for (int mr = 0; mr < BM / 64; ++mr) {
#pragma unroll
    for (int nc = 0; nc < PANELS; ++nc) {
      float acc[32];
      dq_piece_mma<1>(acc, ds_w, k_w, mr, nc);
      wgmma_wait<0>();
      fence_regs(acc);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = q0 + 64 * mr + 16 * warp + g + 8 * h;
        if (row >= seq_q) continue;
        float* out = dq_head + (size_t)row * HEAD_DIM + 64 * nc + 2 * t;
#pragma unroll
        for (int j = 0; j < 8; ++j)
          atomicAdd(reinterpret_cast<float2*>(out + 8 * j), make_float2(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]));
      }
    }
  }
}

#if DQ_MODE
// The m64n64 piece of dQ at rows q0 + 64·mr, columns 64·nc (DQ_MODE 1 and 2): dS (64 query rows of the dS panels
// at `ds`, KEY_PANELS panels of 64 keys, DS_PANEL apart) · K (the same keys from `k`), staged in this warpgroup's
// fp32 buffer `dq_w` (two boxes of 64 rows × 32 columns, 128-byte swizzle: 16-byte chunk c of row r at chunk
// c ^ (r % 8)) and added into the accumulator by two TMA reduce-adds that the warpgroup's first thread issues; the
// consumers do not wait for them: the next piece waits only until the copy engine has read the buffer. Rows past
// seq_q are the map's out-of-bounds rows, skipped. Returns with every wgmma of this warpgroup retired.
template <int KEY_PANELS>
__device__ __forceinline__ void dq_piece_bulk(const TmaDesc* tmap_dq, uint32_t dq_w, uint32_t ds, uint32_t k, int mr,
                                              int nc, int q0, int head, int bar, int warp, int g, int t) {
  const bool issuer = warp == 0 && g == 0 && t == 0;
  float acc[32];
  dq_piece_mma<KEY_PANELS>(acc, ds, k, mr, nc);
  if (issuer) bulk_wait<0, true>();  // the previous piece's reduce has read the buffer
  wgmma_wait<0>();
  fence_regs(acc);
  named_sync(bar, 128);
#pragma unroll
  for (int j = 0; j < 8; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = 16 * warp + g + 8 * h, chunk = 2 * (j % 4) + (t >> 1);
      const uint32_t at = dq_w + (j / 4) * 8192 + row * 128 + ((chunk ^ g) << 4) + 8 * (t & 1);
      asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(at), "f"(acc[4 * j + 2 * h]), "f"(acc[4 * j + 2 * h + 1])
                   : "memory");
    }
  fence_proxy_async();  // the generic-proxy stores, visible to the copy engine
  named_sync(bar, 128);
  if (issuer) {
#pragma unroll
    for (int box = 0; box < 2; ++box)
      tma_reduce_add_3d(tmap_dq, dq_w + box * 8192, 64 * nc + 32 * box, q0 + 64 * mr, head);
    bulk_commit();
  }
}

// This warpgroup's share of dQ for the m_block at q0. DQ_MODE 1: as add_dq, every piece over its own 64 keys
// (its panel ds_w, its keys' rows of K at k_w). DQ_MODE 2: one piece over the block's 128 keys, from both panels
// of ds_w's stage (warpgroup 0's panel first) and all of K at k_s (both consumers' dS written: named barrier 3).
__device__ __forceinline__ void add_dq_bulk(const TmaDesc* tmap_dq, uint32_t dq_w, uint32_t ds_w, uint32_t k_s,
                                            uint32_t k_w, int w, int q0, int head, int warp, int g, int t) {
#if DQ_MODE == 2
  const uint32_t stage = ds_w - w * DS_PANEL;
  dq_piece_bulk<2>(tmap_dq, dq_w, stage, k_s, BM == 128 ? w : 0, BM == 128 ? 0 : w, q0, head, 1 + w, warp, g, t);
#else
#pragma unroll
  for (int mr = 0; mr < BM / 64; ++mr)
#pragma unroll
    for (int nc = 0; nc < PANELS; ++nc) dq_piece_bulk<1>(tmap_dq, dq_w, ds_w, k_w, mr, nc, q0, head, 1 + w, warp, g, t);
#endif
}
#endif

extern "C" __global__ void __launch_bounds__(NT, 1)
    attention_bwd_fa3(const __grid_constant__ TmaDesc tmap_q, const __grid_constant__ TmaDesc tmap_k,
                      const __grid_constant__ TmaDesc tmap_v, const __grid_constant__ TmaDesc tmap_do,
#if DQ_MODE
                      const __grid_constant__ TmaDesc tmap_dq,
#endif
                      const float* __restrict__ lse2, const float* __restrict__ delta, elem_t* __restrict__ dK,
                      elem_t* __restrict__ dV, float* __restrict__ dq_acc, int seq_q, int seq_kv, float scale_log2,
                      float scale KV_GROUP_PARAM) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t k_s = (smem_u32(smem_raw) + 1023) & ~1023u;  // swizzle atoms and TMA boxes: 1024-byte aligned
  const uint32_t v_s = k_s + KV_BYTES, q_s = v_s + KV_BYTES, do_s = q_s + Q_STAGES * Q_BYTES;
  const uint32_t ds_s = do_s + DO_STAGES * Q_BYTES, dq_s = ds_s + 2 * DS_STAGES * DS_PANEL;  // 1024-byte aligned
  const uint32_t lse_s = dq_s + 2 * DQ_STAGE, dl_s = lse_s + Q_STAGES * STAT_BYTES;
  const uint32_t kv_full = dl_s + DO_STAGES * STAT_BYTES, q_full = kv_full + 8, q_empty = q_full + 8 * Q_STAGES;
  const uint32_t do_full = q_empty + 8 * Q_STAGES, do_empty = do_full + 8 * DO_STAGES;

#if BLOCK_ORDER  // (key block, batch · kv head), the heads fastest: see BLOCK_ORDER above
  const int kv_heads = (int)gridDim.x / ((seq_kv + BN - 1) / BN);  // B · HKV
  const int n0 = ((int)blockIdx.x / kv_heads) * BN;
  const int kv_head = (int)blockIdx.x % kv_heads;  // its query heads: kv_head·kv_group + gq
#else
  const int n0 = blockIdx.x * BN;
  const int kv_head = (int)(blockIdx.z * gridDim.y + blockIdx.y);  // its query heads: kv_head·kv_group + gq
#endif
  const int n_mblocks = (seq_q + BM - 1) / BM, m_begin = first_mblock(n0, seq_q, seq_kv);
  const int n_iter = n_mblocks - m_begin;
  const int wg = threadIdx.x / 128;

  if (threadIdx.x == 0) {
    tma_prefetch_desc(&tmap_q);
    tma_prefetch_desc(&tmap_k);
    tma_prefetch_desc(&tmap_v);
    tma_prefetch_desc(&tmap_do);
#if DQ_MODE
    tma_prefetch_desc(&tmap_dq);
#endif
    mbar_init(kv_full, 1);
#pragma unroll
    for (int s = 0; s < Q_STAGES; ++s) {
      mbar_init(q_full + 8 * s, 1);  // the producer's arrive.expect_tx; then the copies' bytes
      mbar_init(q_empty + 8 * s, 8);  // one arrival per consumer warp
    }
#pragma unroll
    for (int s = 0; s < DO_STAGES; ++s) {
      mbar_init(do_full + 8 * s, 1);
      mbar_init(do_empty + 8 * s, 8);
    }
    fence_mbarrier_init();
  }
  __syncthreads();

  if (wg == 0) {
    setmaxnreg_dec<PRODUCER_REGS>();
    if (threadIdx.x == 0) {
      mbar_arrive_expect_tx(kv_full, 2 * KV_BYTES);
#pragma unroll
      for (int p = 0; p < PANELS; ++p) {
        tma_load_3d(k_s + p * KV_PANEL, &tmap_k, 64 * p, n0, kv_head, kv_full);
        tma_load_3d(v_s + p * KV_PANEL, &tmap_v, 64 * p, n0, kv_head, kv_full);
      }
      for (int gq = 0; gq < kv_group; ++gq) {
        const int head = kv_head * kv_group + gq;
        const float *lse2_h = lse2 + (size_t)head * n_mblocks * BM, *delta_h = delta + (size_t)head * n_mblocks * BM;
        for (int i = 0; i < n_iter; ++i) {
          const int m = m_begin + i, j = gq * n_iter + i;  // j: the rings' use count
          load_rows<Q_STAGES>(q_s, lse_s, q_full, q_empty, &tmap_q, lse2_h + m * BM, j, m, head);
          load_rows<DO_STAGES>(do_s, dl_s, do_full, do_empty, &tmap_do, delta_h + m * BM, j, m, head);
        }
      }
    }
  } else {  // the roles are the two branches of one if/else: ptxas then honours setmaxnreg
    setmaxnreg_inc<CONSUMER_REGS>();
    const int w = wg - 1, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int key0 = n0 + 64 * w;             // this warpgroup's first key
    const int my_key = key0 + 16 * warp + g;  // this thread's keys: my_key and my_key + 8
    const int offset = seq_kv - seq_q;        // causal: query i sees keys j <= i + offset
    const uint32_t k_w = k_s + 64 * w * 128, v_w = v_s + 64 * w * 128, ds_w0 = ds_s + w * DS_PANEL;
    float dk[1][HEAD_DIM / 2], dv[1][HEAD_DIM / 2];
    zero_fragments<1, HEAD_DIM>(dk);
    zero_fragments<1, HEAD_DIM>(dv);
    mbar_wait(kv_full, 0);

    for (int gq = 0; gq < kv_group; ++gq) {  // the group's query heads in turn: dK and dV sum over them
      const int head = kv_head * kv_group + gq;
#if !DQ_MODE
      float* dq_head = dq_acc + (size_t)head * seq_q * HEAD_DIM;
#endif
      for (int i = 0; i < n_iter; ++i) {
        const int j = gq * n_iter + i;  // the rings' use count
        const int sq = j % Q_STAGES, sd = j % DO_STAGES, q0 = (m_begin + i) * BM;
        const uint32_t q_t = q_s + sq * Q_BYTES, do_t = do_s + sd * Q_BYTES;
        float s[BM / 2], dp[BM / 2];
        uint32_t p[BM / 4], ds[BM / 4];

        mbar_wait(q_full + 8 * sq, (j / Q_STAGES) & 1);
        wgmma_fence();
        wgmma_ss_panels<BM, HEAD_DIM>(s, k_w, KV_PANEL, q_t, Q_PANEL);  // Sᵀ = K·Qᵀ
        wgmma_commit();
        mbar_wait(do_full + 8 * sd, (j / DO_STAGES) & 1);
        wgmma_fence();  // after the wait's loop (else ptxas injects one: C7519)
        wgmma_ss_panels<BM, HEAD_DIM>(dp, v_w, KV_PANEL, do_t, Q_PANEL);  // dPᵀ = V·dOᵀ
        wgmma_commit();

        wgmma_wait<1>();  // Sᵀ is ready (groups retire in order)
        fence_regs(s);
        const float* lse = smem_floats(smem_raw, lse_s + sq * STAT_BYTES);
        per_column(lse, t, [&](int x, float l) { s[x] = ex2(fmaf(s[x], scale_log2, -l)); });
        if (key0 + 64 > seq_kv || (CAUSAL && key0 + 63 > q0 + offset)) {  // a tile that crosses seq_kv or the diagonal
#pragma unroll
          for (int x = 0; x < BM / 2; ++x) {
            const int key = my_key + 8 * HALF(x), query = q0 + 8 * (x >> 2) + 2 * t + (x & 1);
            if (key >= seq_kv || (CAUSAL && key > query + offset)) s[x] = 0.f;
          }
        }
        pack_pairs<BM / 2>(p, s);
        wgmma_from_regs<HEAD_DIM, BM>(dv[0], p, do_t, Q_PANEL);  // dV += Pᵀ·dO

        wgmma_wait<1>();  // dPᵀ is ready; dV may still run
        fence_regs(dp);
        const float* dl = smem_floats(smem_raw, dl_s + sd * STAT_BYTES);
        per_column(dl, t, [&](int x, float d) { dp[x] = s[x] * (dp[x] - d); });
        pack_pairs<BM / 2>(ds, dp);

        // dS into this warpgroup's panel of the stage before the dK wgmma reads the same registers (the last dQ
        // product that read the panel has retired: this warpgroup's in add_dq; with two stages, the other's before
        // it reached the last m_block's barrier 3), visible to the async proxy and to the warpgroup (both, in mode
        // 2) before the dQ wgmma reads it.
#if DQ_MODE == 2
        const uint32_t ds_w = ds_w0 + (j & 1) * 2 * DS_PANEL;  // this m_block's stage
#else
        const uint32_t ds_w = ds_w0;
#endif
        store_ds(ds_w, ds, warp, lane);
        wgmma_from_regs<HEAD_DIM, BM>(dk[0], ds, q_t, Q_PANEL);  // dK += dSᵀ·Q
        fence_proxy_async();
#if DQ_MODE == 2
        named_sync(3, 256);
#else
        named_sync(1 + w, 128);
#endif
#if DQ_MODE
        add_dq_bulk(&tmap_dq, dq_s + w * DQ_STAGE, ds_w, k_s, k_w, w, q0, head, warp, g, t);  // waits for every wgmma
#else
        add_dq(dq_head, ds_w, k_w, q0, seq_q, warp, g, t);  // waits for every wgmma (dV and dK too)
#endif
        fence_regs(dv[0]);
        fence_regs(dk[0]);
        if (lane == 0) {  // every wgmma that read this m_block's stages has retired
          mbar_arrive(q_empty + 8 * sq);
          mbar_arrive(do_empty + 8 * sd);
        }
      }
    }

#if DQ_MODE
    if (threadIdx.x % 128 == 0) bulk_wait<0, false>();  // every reduce done before the block's shared memory goes
#endif
#pragma unroll
    for (int x = 0; x < HEAD_DIM / 2; ++x) dk[0][x] *= scale;
    const size_t kv_rows = (size_t)kv_head * seq_kv * HEAD_DIM;
    store_fragments<1, HEAD_DIM>(dk, dK + kv_rows, seq_kv, HEAD_DIM, key0, 0);
    store_fragments<1, HEAD_DIM>(dv, dV + kv_rows, seq_kv, HEAD_DIM, key0, 0);
  }
}
