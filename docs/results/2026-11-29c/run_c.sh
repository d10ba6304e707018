#!/usr/bin/env bash
# Call 3 (2026-11-29c): the launcher test after its spy moved to `prepared`; would taking SDPA help the blocks
# (attention_probe.py)?
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
export AUTOTUNE_CACHE_DIR=/tmp/cache AUTOTUNE_DB=/tmp/none.db
D=docs/results/2026-11-29c
TAILN=4 step tests 200 python3 -m pytest -n 12 -q -p no:cacheprovider -rf --tb=short tests/test_torch_gpu.py
TAILN=30 step attn 300 python3 $D/attention_probe.py --rounds 7
cd $OUT && tar czf logs.tgz *.log 2>/dev/null; rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
