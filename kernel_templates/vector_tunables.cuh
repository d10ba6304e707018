// The launch shape shared by the templates whose threads each take ITEMS vectors of VEC elements per step, in
// blocks of BLOCK threads (dot, reduce, histogram, elementwise, layernorm_backward and the row kernels of rows.cuh;
// each template's header comment says what a vector and a step are there), with the defaults of autotune's default
// configuration. A template whose default differs defines it before including this header.
//   BLOCK   threads per block
//   VEC     elements per vector access (4 floats or 8 halves = 16 B)
//   ITEMS   vectors per thread per step (independent accesses in flight)
#pragma once

#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef VEC
#define VEC 4
#endif
#ifndef ITEMS
#define ITEMS 2
#endif
