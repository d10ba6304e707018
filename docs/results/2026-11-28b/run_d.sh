#!/usr/bin/env bash
# Call 4: issue 22's protocol with this session's rules (short-K ping-pong, stream-K for long K): the GPT-2
# layer's GEMMs untuned against cuBLAS; the GPT-2 block untuned (recording its problems), then after a 16-trial
# search of them; the Llama-style block untuned.
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export AUTOTUNE_CACHE_DIR=/tmp/cache
TAILN=14 step untuned 50 python3 benchmarks/linear_vs_torch.py --model gpt2 --dtypes bfloat16 --reps 15 --db /tmp/none.db --out $OUT/untuned.json
export AUTOTUNE_DB=/tmp/gpt2.db
TAILN=40 step gpt2_untuned 100 python3 examples/gpt2_block.py --dtype bfloat16 float32 --steps 10 --no-compile --record /tmp/gpt2.json
TAILN=6 step search 200 python3 -m autotune search --shapes-from /tmp/gpt2.json --trials 16
TAILN=40 step gpt2_tuned 100 python3 examples/gpt2_block.py --dtype bfloat16 float32 --steps 20
export AUTOTUNE_DB=/tmp/none.db  # untuned: nothing stored
TAILN=30 step llama_untuned 130 python3 examples/llama_block.py
cd $OUT && tar czf logs.tgz *.log *.json && rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
