#!/usr/bin/env bash
# Call 6 (2026-11-29d): call 4 again on a fresh machine, to see the spread. Issue 22's protocol on the GPT-2 block
# in bf16: record the problems a patched step sends, search them (24 trials each, the figure), then eager against patched in 15 alternating rounds with the
# tuned database.
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
export AUTOTUNE_CACHE_DIR=/tmp/cache AUTOTUNE_DB=/tmp/tuned.db
TAILN=4 step build 150 python3 -c "import autotune.torch as att; from autotune.runtime import torch_native as n; print('native', n.unavailable_reason())"
TAILN=4 step gpt2_record 90 python3 examples/gpt2_block.py --dtype bfloat16 --no-compile --record /tmp/gpt2.json
TAILN=12 step gpt2_search 290 python3 -m autotune search --shapes-from /tmp/gpt2.json --trials 24
TAILN=12 step gpt2_ab 150 python3 docs/results/2026-11-29c/attention_probe.py --models gpt2 --rounds 15
cp /tmp/gpt2.json $OUT/ 2>/dev/null
cd $OUT && tar czf logs.tgz *.log *.json 2>/dev/null; rm -f *.log *.json
echo "done $(( $(date +%s) - T0 )) s"
