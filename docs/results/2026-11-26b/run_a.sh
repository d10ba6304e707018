#!/usr/bin/env bash
# Call 1 (one GPU): the whole GPU tier on main with i-gqa and i-lnfuse merged and the fresh-worker timeout floor,
# then the process tests alone.
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=15 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
nvidia-smi -L
TAILN=30 step tier 480 python3 -m pytest -m gpu -n 14 -q -p no:cacheprovider -rf --tb=line \
  --ignore=tests/test_gpu_reliability.py --ignore=tests/test_multi.py
TAILN=6 step reliability 70 python3 -m pytest -m gpu -q -p no:cacheprovider -rf --tb=short tests/test_gpu_reliability.py
echo "done $(( $(date +%s) - T0 )) s"
