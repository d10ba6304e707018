// GEMM for float32 at FP32 accuracy on Hopper: 3×TF32 on wgmma, the TMA template (gemm_wgmma_tma.cu) with its
// DTYPE = 0 operand scheme. This file holds only the defaults of that algorithm (autotune's default configuration
// of `wgmma_tf32x3`), which differ from the 16-bit ones: four operand tiles per stage and two accumulator sets
// per thread. One consumer on a 64×128 tile with four stages: on the H100 it kept 2.1× cuBLAS FP32 from 4096³ to
// 8192³, where two consumers on 128×128 (three stages fit) fell to 1.4× at 8192³, waiting on TMA.
#ifndef DTYPE
#define DTYPE 0
#endif
#ifndef BM
#define BM 64
#endif
#ifndef BN
#define BN 128
#endif
#ifndef WG
#define WG 1
#endif
#ifndef STAGES
#define STAGES 4
#endif
#ifndef FOLD
#define FOLD 2
#endif

#include "gemm_wgmma_tma.cu"
