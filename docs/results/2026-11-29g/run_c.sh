#!/usr/bin/env bash
# 2026-11-29g call 5: the new decoding rule (a block per SM; short KV's splits in a cluster of 8) on torch tensors and
# in issue 20's decoding rows untuned, then the tuned rows call 4 did not reach (batch 64 at 32K, 128K keys).
set -u
export PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
export AUTOTUNE_CACHE_DIR=/tmp/cache AUTOTUNE_DB=/tmp/none.db
TAILN=4 step build 150 python3 -c "import autotune.torch as att; from autotune.runtime import torch_native as n; print('native', n.unavailable_reason())"
TAILN=6 step tests 90 python3 -m pytest -n 8 -q -p no:cacheprovider -rf --tb=short -m gpu \
  "tests/test_gpu_attention_gqa.py::test_rule_defaults_on_torch_tensors" "tests/test_gpu_attention.py::test_dispatch_on_torch_tensors"
B="python3 benchmarks/attention_vs_torch.py --no-prefill --dtypes bfloat16"
TAILN=12 step untuned 110 $B --untuned --db /tmp/untuned.db --out $OUT/untuned.json
TAILN=8 step tuned 230 bash -c "$B --trials 40 --db /tmp/dec.db --decode-batches 64 --decode-kv 32768 --out $OUT/tuned64.json; $B --trials 40 --db /tmp/dec.db --decode-batches 1 16 64 --decode-kv 131072 --out $OUT/tuned128k.json"
cd $OUT && tar czf logs.tgz *.log *.json 2>/dev/null; rm -f *.log *.json
echo "done $(( $(date +%s) - T0 )) s"
