#!/usr/bin/env bash
# Call 2 (the last 286 s of device time): the record → tune → patch loop on the GPT-2 block in bf16 — the 14
# problems a patched step sends (recorded on meta tensors: gpt2_bf16_shapes.json), 16 trials each, then the step
# and the Linear GEMMs against torch with those results.
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
export AUTOTUNE_DB=/tmp/gpt2.db AUTOTUNE_CACHE_DIR=/tmp/cache
TAILN=5 step search 110 python3 -m autotune search --shapes-from docs/results/2026-11-28/gpt2_bf16_shapes.json --trials 16
TAILN=20 step best 15 python3 -m autotune best
TAILN=8 step gpt2 45 python3 examples/gpt2_block.py --dtype bfloat16 --steps 10
TAILN=16 step bench 30 python3 benchmarks/linear_vs_torch.py --model gpt2 --dtypes bfloat16 --reps 15
echo "done $(( $(date +%s) - T0 )) s"
