#!/usr/bin/env bash
# Call 4 (one GPU): where functional.layer_norm's host time goes (issue 21), then issue 20's decoding suite tuned
# (16 trials per case) against SDPA's backends.
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=15 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
nvidia-smi -L
TAILN=30 step ln_overhead 120 python3 docs/results/2026-11-26b/layernorm_overhead.py
TAILN=16 step decode_tuned 420 python3 benchmarks/attention_vs_torch.py --no-prefill --trials 16 --dtypes bfloat16 \
  --reps 20 --db /tmp/dec.db --out $OUT/decode_tuned.json
echo "done $(( $(date +%s) - T0 )) s"
