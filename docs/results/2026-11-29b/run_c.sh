#!/usr/bin/env bash
# Call 3 (2026-11-29b): the GPU tier after the split mapping (rows.cuh, the three row templates, RowKernelSpace), the
# GEMM files and the torch files aside (unchanged since their last runs: call 1 here, and 2026-11-28c).
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
export AUTOTUNE_CACHE_DIR=/tmp/cache AUTOTUNE_DB=/tmp/none.db
TAILN=12 step tier 540 python3 -m pytest -m gpu -n 14 -q -p no:cacheprovider -rf --tb=short --durations=8 --ignore=tests/test_gpu_gemm.py --ignore=tests/test_gpu_gemm_layouts.py --ignore=tests/test_torch_gpu.py --ignore=tests/test_torch_linear_gpu.py --ignore=tests/test_gpu_bias_grad.py --ignore=tests/test_gpu_linear_gelu.py --ignore=tests/test_gpu_dispatch.py
cd $OUT && tar czf logs.tgz *.log 2>/dev/null; rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
