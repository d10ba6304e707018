#!/usr/bin/env bash
# Call 3 (one GPU), branch lab-a: the fa3 backward GPU tests (test mended), the torch GPU tests and the process
# tests; then fa3 against fa2 and cuDNN on the backward suite.
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=15 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
nvidia-smi -L
TAILN=20 step fa3bwd_tests 200 python3 -m pytest -m gpu -n 8 -q -p no:cacheprovider -rf --tb=short tests/test_gpu_attention_backward_fa3.py
TAILN=8 step torch_gpu 200 python3 -m pytest -m gpu -n 8 -q -p no:cacheprovider -rf --tb=line tests/test_torch_gpu.py
TAILN=8 step reliability 150 python3 -m pytest -m gpu -q -p no:cacheprovider -rf --tb=line tests/test_gpu_reliability.py
TAILN=40 step bwd_bench 170 python3 benchmarks/attention_vs_torch.py --backward --no-decode --dtypes bfloat16 --head-dims 128 64 --seqs 4096 --causal 0 1 --trials 12 --db $OUT/bwd.db --out $OUT/bwd.json
cd $OUT && tar czf logs.tgz *.log *.json; rm -f *.log *.db*
echo "done $(( $(date +%s) - T0 )) s"
