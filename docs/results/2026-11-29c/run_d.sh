#!/usr/bin/env bash
# Call 4 (2026-11-29c): linear_swiglu on the GPU (its tests, SASS), the torch files again, then the Llama block with
# the fused MLP (example, and alternating rounds in attention_probe.py).
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
export AUTOTUNE_CACHE_DIR=/tmp/cache AUTOTUNE_DB=/tmp/none.db
D=docs/results/2026-11-29c
sass() { nvcc -cubin -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Ikernel_templates -DDTYPE=2 -DB_K_MAJOR=1 -DGEMM_SWIGLU=1 -o /tmp/sw.cubin kernel_templates/gemm_wgmma_tma.cu && cuobjdump -sass /tmp/sw.cubin > /tmp/sw.sass && echo "HGMMA $(grep -c HGMMA /tmp/sw.sass) UTMALDG $(grep -c UTMALDG /tmp/sw.sass) MUFU.EX2 $(grep -c MUFU.EX2 /tmp/sw.sass)"; }
TAILN=3 step sass 60 sass
TAILN=4 step build 150 python3 -c "import autotune.torch as att; from autotune.runtime import torch_native as n; print('native', n.unavailable_reason())"
TAILN=12 step tests 280 python3 -m pytest -n 12 -q -p no:cacheprovider -rf --tb=short tests/test_gpu_linear_swiglu.py tests/test_torch_linear_gpu.py tests/test_torch_gpu.py
TAILN=8 step llama 100 python3 examples/llama_block.py
TAILN=30 step attn 200 python3 $D/attention_probe.py --rounds 7
cd $OUT && tar czf logs.tgz *.log 2>/dev/null; rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
