#!/usr/bin/env bash
# One H100, on main + the attention backward (i-attbwd) and norm backward (i-normbwd) branches merged (s26-merge):
# the GPU tier (process tests excepted: they passed serially on 4 H200s this session), then the norm backward
# against torch untuned, then the attention backward against every SDPA backend after a short search per case.
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=15 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
nvidia-smi -L
TAILN=8 step tier 300 python3 -m pytest -m gpu -n 12 -q -p no:cacheprovider -rf --tb=line \
  --ignore=tests/test_gpu_reliability.py --ignore=tests/test_multi.py
TAILN=60 step normbwd_untuned 100 python3 benchmarks/library_vs_torch.py --untuned --db /tmp/nb.db \
  --kernels layernorm_backward rmsnorm_backward layernorm_backward_mixed rmsnorm_backward_mixed --dtype float32 bfloat16 float16
TAILN=16 step attbwd 160 python3 benchmarks/attention_vs_torch.py --backward --trials 10 --dtypes bfloat16 \
  --head-dims 128 64 --seqs 1024 4096 --reps 10 --db /tmp/ab.db --out $OUT/attbwd.json
echo "done $(( $(date +%s) - T0 )) s"
