// gemm_tf32x3.cu with the transposed copy and the bias of the gemm_nt, gemm_tn and linear families
// (kernel_templates/gemm_layout.cuh; autotune/spaces/gemm_layouts.py).
#include "gemm_tf32x3.cu"
#include "gemm_layout.cuh"
#if GEMM_GELU  // linear_gelu
#include "gemm_bias_gelu.cuh"
#endif
