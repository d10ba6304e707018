#!/usr/bin/env bash
# Call 1 (one GPU), branch lab-a = main + i-cluster-scope + i-fa3bwd: the fa3 backward's first GPU run (its own
# tests), experiment E1 of the cluster review (default-scope cluster arrive), the GEMM GPU tests on the cluster
# change, and one search to show the ranking's new summary line.
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=15 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
nvidia-smi -L
TAILN=30 step fa3bwd_tests 200 python3 -m pytest -m gpu -n 8 -x -q -p no:cacheprovider -rf --tb=short tests/test_gpu_attention_backward_fa3.py
TAILN=40 step e1_cluster 150 python3 benchmarks/gemm_configs.py --algo wgmma_tma --dtypes bfloat16 --shapes 8192x8192x8192 4096x4096x4096
TAILN=12 step gemm_tests 200 python3 -m pytest -m gpu -n 14 -q -p no:cacheprovider -rf --tb=line tests/test_gpu_gemm.py tests/test_gpu_gemm_fallback.py tests/test_gpu_gemm_tf32.py tests/test_gpu_search.py
TAILN=30 step search_line 90 python3 -m autotune search gemm --shape 2048x2048x2048 --dtype bfloat16 --trials 30 --db $OUT/s.db
cd $OUT && tar czf logs.tgz *.log && rm -f *.log s.db
echo "done $(( $(date +%s) - T0 )) s"
