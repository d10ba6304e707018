// Validation on the GPU: compares a candidate's fp32 output with the fp64 reference without copying either
// back to the host. sums[0] += Σ(out − ref)², sums[1] += Σ ref², bad += elements that are NaN/inf in the
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

extern "C" __global__ void compare_f32_f64(const float* __restrict__ out, const double* __restrict__ ref,
                                           unsigned long long n, double* __restrict__ sums,
                                           unsigned long long* __restrict__ bad) {
  double d2 = 0.0, r2 = 0.0;
  unsigned long long nbad = 0;
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    const double r = ref[i];
    const double o = (double)out[i];
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
