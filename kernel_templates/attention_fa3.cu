// FlashAttention-3 style forward for Hopper (sm_90a only), fp16 / bf16: TMA loads, a producer warpgroup (one
// thread issues the copies) and consumer warpgroups on wgmma, P kept in registers.
//
//   O[b,h,i,:] = softmax_j(Q[b,h,i,:]·K[b,h,j,:] · scale  [+ causal mask])·V[b,h,j,:]      LSE[b,h,i] (natural log)
//
// Contract (the attention family's, autotune/spaces/attention.py): layout (batch, heads, seq, HEAD_DIM), contiguous;
// O in the input type, LSE fp32; scale 1/sqrt(HEAD_DIM) (passed with log2(e) folded in); the causal mask is aligned
// bottom-right (key j is seen by query i iff j <= i + seq_kv - seq_q) and the space refuses seq_q > seq_kv with it.
//
// Block: BM = 64·WG query rows of one (batch, head); grid (ceil(seq_q / BM), heads, batch), one block per SM.
// Roles (warp specialisation):
//   warpgroup 0, producer: one thread issues every bulk tensor copy (kernel_templates/attention_sm90.cuh). Q once,
//     then K and V tiles of BN keys into two STAGES-deep rings, in the order K0, K1, V0, K2, V1, …: K runs one tile
//     ahead of V, as the consumers need K[j+1] before V[j]. setmaxnreg gives its registers to the consumers.
//   warpgroups 1..WG, consumers: warpgroup c owns rows 64c..64c+63 of the block. Per key tile j (ascending):
//     S = Q·K[j]ᵀ on wgmma (Q and K from shared memory, both K-major), the online softmax in registers (fp32, the
//     running max in raw units, exp2 with scale·log2(e) folded into one FFMA), P = S rounded to the input type in
//     registers, and O += P·V[j] on wgmma with A from registers and V from shared memory (MN-major: the transpose
//     bit). Row sums stay per thread until the epilogue (one quad reduction).
//
// Barriers (mbarriers in shared memory, count = arrivals):
//   q_full            1 (producer's arrive.expect_tx) + Q's bytes
//   k_full[s], v_full[s]    1 + the tile's bytes (zero-filled parts of a box count too)
//   k_empty[s], v_empty[s]  4·WG: lane 0 of every consumer warp, once its wgmma reading the stage has retired
//   A stage's j-th use waits full with parity (j / STAGES) & 1; the producer waits empty with the opposite parity
//   (a fresh barrier counts as having completed the phase before). Named barriers 1 and 2 (256 threads): PINGPONG.
//
// Shared memory (1024-byte aligned, 128-byte swizzle, exactly what TMA writes for boxes of 64 elements × rows):
//   Q: HEAD_DIM/64 panels (rounded up) of BM rows × 128 bytes; K and V stages: panels of BN rows × 128 bytes.
//   QK reads Q and K K-major (k16 step: +32 bytes in the panel, next panel every 4 steps); PV reads V MN-major
//   (LBO = the panel stride, SBO = 1024, k16 step: +16 rows = 2048 bytes), as kernel_templates/gemm_wgmma_tma.cu.
//   HEAD_DIM 96: the tensor maps' rows are 96 elements, so the second panel's box is half outside the tensor and
//   zero-filled: QK runs 6 k16 steps, PV a 128-column O whose last 32 columns are zero and never stored.
//
// Tunables (compile-time defines; the defaults below are autotune's default configuration):
//   BN        keys per K/V tile (multiple of 16, <= 256): the N of S = Q·Kᵀ and the K of O += P·V
//   STAGES    depth of the K and V rings (each)
//   WG        consumer warpgroups, 1 or 2 (BM = 64 or 128 query rows per block)
//   PINGPONG  WG = 2: named barriers make the consumers take turns issuing their GEMMs, so that one warpgroup's
//             softmax runs while the tensor cores do the other's GEMMs
//   OVERLAP   1: within a warpgroup, S[j+1] = Q·K[j+1]ᵀ and O += P[j]·V[j] are in flight together and softmax(j+1)
//             runs while the tensor cores compute P[j]·V[j] (FA3's intra-warpgroup overlap); 0: QK, wait, softmax,
//             PV, wait
//   REVERSE   causal: 1 launches the longest (bottom) query blocks first
// Problem constants (fixed by the shape): HEAD_DIM (64, 96, 128), CAUSAL, KV_GROUPED, DTYPE (1 fp16, 2 bf16).
// KV_GROUPED (attention_problem.cuh): the K and V tensor maps are (HEAD_DIM, seq_kv, batch·kv heads), and the
// producer copies K, V tiles of kv head KV_HEAD(head) (the block's query head divided by kv_group).
//
// Edges: a 3-D tensor map (HEAD_DIM, seq, batch·heads) per input, so the copy engine zero-fills rows past seq_q
// and seq_kv of each head (never the next head's rows). Keys at or past seq_kv are masked to -inf (their zero
// V rows contribute nothing); rows at or past seq_q are computed on zeros and not stored. Causal: key tiles past
// the block's last diagonal are never loaded; masks only on tiles crossing a warpgroup's diagonal or seq_kv.
// Ascending key order means every row sees key 0 in the first tile, so the running max is finite from then on
// (a row that sees no key would still give O = 0, LSE = -inf). O is stored from registers (the quad transpose of
// kernel_templates/wgmma_epilogue.cuh: 16-byte stores, guarded pairs on a warpgroup's last rows).
//
// Not (yet) FA3: no persistent grid or longest-first tile scheduler, O not staged through shared memory for a
// TMA store, no cluster multicast of K/V, no third consumer warpgroup (BM 192), head_dim 96 padded to 128.

