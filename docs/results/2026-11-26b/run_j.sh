#!/usr/bin/env bash
# Call 10 (one H100): the grouped decoding search whose worker was killed for host memory, after the inputs are
# encoded before they are repeated.
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=15 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
TAILN=14 step gqa_search 200 /usr/bin/time -v python3 -m autotune search attention --shape 64x32x8x1x131072x128 \
  --dtype bfloat16 --trials 6 --db /tmp/gqa.db
grep -E "Maximum resident|Elapsed" $OUT/gqa_search.log
echo "done $(( $(date +%s) - T0 )) s"
