#!/usr/bin/env bash
# GPU run 5: the torch operators after the Library registration (tests, overhead), and the search driver after
# the trial cache (cold 200-trial profile, end-to-end search tests).
set -u
export PYTHONUNBUFFERED=1
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$?"; tail -n ${TAILN:-15} $OUT/$name.log; }
TAILN=8 step torch_tests 150 python3 -m pytest -q -p no:cacheprovider -rfE --tb=short -m gpu tests/test_torch_gpu.py
step torch_overhead 45 python3 benchmarks/torch_overhead.py --batches 20 --out $OUT/torch_overhead.json
TAILN=12 step profile 100 env AUTOTUNE_CACHE_DIR=/tmp/cold bash -c "time autotune search gemm --trials 200 --profile --db /tmp/p.db --seed 1"
TAILN=8 step search_tests 120 python3 -m pytest -q -p no:cacheprovider -rfE --tb=short -m gpu tests/test_gpu_search.py