#include "attention_problem.cuh"
#include "half_dtype.cuh"
#include "attention_sm90.cuh"
#include "dtype.cuh"
#include "wgmma_epilogue.cuh"

#ifndef BN
#define BN 128
#endif
#ifndef STAGES
#define STAGES 2
#endif
#ifndef WG
#define WG 2
#endif
#ifndef PINGPONG
#define PINGPONG 1
#endif
#ifndef OVERLAP
#define OVERLAP 1
#endif
#ifndef REVERSE
#define REVERSE 0
#endif

#define BM (64 * WG)
#define NT (128 * (WG + 1))
#define PANELS ((HEAD_DIM + 63) / 64)  // 64-column panels of Q, K, V in shared memory
#define DV (64 * PANELS)               // columns of O in registers (HEAD_DIM 96: 128, the last 32 zero)
#define KSTEPS (HEAD_DIM / 16)         // k16 steps of S = Q·Kᵀ
#define PSTEPS (BN / 16)               // k16 steps of O += P·V
#define Q_PANEL (BM * 128)
#define KV_PANEL (BN * 128)
#define Q_BYTES (PANELS * Q_PANEL)
#define KV_BYTES (PANELS * KV_PANEL)  // one K or V tile
#define BARRIERS (1 + 4 * STAGES)
#define SMEM_BYTES (1024 + Q_BYTES + 2 * STAGES * KV_BYTES + 8 * BARRIERS)

static_assert(HEAD_DIM == 64 || HEAD_DIM == 96 || HEAD_DIM == 128, "HEAD_DIM is 64, 96 or 128");
static_assert(BN % 16 == 0 && BN >= 64 && BN <= 256, "BN is a multiple of 16 in [64, 256] (one wgmma N, one box)");
static_assert(WG == 1 || WG == 2, "one or two consumer warpgroups");
static_assert(!PINGPONG || WG == 2, "ping-pong needs two consumer warpgroups");
static_assert(STAGES >= 2 && STAGES <= 4, "2..4 stages per ring");
static_assert(SMEM_BYTES <= 232448, "shared memory beyond the sm_90 limit of 227 KB per block");
// S, O and (OVERLAP: live beside the next S while P·V is in flight) P per consumer thread; measured with ptxas
// (autotune/spaces/attention_fa3.py, MAX_TILE_REGISTERS).
static_assert(BN / 2 + (OVERLAP ? BN / 4 : 0) + DV / 2 <= 212, "S, P and O tiles would spill");

#if WG == 2
#define PRODUCER_REGS 24   // 128·(24 + 2·240) = 64512 = 384 threads × 168, the block's allocation
#define CONSUMER_REGS 240
#endif

struct Smem {
  uint32_t q, k, v, q_full, k_full, k_empty, v_full, v_empty;  // shared addresses; per stage: +s·KV_BYTES, +8s
};

