#!/usr/bin/env bash
# Call 8 (the session's last device time): stream-K after its meeting of pieces moved into stream_k.cuh (same PTX
# up to register names), and every GEMM shape class untuned with this session's rules (issue 19's ≥ 0.7× row).
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export AUTOTUNE_CACHE_DIR=/tmp/cache
TAILN=4 step tests 100 python3 -m pytest -m gpu -n 15 -q -p no:cacheprovider -rf --tb=short tests/test_gpu_gemm.py tests/test_gpu_gemm_layouts.py -k "stream or 192 or every_schedule"
TAILN=40 step untuned 110 python3 benchmarks/gemm_untuned.py --dtypes bfloat16 float16 --reps 10 --out $OUT/untuned.json
cd $OUT && tar czf logs.tgz *.log *.json && rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
