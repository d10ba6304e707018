#!/usr/bin/env bash
# For the next session's first two calls (fresh device time): what this session could not measure.
#   bash run_next.sh 1    GPT-2 (about 9 minutes)        bash run_next.sh 2    Llama and 2026-11-26c (about 9)
#  1. the LONG_K rule default (untuned) on the GPT-2 weight gradients, against cuBLAS;
#  2. issue 22's protocol on the GPT-2 block: record → search --shapes-from (24 trials) → patched step, bf16 and
#     fp32 (fp32 at FP32 accuracy);
#  3. the Llama-style block untuned, then after a 16-trial search of its recorded problems;
#  4. the 2026-11-26c work that never met a GPU (code identity, shape ranges, --profile's start-up phases).
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export AUTOTUNE_CACHE_DIR=/tmp/cache
if [ "${1:-1}" = 1 ]; then
TAILN=16 step untuned 60 python3 benchmarks/linear_vs_torch.py --model gpt2 --dtypes bfloat16 --reps 15 --db /tmp/none.db
# Which schedule the K = 768 shapes want (the tuned 16 trials kept 128x256 coop: 0.74-0.98x cuBLAS there).
TAILN=40 step configs 90 python3 benchmarks/gemm_configs.py --algo wgmma_tma --dtypes bfloat16 --shapes 8192x3072x768 8192x768x3072 8192x2304x768
export AUTOTUNE_DB=/tmp/gpt2.db
TAILN=4 step rec 60 python3 examples/gpt2_block.py --dtype bfloat16 float32 --steps 3 --no-compile --record /tmp/gpt2.json
TAILN=5 step search 240 python3 -m autotune search --shapes-from /tmp/gpt2.json --trials 24
TAILN=30 step gpt2 90 python3 examples/gpt2_block.py --dtype bfloat16 float32 --steps 20
TAILN=30 step tuned 90 python3 benchmarks/linear_vs_torch.py --model gpt2 --dtypes bfloat16 float32 --reps 20 --out $OUT/linear_vs_torch.json
else
export AUTOTUNE_DB=/tmp/llama.db
TAILN=8 step llama_untuned 120 python3 examples/llama_block.py --record /tmp/llama.json
TAILN=5 step llama_search 150 python3 -m autotune search --shapes-from /tmp/llama.json --trials 16
TAILN=8 step llama 120 python3 examples/llama_block.py
unset AUTOTUNE_DB
TAILN=8 step code_check 120 python3 -m pytest -m gpu -q -p no:cacheprovider -rf --tb=short tests/test_code_check.py
TAILN=30 step range 120 python3 -m autotune search gemm --shape 1-8192x4096x4096 --dtype bfloat16 --trials 60 --seed 3 --db /tmp/r.db --profile
fi
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
