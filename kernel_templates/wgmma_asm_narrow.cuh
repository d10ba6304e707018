// wgmma_asm.cuh's operand texts for the narrow products of few rows (kernel_templates/gemm_wgmma_skinny.cu): R = 4,
// 8, 16 fp32 accumulators per thread (N = 8, 16, 32), so that WGMMA_ASM(R, …) takes those sizes too. In a header of
// their own: the templates that include wgmma_asm.cuh keep their template hash, and with it their tuned rows.
#pragma once

#include "wgmma_asm.cuh"

#define WGMMA_ACC_TEXT_4 "%0, %1, %2, %3"
#define WGMMA_ACC_TEXT_8 WGMMA_ACC_TEXT_4 ", %4, %5, %6, %7"
#define WGMMA_ACC_TEXT_16 WGMMA_ACC_TEXT_8 ", %8, %9, %10, %11, %12, %13, %14, %15"

#define WGMMA_ACC_ARGS_4(d) "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
#define WGMMA_ACC_ARGS_8(d) WGMMA_ACC_ARGS_8_AT(d, 0)
#define WGMMA_ACC_ARGS_16(d) WGMMA_ACC_ARGS_8_AT(d, 0), WGMMA_ACC_ARGS_8_AT(d, 8)

#define WGMMA_DESC_OPERANDS_4 "%4, %5"
#define WGMMA_SCALE_OPERAND_4 "%6"
#define WGMMA_DESC_OPERANDS_8 "%8, %9"
#define WGMMA_SCALE_OPERAND_8 "%10"
#define WGMMA_DESC_OPERANDS_16 "%16, %17"
#define WGMMA_SCALE_OPERAND_16 "%18"
