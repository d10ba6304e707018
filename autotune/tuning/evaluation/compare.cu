#include <cuda_bf16.h>
#include <cuda_fp16.h>

// Validation on the GPU: compares a candidate's output (fp32, fp16, bf16 or int32) with the fp64 reference
// without copying either back to the host. sums[0] += Σ(out − ref)², sums[1] += Σ ref², bad += elements that are NaN/inf in the
// output where the reference is finite (unwritten NaN-poisoned elements, or overflow). The host zeroes the
// accumulators before each call.

__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ unsigned long long warp_sum(unsigned long long v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ double as_double(float x) { return (double)x; }
__device__ __forceinline__ double as_double(__half x) { return (double)__half2float(x); }
__device__ __forceinline__ double as_double(__nv_bfloat16 x) { return (double)__bfloat162float(x); }
__device__ __forceinline__ double as_double(int x) { return (double)x; }

template <class T>
__device__ void compare(const T* __restrict__ out, const double* __restrict__ ref, unsigned long long n,
                        double* __restrict__ sums, unsigned long long* __restrict__ bad) {
  double d2 = 0.0, r2 = 0.0;
  unsigned long long nbad = 0;
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    const double r = ref[i];
    const double o = as_double(out[i]);
    if (isfinite(r)) {
      if (!isfinite(o)) {
        ++nbad;
      } else {
        const double d = o - r;
        d2 += d * d;
        r2 += r * r;
      }
    } else if (!(o == r || (isnan(o) && isnan(r)))) {
      ++nbad;  // an infinite (or NaN) reference must be matched exactly
    }
  }
  d2 = warp_sum(d2);
  r2 = warp_sum(r2);
  nbad = warp_sum(nbad);
  if ((threadIdx.x & 31) == 0) {
    atomicAdd(&sums[0], d2);
    atomicAdd(&sums[1], r2);
    if (nbad) atomicAdd(bad, nbad);
  }
}

// One entry point per output dtype (names: compare_<short name of autotune.dtypes>_f64). int32 outputs (counts,
// indices) are poisoned with INT_MIN, which no count equals: compared exactly, any difference is an error.
#define COMPARE(NAME, T)                                                                                      \
  extern "C" __global__ void NAME(const T* __restrict__ out, const double* __restrict__ ref,                \
                                  unsigned long long n, double* __restrict__ sums,                         \
                                  unsigned long long* __restrict__ bad) {                                  \
    compare<T>(out, ref, n, sums, bad);                                                                    \
  }
COMPARE(compare_f32_f64, float)
COMPARE(compare_f16_f64, __half)
COMPARE(compare_bf16_f64, __nv_bfloat16)
COMPARE(compare_i32_f64, int)
