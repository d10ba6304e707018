// The light passes around an attention backward's main kernel, shared by attention_backward.cu (fa2) and
// attention_backward_fa3.cu: Δ = rowsum(dO∘O) of one row, and the conversion of the fp32 dQ accumulator.
// The including template defines HEAD_DIM and DTYPE and includes a header that defines pack2 (mma_sm80.cuh or
// wgmma_epilogue.cuh: the two spell the conversion differently) before this.
#pragma once
#include "dtype.cuh"

// Δ of one row of O and dO (HEAD_DIM elements at `row`), by the 8 threads of an aligned lane octet (part = lane % 8,
// each reading every 8th 16-byte chunk), reduced across them: every lane of the warp must call it. `in` false: the
// octet's row is past the end (reads nothing, returns 0). ZERO: the row of the fp32 dQ accumulator zeroed too.
template <bool ZERO>
__device__ __forceinline__ float row_delta(const elem_t* __restrict__ O, const elem_t* __restrict__ dO,
                                           float* __restrict__ dq_acc, int row, bool in, int part) {
  float sum = 0.f;
  if (in) {
    for (int c = part; c < HEAD_DIM / 8; c += 8) {
      const size_t at = (size_t)row * HEAD_DIM + c * 8;
      const uint4 o = *reinterpret_cast<const uint4*>(O + at), d = *reinterpret_cast<const uint4*>(dO + at);
      const elem_t* oe = reinterpret_cast<const elem_t*>(&o);
      const elem_t* de = reinterpret_cast<const elem_t*>(&d);
#pragma unroll
      for (int i = 0; i < 8; ++i) sum = fmaf(to_f32(oe[i]), to_f32(de[i]), sum);
      if (ZERO) {
        float4* acc = reinterpret_cast<float4*>(dq_acc + at);
        acc[0] = acc[1] = make_float4(0.f, 0.f, 0.f, 0.f);
      }
    }
  }
  sum += __shfl_xor_sync(0xffffffffu, sum, 1);
  sum += __shfl_xor_sync(0xffffffffu, sum, 2);
  sum += __shfl_xor_sync(0xffffffffu, sum, 4);
  return sum;
}

// dQ = accumulator·scale in the input type: the row-major fp32 accumulator (rows × HEAD_DIM) of every head.
extern "C" __global__ void __launch_bounds__(256)
    attention_bwd_dq_store(const float* __restrict__ dq_acc, elem_t* __restrict__ dQ, long long n, float scale) {
  const long long i = ((long long)blockIdx.x * 256 + threadIdx.x) * 8;  // n is a multiple of 8 (HEAD_DIM is)
  if (i >= n) return;
  const float4 a = *reinterpret_cast<const float4*>(dq_acc + i), b = *reinterpret_cast<const float4*>(dq_acc + i + 4);
  const uint4 out = make_uint4(pack2(a.x * scale, a.y * scale), pack2(a.z * scale, a.w * scale),
                               pack2(b.x * scale, b.y * scale), pack2(b.z * scale, b.w * scale));
  *reinterpret_cast<uint4*>(dQ + i) = out;
}
