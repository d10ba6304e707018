#!/usr/bin/env bash
# Call 3 (2026-11-29e): the Llama example with its static and cat caches, CUDA graphs and torch.compile, in
# alternating rounds (untuned: rule defaults); then issue 22's protocol on the GPT-2 block in bf16 a third time
# (record, search 24 trials per problem, eager against patched in 15 alternating rounds).
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
export AUTOTUNE_CACHE_DIR=/tmp/cache AUTOTUNE_DB=/tmp/none.db
TAILN=4 step build 150 python3 -c "import autotune.torch as att; from autotune.runtime import torch_native as n; print('native', n.unavailable_reason())"
TAILN=12 step llama 220 python3 examples/llama_block.py --graphs
export AUTOTUNE_DB=/tmp/tuned.db
TAILN=4 step gpt2_record 90 python3 examples/gpt2_block.py --dtype bfloat16 --no-compile --record /tmp/gpt2.json
TAILN=8 step gpt2_search 200 python3 -m autotune search --shapes-from /tmp/gpt2.json --trials 24
TAILN=8 step gpt2_ab 120 python3 docs/results/2026-11-29c/attention_probe.py --models gpt2 --rounds 15
cd $OUT && tar czf logs.tgz *.log 2>/dev/null; rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
