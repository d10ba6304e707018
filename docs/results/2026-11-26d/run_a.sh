#!/usr/bin/env bash
# Call 1: the unverified work of 2026-11-26c on a GPU (code identity, shape ranges, start-up phases), then the
# GPU tier's first half.
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=15 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
TAILN=8 step code_check 150 python3 -m pytest -m gpu -q -p no:cacheprovider -rf --tb=short tests/test_code_check.py
export AUTOTUNE_CACHE_DIR=/tmp/c1
TAILN=40 step range 150 python3 -m autotune search gemm --shape 1-8192x4096x4096 --dtype bfloat16 --trials 60 --seed 3 --db /tmp/r.db --profile
TAILN=12 step range_best 60 python3 -m autotune best --db /tmp/r.db
TAILN=40 step profile 120 python3 -m autotune search gemm --shape 2048x2048x2048 --trials 30 --seed 3 --db /tmp/p.db --profile
unset AUTOTUNE_CACHE_DIR
TAILN=14 step tier_a 330 python3 -m pytest -m gpu -n 15 -q -p no:cacheprovider -rf --tb=line \
  tests/test_gpu_search.py tests/test_gpu_gemm.py tests/test_gpu_library.py tests/test_gpu_dispatch.py \
  tests/test_gpu_gemm_tf32.py tests/test_gpu_gemm_fallback.py
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