// ---- producer ------------------------------------------------------------------------------------------------
__device__ __forceinline__ void load_tile(const Smem& sm, const TmaDesc* map, bool is_v, int j, int head) {
  const int s = j % STAGES;
  const uint32_t full = (is_v ? sm.v_full : sm.k_full) + 8 * s, empty = (is_v ? sm.v_empty : sm.k_empty) + 8 * s;
  mbar_wait(empty, ((j / STAGES) & 1) ^ 1);  // the first pass finds every stage free
  mbar_arrive_expect_tx(full, KV_BYTES);
  const uint32_t dst = (is_v ? sm.v : sm.k) + s * KV_BYTES;
#pragma unroll
  for (int p = 0; p < PANELS; ++p) tma_load_3d(dst + p * KV_PANEL, map, 64 * p, j * BN, head, full);
}

// ---- consumer pieces -----------------------------------------------------------------------------------------
// Accumulator element i of a thread: row g + 8·((i >> 1) & 1) of its warp's 16, column 8·(i >> 2) + 2t + (i & 1).
#define HALF(i) (((i) >> 1) & 1)

// S = Q·K[stage]ᵀ for this warpgroup's 64 rows (q: its first Q row in shared memory).
__device__ __forceinline__ void issue_qk(float (&s)[BN / 2], uint32_t q, uint32_t k) {
  const uint64_t dq = sw128_desc(q, 16, 1024), dk = sw128_desc(k, 16, 1024);
#pragma unroll
  for (int kk = 0; kk < KSTEPS; ++kk) {  // start addresses step inside descriptors (address bits 4..17)
    const uint32_t in_panel = (kk % 4) * 32;
    wgmma_qk<BN>(s, dq + ((kk / 4 * Q_PANEL + in_panel) >> 4), dk + ((kk / 4 * KV_PANEL + in_panel) >> 4), kk > 0);
  }
}

// O += P·V[stage].
__device__ __forceinline__ void issue_pv(float (&o)[DV / 2], const uint32_t (&p)[BN / 4], uint32_t v) {
  const uint64_t dv = sw128_desc(v, KV_PANEL, 1024);
#pragma unroll
  for (int kk = 0; kk < PSTEPS; ++kk)
    wgmma_pv<DV>(o, p[4 * kk], p[4 * kk + 1], p[4 * kk + 2], p[4 * kk + 3], dv + ((kk * 2048) >> 4));
}

// Keys at or past `lim[h]` (columns of this tile, relative to this thread's first column) to -inf.
__device__ __forceinline__ void mask_scores(float (&s)[BN / 2], const int (&lim)[2]) {
#pragma unroll
  for (int i = 0; i < BN / 2; ++i)
    if (8 * (i >> 2) + (i & 1) >= lim[HALF(i)]) s[i] = -INFINITY;
}

// Online softmax of one tile for the thread's two rows: new max (raw units), the factor alpha that rescales the
// previous O and sum, S ← exp2(S·scale_log2 − max·scale_log2), the per-thread row sums.
__device__ __forceinline__ void softmax_tile(float (&s)[BN / 2], float (&m)[2], float (&l)[2], float (&alpha)[2],
                                             float scale_log2) {
  float mx[2] = {m[0], m[1]};
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) mx[HALF(i)] = fmaxf(mx[HALF(i)], s[i]);
  float ms[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));  // the four lanes of a quad share the rows
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
    const float use = mx[h] == -INFINITY ? 0.f : mx[h];  // a row with no key so far: weights 0, not NaN
    alpha[h] = ex2((m[h] - use) * scale_log2);
    m[h] = mx[h];
    ms[h] = use * scale_log2;
    l[h] *= alpha[h];
  }
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) {
    s[i] = ex2(fmaf(s[i], scale_log2, -ms[HALF(i)]));
    l[HALF(i)] += s[i];
  }
}

__device__ __forceinline__ void pack_p(uint32_t (&p)[BN / 4], const float (&s)[BN / 2]) {
#pragma unroll
  for (int i = 0; i < BN / 4; ++i) p[i] = pack2(s[2 * i], s[2 * i + 1]);
}

__device__ __forceinline__ void rescale_o(float (&o)[DV / 2], const float (&alpha)[2]) {
#pragma unroll
  for (int i = 0; i < DV / 2; ++i) o[i] *= alpha[HALF(i)];
}

