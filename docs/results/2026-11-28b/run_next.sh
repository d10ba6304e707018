#!/usr/bin/env bash
# For the next session's first call (about 8 minutes): what this session changed after its last device time, and
# the GPT-2 step where the host does not count.
#  1. the LONG_K rule's stream-K peer limit (256×256×65536 back to split-K) and every class untuned (issue 19);
#  2. the GPT-2 block with the whole step in a CUDA graph, eager and patched, 8×1024 and 32×1024 tokens (issue 22);
#  3. the Llama-style block after a 16-trial search of its recorded problems (issue 22);
#  4. the README job with compiles in batches (issue 23): --compile-batch 1, 4, 8, each with a cold compile cache.
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export AUTOTUNE_CACHE_DIR=/tmp/cache AUTOTUNE_DB=/tmp/none.db
# The GEMM tier first: wgmma_sm90.cuh's transpose bits and compile units changed after the last GPU run.
TAILN=6 step tier 300 python3 -m pytest -m gpu -n 15 -q -p no:cacheprovider -rf --tb=short tests/test_gpu_gemm.py tests/test_gpu_gemm_layouts.py tests/test_torch_linear_gpu.py
TAILN=32 step untuned 120 python3 benchmarks/gemm_untuned.py --dtypes bfloat16 float16 --reps 10 --out $OUT/untuned.json
TAILN=12 step gpt2_graphs 120 python3 examples/gpt2_block.py --dtype bfloat16 float32 --steps 20 --no-compile --graphs
TAILN=12 step gpt2_graphs_b32 120 python3 examples/gpt2_block.py --batch 32 --dtype bfloat16 --steps 15 --no-compile --graphs
export AUTOTUNE_DB=/tmp/llama.db
TAILN=8 step llama_rec 120 python3 examples/llama_block.py --no-compile --record /tmp/llama.json
TAILN=5 step llama_search 150 python3 -m autotune search --shapes-from /tmp/llama.json --trials 16
TAILN=8 step llama 120 python3 examples/llama_block.py
export AUTOTUNE_DB=/tmp/none.db
for b in 1 4 8; do
  export AUTOTUNE_CACHE_DIR=/tmp/cold$b; TAILN=6 step search_batch$b 90 python3 -m autotune search gemm --trials 200 --seed 7 --db /tmp/s$b.db --profile --compile-batch $b
done
cd $OUT && tar czf logs.tgz *.log *.json && rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
