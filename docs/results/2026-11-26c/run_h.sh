#!/usr/bin/env bash
# Call 8 (same H100, warm), final main: the rest of the GPU tier (attention, norms, torch, fallback), cut at 370 s.
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=15 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
TAILN=12 step rest 370 python3 -m pytest -m gpu -n 15 -q -p no:cacheprovider -rf --tb=line \
  --ignore=tests/test_gpu_reliability.py --ignore=tests/test_multi.py --ignore=tests/test_gpu_search.py \
  --ignore=tests/test_gpu_gemm.py --ignore=tests/test_gpu_library.py --ignore=tests/test_gpu_dispatch.py \
  --ignore=tests/test_gpu_gemm_tf32.py
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
