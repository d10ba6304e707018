#!/usr/bin/env bash
# For the next session's first calls: what this session changed after its last device time, then the rest of the
# GPU tier (this session ran only the GEMM, layout and torch files).
#   bash run_next.sh 1   the launcher rebuilt from torch_launcher.cpp + torch_autograd.h (the header split, the
#                        two-input GEMMs back on Python's formulas): torch GPU tests, the bf16/fp32 GPT-2 step and
#                        the Llama block (issue 22)
#   bash run_next.sh 2   the rest of the tier (rows: ROW_START; attention: half_dtype.cuh; everything else)
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
export AUTOTUNE_CACHE_DIR=/tmp/cache AUTOTUNE_DB=/tmp/none.db
case "${1:-1}" in
1)
  python3 -c "import autotune.torch; from autotune.runtime import torch_native as n; print('native:', n.module() is not None, n.unavailable_reason())"
  TAILN=6 step torch_tests 200 python3 -m pytest -m gpu -n 8 -q -p no:cacheprovider -rf --tb=short tests/test_torch_gpu.py tests/test_torch_linear_gpu.py tests/test_gpu_dispatch.py
  TAILN=9 step host_ops 60 python3 docs/results/2026-11-28c/gpt2_host_ops.py
  TAILN=8 step gpt2 150 python3 examples/gpt2_block.py --dtype bfloat16 float32 --steps 30 --no-compile --graphs
  TAILN=8 step llama 150 python3 examples/llama_block.py
  # wgmma_tma_padded in the layout families (landed after the last device time): its tests and gemm_tn over a vocabulary
  TAILN=6 step padded_layouts 120 python3 -m pytest -m gpu -n 8 -q -p no:cacheprovider -rf --tb=short tests/test_gpu_gemm_layouts.py -k padded
  TAILN=10 step padded_tn 90 python3 benchmarks/gemm_configs.py --family gemm_tn --algo wgmma_tma_padded --dtypes bfloat16 --shapes 50257x768x8192 --reps 20
  ;;
2)
  TAILN=6 step tier 560 python3 -m pytest -m gpu -n 14 -q -p no:cacheprovider -rf --tb=short --ignore=tests/test_gpu_gemm.py --ignore=tests/test_gpu_gemm_layouts.py --ignore=tests/test_torch_gpu.py --ignore=tests/test_torch_linear_gpu.py
  ;;
esac
cd $OUT && tar czf logs.tgz *.log 2>/dev/null; rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
