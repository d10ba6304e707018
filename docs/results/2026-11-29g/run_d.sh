#!/usr/bin/env bash
# 2026-11-29g call 6: issue 23's main number on today's code — the README job cold (empty compile cache), then again
# on the warm cache, with --profile.
set -u
export PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore
T0=$(date +%s)
TIMEFORMAT="process wall %R s, user %U s, sys %S s"
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; { time timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; } 2>> $OUT/$name.log; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
export AUTOTUNE_CACHE_DIR=/tmp/cache-readme AUTOTUNE_DB=/tmp/readme.db
rm -rf /tmp/cache-readme /tmp/readme.db
TAILN=30 step cold 70 python3 -m autotune search gemm --trials 200 --seed 7 --profile
rm -f /tmp/readme.db
TAILN=12 step warm 50 python3 -m autotune search gemm --trials 200 --seed 7 --profile
cd $OUT && tar czf logs.tgz *.log 2>/dev/null; rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
