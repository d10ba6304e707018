#!/usr/bin/env bash
# Call 5 (2026-11-29d): wgmma_skinny's rule after call 3 (64-column tiles, fewer slices) — the GPU tests it touches
# (its own, linear_swiglu, the GEMM fallback and layouts' rule defaults, the torch files whose Linear calls take
# few rows), the decode GEMMs against torch, and the Llama block in alternating rounds.
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
export AUTOTUNE_CACHE_DIR=/tmp/cache AUTOTUNE_DB=/tmp/none.db
D=docs/results/2026-11-29d
TAILN=4 step build 150 python3 -c "import autotune.torch as att; from autotune.runtime import torch_native as n; print('native', n.unavailable_reason())"
TAILN=10 step tests 240 python3 -m pytest -n 14 -q -p no:cacheprovider -rf --tb=short tests/test_gpu_gemm_skinny.py tests/test_gpu_linear_swiglu.py tests/test_gpu_gemm_fallback.py tests/test_torch_gpu.py tests/test_torch_linear_gpu.py tests/test_gpu_dispatch.py
TAILN=60 step probe 120 python3 $D/skinny_probe.py --rows 16 4
TAILN=12 step untuned 90 python3 benchmarks/gemm_untuned.py --dtypes bfloat16 float16 --shapes 2x4096x4096 8x11008x4096 16x4096x4096 32x4096x4096
TAILN=30 step llama_ab 150 python3 docs/results/2026-11-29c/attention_probe.py --models llama --rounds 9
cd $OUT && tar czf logs.tgz *.log 2>/dev/null; rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
