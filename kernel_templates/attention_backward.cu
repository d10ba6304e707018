// FlashAttention-2 backward, fp16 / bf16 on tensor cores (mma.sync m16n8k16, fp32 accumulation), sm_80+.
//
//   P = exp(Q·Kᵀ·scale − LSE)   dV = Pᵀ·dO   dP = dO·Vᵀ   dS = P∘(dP − Δ), Δ = rowsum(dO∘O)
//   dQ = dS·K·scale   dK = dSᵀ·Q·scale                                         (scale = 1/√HEAD_DIM)
//
// Inputs as the forward (attention_fa2.cu) leaves them: Q, O, dO (B, H, seq_q, HEAD_DIM), K, V (B, H, seq_kv,
// HEAD_DIM) in the input type, LSE (B, H, seq_q) fp32 natural log; any seq_q, seq_kv (ragged tiles zero-filled);
// causal aligned bottom-right (query i sees key j iff j <= i + seq_kv − seq_q; the space refuses seq_q > seq_kv).
//
// Kernels, in launch order:
//   attention_bwd_prep     Δ = rowsum(dO∘O) in fp32 (workspace), and the fp32 dQ accumulator zeroed (DQ_ATOMIC)
//   attention_bwd_dkdv     a block owns BC keys (WARPS warps, 16·MT keys each) and walks the query tiles of BR
//                          rows that see them, Q, dO, LSE and Δ streaming through a STAGES-deep cp.async ring.
//                          Per tile, in registers: Sᵀ = K·Qᵀ, Pᵀ = exp2(Sᵀ·scale·log2e − LSE·log2e) (masked on
//                          the diagonal and the ragged end), dV += Pᵀ·dO (P rounded to the input type), dPᵀ =
//                          V·dOᵀ, dSᵀ = Pᵀ∘(dPᵀ − Δ), dK += dSᵀ·Q (dS rounded). DQ_ATOMIC: dSᵀ goes to shared
//                          memory and the warps add dS·K of this key block into the fp32 dQ accumulator
//                          (red.global.add; float2 on sm_90). dK·scale and dV are stored in the input type.
//   attention_bwd_dq       DQ_ATOMIC 0 (no atomics): a block owns BC query rows and walks the key tiles of BR
//                          keys they see, recomputing S, P, dP and dS as above (roles of the two tiles swapped),
//                          dQ += dS·K in registers, stored ·scale in the input type.
//   attention_bwd_dq_store DQ_ATOMIC 1: dQ = accumulator·scale in the input type.
// Causal: query tiles (key tiles) that no key (query) of the block sees are never loaded; masks only on tiles
// that cross the diagonal or the end of a sequence. Rows past seq_q are zero-filled: their P is finite and their
// dO and Δ are 0, so they add nothing to dK and dV.
//
// Tunables (defaults = autotune's default configuration):
//   BC, WARPS  keys per block of attention_bwd_dkdv (16·MT per warp, MT = BC / (16·WARPS) in 1..2); query rows per
//              block of attention_bwd_dq
//   BR         query rows per tile of attention_bwd_dkdv; keys per tile of attention_bwd_dq
//   STAGES     depth of the cp.async ring (1: load, then compute)
//   DQ_ATOMIC  1: dQ by fp32 atomics from attention_bwd_dkdv, then a store pass; 0: its own pass (attention_bwd_dq)
//   SWIZZLE    1: XOR-swizzled 16-byte chunks (HEAD_DIM 64 or 128); 0: rows padded by 16 bytes
// Problem constants (fixed by the shape, never tuned): HEAD_DIM, CAUSAL, KV_GROUPED, DTYPE (1 fp16, 2 bf16).
//
// Grouped-query attention (KV_GROUPED, attention_problem.cuh: K, V, dK, dV have heads / kv_group heads, query head
// h reads kv head h / kv_group): dK and dV of a kv head are sums over its group's query heads. A block of
// attention_bwd_dkdv owns BC keys of one kv head (grid.y = kv heads) and runs the query-tile pipeline once per
// query head of the group, accumulating dK and dV in the same registers; K and V are loaded once. Chosen over
// fp32 dK/dV partials per query head and a reduction pass: no workspace (G·B·HKV·seq_kv·HEAD_DIM·8 bytes written
// and read back), no atomics, a fixed summation order, and for kv_group = 1 (the constant of multi-head builds) the
// loop runs once: the multi-head kernel, unchanged. The cost, G-times fewer and longer blocks, matters only where
// B·HKV·seq_kv/BC blocks no longer fill the GPU (multi-query training at short sequences). dQ is per query head
// either way: attention_bwd_dq reads the kv head of its query head; DQ_ATOMIC adds into the query head's rows.

