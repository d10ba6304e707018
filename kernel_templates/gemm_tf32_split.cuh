// 3×TF32 operands for the tensor cores: each fp32 x as big = tf32(x) and small = tf32(x − big), both rounded to
// nearest (cvt.rna.tf32.f32; the residual x − big is exact in fp32), so that big + small carries x to ~2^-22.
// A pre-pass of the wgmma GEMM (kernel_templates/gemm_wgmma_tma.cu with DTYPE = 0): tf32 wgmma reads both
// operands K-major, so B (K×N, row-major) is transposed on the way (to N×K); A (M×K) keeps its layout.
#pragma once

__device__ __forceinline__ float tf32_round(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return __uint_as_float(r);
}

// src: rows×cols row-major. Writes big and small with rows of `ld` elements: rows×ld (transpose = 0) or
// cols×ld (transpose = 1), ld ≥ the row's length, the elements past it zero (TMA needs rows of whole 16 bytes, so
// K is padded to a multiple of 4 in the workspaces; the zeros add nothing to the products). A block of 256
// threads takes a 32×32 tile (grid: ceil(ld/32) × ceil(rows/32), or ceil(cols/32) × ceil(ld/32) transposed);
// the transpose goes through shared memory so that reads and writes are both coalesced.
extern "C" __global__ void __launch_bounds__(256)
gemm_tf32_split(const float* __restrict__ src, float* __restrict__ big, float* __restrict__ small, int rows,
                int cols, int transpose, int ld) {
  __shared__ float tile[32][33];
  const int r0 = blockIdx.y * 32, c0 = blockIdx.x * 32, tx = threadIdx.x % 32, ty = threadIdx.x / 32;
  if (!transpose) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int r = r0 + ty + 8 * i, c = c0 + tx;
      if (r < rows && c < ld) {
        const size_t at = (size_t)r * ld + c;
        const float x = c < cols ? src[(size_t)r * cols + c] : 0.f, b = tf32_round(x);
        big[at] = b;
        small[at] = tf32_round(x - b);
      }
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = r0 + ty + 8 * i, c = c0 + tx;
    tile[ty + 8 * i][tx] = (r < rows && c < cols) ? src[(size_t)r * cols + c] : 0.f;
  }
  __syncthreads();
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = c0 + ty + 8 * i, c = r0 + tx;  // row of the transposed output (a column of src)
    if (r < cols && c < ld) {
      const size_t at = (size_t)r * ld + c;
      const float x = tile[tx][ty + 8 * i], b = tf32_round(x);
      big[at] = b;
      small[at] = tf32_round(x - b);
    }
  }
}
