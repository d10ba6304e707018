#!/usr/bin/env bash
# Call 4: stream-K at mid-size squares whose tiles leave the last wave part-empty (1536³: 144 tiles of 128×128 on
# 132 SMs), against the tiles unsplit of call 3 (issue 19's untuned row); linear's bias gradient as one torch sum
# (its GPU tests, and the bf16 GPT-2 step's host time: issue 22).
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
export AUTOTUNE_CACHE_DIR=/tmp/cache AUTOTUNE_DB=/tmp/none.db
TAILN=3 step streamk_squares 200 python3 benchmarks/gemm_configs.py --algo wgmma_tma_streamk --dtypes bfloat16 --reps 30 --shapes 768x768x768 1000x1000x1000 1024x1024x1024 1536x1536x1536 2048x2048x2048 3072x3072x3072 1280x1280x1280
TAILN=4 step torch_linear 150 python3 -m pytest -m gpu -n 8 -q -p no:cacheprovider -rf --tb=short tests/test_torch_linear_gpu.py tests/test_torch_gpu.py
TAILN=6 step gpt2 120 python3 examples/gpt2_block.py --dtype bfloat16 --steps 30 --no-compile
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
