// The problem constants every attention template compiles in: fixed by the shape and the kernel's name, never
// tuned (autotune/spaces/attention.py, `problem_defines`). The defaults let a template compile without defines.
//   HEAD_DIM  elements per row of q, k, v and o
//   CAUSAL    1: query i sees key j only where j <= i + seq_kv - seq_q (the mask aligned bottom-right)
#pragma once

#ifndef HEAD_DIM
#define HEAD_DIM 128
#endif
#ifndef CAUSAL
#define CAUSAL 0
#endif
