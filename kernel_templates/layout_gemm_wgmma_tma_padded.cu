// gemm_wgmma_tma_padded.cu for the gemm_nt, gemm_tn and linear families: the operand stored the other way is
// copied transposed (gemm_transpose) before the padding copy, the bias added after (autotune/spaces/gemm_layouts.py).
#include "gemm_wgmma_tma_padded.cu"
