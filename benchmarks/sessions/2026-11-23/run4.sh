#!/usr/bin/env bash
# GPU run 4: issue 10 (fp16 rows, untuned) and issue 13 (torch overhead, first call, GPT-2 block). Sequential.
set -u
export PYTHONUNBUFFERED=1
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$?"; tail -n ${TAILN:-20} $OUT/$name.log; }
TAILN=30 step rows16 200 python3 benchmarks/library_vs_torch.py --kernels softmax layernorm rmsnorm --dtype float16 --shapes 16384x8192 4096x50257 1024x65536 --trials 12 --db /tmp/l.db --out $OUT/rows16.json
TAILN=25 step untuned 70 python3 benchmarks/library_vs_torch.py --untuned --kernels softmax layernorm rmsnorm --dtype float16 --shapes 4096x50257 8192x5120 1x12288 --out $OUT/untuned16.json
step torch_overhead 50 python3 benchmarks/torch_overhead.py --batches 20 --out $OUT/torch_overhead.json
step first_call 70 python3 benchmarks/first_call.py --kernels softmax --out $OUT/first_call.json
step gpt2 90 python3 examples/gpt2_block.py --steps 10 --dtype float32 bfloat16 --record $OUT/gpt2_shapes.json
