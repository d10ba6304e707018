#!/usr/bin/env bash
# Two H200s (nvidia-h200-x2): issue 10 measured on both GPUs at once, one library_vs_torch process per GPU
# (each measures the copy bandwidth and torch in its own process, on its own GPU). Logs tarred at the end.
set -u
export PYTHONUNBUFFERED=1
mkdir -p /tmp/r
lib() { local name=$1 gpu=$2 limit=$3; shift 3; CUDA_VISIBLE_DEVICES=$gpu timeout --signal=INT --kill-after=10 $limit python3 benchmarks/library_vs_torch.py "$@" --out /tmp/r/$name.json > /tmp/r/$name.log 2>&1; echo "$name rc=$?"; grep -v "^autotune:" /tmp/r/$name.log | tail -n 30; }
R="--kernels softmax layernorm rmsnorm --shapes 16384x8192 4096x50257 1024x65536 8192x768 --trials ${TRIALS:-20}"
( lib rows_f16 0 ${T1:-280} $R --dtype float16 --db /tmp/r/f16.db ) &
( lib rows_bf16 1 ${T1:-280} $R --dtype bfloat16 --db /tmp/r/bf16.db ) &
wait
( lib rows_f32 0 ${T2:-200} --kernels softmax layernorm rmsnorm --shapes 1024x65536 4096x50257 --trials ${TRIALS:-20} --dtype float32 --db /tmp/r/f32.db;
  lib backward 0 ${T3:-120} --kernels layernorm_backward --shapes 16384x8192 1024x65536 --trials 30 --dtype float32 float16 --db /tmp/r/bwd.db ) &
( lib untuned 1 ${T2:-200} --untuned --kernels softmax layernorm rmsnorm --dtype float16 bfloat16 float32 --shapes 16384x8192 4096x50257 1024x65536 8192x768 1x12288;
  lib dot 1 ${T3:-80} --kernels dot --shapes 67108864 --trials 20 --dtype float32 float16 --db /tmp/r/dh.db;
  lib histogram 1 ${T3:-60} --kernels histogram --shapes 67108864x256 --trials 20 --db /tmp/r/dh.db ) &
wait
tar czf $OUT/rows.tgz -C /tmp r
