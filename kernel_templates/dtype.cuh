// The problem's element type, chosen by DTYPE (codes of autotune/dtypes.py): 0 float, 1 __half, 2 __nv_bfloat16.
// Arithmetic and statistics stay in fp32: elem_t is only what is loaded and stored.
#pragma once

#ifndef DTYPE
#define DTYPE 0
#endif

// The half types only where an operand is half: cuda_fp16.h and cuda_bf16.h cost an fp32 kernel a fifth to a quarter
// of its compile time (preprocessing and cicc), and an fp32 GEMM search compiles hundreds of candidates.
#if DTYPE != 0 || (defined(WDTYPE) && WDTYPE != 0)
#define HALF_TYPES 1
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#else
#define HALF_TYPES 0
#endif

#if DTYPE == 0
typedef float elem_t;
#elif DTYPE == 1
typedef __half elem_t;
#elif DTYPE == 2
typedef __nv_bfloat16 elem_t;
#else
#error "DTYPE must be 0 (float32), 1 (float16) or 2 (bfloat16)"
#endif

__device__ __forceinline__ float to_f32(float x) { return x; }

template <class T>
__device__ __forceinline__ T from_f32(float x);
template <>
__device__ __forceinline__ float from_f32<float>(float x) { return x; }

#if HALF_TYPES
__device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
template <>
__device__ __forceinline__ __half from_f32<__half>(float x) { return __float2half_rn(x); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
#endif
