#!/usr/bin/env bash
# Call 1 (2026-11-29d): last session's unrun edits on the GPU (linear_swiglu's review fixes, its split-K reduce in
# its header, the torch re-layout), then the decode GEMMs at 16 rows against cuBLAS (what a skinny kernel must beat).
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
export AUTOTUNE_CACHE_DIR=/tmp/cache AUTOTUNE_DB=/tmp/none.db
TAILN=4 step build 150 python3 -c "import autotune.torch as att; from autotune.runtime import torch_native as n; print('native', n.unavailable_reason())"
TAILN=8 step tests 240 python3 -m pytest -n 14 -q -p no:cacheprovider -rf --tb=short tests/test_gpu_linear_swiglu.py tests/test_torch_gpu.py tests/test_torch_linear_gpu.py tests/test_torch_fusion.py
TAILN=30 step small_m 120 python3 benchmarks/linear_vs_torch.py --model llama --tokens 16 --dtypes bfloat16
TAILN=20 step small_m1 60 python3 benchmarks/linear_vs_torch.py --model llama --tokens 1 --dtypes bfloat16
cd $OUT && tar czf logs.tgz *.log 2>/dev/null; rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
