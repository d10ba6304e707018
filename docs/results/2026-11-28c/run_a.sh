#!/usr/bin/env bash
# Call 1 (2026-11-28, third session): the GEMM GPU tier after last session's unrun edits (wgmma_sm90.cuh's
# transpose bits, compile units, the LONG_K peer limit); every shape class untuned; the README job with compiles
# in batches (issue 23): --compile-batch 1, 4, 8 with cold compile caches, then the same search on a warm cache.
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
nproc
export AUTOTUNE_CACHE_DIR=/tmp/cache AUTOTUNE_DB=/tmp/none.db
TAILN=6 step tier 280 python3 -m pytest -m gpu -n 15 -q -p no:cacheprovider -rf --tb=short tests/test_gpu_gemm.py tests/test_gpu_gemm_layouts.py tests/test_torch_linear_gpu.py
TAILN=32 step untuned 100 python3 benchmarks/gemm_untuned.py --dtypes bfloat16 float16 --reps 10 --out $OUT/untuned.json
for b in 1 4 8; do
  export AUTOTUNE_CACHE_DIR=/tmp/cold$b; TAILN=8 step search_batch$b 60 python3 -m autotune search gemm --trials 200 --seed 7 --db /tmp/s$b.db --profile --compile-batch $b
done
# warm: the same search on batch 4's compile cache, a fresh database
export AUTOTUNE_CACHE_DIR=/tmp/cold4; TAILN=8 step search_warm4 60 python3 -m autotune search gemm --trials 200 --seed 7 --db /tmp/w4.db --profile --compile-batch 4
cd $OUT && tar czf logs.tgz *.log *.json && rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
