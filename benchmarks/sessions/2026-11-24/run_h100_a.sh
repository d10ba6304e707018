#!/usr/bin/env bash
# H100, run A: the cold and warm 200-trial GEMM search with --profile (nothing else running), Kernel Tuner side by
# side, then a random recording of the whole fp32 GEMM space at 4096^3 until the command's time is nearly spent.
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$?"; tail -n ${TAILN:-12} $OUT/$name.log; }
nproc; uptime
TAILN=14 step search_cold 110 env AUTOTUNE_CACHE_DIR=/tmp/cold autotune search gemm --trials 200 --profile --db /tmp/p.db
TAILN=14 step search_warm 80 env AUTOTUNE_CACHE_DIR=/tmp/cold autotune search gemm --trials 200 --profile --db /tmp/p2.db
TAILN=16 step vs_kt 170 python3 benchmarks/vs_kernel_tuner.py --budget 40 --out $OUT/kt
mkdir -p build/rec
LEFT=$(( 585 - ($(date +%s) - T0) ))
TAILN=3 step record 600 python3 benchmarks/record_replay.py --random 3000 --shape 4096x4096x4096 --min-time-ms 5 --deadline-s $((LEFT - 25)) --append --out build/rec/random_gemm_4096.json.gz
cp build/rec/random_gemm_4096.json.gz $OUT/
echo "done $(( $(date +%s) - T0 )) s"
