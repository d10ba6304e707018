#!/usr/bin/env bash
# Session 2026-11-29h, call 1: the diagnoses last session's run_next.sh 3 and 4 asked for, before new work.
#   host_profile: where a bf16 GPT-2 training step's host time goes, eager against patched (issue 22)
#   ncu: batch-1 grouped decoding at 32K and 128K keys, split_kv's rule default against cuDNN's kernel (issue 20)
#   order: the fa3 backward's BLOCK_ORDER 0 against 1 on causal shapes (validated against fa2 in the probe)
set -u
export PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore
T0=$(date +%s)
TIMEFORMAT="process wall %R s, user %U s, sys %S s"
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; { time timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; } 2>> $OUT/$name.log; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
export AUTOTUNE_CACHE_DIR=/tmp/cache AUTOTUNE_DB=/tmp/none.db
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
TAILN=4 step build 150 python3 -c "import autotune.torch as att; from autotune.runtime import torch_native as n; print('native', n.unavailable_reason())"
TAILN=120 step host_profile 110 python3 docs/results/2026-11-28c/host_profile.py
TAILN=60 step order 170 python3 docs/results/2026-11-29g/order_probe.py
TAILN=10 step ncu 170 ncu --clock-control none --target-processes all -k "regex:attention_split_kv|cudnn|fmha|sm90" -c 6 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy \
    --section LaunchStats --section SchedulerStats python3 docs/results/2026-11-29g/ncu_decode.py
cd $OUT && tar czf logs.tgz *.log *.json 2>/dev/null; rm -f *.log *.json
echo "done $(( $(date +%s) - T0 )) s"
