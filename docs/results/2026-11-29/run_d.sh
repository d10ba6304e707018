#!/usr/bin/env bash
# Call 4 (2026-11-29): the GELU epilogue's read-back batched; the GPT-2 step in alternating rounds with the host
# profile; issue 22's protocol (record → search 16 trials → patched step).
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
export AUTOTUNE_CACHE_DIR=/tmp/cache AUTOTUNE_DB=/tmp/none.db
TAILN=4 step tests 100 python3 -m pytest -m gpu -n 8 -q -p no:cacheprovider -rf --tb=short tests/test_gpu_linear_gelu.py -k "schedule or rule"
TAILN=3 step probe 60 python3 docs/results/2026-11-29/fusion_probe.py
TAILN=60 step ab_untuned 90 python3 docs/results/2026-11-29/gpt2_ab.py
export AUTOTUNE_DB=/tmp/tuned.db
TAILN=3 step gpt2_record 150 python3 examples/gpt2_block.py --dtype bfloat16 float32 --steps 3 --no-compile --record /tmp/gpt2.json
TAILN=4 step gpt2_search 200 python3 -m autotune search --shapes-from /tmp/gpt2.json --trials 16
TAILN=12 step ab_tuned 80 python3 docs/results/2026-11-29/gpt2_ab.py
TAILN=30 step gpt2_tuned 100 python3 examples/gpt2_block.py --dtype bfloat16 float32 --steps 50 --no-compile --graphs
cp /tmp/gpt2.json $OUT/ 2>/dev/null
cd $OUT && tar czf logs.tgz *.log *.json 2>/dev/null; rm -f *.log *.json
echo "done $(( $(date +%s) - T0 )) s"
