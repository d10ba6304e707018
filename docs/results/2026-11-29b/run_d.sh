#!/usr/bin/env bash
# Call 4 (2026-11-29b): call 3's tier ran out of time at ~96% (no failure up to there, no summary): the row tests
# whose constraint changed after call 2 (shared-memory rows, split rows), with their summary.
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
export AUTOTUNE_CACHE_DIR=/tmp/cache AUTOTUNE_DB=/tmp/none.db
TAILN=4 step rows 200 python3 -m pytest -m gpu -n 14 -q -p no:cacheprovider -rf --tb=short tests/test_gpu_library.py -k "shared_memory or split or cluster or random_valid"
cd $OUT && tar czf logs.tgz *.log 2>/dev/null; rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
