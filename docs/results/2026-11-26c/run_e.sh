#!/usr/bin/env bash
# Call 5 (same four GPUs): the GPU tier on the big host, xdist workers spread over the four GPUs
# (AUTOTUNE_TEST_GPUS), then the tests of several GPUs and the process tests alone.
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=15 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
TAILN=14 step tier_parallel 420 env AUTOTUNE_TEST_GPUS=4 python3 -m pytest -m gpu -n 24 -q -p no:cacheprovider -rf --tb=line \
  --ignore=tests/test_gpu_reliability.py --ignore=tests/test_multi.py
TAILN=8 step tier_serial 150 python3 -m pytest -m gpu -q -p no:cacheprovider -rf --tb=short tests/test_gpu_reliability.py tests/test_multi.py
cd $OUT && tar czf tier.tgz *.log && rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
