#!/usr/bin/env bash
# Two H200s (nvidia-h200-x2): issue 12 item 2. The two-GPU tests (the fault test fixed last session included),
# then 200-trial GEMM searches on one GPU and on both: at 4096^3 with cold compile caches (32 cores compile), and
# at 8192^3, where each candidate's GPU time outweighs its compile time. Last, the exhaustive narrowed recording
# at 2048^3 on GPU 0 (the warm-start source for the sampler replays at 1024^3).
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-12} $OUT/$name.log; }
nvidia-smi -L
nproc
TAILN=4 step multi_tests 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_multi.py
TAILN=9 step one_gpu_4096 90 env AUTOTUNE_CACHE_DIR=/tmp/c1 autotune search gemm --trials 200 --devices 0 --profile --db /tmp/one.db
TAILN=9 step two_gpus_4096 90 env AUTOTUNE_CACHE_DIR=/tmp/c2 autotune search gemm --trials 200 --devices 0,1 --profile --db /tmp/two.db
TAILN=9 step one_gpu_8192 150 env AUTOTUNE_CACHE_DIR=/tmp/c3 autotune search gemm --shape 8192x8192x8192 --trials 200 --devices 0 --profile --db /tmp/one8.db
TAILN=9 step two_gpus_8192 110 env AUTOTUNE_CACHE_DIR=/tmp/c4 autotune search gemm --shape 8192x8192x8192 --trials 200 --devices 0,1 --profile --db /tmp/two8.db
TAILN=2 step record_2048 100 python3 benchmarks/record_replay.py --shape 2048x2048x2048 --out $OUT/replay_gemm_h200_2048.json
echo "done $(( $(date +%s) - T0 )) s"
