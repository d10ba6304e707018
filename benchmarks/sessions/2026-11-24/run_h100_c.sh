#!/usr/bin/env bash
# H100, run C: a warm compile cache that holds the candidates. The same 200-trial search (--seed 5) twice, into
# fresh databases: the second run proposes what the first compiled until the trajectories part.
set -u
export PYTHONUNBUFFERED=1
for run in cold warm; do
  echo "=== $run ($(date +%T))"
  /usr/bin/time -f "process wall %e s" env AUTOTUNE_CACHE_DIR=/tmp/w timeout 100 autotune search gemm --trials 200 --profile --seed 5 --db /tmp/$run.db > $OUT/seed5_$run.log 2>&1
  tail -n 11 $OUT/seed5_$run.log
done
