#!/usr/bin/env bash
# Call 2 (2026-11-29d): wgmma_skinny (few rows: the transposed product, K split over a cluster) on the GPU — SASS,
# its tests, the decode GEMMs at 16 rows against cuBLAS (rule default, then hand-picked configurations), and the
# Llama block in alternating rounds.
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
export AUTOTUNE_CACHE_DIR=/tmp/cache AUTOTUNE_DB=/tmp/none.db
TAILN=4 step build 150 python3 -c "import autotune.torch as att; from autotune.runtime import torch_native as n; print('native', n.unavailable_reason())"
TAILN=3 step sass 60 bash -c "nvcc -cubin -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Ikernel_templates -DDTYPE=2 -DB_K_MAJOR=1 -o /tmp/sk.cubin kernel_templates/gemm_wgmma_skinny.cu && cuobjdump -sass /tmp/sk.cubin > /tmp/sk.sass && echo HGMMA \$(grep -c HGMMA /tmp/sk.sass) UTMALDG \$(grep -c UTMALDG /tmp/sk.sass) && grep -m2 HGMMA /tmp/sk.sass"
TAILN=12 step tests 240 python3 -m pytest -n 14 -q -p no:cacheprovider -rf --tb=short tests/test_gpu_gemm_skinny.py
TAILN=16 step small_m 90 python3 benchmarks/linear_vs_torch.py --model llama --tokens 16 --dtypes bfloat16
TAILN=80 step configs 200 python3 benchmarks/gemm_configs.py --algo wgmma_skinny --family gemm_nt --dtypes bfloat16 --shapes 16x4096x4096 16x28672x4096 16x4096x14336 16x2048x4096 --reps 20
TAILN=30 step llama_ab 150 python3 docs/results/2026-11-29c/attention_probe.py --models llama --rounds 9
cd $OUT && tar czf logs.tgz *.log 2>/dev/null; rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