// O / l in the output type and LSE = max·scale + ln(l) for the rows below seq_q.
__device__ __forceinline__ void epilogue(const float (&o)[DV / 2], const float (&m)[2], float (&l)[2],
                                         elem_t* __restrict__ O, float* __restrict__ LSE, size_t head, int seq_q,
                                         int row0, int my_row, int t, float scale_log2) {
  float inv[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    inv[h] = l[h] > 0.f ? 1.f / l[h] : 0.f;
  }
  float out[1][HEAD_DIM / 2];
#pragma unroll
  for (int i = 0; i < HEAD_DIM / 2; ++i) out[0][i] = o[i] * inv[HALF(i)];
  store_fragments<1, HEAD_DIM>(out, O + head * seq_q * HEAD_DIM, seq_q, HEAD_DIM, row0, 0);
  if (t == 0) {
    const float LN2 = 0.6931471805599453f;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = my_row + 8 * h;
      if (row < seq_q) LSE[head * seq_q + row] = l[h] > 0.f ? (m[h] * scale_log2 + __log2f(l[h])) * LN2 : -INFINITY;
    }
  }
}

extern "C" __global__ void __launch_bounds__(NT, 1)
attention_fa3(const __grid_constant__ TmaDesc tmap_q, const __grid_constant__ TmaDesc tmap_k,
              const __grid_constant__ TmaDesc tmap_v, elem_t* __restrict__ O, float* __restrict__ LSE, int seq_q,
              int seq_kv, float scale_log2 KV_GROUP_PARAM) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  Smem sm;
  sm.q = (smem_u32(smem_raw) + 1023) & ~1023u;  // swizzle atoms and TMA boxes want 1024-byte alignment
  sm.k = sm.q + Q_BYTES;
  sm.v = sm.k + STAGES * KV_BYTES;
  sm.q_full = sm.v + STAGES * KV_BYTES;
  sm.k_full = sm.q_full + 8;
  sm.k_empty = sm.k_full + 8 * STAGES;
  sm.v_full = sm.k_empty + 8 * STAGES;
  sm.v_empty = sm.v_full + 8 * STAGES;

  const int qblock = (CAUSAL && REVERSE) ? (int)(gridDim.x - 1 - blockIdx.x) : (int)blockIdx.x;
  const int q0 = qblock * BM;
  const int head = (int)(blockIdx.z * gridDim.y + blockIdx.y);
  const int offset = seq_kv - seq_q;  // causal: query i sees keys j <= i + offset
  const int kv_end = CAUSAL ? min(seq_kv, q0 + BM + offset) : seq_kv;  // past the block's last diagonal: never
  const int n_tiles = (kv_end + BN - 1) / BN;
  const int wg = threadIdx.x / 128;

  if (threadIdx.x == 0) {
    tma_prefetch_desc(&tmap_q);
    tma_prefetch_desc(&tmap_k);
    tma_prefetch_desc(&tmap_v);
    mbar_init(sm.q_full, 1);
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(sm.k_full + 8 * s, 1);  // the producer's arrive.expect_tx; then the copies' bytes
      mbar_init(sm.v_full + 8 * s, 1);
      mbar_init(sm.k_empty + 8 * s, 4 * WG);  // one arrival per consumer warp
      mbar_init(sm.v_empty + 8 * s, 4 * WG);
    }
    fence_mbarrier_init();
  }
  __syncthreads();

  if (wg == 0) {
#ifdef PRODUCER_REGS
    setmaxnreg_dec<PRODUCER_REGS>();
#endif
    if (threadIdx.x == 0) {
      mbar_arrive_expect_tx(sm.q_full, Q_BYTES);
#pragma unroll
      for (int p = 0; p < PANELS; ++p) tma_load_3d(sm.q + p * Q_PANEL, &tmap_q, 64 * p, q0, head, sm.q_full);
      const int kv_head = KV_HEAD(head);
      load_tile(sm, &tmap_k, false, 0, kv_head);
      for (int j = 1; j < n_tiles; ++j) {
        load_tile(sm, &tmap_k, false, j, kv_head);
        load_tile(sm, &tmap_v, true, j - 1, kv_head);
      }
      load_tile(sm, &tmap_v, true, n_tiles - 1, kv_head);
    }
  } else {  // the roles are the two branches of one if/else: ptxas then honours setmaxnreg
#ifdef CONSUMER_REGS
    setmaxnreg_inc<CONSUMER_REGS>();
#endif
    const int cw = wg - 1, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int row0 = q0 + 64 * cw;           // this warpgroup's first query row
    const int my_row = row0 + 16 * warp + g;  // this thread's rows: my_row and my_row + 8
    const uint32_t q = sm.q + 64 * cw * 128;
    auto release = [&](uint32_t bar) {
      if (lane == 0) mbar_arrive(bar);
    };
    // Tiles that cross seq_kv or (causal) this warpgroup's diagonal are masked: lim = first masked column.
    auto mask_if_needed = [&](float (&s)[BN / 2], int j) {
      const int n0 = j * BN;
      if (n0 + BN > seq_kv || (CAUSAL && n0 + BN - 1 > row0 + offset)) {
        int lim[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          lim[h] = seq_kv - n0;
          if (CAUSAL) lim[h] = min(lim[h], my_row + 8 * h + offset + 1 - n0);
          lim[h] -= 2 * t;
        }
        mask_scores(s, lim);
      }
    };
    // PINGPONG: consumer c waits for its turn on barrier 1 + c and passes it on to the other one's.
    auto turn_wait = [&] {
      if (PINGPONG) named_sync(1 + cw, 256);
    };
    auto turn_pass = [&] {
      if (PINGPONG) named_arrive(2 - cw, 256);
    };
    if (PINGPONG && cw == 0) named_arrive(1, 256);  // the first turn is consumer 0's

    float o[DV / 2], s[BN / 2], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f}, alpha[2];
    uint32_t p[BN / 4];
