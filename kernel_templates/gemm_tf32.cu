// GEMM with 1×TF32 tensor-core products (the `gemm_tf32` kernel: TF32 accuracy, never an fp32 answer): the
// 3×TF32 template without the compensation — operands rounded to TF32 once, big·big only, one accumulation
// level (the operand rounding, ~1e-4, dominates the accumulator's round-toward-zero bias).
#define COMPENSATE 0
#define FOLD 0
#include "gemm_tf32x3.cu"
