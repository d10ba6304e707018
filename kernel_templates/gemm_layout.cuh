// The small kernels by which a GEMM template serves the other operand layouts and the bias of the gemm_nt,
// gemm_tn, linear and linear_gelu families (autotune/spaces/gemm_layouts.py): an algorithm that reads only
// row-major A (M×K) and B (K×N) gets a transposed copy of the operand stored the other way (gemm_transpose) first,
// and one without a bias epilogue gets gemm_bias_add after it (linear_gelu: gemm_bias_gelu.cuh). The
// layout_gemm_*.cu templates are the GEMM templates with these.
// Also the copy into rows of whole 16 bytes (gemm_pad_rows) by which the TMA kernel takes any N and K
// (autotune/spaces/gemm_wgmma_tma_padded.py).
#pragma once
#include <stdint.h>

#include "dtype.cuh"

#define TRANSPOSE_TILE 32
#define TRANSPOSE_ROWS 8  // threads per block: TRANSPOSE_TILE × TRANSPOSE_ROWS

// dst (cols × rows) = srcᵀ, src row-major rows × cols; 32×32 tiles through shared memory (padded against bank
// conflicts), both sides read and written along rows. Grid: (⌈cols/32⌉, min(⌈rows/32⌉, 65535)); a block walks the
// tile rows blockIdx.y, + gridDim.y, … (gridDim.y's limit would otherwise cap rows at about 2M).
extern "C" __global__ void __launch_bounds__(TRANSPOSE_TILE* TRANSPOSE_ROWS)
    gemm_transpose(const elem_t* __restrict__ src, elem_t* __restrict__ dst, int rows, int cols) {
  __shared__ elem_t tile[TRANSPOSE_TILE][TRANSPOSE_TILE + 1];
  const int c0 = blockIdx.x * TRANSPOSE_TILE;
  const int x = threadIdx.x % TRANSPOSE_TILE, y = threadIdx.x / TRANSPOSE_TILE;
  for (int r0 = blockIdx.y * TRANSPOSE_TILE; r0 < rows; r0 += gridDim.y * TRANSPOSE_TILE) {
#pragma unroll
    for (int j = y; j < TRANSPOSE_TILE; j += TRANSPOSE_ROWS) {
      const int r = r0 + j, c = c0 + x;
      if (r < rows && c < cols) tile[j][x] = src[(size_t)r * cols + c];
    }
    __syncthreads();
#pragma unroll
    for (int j = y; j < TRANSPOSE_TILE; j += TRANSPOSE_ROWS) {
      const int c = c0 + j, r = r0 + x;
      if (c < cols && r < rows) dst[(size_t)c * rows + r] = tile[x][j];
    }
    __syncthreads();  // the tile is refilled by the next row of tiles
  }
}

// C (M×N) += bias (N) in fp32, rounded once more to the element type (the GEMM's output was rounded already: a
// fused epilogue, where an algorithm has one, rounds once).
extern "C" __global__ void __launch_bounds__(256)
    gemm_bias_add(elem_t* __restrict__ C, const elem_t* __restrict__ bias, long long mn, int N) {
  const long long stride = (long long)gridDim.x * 256;
  for (long long i = (long long)blockIdx.x * 256 + threadIdx.x; i < mn; i += stride)
    C[i] = from_f32<elem_t>(to_f32(C[i]) + to_f32(bias[i % N]));
}

// dst (rows × ld) = src (rows × cols, dense, 16-bit elements, any alignment), each row zero-padded to ld: TMA
// strides only rows of whole 16 bytes (ld a multiple of 8, dst 16-byte aligned). A thread writes 8 elements as one
// 16-byte store, read element by element. Grid: (⌈ld/2048⌉, min(rows, 65535)); a block walks rows blockIdx.y,
// + gridDim.y, …
extern "C" __global__ void __launch_bounds__(256)
    gemm_pad_rows(const uint16_t* __restrict__ src, uint16_t* __restrict__ dst, int rows, int cols, int ld) {
  const int c0 = (blockIdx.x * 256 + threadIdx.x) * 8;
  if (c0 >= ld) return;
  for (int r = blockIdx.y; r < rows; r += gridDim.y) {
    const uint16_t* s = src + (size_t)r * cols;
    uint32_t w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int c = c0 + 2 * i;
      const uint32_t lo = c < cols ? s[c] : 0u, hi = c + 1 < cols ? s[c + 1] : 0u;
      w[i] = lo | (hi << 16);
    }
    *reinterpret_cast<uint4*>(dst + (size_t)r * ld + c0) = make_uint4(w[0], w[1], w[2], w[3]);
  }
}
