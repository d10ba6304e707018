#!/usr/bin/env bash
# H100, final run B (sequential benchmarks): long rows cached in shared memory (narrowed grid searches through the
# dispatcher, against torch and the copy), layernorm fp16 after the one-exchange statistics, Kernel Tuner.
set -u
export PYTHONUNBUFFERED=1
B=/tmp/b; mkdir -p $B
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $B/$name.log 2>&1; echo "rc=$?"; grep -v "^autotune:" $B/$name.log | tail -n ${TAILN:-12}; tar czf $OUT/run_b.tgz -C /tmp b; }
TAILN=8 step smem16 130 python3 benchmarks/library_vs_torch.py --kernels softmax layernorm rmsnorm --dtype float16 --shapes 1024x65536 4096x50257 --trials 12 --sampler grid --db /tmp/s16.db --out $B/smem16.json --domains '{"CACHE": [2], "MAPPING": ["block"], "BLOCK": [256, 512, 1024], "VEC": [8], "ITEMS": [4, 8, 16, 32], "STREAM": [0]}'
TAILN=8 step smem32 130 python3 benchmarks/library_vs_torch.py --kernels softmax layernorm rmsnorm --dtype float32 --shapes 1024x65536 4096x50257 --trials 12 --sampler grid --db /tmp/s32.db --out $B/smem32.json --domains '{"CACHE": [2], "MAPPING": ["cluster"], "CLUSTER": [2, 4], "BLOCK": [256, 512], "VEC": [4], "ITEMS": [8, 16, 32], "STREAM": [0]}'
TAILN=4 step layernorm16 90 python3 benchmarks/library_vs_torch.py --kernels layernorm --dtype float16 --shapes 16384x8192 --trials 30 --db /tmp/ln.db --out $B/layernorm16.json
TAILN=20 step kt 170 python3 benchmarks/vs_kernel_tuner.py --budget 40 --out $B/kt
