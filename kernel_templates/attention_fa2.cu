// FlashAttention-2 forward, fp16 / bf16 on tensor cores (mma.sync m16n8k16, fp32 accumulation), sm_80+.
//
//   O[b,h,i,:] = softmax_j(Q[b,h,i,:]·K[b,h,j,:] · scale  [+ causal mask])·V[b,h,j,:]      LSE[b,h,i] (natural log)
//
// Layout (batch, heads, seq, HEAD_DIM), contiguous; seq_q and seq_kv independent and arbitrary (ragged tiles are
// zero-filled by cp.async and masked). Causal masks are aligned bottom-right (key j is seen by query i iff
// j <= i + seq_kv - seq_q), as torch does; the space refuses seq_q > seq_kv with causal (rows with no key).
// KV_GROUPED: k and v have heads / kv_group heads; query head h reads kv head h / kv_group (attention_problem.cuh).
//
// A block owns BR query rows of one (batch, head): WARPS warps, each 16·MT rows (MT m16 tiles). It walks the KV
// sequence in tiles of BC keys; K and V tiles stream through a STAGES-deep cp.async ring in shared memory. Per
// tile: S = Q·Kᵀ (ldmatrix of K, non-transposed), online softmax in registers (exp2 with log2e folded into the
// scale; the running max and sum live in the lanes that own the rows), P rounded to the input type and reused
// in registers as the A operand of O += P·V (ldmatrix.trans of V). Causal: tiles entirely above the diagonal are
// never loaded; masks are applied only on tiles that cross the diagonal or the end of the sequence.
//
// Tunables (defaults = autotune's default configuration):
//   BC        keys per KV tile (16·k)
//   WARPS, MT warps per block, m16 tiles per warp (BR = 16·MT·WARPS query rows per block)
//   STAGES    depth of the K/V cp.async ring (1: load then compute)
//   Q_REGS    1: Q fragments loaded once into registers; 0: re-read from shared memory (ldmatrix) per KV tile
//   SWIZZLE   1: XOR-swizzled 16-byte chunks (HEAD_DIM 64 or 128); 0: rows padded by 16 bytes
//   REVERSE   causal: 1 launches the longest (bottom) query blocks first (better tail), 0 in order
// Problem constants (fixed by the shape, never tuned): HEAD_DIM, CAUSAL, KV_GROUPED, DTYPE (1 fp16, 2 bf16).

#include "attention_problem.cuh"
#include "half_dtype.cuh"

#ifndef BC
#define BC 64
#endif
#ifndef WARPS
#define WARPS 4
#endif
#ifndef MT
#define MT 1
#endif
#ifndef STAGES
#define STAGES 2
#endif
#ifndef Q_REGS
#define Q_REGS 1
#endif
#ifndef SWIZZLE
#define SWIZZLE 0
#endif
#ifndef REVERSE
#define REVERSE 0
#endif

#define NT (32 * WARPS)
#define BR (16 * MT * WARPS)
#define KT (HEAD_DIM / 16)  // k16 steps of S = Q·Kᵀ
#define DN (HEAD_DIM / 8)   // n8 tiles of O
#define SN (BC / 8)         // n8 tiles of S

static_assert(HEAD_DIM % 16 == 0 && HEAD_DIM >= 32 && HEAD_DIM <= 256, "HEAD_DIM is a multiple of 16 in [32, 256]");
static_assert(BC % 16 == 0 && BC >= 16, "BC is a multiple of 16");
static_assert(STAGES >= 1 && STAGES <= 4, "STAGES is 1..4");

#include "attention_mma.cuh"
#include "online_softmax.cuh"

static_assert(MT * (DN * 4 + SN * 4 + (Q_REGS ? KT * 4 : 0)) <= 136, "register tiles would spill");  // measured with ptxas

