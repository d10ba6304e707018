#!/usr/bin/env bash
# H100, final run D: fp16 and bf16 rows tuned (16-trial searches, seeded with the rule default) after the
# shared-memory cache and the rule change; JSON written after every row, tarred at the end of each dtype.
set -u
export PYTHONUNBUFFERED=1
B=/tmp/d; mkdir -p $B
for dt in float16 bfloat16; do
  echo "=== $dt ($(date +%T))"
  timeout --signal=INT --kill-after=10 ${T:-250} python3 benchmarks/library_vs_torch.py --kernels softmax layernorm rmsnorm --dtype $dt --shapes 16384x8192 4096x50257 1024x65536 8192x768 --trials 16 --reps 20 --db $B/$dt.db --out $B/tuned_$dt.json > $B/tuned_$dt.log 2>&1
  echo "rc=$?"; grep -v "^autotune:" $B/tuned_$dt.log | tail -n 13
  tar czf $OUT/run_d.tgz --exclude='*.db*' -C /tmp d
done
