// The problem constants every attention template compiles in: fixed by the shape and the kernel's name, never
// tuned (autotune/spaces/attention.py, `problem_defines`). The defaults let a template compile without defines.
//   HEAD_DIM    elements per row of q, k, v and o
//   CAUSAL      1: query i sees key j only where j <= i + seq_kv - seq_q (the mask aligned bottom-right)
//   KV_GROUPED  1: grouped-query attention, k and v have H / kv_group heads and query head h reads kv head
//               h / kv_group. The group size is a run-time argument (every group size runs one binary), appended
//               to each kernel's parameters by KV_GROUP_PARAM; 0 (multi-head attention): no argument, and
//               kv_group is the constant 1, so the kernels are exactly the multi-head kernels (same PTX).
//
// Heads are flat (batch · heads + head) in every template; with H = HKV · kv_group, query head b·H + h reads
// kv head b·HKV + h / kv_group = (b·H + h) / kv_group: one division of the flat index (KV_HEAD).
#pragma once

#ifndef HEAD_DIM
#define HEAD_DIM 128
#endif
#ifndef CAUSAL
#define CAUSAL 0
#endif
#ifndef KV_GROUPED
#define KV_GROUPED 0
#endif

#if KV_GROUPED
#define KV_GROUP_PARAM , int kv_group
#define KV_HEAD(head) ((head) / kv_group)
#else
#define KV_GROUP_PARAM
#define KV_HEAD(head) (head)
constexpr int kv_group = 1;  // loops over a group's query heads run once, unrolled away
#endif
