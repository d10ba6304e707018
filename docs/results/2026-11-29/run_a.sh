#!/usr/bin/env bash
# Call 1 (2026-11-29): last session's unrun edits (the launcher with torch_autograd.h, the GEMMs' C++ nodes from
# gemm_native_autograd.patch, the padded layouts), the GPT-2 and Llama blocks.
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
export AUTOTUNE_CACHE_DIR=/tmp/cache AUTOTUNE_DB=/tmp/none.db
python3 -c "import autotune.torch; from autotune.runtime import torch_native as n; print('native:', n.module() is not None, n.unavailable_reason())"
TAILN=8 step torch_tests 190 python3 -m pytest -m gpu -n 8 -q -p no:cacheprovider -rf --tb=short tests/test_torch_gpu.py tests/test_torch_linear_gpu.py tests/test_gpu_dispatch.py
TAILN=8 step gpt2 120 python3 examples/gpt2_block.py --dtype bfloat16 float32 --steps 30 --no-compile --graphs
TAILN=6 step padded_layouts 100 python3 -m pytest -m gpu -n 8 -q -p no:cacheprovider -rf --tb=short tests/test_gpu_gemm_layouts.py -k padded
TAILN=10 step padded_tn 60 python3 benchmarks/gemm_configs.py --family gemm_tn --algo wgmma_tma_padded --dtypes bfloat16 --shapes 50257x768x8192 --reps 20
TAILN=8 step llama 90 python3 examples/llama_block.py
TAILN=9 step host_ops 45 python3 docs/results/2026-11-28c/gpt2_host_ops.py
cd $OUT && tar czf logs.tgz *.log 2>/dev/null; rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
