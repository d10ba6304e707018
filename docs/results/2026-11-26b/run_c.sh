#!/usr/bin/env bash
# Call 3 (one GPU): do clusters of two wgmma_tma blocks fit the persistent grid (cuOccupancyMaxActiveClusters), and
# the hand-picked wgmma_tma configurations (clusters among them) against cuBLAS at 8192^3 and 4096^3 bf16.
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=15 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
nvidia-smi -L
TAILN=8 step cluster_probe 120 python3 docs/results/2026-11-26b/cluster_probe.py
TAILN=30 step configs 240 python3 benchmarks/gemm_configs.py --algo wgmma_tma --dtypes bfloat16 \
  --shapes 8192x8192x8192 4096x4096x4096
echo "done $(( $(date +%s) - T0 )) s"
