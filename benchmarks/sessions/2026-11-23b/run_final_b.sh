#!/usr/bin/env bash
# H100, final run B (sequential benchmarks): long rows cached in shared memory (narrowed grid searches through the
# dispatcher, against torch and the copy), layernorm fp16 after the one-exchange statistics, Kernel Tuner.
set -u
export PYTHONUNBUFFERED=1
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$?"; grep -v "^autotune:" $OUT/$name.log | tail -n ${TAILN:-12}; }
TAILN=8 step smem16 150 python3 benchmarks/library_vs_torch.py --kernels softmax layernorm rmsnorm --dtype float16 --shapes 1024x65536 4096x50257 --trials 12 --sampler grid --db /tmp/s16.db --out $OUT/smem16.json --domains '{"CACHE": [2], "MAPPING": ["block"], "BLOCK": [256, 512, 1024], "VEC": [8], "ITEMS": [4, 8, 16, 32], "STREAM": [0]}'
TAILN=8 step smem32 150 python3 benchmarks/library_vs_torch.py --kernels softmax layernorm rmsnorm --dtype float32 --shapes 1024x65536 4096x50257 --trials 12 --sampler grid --db /tmp/s32.db --out $OUT/smem32.json --domains '{"CACHE": [2], "MAPPING": ["cluster"], "CLUSTER": [2, 4], "BLOCK": [256, 512], "VEC": [4], "ITEMS": [8, 16, 32], "STREAM": [0]}'
TAILN=4 step layernorm16 90 python3 benchmarks/library_vs_torch.py --kernels layernorm --dtype float16 --shapes 16384x8192 --trials 30 --db /tmp/ln.db --out $OUT/layernorm16.json
TAILN=20 step kt 220 python3 benchmarks/vs_kernel_tuner.py --budget 40 --out $OUT/kt
