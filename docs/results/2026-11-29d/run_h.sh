#!/usr/bin/env bash
# Call 8 (2026-11-29d): wgmma_skinny after its last template edit (linear_gelu's pre and GELU on the slices' sum; the
# stores through one helper) — its tests in every family, linear_gelu's rule defaults, the GEMM tier's draws of it.
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
export AUTOTUNE_CACHE_DIR=/tmp/cache AUTOTUNE_DB=/tmp/none.db
TAILN=4 step build 150 python3 -c "import autotune.torch as att; from autotune.runtime import torch_native as n; print('native', n.unavailable_reason())"
TAILN=10 step tests 170 python3 -m pytest -n 14 -q -p no:cacheprovider -rf --tb=short tests/test_gpu_gemm_skinny.py tests/test_gpu_linear_gelu.py tests/test_gpu_linear_swiglu.py tests/test_gpu_gemm.py -k "skinny or few or rule"
cd $OUT && tar czf logs.tgz *.log 2>/dev/null; rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