#include "attention_problem.cuh"
#include "half_dtype.cuh"

#ifndef BC
#define BC 128
#endif
#ifndef WARPS
#define WARPS 8
#endif
#ifndef BR
#define BR 32
#endif
#ifndef STAGES
#define STAGES 2
#endif
#ifndef DQ_ATOMIC
#define DQ_ATOMIC 1
#endif
#ifndef SWIZZLE
#define SWIZZLE 0
#endif

#define NT (32 * WARPS)
#define MT (BC / (16 * WARPS))  // m16 tiles per warp: keys of attention_bwd_dkdv, query rows of attention_bwd_dq
#define DS_ROW (BR + 8)         // elements per row of the dSᵀ tile (padded: conflict-free ldmatrix)
#define PREP_ROWS 32            // rows per block of attention_bwd_prep (8 threads a row)

static_assert(HEAD_DIM % 16 == 0 && HEAD_DIM >= 32 && HEAD_DIM <= 256, "HEAD_DIM is a multiple of 16 in [32, 256]");
static_assert(BC % (16 * WARPS) == 0 && MT >= 1 && MT <= 2, "BC is 16·WARPS or 32·WARPS keys");
static_assert(BR % 16 == 0 && BR >= 16 && BR <= 64, "BR is 16, 32 or 64");
static_assert(STAGES >= 1 && STAGES <= 4, "STAGES is 1..4");

#include "attention_mma.cuh"
#include "attention_backward.cuh"
#include "attention_bwd_passes.cuh"  // row_delta, attention_bwd_dq_store

// dK, dV, Sᵀ and dPᵀ fragments per thread of attention_bwd_dkdv (the heavier kernel). Measured with ptxas 13.0,
// sm_80 and sm_90a, all four kernels: every HEAD_DIM, BC, WARPS, BR within this bound, both DQ_ATOMIC, with
// STAGES 1 and 3, SWIZZLE, bf16 and non-causal varied one at a time (780 compiles), none spills (the heaviest
// use 255 registers); 192 spills at 2 warps or BR 64 with HEAD_DIM 64 or more, and 2 warps at 160 (HEAD_DIM 96).
static_assert(MT * (HEAD_DIM + BR) <= (WARPS == 2 ? 144 : 160), "register tiles would spill");

constexpr float LOG2E = 1.4426950408889634f;

// Per (batch, head) pointers of a (seq, HEAD_DIM) matrix: of the query head `head`, of the kv head `kv_head`.
#define HEAD_ROWS(p, seq) ((p) + head * (size_t)(seq) * HEAD_DIM)
#define KV_ROWS(p) ((p) + kv_head * (size_t)(seq_kv) * HEAD_DIM)

extern "C" __global__ void __launch_bounds__(8 * PREP_ROWS)
    attention_bwd_prep(const elem_t* __restrict__ O, const elem_t* __restrict__ dO, float* __restrict__ delta,
                       float* __restrict__ dq_acc, int rows) {
  const int row = blockIdx.x * PREP_ROWS + threadIdx.x / 8, part = threadIdx.x % 8;
  const float sum = row_delta<DQ_ATOMIC != 0>(O, dO, dq_acc, row, row < rows, part);
  if (row < rows && part == 0) delta[row] = sum;
}

