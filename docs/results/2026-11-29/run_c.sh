#!/usr/bin/env bash
# Call 3 (2026-11-29): linear_gelu (GELU in the TMA kernel's epilogue), bias_grad and gelu_bias_grad (column sums),
# the C++ nodes that use them: SASS, GPU tests, the pieces against torch, the GPT-2 step untuned.
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
export AUTOTUNE_CACHE_DIR=/tmp/cache AUTOTUNE_DB=/tmp/none.db
(cd kernel_templates && nvcc -cubin -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -DDTYPE=2 -DB_K_MAJOR=1 -DGEMM_BIAS=1 -DGEMM_GELU=1 -o /tmp/lg.cubin gemm_wgmma_tma.cu && cuobjdump -sass /tmp/lg.cubin > /tmp/lg.sass && echo "linear_gelu bf16 default SASS: HGMMA $(grep -c HGMMA /tmp/lg.sass) UTMALDG $(grep -c UTMALDG /tmp/lg.sass) MUFU.EX2 $(grep -c MUFU.EX2 /tmp/lg.sass) functions $(grep -c Function /tmp/lg.sass)" | tee $OUT/sass.log)
TAILN=12 step tests 240 python3 -m pytest -m gpu -n 8 -q -p no:cacheprovider -rf --tb=short tests/test_gpu_bias_grad.py tests/test_gpu_linear_gelu.py tests/test_torch_gpu.py tests/test_torch_linear_gpu.py tests/test_gpu_dispatch.py
TAILN=12 step probe 90 python3 docs/results/2026-11-29/fusion_probe.py
TAILN=40 step gpt2 120 python3 examples/gpt2_block.py --dtype bfloat16 float32 --steps 50 --no-compile --graphs
cd $OUT && tar czf logs.tgz *.log 2>/dev/null; rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
