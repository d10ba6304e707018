// Attention forward in fp32 on the SIMT cores (FFMA): the reference algorithm, and the float32 answer.
//
//   O[b,h,i,:] = softmax_j(Q[b,h,i,:]·K[b,h,j,:] · scale  [+ causal mask])·V[b,h,j,:]      LSE[b,h,i] (natural log)
//
// Layout (batch, heads, seq, HEAD_DIM), contiguous; any seq_q, seq_kv; causal masks aligned bottom-right
// (query i sees keys j <= i + seq_kv - seq_q). KV_GROUPED: k and v have heads / kv_group heads, and query head h
// reads kv head h / kv_group (attention_problem.cuh).
//
// A block owns WARPS·ROWS query rows of one (batch, head); each warp ROWS of them. K and V tiles of BC = 32·KPL
// keys are staged in shared memory (K rows padded by one float: lane-per-key dot products are conflict-free).
// Scores: lane l computes the keys l, l+32, … of the tile for each of the warp's rows (Q rows in shared memory,
// broadcast reads). Online softmax per row with warp shuffles; O: lane l accumulates dims l, l+32, … of each
// row, P broadcast by shuffles.
//
// Tunables: WARPS (warps per block), ROWS (query rows per warp), KPL (keys per lane per tile).
// Problem constants: HEAD_DIM (a multiple of 32), CAUSAL, KV_GROUPED.
#include "attention_problem.cuh"
#include "dtype.cuh"
#include "online_softmax.cuh"

#ifndef WARPS
#define WARPS 4
#endif
#ifndef ROWS
#define ROWS 2
#endif
#ifndef KPL
#define KPL 1
#endif

#define NT (32 * WARPS)
#define BR (WARPS * ROWS)
#define BC (32 * KPL)
#define DPL (HEAD_DIM / 32)  // dims per lane
#define KROW (HEAD_DIM + 1)

static_assert(HEAD_DIM % 32 == 0, "the SIMT kernel needs HEAD_DIM a multiple of 32");
static_assert(ROWS * (KPL + DPL) <= 128, "per-lane state would spill");

extern "C" __global__ void __launch_bounds__(NT, 1)  // without the 1, ptxas capped 256-thread blocks at 80 registers and spilled
    attention_simt(const float* __restrict__ Q, const float* __restrict__ K, const float* __restrict__ V,
                   float* __restrict__ O, float* __restrict__ LSE, int seq_q, int seq_kv, float scale_log2 KV_GROUP_PARAM) {
  extern __shared__ float sm[];
  float* qs = sm;                    // BR x HEAD_DIM
  float* ks = qs + BR * HEAD_DIM;    // BC x KROW
  float* vs = ks + BC * KROW;        // BC x HEAD_DIM
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const size_t head = (size_t)blockIdx.z * gridDim.y + blockIdx.y;
  const int q0 = blockIdx.x * BR;
  const float* Qh = Q + head * seq_q * HEAD_DIM;
  const float* Kh = K + KV_HEAD(head) * seq_kv * HEAD_DIM;
  const float* Vh = V + KV_HEAD(head) * seq_kv * HEAD_DIM;
  const int offset = seq_kv - seq_q;
  int kv_end = seq_kv;
  if (CAUSAL) kv_end = min(seq_kv, q0 + BR + offset);

  for (int i = threadIdx.x; i < BR * HEAD_DIM; i += NT) {
    const int r = q0 + i / HEAD_DIM;
    qs[i] = r < seq_q ? Qh[(size_t)r * HEAD_DIM + i % HEAD_DIM] : 0.f;
  }
  float o[ROWS][DPL], m[ROWS], l[ROWS];
#pragma unroll
  for (int r = 0; r < ROWS; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.f;
#pragma unroll
    for (int d = 0; d < DPL; ++d) o[r][d] = 0.f;
  }

  for (int kv0 = 0; kv0 < kv_end; kv0 += BC) {
    __syncthreads();  // the previous tile is consumed (and, the first time, Q is stored)
    for (int i = threadIdx.x; i < BC * HEAD_DIM; i += NT) {
      const int r = i / HEAD_DIM, d = i % HEAD_DIM;
      const bool in = kv0 + r < seq_kv;
      ks[r * KROW + d] = in ? Kh[(size_t)(kv0 + r) * HEAD_DIM + d] : 0.f;
      vs[i] = in ? Vh[(size_t)(kv0 + r) * HEAD_DIM + d] : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
      const int row_local = warp * ROWS + r;
      const int row = q0 + row_local;
      const float* q = qs + row_local * HEAD_DIM;
      float s[KPL];
      float mx = -INFINITY;
#pragma unroll
      for (int c = 0; c < KPL; ++c) {
        const int key = c * 32 + lane;
        const float* k = ks + key * KROW;
        float acc = 0.f;
#pragma unroll 8
        for (int d = 0; d < HEAD_DIM; ++d) acc = fmaf(q[d], k[d], acc);
        const int col = kv0 + key;
        const bool masked = col >= seq_kv || (CAUSAL && col > row + offset);
        s[c] = masked ? -INFINITY : acc * scale_log2;
        mx = fmaxf(mx, s[c]);
      }
#pragma unroll
      for (int w = 16; w > 0; w >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, w));
      float m_use;
      const float alpha = online_max(m[r], mx, m_use, [](float x) { return exp2f(x); });
      float sum = 0.f;
#pragma unroll
      for (int c = 0; c < KPL; ++c) {
        s[c] = exp2f(s[c] - m_use);
        sum += s[c];
      }
      l[r] = l[r] * alpha + sum;  // per-lane partial: reduced over the warp at the end
#pragma unroll
      for (int d = 0; d < DPL; ++d) o[r][d] *= alpha;
#pragma unroll
      for (int c = 0; c < KPL; ++c)
        for (int src = 0; src < 32; ++src) {
          const float p = __shfl_sync(0xffffffffu, s[c], src);
          const float* v = vs + (c * 32 + src) * HEAD_DIM;
#pragma unroll
          for (int d = 0; d < DPL; ++d) o[r][d] = fmaf(p, v[d * 32 + lane], o[r][d]);
        }
    }
  }

  const float LN2 = 0.6931471805599453f;
#pragma unroll
  for (int r = 0; r < ROWS; ++r) {
    const int row = q0 + warp * ROWS + r;
    float sum = l[r];
#pragma unroll
    for (int w = 16; w > 0; w >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, w);
    if (row >= seq_q) continue;
    const float inv = 1.f / sum;
    float* out = O + (head * seq_q + row) * HEAD_DIM;
#pragma unroll
    for (int d = 0; d < DPL; ++d) out[d * 32 + lane] = o[r][d] * inv;
    if (lane == 0) LSE[head * seq_q + row] = (m[r] + log2f(sum)) * LN2;
  }
}
