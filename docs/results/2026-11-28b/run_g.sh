#!/usr/bin/env bash
# Call 7: the host-side CUDA calls of one GPT-2 training step, eager and patched (sync_probe.py).
set -u
export PYTHONUNBUFFERED=1 AUTOTUNE_CACHE_DIR=/tmp/cache AUTOTUNE_DB=/tmp/none.db
timeout 150 python3 docs/results/2026-11-28b/sync_probe.py > $OUT/sync_probe.log 2>&1; echo rc=$?
grep -v "^autotune:" $OUT/sync_probe.log | grep -B1 -A14 "host CUDA API"
