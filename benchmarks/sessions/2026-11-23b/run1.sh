#!/usr/bin/env bash
# GPU run 1 (second session of 2026-11-23): issue 10 diagnostics. fp16 rows tuned with the rule default seeded,
# fp32 long rows, untuned fp16/fp32. Sequential (timings); the databases come back for leader analysis.
set -u
export PYTHONUNBUFFERED=1
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$?"; tail -n ${TAILN:-20} $OUT/$name.log; }
TAILN=16 step rows16 300 python3 benchmarks/library_vs_torch.py --kernels softmax layernorm rmsnorm --dtype float16 --shapes 16384x8192 4096x50257 1024x65536 8192x768 --trials 20 --db $OUT/rows16.db --out $OUT/rows16.json
TAILN=8 step rows32 120 python3 benchmarks/library_vs_torch.py --kernels softmax layernorm rmsnorm --dtype float32 --shapes 1024x65536 4096x50257 --trials 20 --db $OUT/rows32.db --out $OUT/rows32.json
TAILN=20 step untuned 120 python3 benchmarks/library_vs_torch.py --untuned --kernels softmax layernorm rmsnorm --dtype float16 float32 --shapes 16384x8192 4096x50257 1024x65536 8192x768 1x12288 --out $OUT/untuned.json
