#!/usr/bin/env bash
# Session 2026-11-29h, call 2: the combine kernel unrolled over its splits and the backward rule's key blocks first.
#   untuned: issue 20's decoding rows through the rule default (32K and 128K keys run the combine kernel)
#   readme_cold: issue 23's README job, cold compile cache, with its profile
#   tests: the GQA/decoding GPU tests and the fa3 backward's (both block orders; the rule's order under a mask)
set -u
export PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore
T0=$(date +%s)
TIMEFORMAT="process wall %R s, user %U s, sys %S s"
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; { time timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; } 2>> $OUT/$name.log; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
export AUTOTUNE_CACHE_DIR=/tmp/cache AUTOTUNE_DB=/tmp/none.db
TAILN=4 step build 150 python3 -c "import autotune.torch as att; from autotune.runtime import torch_native as n; print('native', n.unavailable_reason())"
TAILN=14 step untuned 110 python3 benchmarks/attention_vs_torch.py --no-prefill --dtypes bfloat16 --untuned --db /tmp/untuned.db --out $OUT/untuned.json
rm -rf /tmp/cache-readme /tmp/readme.db
TAILN=30 step readme_cold 60 env AUTOTUNE_CACHE_DIR=/tmp/cache-readme AUTOTUNE_DB=/tmp/readme.db python3 -m autotune search gemm --trials 200 --seed 7 --profile
TAILN=12 step tests 320 python3 -m pytest -n 16 -q -p no:cacheprovider -rf --tb=short -m gpu \
    tests/test_gpu_attention_gqa.py tests/test_gpu_attention_backward_fa3.py
cd $OUT && tar czf logs.tgz *.log *.json 2>/dev/null; rm -f *.log *.json
echo "done $(( $(date +%s) - T0 )) s"