extern "C" __global__ void __launch_bounds__(NT, 1)  // without the 1, ptxas capped 256-thread blocks at 80 registers and spilled
    attention_fa2(const elem_t* __restrict__ Q, const elem_t* __restrict__ K, const elem_t* __restrict__ V,
                  elem_t* __restrict__ O, float* __restrict__ LSE, int seq_q, int seq_kv, float scale_log2 KV_GROUP_PARAM) {
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t q_tile = smem_addr(smem);
  const uint32_t kv_base = q_tile + BR * ROW * 2;
  constexpr uint32_t TILE_BYTES = BC * ROW * 2;  // one K or V tile

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;  // mma fragment coordinates: row group, thread in group
  const int n_qblocks = (seq_q + BR - 1) / BR;
  const int qblock = (CAUSAL && REVERSE) ? n_qblocks - 1 - (int)blockIdx.x : (int)blockIdx.x;
  const int q0 = qblock * BR;
  const size_t head = (size_t)blockIdx.z * gridDim.y + blockIdx.y;
  const elem_t* Qh = Q + head * seq_q * HEAD_DIM;
  const elem_t* Kh = K + KV_HEAD(head) * seq_kv * HEAD_DIM;
  const elem_t* Vh = V + KV_HEAD(head) * seq_kv * HEAD_DIM;
  const int offset = seq_kv - seq_q;  // causal: query i sees keys j <= i + offset

  // KV tiles this block needs: causal stops after the tile holding its last row's diagonal.
  int kv_end = seq_kv;
  if (CAUSAL) kv_end = min(seq_kv, q0 + BR + offset);
  const int n_tiles = (kv_end + BC - 1) / BC;

  // Q is committed with the first K/V tile (one group: the waits below stay in step).
  load_tile<BR, NT>(q_tile, Qh, q0, seq_q, threadIdx.x);
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < n_tiles) {
      load_tile<BC, NT>(kv_base + (2 * s) * TILE_BYTES, Kh, s * BC, seq_kv, threadIdx.x);
      load_tile<BC, NT>(kv_base + (2 * s + 1) * TILE_BYTES, Vh, s * BC, seq_kv, threadIdx.x);
    }
    cp_async_commit();
  }

  // ldmatrix lane roles. A operand (16x16 of Q): row lane%16, chunk lane/16. K (non-trans, two n8 tiles):
  // key (lane%8) + 8·(lane/16), chunk (lane/8)%2. V (trans, two n8 tiles): key (lane%8) + 8·((lane/8)%2),
  // chunk lane/16.
  const int a_row = lane % 16, a_chunk = lane / 16;
  const int k_row = (lane % 8) + 8 * (lane / 16), k_chunk = (lane / 8) % 2;
  const int v_row = (lane % 8) + 8 * ((lane / 8) % 2), v_chunk = lane / 16;
  const int warp_row0 = warp * 16 * MT;

  uint32_t qf[Q_REGS ? MT : 1][Q_REGS ? KT : 1][4];
  float o[MT][DN][4];
  float m[MT][2], l[MT][2];  // running max (log2 units, scaled) and sum of the rows g and g+8 of each m-tile
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int n = 0; n < DN; ++n) o[mt][n][0] = o[mt][n][1] = o[mt][n][2] = o[mt][n][3] = 0.f;
    m[mt][0] = m[mt][1] = -INFINITY;
    l[mt][0] = l[mt][1] = 0.f;
  }

  for (int j = 0; j < n_tiles; ++j) {
    // Groups committed so far: STAGES-1 in the prologue (the first with Q), one per iteration. Leaving STAGES-2
    // of them in flight means Q and tile j have landed (this thread's copies) ...
    cp_async_wait<(STAGES >= 2 ? STAGES - 2 : 0)>();
    __syncthreads();  // ... and everyone's; and every warp is done with tile j-1, whose slot is refilled below
    if (STAGES > 1) {
      const int next = j + STAGES - 1;
      if (next < n_tiles) {
        const int slot = next % STAGES;
        load_tile<BC, NT>(kv_base + (2 * slot) * TILE_BYTES, Kh, next * BC, seq_kv, threadIdx.x);
        load_tile<BC, NT>(kv_base + (2 * slot + 1) * TILE_BYTES, Vh, next * BC, seq_kv, threadIdx.x);
      }
      cp_async_commit();
    } else {
      load_tile<BC, NT>(kv_base, Kh, j * BC, seq_kv, threadIdx.x);
      load_tile<BC, NT>(kv_base + TILE_BYTES, Vh, j * BC, seq_kv, threadIdx.x);
      cp_async_commit();
      cp_async_wait<0>();
      __syncthreads();
    }
    if (Q_REGS && j == 0) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int kk = 0; kk < KT; ++kk)
          ldmatrix_x4(qf[Q_REGS ? mt : 0][Q_REGS ? kk : 0],
                      q_tile + tile_offset(warp_row0 + mt * 16 + a_row, 2 * kk + a_chunk));
    }
    const int slot = STAGES > 1 ? j % STAGES : 0;
    const uint32_t k_tile = kv_base + (2 * slot) * TILE_BYTES;
    const uint32_t v_tile = k_tile + TILE_BYTES;
    const int kv0 = j * BC;

    // S = Q·Kᵀ for this warp's rows and the tile's BC keys.
    float s[MT][SN][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int n = 0; n < SN; ++n) s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < KT; ++kk) {
      uint32_t a[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        if (Q_REGS) {
#pragma unroll
          for (int x = 0; x < 4; ++x) a[mt][x] = qf[Q_REGS ? mt : 0][Q_REGS ? kk : 0][x];
        } else {
          ldmatrix_x4(a[mt], q_tile + tile_offset(warp_row0 + mt * 16 + a_row, 2 * kk + a_chunk));
        }
      }
#pragma unroll
      for (int n = 0; n < SN; n += 2) {
        uint32_t b[4];
        ldmatrix_x4(b, k_tile + tile_offset(n * 8 + k_row, 2 * kk + k_chunk));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma16816(s[mt][n], a[mt], b[0], b[1]);
          mma16816(s[mt][n + 1], a[mt], b[2], b[3]);
        }
      }
    }

    // Masks only where the tile crosses the end of the sequence or (causal) the block's diagonal.
    const bool ragged = kv0 + BC > seq_kv;
    const bool diagonal = CAUSAL && kv0 + BC - 1 > q0 + offset;
    if (ragged || diagonal) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int n = 0; n < SN; ++n)
