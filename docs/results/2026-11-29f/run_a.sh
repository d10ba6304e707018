#!/usr/bin/env bash
# Session 2026-11-29f: last session's run_next.sh, run as is (its probes stay in 2026-11-29e).
#   bash run_next.sh 1   their GPU tests, then one row and 64-256 rows against cuBLAS (rows_probe.py) (~450 s)
#   bash run_next.sh 2   the backward's dQ modes against SDPA's fastest backward (bwd_probe.py) (~250 s)
#   bash run_next.sh 3   issue 22's protocol on the Llama block: record, search 24 trials per problem, the example on
#                        the tuned database (static and cat caches, CUDA graphs, torch.compile of both) (~450 s)
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
export AUTOTUNE_CACHE_DIR=/tmp/cache AUTOTUNE_DB=/tmp/none.db
D=docs/results/2026-11-29e
TAILN=4 step build 150 python3 -c "import autotune.torch as att; from autotune.runtime import torch_native as n; print('native', n.unavailable_reason())"
case "${1:-1}" in
1)
  TAILN=8 step tests 300 python3 -m pytest -n 14 -q -p no:cacheprovider -rf --tb=short tests/test_gpu_gemm_skinny.py tests/test_gpu_linear_swiglu.py tests/test_gpu_gemm_layouts.py tests/test_gpu_attention_backward_fa3.py
  TAILN=90 step rows 150 python3 $D/rows_probe.py
  ;;
2)
  TAILN=40 step bwd 400 python3 $D/bwd_probe.py
  ;;
3)
  export AUTOTUNE_DB=/tmp/tuned.db
  TAILN=4 step llama_record 60 python3 examples/llama_block.py --no-compile --rounds 1 --record /tmp/llama.json
  TAILN=8 step llama_search 250 python3 -m autotune search --shapes-from /tmp/llama.json --trials 24
  TAILN=14 step llama 230 python3 examples/llama_block.py --graphs
  ;;
esac
cd $OUT && tar czf logs.tgz *.log 2>/dev/null; rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
