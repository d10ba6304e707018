#!/usr/bin/env bash
# Call 2: the 192-accumulator consumers after the register split fix (24/240; 32/240 hung in setmaxnreg in call 1):
# their GPU tests, then every hand-picked tile at the GPT-2 layer's K = 768 / N = 768 shapes, and the layouts
# (gemm_nt, linear) against cuBLAS on the same layout, to place linear's gap.
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export AUTOTUNE_CACHE_DIR=/tmp/cache
TAILN=8 step wide 150 python3 -m pytest -m gpu -n 8 -q -p no:cacheprovider -rf --tb=short tests/test_gpu_gemm.py tests/test_gpu_gemm_layouts.py -k "192 or every_schedule"
TAILN=200 step configs 200 python3 benchmarks/gemm_configs.py --algo wgmma_tma --dtypes bfloat16 --shapes 8192x3072x768 8192x768x3072 8192x2304x768 8192x768x768 --reps 15
TAILN=200 step layouts 150 python3 benchmarks/gemm_configs.py --algo wgmma_tma --dtypes bfloat16 --family linear --shapes 8192x3072x768 8192x2304x768 --reps 15
TAILN=200 step layouts_nt 100 python3 benchmarks/gemm_configs.py --algo wgmma_tma --dtypes bfloat16 --family gemm_nt --shapes 8192x3072x768 --reps 15
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
