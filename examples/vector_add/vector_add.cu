// C = A + B over n floats: a kernel of your own, tuned by autotune (see my_space.py beside this file).
//
// Every tunable is a macro with a default, so the file also compiles with no -D at all, and the defaults equal
// the space's default_config. The entry point is extern "C": autotune finds it by name.

#include <stdint.h>

#ifndef BLOCK
#define BLOCK 256  // threads per block
#endif
#ifndef VEC
#define VEC 4  // floats per load and store (1, 2 or 4)
#endif
#ifndef UNROLL
#define UNROLL 1  // vectors per thread
#endif

template <int N> struct Vec;
template <> struct Vec<1> { typedef float type; };
template <> struct Vec<2> { typedef float2 type; };
template <> struct Vec<4> { typedef float4 type; };

__device__ __forceinline__ float add(float a, float b) { return a + b; }
__device__ __forceinline__ float2 add(float2 a, float2 b) { return make_float2(a.x + b.x, a.y + b.y); }
__device__ __forceinline__ float4 add(float4 a, float4 b) {
    return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}

extern "C" __global__ void __launch_bounds__(BLOCK)
vector_add(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c, long long n) {
    typedef typename Vec<VEC>::type V;
    // Vector accesses need VEC*4-byte alignment: true of any allocation, not of every view into one.
    const bool aligned = ((uintptr_t)a | (uintptr_t)b | (uintptr_t)c) % (VEC * sizeof(float)) == 0;
    const long long first = ((long long)blockIdx.x * UNROLL * BLOCK + threadIdx.x) * VEC;
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
        const long long i = first + (long long)u * BLOCK * VEC;
        if (aligned && i + VEC <= n) {
            V x = *reinterpret_cast<const V*>(a + i);
            V y = *reinterpret_cast<const V*>(b + i);
            *reinterpret_cast<V*>(c + i) = add(x, y);
        } else {
            for (int k = 0; k < VEC; ++k) {  // the ragged end, or unaligned views
                if (i + k < n) c[i + k] = a[i + k] + b[i + k];
            }
        }
    }
}
