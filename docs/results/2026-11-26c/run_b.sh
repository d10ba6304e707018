#!/usr/bin/env bash
# Call 2 (same H200, warm), branch lab-a: the GPU tier without the torch GPU tests, the process tests and the fa3
# backward file (its bf16 comparison test passes uint16 arrays: a test bug, mended after this call).
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=15 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
TAILN=14 step tier 560 python3 -m pytest -m gpu -n 15 -q -p no:cacheprovider -rf --tb=line \
  --ignore=tests/test_gpu_reliability.py --ignore=tests/test_multi.py --ignore=tests/test_torch_gpu.py \
  --ignore=tests/test_gpu_attention_backward_fa3.py --deselect tests/test_gpu_gemm.py --deselect tests/test_gpu_gemm_fallback.py \
  --deselect tests/test_gpu_gemm_tf32.py --deselect tests/test_gpu_search.py
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
