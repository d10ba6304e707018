#!/usr/bin/env bash
# Session 2026-11-29f, after the rule changes (fa3 backward's default; wgmma_skinny to 128 rows and one row):
#   bash run_b.sh 1   rows_probe.py (the new rule default against cuBLAS), then the untuned backward suite (24 cases)
#   bash run_b.sh 2   the GPU tests of what changed
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
export AUTOTUNE_CACHE_DIR=/tmp/cache AUTOTUNE_DB=/tmp/none.db
D=docs/results/2026-11-29f
TAILN=4 step build 150 python3 -c "import autotune.torch as att; from autotune.runtime import torch_native as n; print('native', n.unavailable_reason())"
case "${1:-1}" in
1)
  TAILN=70 step rows 150 python3 $D/rows_probe.py
  TAILN=40 step bwd_untuned 330 python3 benchmarks/attention_vs_torch.py --untuned --backward --no-decode --reps 10 \
    --db /tmp/bwd-empty.db --out $OUT/bwd_untuned.json
  ;;
2)
  TAILN=8 step tests 420 python3 -m pytest -n 14 -q -p no:cacheprovider -rf --tb=short -m gpu \
    tests/test_gpu_attention_backward_fa3.py tests/test_gpu_attention_backward.py tests/test_torch_gpu.py \
    tests/test_gpu_gemm_skinny.py tests/test_gpu_gemm_fallback.py tests/test_gpu_gemm_layouts.py tests/test_gpu_linear_swiglu.py
  ;;
esac
cd $OUT && tar czf logs.tgz *.log *.json 2>/dev/null; rm -f *.log *.json
echo "done $(( $(date +%s) - T0 )) s"
