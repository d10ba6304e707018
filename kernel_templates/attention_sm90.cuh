// Hopper (sm_90a) pieces of the FlashAttention-3 style forward (kernel_templates/attention_fa3.cu) that the GEMM
// headers lack: 3-D TMA loads, named barriers, register fences, exp2, and the two wgmma forms attention needs.
//
//   wgmma_qk<N>  S (64×N, fp32) [+]= A (64×16, shared, K-major) · B (16×N, shared, K-major: N rows of 16 k)
//                The B operand is K itself (keys as rows, head_dim contiguous), so no transpose bit. `acc` false
//                starts a fresh accumulation (scale-d = 0 and "=f" outputs: the old S is not an input).
//   wgmma_pv<N>  O (64×N, fp32) += A (64×16 in registers) · B (16×N, shared, MN-major: the transpose bit)
//                A is P, four 32-bit registers of two 16-bit values per thread: for k16 step kk of a 64×BN
//                accumulator S in the wgmma fragment layout, register j (0..3) holds S[8kk + 2j] (low half) and
//                S[8kk + 2j + 1] (high half): rows g / g+8 and columns 2t / 2t+8 of mma.m16n8k16's A fragment,
//                which is exactly where the accumulator keeps them (no shuffles).
// Both take the 128-byte-swizzled descriptors of kernel_templates/wgmma_sm90.cuh (sw128_desc).
//
// The wgmma wrappers are stamped out by macros for each N the template may ask for: the asm operand lists
// ("%0, …" and "+f"(d[0]), …) are built 8 registers at a time.
#pragma once
#include <stdint.h>

#include "tma_sm90.cuh"
#include "wgmma_sm90.cuh"

// ---- TMA -----------------------------------------------------------------------------------------------------
// Box at (c0, c1, c2) (c0 innermost) of a 3-D tensor map into shared address `dst`, completing on `bar`. Elements
// outside the tensor (in any dimension) are zero-filled and still count towards the transaction bytes.
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const TmaDesc* desc, int c0, int c1, int c2, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n" ::
          "r"(dst),
      "l"(reinterpret_cast<uint64_t>(desc)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
      : "memory");
}

// ---- named barriers (ids 1..15; 0 is __syncthreads) ----------------------------------------------------------
__device__ __forceinline__ void named_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// ---- registers around asynchronous wgmma ---------------------------------------------------------------------
// An empty volatile asm that "modifies" each register: ordinary code that reads or writes the registers stays on
// its side of the neighbouring wgmma fence / issue / wait (volatile asm statements keep their order).
template <int N>
__device__ __forceinline__ void fence_regs(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i]));
}
template <int N>
__device__ __forceinline__ void fence_regs(uint32_t (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(r[i]));
}

// 2^x, one MUFU op; denormal results flush to zero (a weight below 2^-126 is nothing next to the row's max, 1).
__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// ---- wgmma operand lists -------------------------------------------------------------------------------------
#define ATT_P8 "%0, %1, %2, %3, %4, %5, %6, %7"
#define ATT_P16 ATT_P8 ", %8, %9, %10, %11, %12, %13, %14, %15"
#define ATT_P24 ATT_P16 ", %16, %17, %18, %19, %20, %21, %22, %23"
#define ATT_P32 ATT_P24 ", %24, %25, %26, %27, %28, %29, %30, %31"
#define ATT_P40 ATT_P32 ", %32, %33, %34, %35, %36, %37, %38, %39"
#define ATT_P48 ATT_P40 ", %40, %41, %42, %43, %44, %45, %46, %47"
#define ATT_P56 ATT_P48 ", %48, %49, %50, %51, %52, %53, %54, %55"
#define ATT_P64 ATT_P56 ", %56, %57, %58, %59, %60, %61, %62, %63"
#define ATT_P72 ATT_P64 ", %64, %65, %66, %67, %68, %69, %70, %71"
#define ATT_P80 ATT_P72 ", %72, %73, %74, %75, %76, %77, %78, %79"
#define ATT_P88 ATT_P80 ", %80, %81, %82, %83, %84, %85, %86, %87"
#define ATT_P96 ATT_P88 ", %88, %89, %90, %91, %92, %93, %94, %95"
#define ATT_P104 ATT_P96 ", %96, %97, %98, %99, %100, %101, %102, %103"
#define ATT_P112 ATT_P104 ", %104, %105, %106, %107, %108, %109, %110, %111"
#define ATT_P120 ATT_P112 ", %112, %113, %114, %115, %116, %117, %118, %119"
#define ATT_P128 ATT_P120 ", %120, %121, %122, %123, %124, %125, %126, %127"

#define ATT_F8(c, i) \
  c(d[i]), c(d[i + 1]), c(d[i + 2]), c(d[i + 3]), c(d[i + 4]), c(d[i + 5]), c(d[i + 6]), c(d[i + 7])
