#!/usr/bin/env bash
# Session 2026-11-29f, call 7: issue 19's 1000³ against 128-byte aligned rows (align_probe.py); the Llama example
# with torch.compile afresh per case (untuned: its compiled figures of the last case were eager ones before).
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
export AUTOTUNE_CACHE_DIR=/tmp/cache AUTOTUNE_DB=/tmp/none.db
D=docs/results/2026-11-29f
TAILN=4 step build 150 python3 -c "import autotune.torch as att; from autotune.runtime import torch_native as n; print('native', n.unavailable_reason())"
TAILN=60 step align 110 python3 $D/align_probe.py
TAILN=8 step llama 170 python3 examples/llama_block.py --prefill 2048 --batches 16 --rounds 5
cd $OUT && tar czf logs.tgz *.log 2>/dev/null; rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
