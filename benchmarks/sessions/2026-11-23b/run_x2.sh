#!/usr/bin/env bash
# Two H200s (nvidia-h200-x2): issue 12 item 2. The two-GPU tests, then the same cold 200-trial GEMM search on one
# GPU and on both (separate cold compile caches); trials per minute and best found from each report.
set -u
export PYTHONUNBUFFERED=1
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$?"; tail -n ${TAILN:-12} $OUT/$name.log; }
nvidia-smi -L
nproc
step multi_tests 240 python3 -m pytest -q -m gpu tests/test_multi.py
TAILN=10 step one_gpu 150 env AUTOTUNE_CACHE_DIR=/tmp/c1 autotune search gemm --trials 200 --devices 0 --profile --db /tmp/one.db
TAILN=10 step two_gpus 150 env AUTOTUNE_CACHE_DIR=/tmp/c2 autotune search gemm --trials 200 --devices 0,1 --profile --db /tmp/two.db