#pragma unroll
          for (int x = 0; x < 4; ++x) {
            const int col = kv0 + n * 8 + 2 * t + (x & 1);
            const int row = q0 + warp_row0 + mt * 16 + g + 8 * (x >> 1);
            if (col >= seq_kv || (CAUSAL && col > row + offset)) s[mt][n][x] = -INFINITY;
          }
    }

    // Online softmax: new row max, rescale O and the running sum, P = exp2(S·scale_log2 − max).
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float mx = -INFINITY;
#pragma unroll
        for (int n = 0; n < SN; ++n) mx = fmaxf(mx, fmaxf(s[mt][n][2 * h], s[mt][n][2 * h + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        float m_use;
        const float alpha = online_max(m[mt][h], mx * scale_log2, m_use, [](float x) { return fast_exp2(x); });
        float sum = 0.f;
#pragma unroll
        for (int n = 0; n < SN; ++n) {
          const float p0 = fast_exp2(fmaf(s[mt][n][2 * h], scale_log2, -m_use));
          const float p1 = fast_exp2(fmaf(s[mt][n][2 * h + 1], scale_log2, -m_use));
          s[mt][n][2 * h] = p0;
          s[mt][n][2 * h + 1] = p1;
          sum += p0 + p1;
        }
        l[mt][h] = l[mt][h] * alpha + sum;  // per-lane partial sum: reduced across the quad at the end
#pragma unroll
        for (int n = 0; n < DN; ++n) {
          o[mt][n][2 * h] *= alpha;
          o[mt][n][2 * h + 1] *= alpha;
        }
      }

    // O += P·V: P (C fragments of S) becomes A fragments in registers, V through ldmatrix.trans.
#pragma unroll
    for (int kk = 0; kk < BC / 16; ++kk) {
      uint32_t p[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        p[mt][0] = pack2(s[mt][2 * kk][0], s[mt][2 * kk][1]);
        p[mt][1] = pack2(s[mt][2 * kk][2], s[mt][2 * kk][3]);
        p[mt][2] = pack2(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
        p[mt][3] = pack2(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
      }
#pragma unroll
      for (int n = 0; n < DN; n += 2) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, v_tile + tile_offset(kk * 16 + v_row, n + v_chunk));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma16816(o[mt][n], p[mt], b[0], b[1]);
          mma16816(o[mt][n + 1], p[mt], b[2], b[3]);
        }
      }
    }
  }
  cp_async_wait<0>();  // no copy may outlive the block (trailing empty groups)

  // Epilogue: O / l in the output type, LSE = ln(sum) + max in natural-log units.
  const float LN2 = 0.6931471805599453f;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float sum = l[mt][h];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const int row = q0 + warp_row0 + mt * 16 + g + 8 * h;
      if (row >= seq_q) continue;
      const float inv = 1.f / sum;
      elem_t* out = O + (head * seq_q + row) * HEAD_DIM;
#pragma unroll
      for (int n = 0; n < DN; ++n) {
        const uint32_t v = pack2(o[mt][n][2 * h] * inv, o[mt][n][2 * h + 1] * inv);
        *reinterpret_cast<uint32_t*>(out + n * 8 + 2 * t) = v;
      }
      if (t == 0) LSE[head * seq_q + row] = (m[mt][h] + __log2f(sum)) * LN2;
    }
}