#pragma unroll
    for (int i = 0; i < DV / 2; ++i) o[i] = 0.f;
    mbar_wait(sm.q_full, 0);

#if OVERLAP
    // Tile 0: S, softmax, P. Then each step issues S[j] = Q·K[j]ᵀ and O += P[j-1]·V[j-1] together, waits for S
    // only, runs softmax(j) while P·V is in flight, then waits for it before overwriting P and rescaling O.
    mbar_wait(sm.k_full, 0);
    wgmma_fence();
    issue_qk(s, q, sm.k);
    wgmma_commit();
    wgmma_wait<0>();
    fence_regs(s);
    release(sm.k_empty);
    mask_if_needed(s, 0);
    softmax_tile(s, m, l, alpha, scale_log2);
    pack_p(p, s);
    for (int j = 1; j < n_tiles; ++j) {
      const int sk = j % STAGES, sv = (j - 1) % STAGES;
      mbar_wait(sm.k_full + 8 * sk, (j / STAGES) & 1);
      turn_wait();
      fence_regs(p);
      fence_regs(o);
      wgmma_fence();
      issue_qk(s, q, sm.k + sk * KV_BYTES);
      wgmma_commit();
      mbar_wait(sm.v_full + 8 * sv, ((j - 1) / STAGES) & 1);
      wgmma_fence();  // after the wait's loop (else ptxas injects one: C7519)
      issue_pv(o, p, sm.v + sv * KV_BYTES);
      wgmma_commit();
      turn_pass();
      wgmma_wait<1>();  // S[j] is ready (groups retire in order); P·V may still run
      fence_regs(s);
      release(sm.k_empty + 8 * sk);
      mask_if_needed(s, j);
      softmax_tile(s, m, l, alpha, scale_log2);
      wgmma_wait<0>();
      fence_regs(o);
      fence_regs(p);
      release(sm.v_empty + 8 * sv);
      pack_p(p, s);
      rescale_o(o, alpha);
    }
    {
      const int sv = (n_tiles - 1) % STAGES;
      mbar_wait(sm.v_full + 8 * sv, ((n_tiles - 1) / STAGES) & 1);
      fence_regs(p);
      fence_regs(o);
      wgmma_fence();
      issue_pv(o, p, sm.v + sv * KV_BYTES);
      wgmma_commit();
      wgmma_wait<0>();
      fence_regs(o);
    }
#else
    for (int j = 0; j < n_tiles; ++j) {
      const int st = j % STAGES;
      const uint32_t parity = (j / STAGES) & 1;
      mbar_wait(sm.k_full + 8 * st, parity);
      turn_wait();
      wgmma_fence();
      issue_qk(s, q, sm.k + st * KV_BYTES);
      wgmma_commit();
      turn_pass();
      wgmma_wait<0>();
      fence_regs(s);
      release(sm.k_empty + 8 * st);
      mask_if_needed(s, j);
      softmax_tile(s, m, l, alpha, scale_log2);
      rescale_o(o, alpha);
      pack_p(p, s);
      mbar_wait(sm.v_full + 8 * st, parity);
      turn_wait();
      fence_regs(p);
      fence_regs(o);
      wgmma_fence();
      issue_pv(o, p, sm.v + st * KV_BYTES);
      wgmma_commit();
      turn_pass();
      wgmma_wait<0>();
      fence_regs(o);
      fence_regs(p);
      release(sm.v_empty + 8 * st);
    }
#endif
    epilogue(o, m, l, O, LSE, (size_t)head, seq_q, row0, my_row, t, scale_log2);
  }
}
