// The inline asm of one Hopper warpgroup MMA (wgmma.mma_async, sm_90a) with R = N/2 fp32 accumulators per thread,
// written once for the wrappers of wgmma_sm90.cuh (16-bit inputs) and wgmma_tf32_sm90.cuh (tf32): a predicate p
// from the scale-d operand (0: d = A·B, else d += A·B), then
//   wgmma.mma_async.sync.aligned.<SHAPE_TYPES> {%0, …, %R-1}, desc_a, desc_b, p, <IMMEDIATES>;
// R is 32, 64, 96 or 128 (N = 64, 128, 192, 256). The asm text the macros concatenate is, byte for byte, the one the
// wrappers used to spell out for each N.
#pragma once

// The accumulator registers as asm text, %0 … %R-1 (each list extends the next smaller one) ...
#define WGMMA_ACC_TEXT_32                                                                                            \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"                                            \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define WGMMA_ACC_TEXT_64 WGMMA_ACC_TEXT_32 ","                                                                      \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"                                  \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define WGMMA_ACC_TEXT_96 WGMMA_ACC_TEXT_64 ","                                                                      \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79,"                                  \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define WGMMA_ACC_TEXT_128 WGMMA_ACC_TEXT_96 ","                                                                     \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111,"                      \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"

// ... and as "+f" operands, d[0] … d[R-1]: the compiler keeps them in place while the wgmma is in flight (they are
// not touched again before wgmma_wait).
#define WGMMA_ACC_ARGS_8_AT(d, i)                                                                                    \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]),        \
      "+f"(d[i + 7])
#define WGMMA_ACC_ARGS_32_AT(d, i)                                                                                   \
  WGMMA_ACC_ARGS_8_AT(d, i), WGMMA_ACC_ARGS_8_AT(d, i + 8), WGMMA_ACC_ARGS_8_AT(d, i + 16),                          \
      WGMMA_ACC_ARGS_8_AT(d, i + 24)
#define WGMMA_ACC_ARGS_32(d) WGMMA_ACC_ARGS_32_AT(d, 0)
#define WGMMA_ACC_ARGS_64(d) WGMMA_ACC_ARGS_32(d), WGMMA_ACC_ARGS_32_AT(d, 32)
#define WGMMA_ACC_ARGS_96(d) WGMMA_ACC_ARGS_64(d), WGMMA_ACC_ARGS_32_AT(d, 64)
#define WGMMA_ACC_ARGS_128(d) WGMMA_ACC_ARGS_96(d), WGMMA_ACC_ARGS_32_AT(d, 96)

// The operand numbers past the accumulators: the two descriptors, then the scale-d flag.
#define WGMMA_DESC_OPERANDS_32 "%32, %33"
#define WGMMA_SCALE_OPERAND_32 "%34"
#define WGMMA_DESC_OPERANDS_64 "%64, %65"
#define WGMMA_SCALE_OPERAND_64 "%66"
#define WGMMA_DESC_OPERANDS_96 "%96, %97"
#define WGMMA_SCALE_OPERAND_96 "%98"
#define WGMMA_DESC_OPERANDS_128 "%128, %129"
#define WGMMA_SCALE_OPERAND_128 "%130"

// d (R fp32 accumulators) (+)= A·B: one wgmma of SHAPE_TYPES (e.g. "m64n128k16.f32.f16.f16") on the shared-memory
// descriptors desc_a and desc_b, with IMMEDIATES after the predicate (the scales of A and B and, for 16-bit
// inputs, the transpose bits); scale_d: an int, 0 overwrites d.
#define WGMMA_ASM(R, SHAPE_TYPES, IMMEDIATES, d, desc_a, desc_b, scale_d)                                            \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " WGMMA_SCALE_OPERAND_##R ", 0;\n"                                  \
               "wgmma.mma_async.sync.aligned." SHAPE_TYPES " {" WGMMA_ACC_TEXT_##R "}, " WGMMA_DESC_OPERANDS_##R     \
               ", p, " IMMEDIATES ";\n}\n"                                                                           \
               : WGMMA_ACC_ARGS_##R(d)                                                                               \
               : "l"(desc_a), "l"(desc_b), "r"(scale_d))
