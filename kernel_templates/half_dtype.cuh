// The element type of a template that runs on 16-bit tensor cores only (mma.sync or wgmma: the attention forward
// and backward templates but simt and split_kv): float16 where a compile names none, so that the template compiles
// without defines, and a float32 compile refused with one line. Included before dtype.cuh (its default: float32).
#pragma once

#ifndef DTYPE
#define DTYPE 1
#endif
#if DTYPE != 1 && DTYPE != 2
#error "a 16-bit tensor-core template: DTYPE must be 1 (float16) or 2 (bfloat16)"
#endif

#include "dtype.cuh"
