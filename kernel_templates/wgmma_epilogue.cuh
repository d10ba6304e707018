// Storing a warpgroup's wgmma accumulators (fp32) to a row-major C of 16-bit elements, straight from registers.
//
// Fragment (kernel_templates/wgmma_sm90.cuh): for each m64 slice, warp w of the warpgroup owns rows 16w..16w+15;
// lane l holds, per 8-column group j, d[4j+0..1] = row 16w + l/4, columns 8j + 2(l%4) + {0,1}, and d[4j+2..3]
// the same columns 8 rows below.
//
// Interior tiles (and 16-byte aligned rows): the four lanes of a quad exchange their pairs of four consecutive
// column groups (a 4×4 transpose by shuffles), after which each lane holds 8 consecutive columns and stores them
// as one 16-byte vector: a warp's store covers 64 contiguous bytes of each of 8 rows. Edge tiles store guarded
// pairs.
#pragma once
#include <stdint.h>

#include "dtype.cuh"

// x, y rounded to the element type and packed (x in the low half: the lower address).
__device__ __forceinline__ uint32_t pack2(float x, float y) {
  uint32_t d;
#if DTYPE == 2
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(y), "f"(x));
#else
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(y), "f"(x));
#endif
  return d;
}

__device__ __forceinline__ void store_pair(elem_t* __restrict__ C, int M, int N, int row, int col, float x,
                                           float y, bool paired) {
  if (row >= M) return;
  elem_t* p = C + (size_t)row * N + col;
  if (paired && col + 1 < N) {
    *reinterpret_cast<uint32_t*>(p) = pack2(x, y);
  } else {
    if (col < N) p[0] = from_f32<elem_t>(x);
    if (col + 1 < N) p[1] = from_f32<elem_t>(y);
  }
}

// One swap of a transpose across lanes l and l ^ mask: the `upper` lane trades its (a, b) for the other's (c, d),
// which gets (a, b) in their place.
__device__ __forceinline__ void trade_pairs(bool upper, int mask, uint32_t& a, uint32_t& b, uint32_t& c,
                                            uint32_t& d) {
  const uint32_t r0 = __shfl_xor_sync(0xffffffffu, upper ? a : c, mask);
  const uint32_t r1 = __shfl_xor_sync(0xffffffffu, upper ? b : d, mask);
  a = upper ? r0 : a;
  b = upper ? r1 : b;
  c = upper ? c : r0;
  d = upper ? d : r1;
}

template <int MT, int TN>
__device__ __forceinline__ void zero_fragments(float (&acc)[MT][TN / 2]) {
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int j = 0; j < TN / 2; ++j) acc[m][j] = 0.f;
}

// MT m64 slices × TN columns of one warpgroup, whose first row is row0 and first column col0.
template <int MT, int TN>
__device__ __forceinline__ void store_fragments(const float (&acc)[MT][TN / 2], elem_t* __restrict__ C, int M,
                                                int N, int row0, int col0) {
  const int warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32, q = lane % 4;
  const bool interior = row0 + 64 * MT <= M && col0 + TN <= N && (N % 8) == 0 &&
                        (reinterpret_cast<uintptr_t>(C) & 15) == 0;
  if (interior) {
#pragma unroll
    for (int m = 0; m < MT; ++m) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = row0 + m * 64 + warp * 16 + lane / 4 + 8 * h;
        elem_t* out = C + (size_t)row * N + col0;
#pragma unroll
        for (int jb = 0; jb < TN / 32; ++jb) {
          const float* a = &acc[m][16 * jb + 2 * h];  // groups 4jb..4jb+3, 4 floats apart
          uint32_t v0 = pack2(a[0], a[1]), v1 = pack2(a[4], a[5]), v2 = pack2(a[8], a[9]),
                   v3 = pack2(a[12], a[13]);
          // Lane q holds row q of a 4×4 matrix (group i, its column pair q); transposed in two swaps: 2×2 blocks
          // across lanes q^2, then elements across lanes q^1. Then lane q holds group q, pairs 0..3 in order.
          trade_pairs(lane & 2, 2, v0, v1, v2, v3);
          trade_pairs(lane & 1, 1, v0, v2, v1, v3);
          *reinterpret_cast<uint4*>(out + 8 * (4 * jb + q)) = make_uint4(v0, v1, v2, v3);
        }
      }
    }
    return;
  }
  const bool paired = (N % 2) == 0 && (reinterpret_cast<uintptr_t>(C) & 3) == 0;
#pragma unroll
  for (int m = 0; m < MT; ++m) {
    const int row = row0 + m * 64 + warp * 16 + lane / 4;
#pragma unroll
    for (int j = 0; j < TN / 8; ++j) {
      const int col = col0 + j * 8 + 2 * q;
      store_pair(C, M, N, row, col, acc[m][4 * j], acc[m][4 * j + 1], paired);
      store_pair(C, M, N, row + 8, col, acc[m][4 * j + 2], acc[m][4 * j + 3], paired);
    }
  }
}

// The same fragments as fp32, for a split-K partial (S×M×N floats): pairs of columns as 8-byte stores.
template <int MT, int TN>
__device__ __forceinline__ void store_fragments_f32(const float (&acc)[MT][TN / 2], float* __restrict__ P, int M,
                                                    int N, int row0, int col0) {
  const int warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32, q = lane % 4;
  const bool paired = (N % 2) == 0;
#pragma unroll
  for (int m = 0; m < MT; ++m) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = row0 + m * 64 + warp * 16 + lane / 4 + 8 * h;
      if (row >= M) continue;
      float* out = P + (size_t)row * N;
#pragma unroll
      for (int j = 0; j < TN / 8; ++j) {
        const int col = col0 + j * 8 + 2 * q;
        const float x = acc[m][4 * j + 2 * h], y = acc[m][4 * j + 2 * h + 1];
        if (paired && col + 1 < N) {
          *reinterpret_cast<float2*>(out + col) = make_float2(x, y);
        } else {
          if (col < N) out[col] = x;
          if (col + 1 < N) out[col + 1] = y;
        }
      }
    }
  }
}

// acc += bias[col] for each accumulator of MT m64 slices × TN columns whose first column is col0 (columns past N
// add nothing: the store drops them).
template <int MT, int TN>
__device__ __forceinline__ void add_bias(float (&acc)[MT][TN / 2], const elem_t* __restrict__ bias, int N,
                                         int col0) {
  const int q = (threadIdx.x % 32) % 4;
#pragma unroll
  for (int j = 0; j < TN / 8; ++j) {
    const int col = col0 + j * 8 + 2 * q;
    const float b0 = col < N ? to_f32(bias[col]) : 0.f, b1 = col + 1 < N ? to_f32(bias[col + 1]) : 0.f;
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      acc[m][4 * j] += b0;
      acc[m][4 * j + 1] += b1;
      acc[m][4 * j + 2] += b0;
      acc[m][4 * j + 3] += b1;
    }
  }
}
