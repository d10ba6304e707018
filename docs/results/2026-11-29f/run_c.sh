#!/usr/bin/env bash
# Session 2026-11-29f, call 6: the gemm fallback GPU tests after their update to the new rule, then issue 22's
# GPT-2 bf16 protocol with fa3's bulk-block backward as the attention backward's rule default (record, search 24
# trials per problem, patched against eager in alternating rounds).
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
export AUTOTUNE_CACHE_DIR=/tmp/cache AUTOTUNE_DB=/tmp/none.db
TAILN=4 step build 150 python3 -c "import autotune.torch as att; from autotune.runtime import torch_native as n; print('native', n.unavailable_reason())"
TAILN=6 step fallback 110 python3 -m pytest -n 14 -q -p no:cacheprovider -rf --tb=short -m gpu tests/test_gpu_gemm_fallback.py
export AUTOTUNE_DB=/tmp/gpt2.db
TAILN=4 step gpt2_record 80 python3 examples/gpt2_block.py --dtype bfloat16 --no-compile --record /tmp/gpt2.json
TAILN=8 step gpt2_search 200 python3 -m autotune search --shapes-from /tmp/gpt2.json --trials 24
TAILN=10 step gpt2_ab 120 python3 docs/results/2026-11-29c/attention_probe.py --models gpt2 --rounds 15
cd $OUT && tar czf logs.tgz *.log 2>/dev/null; rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
