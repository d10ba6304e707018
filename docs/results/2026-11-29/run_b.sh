#!/usr/bin/env bash
# Call 2 (2026-11-29): issue 22's protocol, record → search --shapes-from (16 trials) → patched step, on the GPT-2
# block (bf16, fp32) and the Llama-style block, with the C++ nodes' cached operator handles.
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
export AUTOTUNE_CACHE_DIR=/tmp/cache AUTOTUNE_DB=/tmp/tuned.db
TAILN=3 step gpt2_record 60 python3 examples/gpt2_block.py --dtype bfloat16 float32 --steps 5 --no-compile --record /tmp/gpt2.json
TAILN=4 step gpt2_search 170 python3 -m autotune search --shapes-from /tmp/gpt2.json --trials 16
TAILN=40 step gpt2_tuned 100 python3 examples/gpt2_block.py --dtype bfloat16 float32 --steps 50 --no-compile --graphs
TAILN=3 step llama_record 50 python3 examples/llama_block.py --record /tmp/llama.json
TAILN=4 step llama_search 120 python3 -m autotune search --shapes-from /tmp/llama.json --trials 16
TAILN=8 step llama_tuned 60 python3 examples/llama_block.py
cp /tmp/gpt2.json /tmp/llama.json $OUT/ 2>/dev/null
cd $OUT && tar czf logs.tgz *.log *.json 2>/dev/null; rm -f *.log *.json
echo "done $(( $(date +%s) - T0 )) s"
