// Warp-level pieces of the attention backward (attention_backward.cu) on top of attention_mma.cuh: the two shapes
// of tile product it is made of, and fp32 row statistics copied into shared memory.
// The including template defines HEAD_DIM, SWIZZLE and DTYPE, then includes attention_mma.cuh, then this.
#pragma once

#define DN (HEAD_DIM / 8)  // n8 tiles across the head dimension

// ldmatrix lane roles, as in attention_fa2.cu. A operand (16x16, rows non-transposed): row lane%16, chunk lane/16.
// B operand from rows that are its n index (two n8 tiles, non-transposed), or A operand from a tile stored
// transposed: row (lane%8) + 8·(lane/16), chunk (lane/8)%2. B operand from rows that are its k index (two n8
// tiles, ldmatrix.trans): row (lane%8) + 8·((lane/8)%2), chunk lane/16.
struct Lanes {
  int a_row, a_chunk, n_row, n_chunk, k_row, k_chunk;
  __device__ __forceinline__ explicit Lanes(int lane)
      : a_row(lane % 16), a_chunk(lane / 16), n_row((lane % 8) + 8 * (lane / 16)), n_chunk((lane / 8) % 2),
        k_row((lane % 8) + 8 * ((lane / 8) % 2)), k_chunk(lane / 16) {}
};

// acc[TM][N/8] += A·Bᵀ over the head dimension: A is 16·TM rows of tile `a` from row a0, B the N rows of tile `b`
// (both (rows, HEAD_DIM) tiles in the ROW layout). S = Q·Kᵀ, dP = dO·Vᵀ, and their transposes K·Qᵀ, V·dOᵀ.
template <int TM, int N>
__device__ __forceinline__ void mma_rows(float (&acc)[TM][N / 8][4], uint32_t a, int a0, uint32_t b, const Lanes& l) {
#pragma unroll
  for (int kk = 0; kk < HEAD_DIM / 16; ++kk) {
    uint32_t af[TM][4];
#pragma unroll
    for (int mt = 0; mt < TM; ++mt) ldmatrix_x4(af[mt], a + tile_offset(a0 + mt * 16 + l.a_row, 2 * kk + l.a_chunk));
#pragma unroll
    for (int n = 0; n < N / 8; n += 2) {
      uint32_t bf[4];
      ldmatrix_x4(bf, b + tile_offset(n * 8 + l.n_row, 2 * kk + l.n_chunk));
#pragma unroll
      for (int mt = 0; mt < TM; ++mt) {
        mma16816(acc[mt][n], af[mt], bf[0], bf[1]);
        mma16816(acc[mt][n + 1], af[mt], bf[2], bf[3]);
      }
    }
  }
}

// acc[TM][DN] += X·B: X (16·TM × K) in fp32 C fragments, rounded to the input type into A fragments in registers;
// B the K rows of tile `b` (a (rows, HEAD_DIM) tile), read transposed. dV += Pᵀ·dO, dK += dSᵀ·Q, dQ += dS·K.
template <int TM, int K>
__device__ __forceinline__ void mma_frags(float (&acc)[TM][DN][4], const float (&x)[TM][K / 8][4], uint32_t b,
                                          const Lanes& l) {
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) {
    uint32_t xf[TM][4];
#pragma unroll
    for (int mt = 0; mt < TM; ++mt) {
      xf[mt][0] = pack2(x[mt][2 * kk][0], x[mt][2 * kk][1]);
      xf[mt][1] = pack2(x[mt][2 * kk][2], x[mt][2 * kk][3]);
      xf[mt][2] = pack2(x[mt][2 * kk + 1][0], x[mt][2 * kk + 1][1]);
      xf[mt][3] = pack2(x[mt][2 * kk + 1][2], x[mt][2 * kk + 1][3]);
    }
#pragma unroll
    for (int n = 0; n < DN; n += 2) {
      uint32_t bf[4];
      ldmatrix_x4_trans(bf, b + tile_offset(kk * 16 + l.k_row, n + l.k_chunk));
#pragma unroll
      for (int mt = 0; mt < TM; ++mt) {
        mma16816(acc[mt][n], xf[mt], bf[0], bf[1]);
        mma16816(acc[mt][n + 1], xf[mt], bf[2], bf[3]);
      }
    }
  }
}

template <int TM, int N>
__device__ __forceinline__ void zero_frags(float (&acc)[TM][N][4]) {
#pragma unroll
  for (int mt = 0; mt < TM; ++mt)
#pragma unroll
    for (int n = 0; n < N; ++n) acc[mt][n][0] = acc[mt][n][1] = acc[mt][n][2] = acc[mt][n][3] = 0.f;
}

// 4 bytes global → shared (cp.async.ca: .cg copies 16 bytes only); src_bytes 0 zero-fills.
__device__ __forceinline__ void cp_async4(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}

// Entries [row0, row0 + ROWS) of an fp32 vector of `n` into shared memory; entries at or past n read as 0.
template <int ROWS, int THREADS>
__device__ __forceinline__ void load_floats(uint32_t dst, const float* __restrict__ src, int row0, int n, int me) {
#pragma unroll
  for (int it = 0; it < (ROWS + THREADS - 1) / THREADS; ++it) {
    const int i = me + it * THREADS;
    if (ROWS % THREADS == 0 || i < ROWS) {
      const bool in = row0 + i < n;
      cp_async4(dst + 4u * i, src + (in ? row0 + i : 0), in ? 4 : 0);
    }
  }
}

// The C fragments of 16·TM rows × 8·N columns, scaled and rounded to the input type, stored to the rows of a
// (seq, HEAD_DIM) matrix below `seq` (row0: the first row's index).
template <int TM, int N>
__device__ __forceinline__ void store_frags(elem_t* __restrict__ out, const float (&acc)[TM][N][4], float scale,
                                            int row0, int seq, int lane) {
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int mt = 0; mt < TM; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = row0 + mt * 16 + g + 8 * h;
      if (row >= seq) continue;
#pragma unroll
      for (int n = 0; n < N; ++n)
        *reinterpret_cast<uint32_t*>(out + (size_t)row * HEAD_DIM + n * 8 + 2 * t) =
            pack2(acc[mt][n][2 * h] * scale, acc[mt][n][2 * h + 1] * scale);
    }
}
