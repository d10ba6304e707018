#!/usr/bin/env bash
# 2026-11-29g: last session's run_next.sh, run as written (its probes live in 2026-11-29f).
#   bash run_next.sh 1   GPU tests of fa3's grouped backward, attention's C++ autograd node, patch(attention=True),
#                        split_kv's cluster combine and the grouped attention files (~450 s)
#   bash run_next.sh 2   gqa_bwd_probe.py: fa3 against fa2 and SDPA's fastest backward on grouped heads; if fa3 wins,
#                        take it in AttentionBackwardSpace.rule_default for grouped heads; combine_probe.py: split_kv's
#                        cluster combine against the combine kernel and cuDNN at batch-1 decoding (~300 s)
#   bash run_next.sh 3   issue 22's GPT-2 bf16 protocol with patch(attention=True): record, search 24 trials, the
#                        alternating rounds of 2026-11-29c/attention_probe.py (its attention now a C++ node), and
#                        examples/gpt2_block.py --attention (~450 s)
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
export AUTOTUNE_CACHE_DIR=/tmp/cache AUTOTUNE_DB=/tmp/none.db
D=docs/results/2026-11-29f
TAILN=4 step build 150 python3 -c "import autotune.torch as att; from autotune.runtime import torch_native as n; print('native', n.unavailable_reason())"
case "${1:-1}" in
1)
  TAILN=10 step tests 420 python3 -m pytest -n 14 -q -p no:cacheprovider -rf --tb=short -m gpu \
    tests/test_gpu_attention_backward_fa3.py tests/test_torch_gpu.py tests/test_torch_attention_gpu.py \
    tests/test_gpu_attention_gqa.py "tests/test_gpu_attention.py::test_split_kv_matches_the_one_pass_kernel"
  ;;
2)
  TAILN=40 step gqa_bwd 200 python3 $D/gqa_bwd_probe.py
  TAILN=40 step combine 120 python3 $D/combine_probe.py
  ;;
3)
  export AUTOTUNE_DB=/tmp/gpt2.db
  TAILN=4 step gpt2_record 90 python3 examples/gpt2_block.py --dtype bfloat16 --no-compile --attention --record /tmp/gpt2.json
  TAILN=8 step gpt2_search 200 python3 -m autotune search --shapes-from /tmp/gpt2.json --trials 24
  TAILN=8 step gpt2_ab 120 python3 docs/results/2026-11-29c/attention_probe.py --models gpt2 --rounds 15
  TAILN=8 step gpt2_attention 60 python3 examples/gpt2_block.py --dtype bfloat16 --no-compile --attention
  ;;
esac
cd $OUT && tar czf logs.tgz *.log 2>/dev/null; rm -f *.log
echo "done $(( $(date +%s) - T0 )) s"
