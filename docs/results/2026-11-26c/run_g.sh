#!/usr/bin/env bash
# Call 7 (one H200), final main: the GPU tests that this session's changes reach (racing and the re-timing protocol
# in every search, the compile deadline, the ranking of the defaults): searches, GEMM, the library's tune-missing,
# the dispatcher, the process tests.
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=15 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
nvidia-smi -L
TAILN=10 step touched 330 python3 -m pytest -m gpu -n 15 -q -p no:cacheprovider -rf --tb=short tests/test_gpu_search.py \
  tests/test_gpu_gemm.py tests/test_gpu_library.py tests/test_gpu_dispatch.py tests/test_gpu_gemm_tf32.py
TAILN=6 step reliability 100 python3 -m pytest -m gpu -q -p no:cacheprovider -rf --tb=short tests/test_gpu_reliability.py
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
