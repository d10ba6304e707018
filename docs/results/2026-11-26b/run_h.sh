#!/usr/bin/env bash
# Call 8 (one H100): the GPU tier on the final main (LocalTrials split, the duplicates clean-up, the references
# hook), without the torch GPU tests and the process tests (call 9 runs those).
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=15 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
nvidia-smi -L
TAILN=12 step tier 540 python3 -m pytest -m gpu -n 14 -q -p no:cacheprovider -rf --tb=line \
  --ignore=tests/test_gpu_reliability.py --ignore=tests/test_multi.py --ignore=tests/test_torch_gpu.py
echo "done $(( $(date +%s) - T0 )) s"
