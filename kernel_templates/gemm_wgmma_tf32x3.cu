// GEMM for float32 at FP32 accuracy on Hopper: 3×TF32 on wgmma, the TMA template (gemm_wgmma_tma.cu) with its
// DTYPE = 0 operand scheme. This file holds only the defaults of that algorithm (autotune's default configuration
// of `wgmma_tf32x3`), which differ from the 16-bit ones: four operand tiles per stage and two accumulator sets
// per thread fit a 128×128 tile with three stages.
#ifndef DTYPE
#define DTYPE 0
#endif
#ifndef BN
#define BN 128
#endif
#ifndef STAGES
#define STAGES 3
#endif
#ifndef FOLD
#define FOLD 2
#endif

#include "gemm_wgmma_tma.cu"
