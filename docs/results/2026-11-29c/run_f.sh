#!/usr/bin/env bash
# Call 6 (2026-11-29c): linear_swiglu's split-K (decoding) on the GPU — its tests, then the Llama block in
# alternating rounds, untuned (the rule now splits K at decoding's few rows).
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
export AUTOTUNE_CACHE_DIR=/tmp/cache AUTOTUNE_DB=/tmp/none.db
D=docs/results/2026-11-29c
TAILN=8 step tests 150 python3 -m pytest -n 14 -q -p no:cacheprovider -rf --tb=short tests/test_gpu_linear_swiglu.py
TAILN=30 step llama_ab 150 python3 $D/attention_probe.py --models llama --rounds 9
TAILN=8 step llama 90 python3 examples/llama_block.py
cd $OUT && tar czf logs.tgz *.log 2>/dev/null; rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