// Columns of a piece of dQ: the widest of 64, 48, 32 that divides HEAD_DIM and still gives every warp a piece,
// else 16 (fp32 accumulators per thread: half of it).
__host__ __device__ constexpr int dq_columns() {
  for (int c = 64; c > 16; c -= 16)
    if (HEAD_DIM % c == 0 && (BR / 16) * (HEAD_DIM / c) >= WARPS) return c;
  return 16;
}
constexpr int DQC = dq_columns();

// This key block's share of dQ (dS·K over its BC keys) added into the fp32 accumulator: the BR/16 × HEAD_DIM/DQC
// output pieces (16 rows × DQC columns each) spread over the warps. dSᵀ is in shared memory ((BC, DS_ROW),
// read transposed as the A operand), K in its tile.
__device__ __forceinline__ void add_dq(float* __restrict__ dq_acc, uint32_t ds_tile, uint32_t k_tile, int q0,
                                       int seq_q, int warp, int lane, const Lanes& l) {
  constexpr int PIECES = (BR / 16) * (HEAD_DIM / DQC);
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int it = 0; it < (PIECES + WARPS - 1) / WARPS; ++it) {
    const int piece = warp + it * WARPS;
    if (PIECES % WARPS != 0 && piece >= PIECES) break;  // uniform across the warp
    const int r = piece / (HEAD_DIM / DQC), c0 = (piece % (HEAD_DIM / DQC)) * (DQC / 8);
    float acc[DQC / 8][4];
#pragma unroll
    for (int n = 0; n < DQC / 8; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < BC / 16; ++kk) {
      uint32_t a[4];
      ldmatrix_x4_trans(a, ds_tile + (uint32_t)((kk * 16 + l.n_row) * DS_ROW + (2 * r + l.n_chunk) * 8) * 2u);
#pragma unroll
      for (int n = 0; n < DQC / 8; n += 2) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, k_tile + tile_offset(kk * 16 + l.k_row, c0 + n + l.k_chunk));
        mma16816(acc[n], a, b[0], b[1]);
        mma16816(acc[n + 1], a, b[2], b[3]);
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = q0 + r * 16 + g + 8 * h;
      if (row >= seq_q) continue;
      float* out = dq_acc + (size_t)row * HEAD_DIM + c0 * 8 + 2 * t;
#pragma unroll
      for (int n = 0; n < DQC / 8; ++n) {
#if __CUDA_ARCH__ >= 900
        atomicAdd(reinterpret_cast<float2*>(out + n * 8), make_float2(acc[n][2 * h], acc[n][2 * h + 1]));
#else
        atomicAdd(out + n * 8, acc[n][2 * h]);
        atomicAdd(out + n * 8 + 1, acc[n][2 * h + 1]);
#endif
      }
    }
  }
}

