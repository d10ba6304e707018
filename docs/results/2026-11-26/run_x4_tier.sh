#!/usr/bin/env bash
# Four GPUs (nvidia-h100-x4): the whole GPU tier on the big host. Parallel part first (the process and signal
# tests kept serial, as in every earlier tier run), failures printed one per line.
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=15 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
TAILN=30 step tier_parallel 420 python3 -m pytest -m gpu -n 16 -q -p no:cacheprovider -rf --tb=line \
  --ignore=tests/test_gpu_reliability.py --ignore=tests/test_multi.py
TAILN=12 step tier_serial 120 python3 -m pytest -m gpu -q -p no:cacheprovider -rf --tb=short tests/test_gpu_reliability.py
echo "done $(( $(date +%s) - T0 )) s"
