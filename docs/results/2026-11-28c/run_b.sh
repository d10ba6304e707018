#!/usr/bin/env bash
# Call 2: the new wgmma_tma_padded algorithm (rows TMA cannot stride: N or K not a multiple of 8) on the GPU — its
# tests, its SASS, its tiles against cuBLAS and against the mma tile the rule ran before; 1000³ tiles (the weakest
# untuned class in call 1); the GPT-2 step in CUDA graphs (issue 22); Kernel Tuner side by side (issue 23).
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
export AUTOTUNE_CACHE_DIR=/tmp/cache AUTOTUNE_DB=/tmp/none.db
TAILN=6 step tests 150 python3 -m pytest -m gpu -n 15 -q -p no:cacheprovider -rf --tb=short tests/test_gpu_gemm.py tests/test_gpu_gemm_layouts.py -k "padded"
# SASS of the padded module: HGMMA and UTMALDG in the product, the copy beside it
nvcc -cubin -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -DDTYPE=2 -o /tmp/padded.cubin kernel_templates/gemm_wgmma_tma_padded.cu && cuobjdump -sass /tmp/padded.cubin > /tmp/padded.sass && echo "SASS: HGMMA $(grep -c HGMMA /tmp/padded.sass) UTMALDG $(grep -c UTMALDG /tmp/padded.sass) functions $(grep -c Function /tmp/padded.sass)" | tee $OUT/sass.log
TAILN=40 step padded 150 python3 benchmarks/gemm_configs.py --algo wgmma_tma_padded --dtypes bfloat16 --reps 20 --shapes 4095x4097x1023 1000x1000x1001 2047x2049x2047 8191x8191x8191
TAILN=16 step padded_mma 60 python3 benchmarks/gemm_configs.py --algo mma --only default --dtypes bfloat16 --reps 20 --shapes 4095x4097x1023 1000x1000x1001 2047x2049x2047 8191x8191x8191
TAILN=40 step k1000 90 python3 benchmarks/gemm_configs.py --algo wgmma_tma_split --dtypes float16 bfloat16 --reps 30 --shapes 1000x1000x1000
TAILN=14 step gpt2_graphs 150 python3 examples/gpt2_block.py --dtype bfloat16 float32 --steps 20 --no-compile --graphs
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