extern "C" __global__ void __launch_bounds__(NT, 1)
    attention_bwd_dkdv(const elem_t* __restrict__ Q, const elem_t* __restrict__ K, const elem_t* __restrict__ V,
                       const elem_t* __restrict__ dO, const float* __restrict__ LSE, const float* __restrict__ delta,
                       elem_t* __restrict__ dK, elem_t* __restrict__ dV, float* __restrict__ dq_acc, int seq_q,
                       int seq_kv, float scale_log2, float scale KV_GROUP_PARAM) {
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr uint32_t KV_BYTES = BC * ROW * 2, Q_BYTES = BR * ROW * 2;
  constexpr uint32_t STAGE_BYTES = 2 * Q_BYTES + 2 * BR * 4;  // Q, dO, LSE, Δ
  const uint32_t k_tile = smem_addr(smem), v_tile = k_tile + KV_BYTES, ring = v_tile + KV_BYTES;
  const uint32_t ds_tile = ring + STAGES * STAGE_BYTES;  // DQ_ATOMIC only

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, t = lane % 4, g = lane / 4;
  const Lanes l(lane);
  const size_t kv_head = (size_t)blockIdx.z * gridDim.y + blockIdx.y;
  const int k0 = blockIdx.x * BC, warp_key0 = warp * 16 * MT;
  const int offset = seq_kv - seq_q;  // causal: query i sees keys j <= i + offset
  float dk[MT][DN][4], dv[MT][DN][4];  // summed over the group's query heads

#if KV_GROUPED
  // K and V (committed with the first query head's first tile) and the zeroed sums, before the loop over the
  // group: inside it, under `member == 0`, ptxas kept more registers live across the loop and spilled at the
  // register bound (255 registers, 16-24 bytes of spill in causal builds at MT·(HEAD_DIM + BR) = 160, e.g. BC 128,
  // 4 warps, BR 16, HEAD_DIM 64, DQ_ATOMIC). The multi-head build keeps its own order below (the same PTX).
  load_tile<BC, NT>(k_tile, KV_ROWS(K), k0, seq_kv, threadIdx.x);
  load_tile<BC, NT>(v_tile, KV_ROWS(V), k0, seq_kv, threadIdx.x);
  zero_frags(dk);
  zero_frags(dv);
#endif
  for (int member = 0; member < kv_group; ++member) {  // the query heads of the group, one pipeline each
    const size_t head = kv_head * kv_group + member;
    const elem_t *Qh = HEAD_ROWS(Q, seq_q), *dOh = HEAD_ROWS(dO, seq_q);
    const float *LSEh = LSE + head * seq_q, *Dh = delta + head * seq_q;
    float* dq_h = dq_acc + head * (size_t)seq_q * HEAD_DIM;

    // Query tiles that see this block's keys: causal starts at the tile holding query k0 − offset.
    const int qt_begin = CAUSAL ? max(0, k0 - offset) / BR : 0;
    const int n_iter = (seq_q + BR - 1) / BR - qt_begin;
    auto load_stage = [&](int slot, int i) {
      const uint32_t base = ring + slot * STAGE_BYTES;
      const int q0 = (qt_begin + i) * BR;
      load_tile<BR, NT>(base, Qh, q0, seq_q, threadIdx.x);
      load_tile<BR, NT>(base + Q_BYTES, dOh, q0, seq_q, threadIdx.x);
      load_floats<BR, NT>(base + 2 * Q_BYTES, LSEh, q0, seq_q, threadIdx.x);
      load_floats<BR, NT>(base + 2 * Q_BYTES + BR * 4, Dh, q0, seq_q, threadIdx.x);
    };

#if KV_GROUPED
    if (member != 0) __syncthreads();  // every warp is done with the previous query head's ring slots and dSᵀ tile
#else
    // K and V, committed with the first query tile (one group: the waits stay in step).
    load_tile<BC, NT>(k_tile, KV_ROWS(K), k0, seq_kv, threadIdx.x);
    load_tile<BC, NT>(v_tile, KV_ROWS(V), k0, seq_kv, threadIdx.x);
#endif
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
      if (s < n_iter) load_stage(s, s);
      cp_async_commit();
    }
#if !KV_GROUPED
    zero_frags(dk);  // here, after the prologue: where the multi-head kernel always had it (the same PTX)
    zero_frags(dv);
#endif
    const bool ragged = k0 + BC > seq_kv;

    for (int i = 0; i < n_iter; ++i) {
      // As attention_fa2.cu: STAGES-2 groups left in flight means tile i (and K, V) landed for this thread; the
      // barrier makes it everyone's, and frees tile i-1's slot (and the dSᵀ tile) for reuse.
      cp_async_wait<(STAGES >= 2 ? STAGES - 2 : 0)>();
      __syncthreads();
      if (STAGES > 1) {
        if (i + STAGES - 1 < n_iter) load_stage((i + STAGES - 1) % STAGES, i + STAGES - 1);
        cp_async_commit();
      } else {
        load_stage(0, i);
        cp_async_commit();
        cp_async_wait<0>();
        __syncthreads();
      }
      const uint32_t q_tile = ring + (STAGES > 1 ? i % STAGES : 0) * STAGE_BYTES, do_tile = q_tile + Q_BYTES;
      const float* lse_s = reinterpret_cast<const float*>(smem + (q_tile - k_tile) + 2 * Q_BYTES);
      const float* d_s = lse_s + BR;
      const int q0 = (qt_begin + i) * BR;

      // Sᵀ = K·Qᵀ: this warp's keys × the tile's queries; masked, then Pᵀ in place.
      float s[MT][BR / 8][4];
      zero_frags(s);
      mma_rows<MT, BR>(s, k_tile, warp_key0, q_tile, l);
      if (ragged || (CAUSAL && k0 + BC - 1 > q0 + offset)) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int n = 0; n < BR / 8; ++n)
#pragma unroll
            for (int x = 0; x < 4; ++x) {
              const int key = k0 + warp_key0 + mt * 16 + g + 8 * (x >> 1), query = q0 + n * 8 + 2 * t + (x & 1);
              if (key >= seq_kv || (CAUSAL && key > query + offset)) s[mt][n][x] = -INFINITY;
            }
      }
