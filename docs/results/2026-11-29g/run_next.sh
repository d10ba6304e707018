#!/usr/bin/env bash
# For the next session's first calls (written 2026-11-29g, not yet run): what landed after this session's device time.
#   bash run_next.sh 1   the decoding rule with XOR-swizzled tiles on torch tensors and in issue 20's decoding rows
#                        untuned (~150 s); issue 23's README job cold, then warm (~70 s); the tuned decoding rows that
#                        call 5 did not reach, 16 and 64 x 128K keys (~200 s)
#   bash run_next.sh 4   the fa3 backward's BLOCK_ORDER: its GPU tests (both orders; ~300 s), then order_probe.py (head by
#                        head against key block by key block, causal, grouped and multi-head; ~120 s). If
#                        keys first wins on causal shapes, take it in AttentionBackwardSpace.rule_default for causal
#   bash run_next.sh 3   diagnosis: Nsight Compute on batch-1 decoding at 32K and 128K keys (split_kv's rule default
#                        against cuDNN's kernel: ncu_decode.py), and where a bf16 GPT-2 step's host time goes
#                        (2026-11-28c/host_profile.py) (~200 s)
#   bash run_next.sh 2   issue 23's range row: benchmarks/range_search.py, fp32 1-8192x4096x4096, 600 trials over the
#                        14 buckets against each bucket's own cold 200-trial search (~450 s; run again to go on)
set -u
export PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore
T0=$(date +%s)
TIMEFORMAT="process wall %R s, user %U s, sys %S s"
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; { time timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; } 2>> $OUT/$name.log; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
export AUTOTUNE_CACHE_DIR=/tmp/cache AUTOTUNE_DB=/tmp/none.db
TAILN=4 step build 150 python3 -c "import autotune.torch as att; from autotune.runtime import torch_native as n; print('native', n.unavailable_reason())"
B="python3 benchmarks/attention_vs_torch.py --no-prefill --dtypes bfloat16"
case "${1:-1}" in
1)
  TAILN=6 step tests 90 python3 -m pytest -n 8 -q -p no:cacheprovider -rf --tb=short -m gpu \
    "tests/test_gpu_attention_gqa.py::test_rule_defaults_on_torch_tensors" "tests/test_gpu_attention.py::test_dispatch_on_torch_tensors"
  TAILN=12 step untuned 110 $B --untuned --db /tmp/untuned.db --out $OUT/untuned.json
  rm -rf /tmp/cache-readme /tmp/readme.db
  TAILN=30 step readme_cold 70 env AUTOTUNE_CACHE_DIR=/tmp/cache-readme AUTOTUNE_DB=/tmp/readme.db python3 -m autotune search gemm --trials 200 --seed 7 --profile
  rm -f /tmp/readme.db
  TAILN=12 step readme_warm 50 env AUTOTUNE_CACHE_DIR=/tmp/cache-readme AUTOTUNE_DB=/tmp/readme.db python3 -m autotune search gemm --trials 200 --seed 7 --profile
  TAILN=8 step tuned 200 $B --trials 40 --db /tmp/dec.db --decode-batches 16 64 --decode-kv 131072 --out $OUT/tuned128k.json
  ;;
2)
  cd benchmarks && TAILN=20 step range 560 python3 range_search.py --work /tmp/range-bench --out $OUT/range.json; cd ..
  ;;
4)
  TAILN=10 step tests 320 python3 -m pytest -n 14 -q -p no:cacheprovider -rf --tb=short -m gpu \
    tests/test_gpu_attention_backward_fa3.py
  TAILN=80 step order 230 python3 docs/results/2026-11-29g/order_probe.py
  ;;
3)
  TAILN=80 step ncu 150 ncu --clock-control none --target-processes all -k "regex:attention_split_kv|cudnn|fmha|sm90" -c 6 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy \
    --section LaunchStats python3 docs/results/2026-11-29g/ncu_decode.py
  TAILN=60 step host_profile 120 python3 docs/results/2026-11-28c/host_profile.py
  ;;
esac
cd $OUT && tar czf logs.tgz *.log *.json 2>/dev/null; rm -f *.log *.json
echo "done $(( $(date +%s) - T0 )) s"
