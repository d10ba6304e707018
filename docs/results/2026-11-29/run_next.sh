#!/usr/bin/env bash
# For the next session's first calls: what this session changed after its last device time, then the rest of the
# GPU tier (neither this session nor the last ran it whole).
#   bash run_next.sh 1   gelu.cuh's clamp (e^{-2u} < 1e30, landed after call 6): the two new families' GPU tests,
#                        the torch files, the pieces against torch, the GPT-2 step in alternating rounds
#   bash run_next.sh 2   the rest of the tier (rows: ROW_START; attention: half_dtype.cuh; everything else)
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
export AUTOTUNE_CACHE_DIR=/tmp/cache AUTOTUNE_DB=/tmp/none.db
case "${1:-1}" in
1)
  TAILN=6 step tests 240 python3 -m pytest -m gpu -n 10 -q -p no:cacheprovider -rf --tb=short tests/test_gpu_bias_grad.py tests/test_gpu_linear_gelu.py tests/test_torch_gpu.py tests/test_torch_linear_gpu.py tests/test_gpu_dispatch.py
  TAILN=10 step probe 70 python3 docs/results/2026-11-29/fusion_probe.py
  TAILN=12 step ab 90 python3 docs/results/2026-11-29/gpt2_ab.py --rounds 9 --steps 25
  ;;
2)
  TAILN=6 step tier 560 python3 -m pytest -m gpu -n 14 -q -p no:cacheprovider -rf --tb=short --ignore=tests/test_gpu_gemm.py --ignore=tests/test_gpu_gemm_layouts.py --ignore=tests/test_torch_gpu.py --ignore=tests/test_torch_linear_gpu.py --ignore=tests/test_gpu_bias_grad.py --ignore=tests/test_gpu_linear_gelu.py
  ;;
esac
cd $OUT && tar czf logs.tgz *.log 2>/dev/null; rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
