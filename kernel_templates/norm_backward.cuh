// What the LayerNorm and RMSNorm backward templates share (layernorm_backward.cu, layernorm_backward_persistent.cu):
// the problem constants, fixed by the kernel's name and dtypes and never tuned, and the weights' element type.
//   RMS     1: RMSNorm (no mean, no dbias); 0: LayerNorm
//   WDTYPE  w, dw, db: 0 float, 1 half, 2 bfloat16 (default DTYPE; the _mixed kernels take fp32 weights)
#pragma once
#include "common.cuh"

#ifndef RMS
#define RMS 0
#endif
#ifndef WDTYPE
#define WDTYPE DTYPE
#endif
typedef ElemOf<WDTYPE>::type weight_t;
