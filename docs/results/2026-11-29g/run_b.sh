#!/usr/bin/env bash
# 2026-11-29g call 4: split_kv's cluster combine at 16 splits (the non-portable cluster) — its GPU tests, then
# decode_probe.py (cluster 2-16 splits, ring depths, warps, against the combine kernel and cuDNN), then issue 20's
# decoding rows tuned (40 trials; the space now holds COMBINE=1 up to 16 splits).
set -u
export PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
export AUTOTUNE_CACHE_DIR=/tmp/cache AUTOTUNE_DB=/tmp/none.db
D=docs/results/2026-11-29g
TAILN=4 step build 150 python3 -c "import autotune.torch as att; from autotune.runtime import torch_native as n; print('native', n.unavailable_reason())"
TAILN=6 step tests 140 python3 -m pytest -n 14 -q -p no:cacheprovider -rf --tb=short -m gpu \
  "tests/test_gpu_attention.py::test_split_kv_matches_the_one_pass_kernel" tests/test_gpu_attention_gqa.py \
  -k "split_kv_matches or equals_multi_head or rule_defaults or gradients_against or backward_of_the_gpu"
TAILN=200 step probe 200 python3 $D/decode_probe.py --reps 30
TAILN=30 step decode 220 python3 benchmarks/attention_vs_torch.py --no-prefill --dtypes bfloat16 --trials 40 --db /tmp/dec.db --out $OUT/decode.json
cd $OUT && tar czf logs.tgz *.log *.json 2>/dev/null; rm -f *.log *.json
echo "done $(( $(date +%s) - T0 )) s"
