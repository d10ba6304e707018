#!/usr/bin/env bash
# Session 2026-11-29h, call 4: issue 23's range row, never run on a GPU before (benchmarks/range_search.py):
# fp32 1-8192x4096x4096 in one 600-trial search against each of its 14 buckets' own cold 200-trial search.
set -u
export PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore
T0=$(date +%s)
TIMEFORMAT="process wall %R s, user %U s, sys %S s"
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; { time timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; } 2>> $OUT/$name.log; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
export AUTOTUNE_CACHE_DIR=/tmp/cache AUTOTUNE_DB=/tmp/none.db
TAILN=40 step range 540 python3 benchmarks/range_search.py --work /tmp/range-bench --out $OUT/range.json
for f in /tmp/range-bench/*/search.log; do b=$(basename $(dirname $f)); cp $f $OUT/search_$b.log; done 2>/dev/null
cd $OUT && tar czf logs.tgz *.log *.json 2>/dev/null; rm -f *.log *.json
echo "done $(( $(date +%s) - T0 )) s"
