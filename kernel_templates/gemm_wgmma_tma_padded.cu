// gemm_wgmma_tma.cu for operands whose rows TMA cannot stride (N or K not a multiple of 8 elements): the
// `wgmma_tma_padded` algorithm (autotune/spaces/gemm_wgmma_tma_padded.py) copies such an operand into a workspace
// of rows padded to whole 16 bytes (gemm_pad_rows) and runs the TMA kernel over it.
#include "gemm_wgmma_tma.cu"
#include "gemm_layout.cuh"
