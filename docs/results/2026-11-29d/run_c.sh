#!/usr/bin/env bash
# Call 3 (2026-11-29d): wgmma_skinny after call 2 — its tests (the variant test fixed), linear_swiglu's few rows on
# it, the rule-default tests that now pick it; the decode GEMMs' configurations at 16 and 1 rows against torch; the
# Llama block in alternating rounds, and once with torch.compile.
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
export AUTOTUNE_CACHE_DIR=/tmp/cache AUTOTUNE_DB=/tmp/none.db
D=docs/results/2026-11-29d
TAILN=4 step build 150 python3 -c "import autotune.torch as att; from autotune.runtime import torch_native as n; print('native', n.unavailable_reason())"
TAILN=3 step sass 60 bash -c "nvcc -cubin -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Ikernel_templates -DDTYPE=2 -DB_K_MAJOR=1 -DGEMM_SWIGLU=1 -DSTAGES=3 -DSPLIT_K=2 -o /tmp/sk.cubin kernel_templates/gemm_wgmma_skinny.cu && cuobjdump -sass /tmp/sk.cubin > /tmp/sk.sass && echo HGMMA \$(grep -c HGMMA /tmp/sk.sass) UTMALDG \$(grep -c UTMALDG /tmp/sk.sass) MUFU.EX2 \$(grep -c MUFU.EX2 /tmp/sk.sass)"
TAILN=10 step tests 300 python3 -m pytest -n 14 -q -p no:cacheprovider -rf --tb=short tests/test_gpu_gemm_skinny.py tests/test_gpu_linear_swiglu.py tests/test_gpu_gemm_fallback.py tests/test_gpu_gemm_layouts.py -k "skinny or swiglu or rule or few or fallback or default"
TAILN=100 step probe 200 python3 $D/skinny_probe.py --rows 16 1
TAILN=30 step llama_ab 150 python3 docs/results/2026-11-29c/attention_probe.py --models llama --rounds 9
TAILN=6 step llama 90 python3 examples/llama_block.py
cd $OUT && tar czf logs.tgz *.log 2>/dev/null; rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