#define ATT_D8(c) ATT_F8(c, 0)
#define ATT_D16(c) ATT_D8(c), ATT_F8(c, 8)
#define ATT_D24(c) ATT_D16(c), ATT_F8(c, 16)
#define ATT_D32(c) ATT_D24(c), ATT_F8(c, 24)
#define ATT_D40(c) ATT_D32(c), ATT_F8(c, 32)
#define ATT_D48(c) ATT_D40(c), ATT_F8(c, 40)
#define ATT_D56(c) ATT_D48(c), ATT_F8(c, 48)
#define ATT_D64(c) ATT_D56(c), ATT_F8(c, 56)
#define ATT_D72(c) ATT_D64(c), ATT_F8(c, 64)
#define ATT_D80(c) ATT_D72(c), ATT_F8(c, 72)
#define ATT_D88(c) ATT_D80(c), ATT_F8(c, 80)
#define ATT_D96(c) ATT_D88(c), ATT_F8(c, 88)
#define ATT_D104(c) ATT_D96(c), ATT_F8(c, 96)
#define ATT_D112(c) ATT_D104(c), ATT_F8(c, 104)
#define ATT_D120(c) ATT_D112(c), ATT_F8(c, 112)
#define ATT_D128(c) ATT_D120(c), ATT_F8(c, 120)

template <int N>
__device__ __forceinline__ void wgmma_qk(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b, bool acc);
template <int N>
__device__ __forceinline__ void wgmma_pv(float (&d)[N / 2], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint64_t desc_b);

// S = A·B (acc false) or S += A·B; NR = N/2 accumulators; IA, IB, IP: the operand numbers after them.
#define ATT_WGMMA_QK(N, NR, IA, IB, IP)                                                                          \
  template <>                                                                                                    \
  __device__ __forceinline__ void wgmma_qk<N>(float (&d)[NR], uint64_t desc_a, uint64_t desc_b, bool acc) {     \
    if (acc) {                                                                                                   \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #IP ", 0;\n"                                             \
                   "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." WGMMA_AB "." WGMMA_AB " {" ATT_P##NR        \
                   "}, %" #IA ", %" #IB ", p, 1, 1, 0, 0;\n}\n"                                                  \
                   : ATT_D##NR("+f")                                                                             \
                   : "l"(desc_a), "l"(desc_b), "r"(1));                                                          \
    } else {                                                                                                     \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #IP ", 0;\n"                                             \
                   "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." WGMMA_AB "." WGMMA_AB " {" ATT_P##NR        \
                   "}, %" #IA ", %" #IB ", p, 1, 1, 0, 0;\n}\n"                                                  \
                   : ATT_D##NR("=f")                                                                             \
                   : "l"(desc_a), "l"(desc_b), "r"(0));                                                          \
    }                                                                                                            \
  }

// O += P·V: A from four registers, B MN-major (transpose bit); NR = N/2; IA..IA+3 the A registers, IB, IP.
#define ATT_WGMMA_PV(N, NR, A0, A1, A2, A3, IB, IP)                                                              \
  template <>                                                                                                    \
  __device__ __forceinline__ void wgmma_pv<N>(float (&d)[NR], uint32_t a0, uint32_t a1, uint32_t a2,            \
                                              uint32_t a3, uint64_t desc_b) {                                    \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #IP ", 0;\n"                                               \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." WGMMA_AB "." WGMMA_AB " {" ATT_P##NR          \
                 "}, {%" #A0 ", %" #A1 ", %" #A2 ", %" #A3 "}, %" #IB ", p, 1, 1, 1;\n}\n"                       \
                 : ATT_D##NR("+f")                                                                               \
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc_b), "r"(1));                                    \
  }

ATT_WGMMA_QK(64, 32, 32, 33, 34)
ATT_WGMMA_QK(80, 40, 40, 41, 42)
ATT_WGMMA_QK(96, 48, 48, 49, 50)
ATT_WGMMA_QK(112, 56, 56, 57, 58)
ATT_WGMMA_QK(128, 64, 64, 65, 66)
ATT_WGMMA_QK(144, 72, 72, 73, 74)
ATT_WGMMA_QK(160, 80, 80, 81, 82)
ATT_WGMMA_QK(176, 88, 88, 89, 90)
ATT_WGMMA_QK(192, 96, 96, 97, 98)
ATT_WGMMA_QK(208, 104, 104, 105, 106)
ATT_WGMMA_QK(224, 112, 112, 113, 114)
ATT_WGMMA_QK(240, 120, 120, 121, 122)
ATT_WGMMA_QK(256, 128, 128, 129, 130)

ATT_WGMMA_PV(64, 32, 32, 33, 34, 35, 36, 37)
ATT_WGMMA_PV(128, 64, 64, 65, 66, 67, 68, 69)