#pragma unroll
      for (int n = 0; n < BR / 8; ++n) {
        const float2 lse = *reinterpret_cast<const float2*>(lse_s + n * 8 + 2 * t);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int x = 0; x < 4; ++x)
            s[mt][n][x] = fast_exp2(fmaf(s[mt][n][x], scale_log2, -((x & 1) ? lse.y : lse.x) * LOG2E));
      }
      mma_frags<MT, BR>(dv, s, do_tile, l);  // dV += Pᵀ·dO

      // dPᵀ = V·dOᵀ, then dSᵀ = Pᵀ∘(dPᵀ − Δ) in its place; dK += dSᵀ·Q.
      float ds[MT][BR / 8][4];
      zero_frags(ds);
      mma_rows<MT, BR>(ds, v_tile, warp_key0, do_tile, l);
#pragma unroll
      for (int n = 0; n < BR / 8; ++n) {
        const float2 d = *reinterpret_cast<const float2*>(d_s + n * 8 + 2 * t);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int x = 0; x < 4; ++x) ds[mt][n][x] = s[mt][n][x] * (ds[mt][n][x] - ((x & 1) ? d.y : d.x));
      }
      mma_frags<MT, BR>(dk, ds, q_tile, l);

      if (DQ_ATOMIC) {
        // dSᵀ rounded as for dK (the same values), row = key, column = query; then dQ += dS·K.
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int n = 0; n < BR / 8; ++n) {
              const int key = warp_key0 + mt * 16 + g + 8 * h;
              asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(ds_tile + (uint32_t)(key * DS_ROW + n * 8 + 2 * t) * 2u),
                           "r"(pack2(ds[mt][n][2 * h], ds[mt][n][2 * h + 1])));
            }
        __syncthreads();
        add_dq(dq_h, ds_tile, k_tile, q0, seq_q, warp, lane, l);
      }
    }
    cp_async_commit();
    cp_async_wait<0>();  // no copy may outlive the head's pipeline (trailing empty groups, or none with n_iter 0)
  }  // the group's query heads

  store_frags(KV_ROWS(dK), dk, scale, k0 + warp_key0, seq_kv, lane);
  store_frags(KV_ROWS(dV), dv, 1.f, k0 + warp_key0, seq_kv, lane);
}

