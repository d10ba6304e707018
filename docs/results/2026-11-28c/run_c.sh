#!/usr/bin/env bash
# Call 3: where the bf16 GPT-2 step's host time goes (eager against patched, issue 22); the untuned odd shapes
# through the new rule (issue 19); small squares' TMA tiles unsplit (the 1000³ rule); Kernel Tuner side by side
# (issue 23).
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
export AUTOTUNE_CACHE_DIR=/tmp/cache AUTOTUNE_DB=/tmp/none.db
TAILN=4 step host_profile 150 python3 docs/results/2026-11-28c/host_profile.py
TAILN=8 step untuned_odd 90 python3 benchmarks/gemm_untuned.py --dtypes bfloat16 float16 --reps 20 --shapes 4095x4097x1023 1000x1000x1001 2047x2049x2047 8191x8191x8191 --out $OUT/untuned_odd.json
TAILN=4 step squares 150 python3 benchmarks/gemm_configs.py --algo wgmma_tma_split --only split1 --dtypes bfloat16 float16 --reps 30 --shapes 768x768x768 1000x1000x1000 1024x1024x1024 1280x1280x1280 1536x1536x1536 2048x2048x2048
TAILN=12 step kernel_tuner 180 python3 benchmarks/vs_kernel_tuner.py --budget 40 --out $OUT/vs_kt.json
cd $OUT && tar czf logs.tgz *.log *.json && rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
