#!/usr/bin/env bash
# GPU run 3: benchmarks for issues 9, 11, 12 (sequential: timing).
set -u
export PYTHONUNBUFFERED=1
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$?"; tail -n ${TAILN:-25} $OUT/$name.log; }
step profile 130 env AUTOTUNE_CACHE_DIR=/tmp/cold bash -c "time autotune search gemm --trials 200 --profile --db /tmp/p.db --seed 1"
step gemm32 170 python3 benchmarks/gemm_vs_cublas.py --db /tmp/p.db --dtypes float32 --shapes 4096x4096x4096 127x4096x4096 2048x2048x2048 --trials 60 --trials-more 40 --fallback --out $OUT/gemm32.json
TAILN=12 step attn 150 python3 benchmarks/attention_vs_torch.py --db /tmp/a.db --trials 16 --dtypes bfloat16 --head-dims 128 --seqs 4096 --causal 0 1 --no-decode --out $OUT/attn_prefill.json
TAILN=14 step decode 110 python3 benchmarks/attention_vs_torch.py --db /tmp/a.db --trials 12 --dtypes bfloat16 --no-prefill --out $OUT/attn_decode.json
