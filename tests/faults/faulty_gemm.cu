// Test-only: a shared-memory-tiled SGEMM (correct for FAULT=0) with faults to inject.
//   FAULT 0 none, 1 illegal address, 2 hang, 3 wrong only when M is odd, 4 compile error,
//         5 cannot launch (the space asks for a 2048-thread block), 6 NaN output
#ifndef FAULT
#define FAULT 0
#endif
#ifndef TILE
#define TILE 16
#endif
#ifndef UNROLL
#define UNROLL 1
#endif
constexpr int kUnroll = UNROLL;  // #pragma unroll takes a constant expression, not a macro
#if FAULT == 4
#error "injected compile failure"
#endif

extern "C" __global__ void sgemm(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                                 int M, int N, int K) {
  __shared__ float As[TILE][TILE + 1];
  __shared__ float Bs[TILE][TILE + 1];
  const int tx = threadIdx.x % TILE, ty = threadIdx.x / TILE;
  const int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
#if FAULT == 1
  if (blockIdx.x == 1 && threadIdx.x == 0) *(volatile float*)(C - (1ll << 40)) = 1.f;  // far outside any allocation
#elif FAULT == 2
  if (threadIdx.x == 0) {
    volatile int spin = 1;
    while (spin) __nanosleep(1000);
  }
  __syncthreads();
#endif
  float acc = 0.f;
  for (int k0 = 0; k0 < K; k0 += TILE) {
    As[ty][tx] = (row < M && k0 + tx < K) ? A[(size_t)row * K + k0 + tx] : 0.f;
    Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(size_t)(k0 + ty) * N + col] : 0.f;
    __syncthreads();
#pragma unroll kUnroll
    for (int k = 0; k < TILE; ++k) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();
  }
#if FAULT == 3
  if (M % 2) acc *= 1.01f;
#elif FAULT == 6
  acc = __int_as_float(0x7fc00000);
#endif
  if (row < M && col < N) C[(size_t)row * N + col] = acc;
}