extern "C" __global__ void __launch_bounds__(NT, 1)
    attention_bwd_dq(const elem_t* __restrict__ Q, const elem_t* __restrict__ K, const elem_t* __restrict__ V,
                     const elem_t* __restrict__ dO, const float* __restrict__ LSE, const float* __restrict__ delta,
                     elem_t* __restrict__ dQ, int seq_q, int seq_kv, float scale_log2, float scale KV_GROUP_PARAM) {
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr uint32_t Q_BYTES = BC * ROW * 2, KV_BYTES = BR * ROW * 2;
  const uint32_t q_tile = smem_addr(smem), do_tile = q_tile + Q_BYTES, ring = do_tile + Q_BYTES;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, t = lane % 4, g = lane / 4;
  const Lanes l(lane);
  const size_t head = (size_t)blockIdx.z * gridDim.y + blockIdx.y;
  const int n_qblocks = (seq_q + BC - 1) / BC;
  const int q0 = (CAUSAL ? n_qblocks - 1 - (int)blockIdx.x : (int)blockIdx.x) * BC;  // causal: longest first
  const int warp_row0 = warp * 16 * MT;
  const int offset = seq_kv - seq_q;
  const size_t kv_head = KV_HEAD(head);
  const elem_t *Kh = KV_ROWS(K), *Vh = KV_ROWS(V);
  const int kv_end = CAUSAL ? min(seq_kv, q0 + BC + offset) : seq_kv;
  const int n_tiles = (kv_end + BR - 1) / BR;

  // This thread's rows: LSE (log2 units) and Δ; rows past seq_q read 0 (their Q and dO are zero-filled).
  float lse2[MT][2], dl[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = q0 + warp_row0 + mt * 16 + g + 8 * h;
      lse2[mt][h] = row < seq_q ? LSE[head * seq_q + row] * LOG2E : 0.f;
      dl[mt][h] = row < seq_q ? delta[head * seq_q + row] : 0.f;
    }

  auto load_kv = [&](int slot, int j) {
    load_tile<BR, NT>(ring + (2 * slot) * KV_BYTES, Kh, j * BR, seq_kv, threadIdx.x);
    load_tile<BR, NT>(ring + (2 * slot + 1) * KV_BYTES, Vh, j * BR, seq_kv, threadIdx.x);
  };
  load_tile<BC, NT>(q_tile, HEAD_ROWS(Q, seq_q), q0, seq_q, threadIdx.x);
  load_tile<BC, NT>(do_tile, HEAD_ROWS(dO, seq_q), q0, seq_q, threadIdx.x);
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < n_tiles) load_kv(s, s);
    cp_async_commit();
  }

  float dq[MT][DN][4];
  zero_frags(dq);
  for (int j = 0; j < n_tiles; ++j) {
    cp_async_wait<(STAGES >= 2 ? STAGES - 2 : 0)>();
    __syncthreads();
    if (STAGES > 1) {
      if (j + STAGES - 1 < n_tiles) load_kv((j + STAGES - 1) % STAGES, j + STAGES - 1);
      cp_async_commit();
    } else {
      load_kv(0, j);
      cp_async_commit();
      cp_async_wait<0>();
      __syncthreads();
    }
    const uint32_t k_tile = ring + 2 * (STAGES > 1 ? j % STAGES : 0) * KV_BYTES, v_tile = k_tile + KV_BYTES;
    const int kv0 = j * BR;

    float s[MT][BR / 8][4], ds[MT][BR / 8][4];
    zero_frags(s);
    zero_frags(ds);
    mma_rows<MT, BR>(s, q_tile, warp_row0, k_tile, l);
    mma_rows<MT, BR>(ds, do_tile, warp_row0, v_tile, l);
    const bool mask = kv0 + BR > seq_kv || (CAUSAL && kv0 + BR - 1 > q0 + offset);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int n = 0; n < BR / 8; ++n)
#pragma unroll
        for (int x = 0; x < 4; ++x) {
          const int h = x >> 1, key = kv0 + n * 8 + 2 * t + (x & 1), row = q0 + warp_row0 + mt * 16 + g + 8 * h;
          float p = fast_exp2(fmaf(s[mt][n][x], scale_log2, -lse2[mt][h]));
          if (mask && (key >= seq_kv || (CAUSAL && key > row + offset))) p = 0.f;
          ds[mt][n][x] = p * (ds[mt][n][x] - dl[mt][h]);
        }
    mma_frags<MT, BR>(dq, ds, k_tile, l);  // dQ += dS·K
  }
  cp_async_commit();
  cp_async_wait<0>();
  store_frags(HEAD_ROWS(dQ, seq_q), dq, scale, q0 + warp_row0, seq_q, lane);
}
