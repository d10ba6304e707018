#!/usr/bin/env bash
# Call 5: compiles in batches that can form (the search asks jobs × batch candidates ahead; issue 23), cold caches;
# the GPT-2 block's host cost per piece, eager against patched (issue 22).
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
export AUTOTUNE_DB=/tmp/none.db
for b in 4 1 8; do
  export AUTOTUNE_CACHE_DIR=/tmp/cold$b; TAILN=9 step search_batch$b 60 python3 -m autotune search gemm --trials 200 --seed 7 --db /tmp/s$b.db --profile --compile-batch $b
done
export AUTOTUNE_CACHE_DIR=/tmp/cache
TAILN=6 step host_ops 120 python3 docs/results/2026-11-28c/gpt2_host_ops.py
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
