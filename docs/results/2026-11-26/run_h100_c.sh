#!/usr/bin/env bash
# One H100, main after the s26 merge and the C++ launcher's TMA alignment fix: the TMA dispatcher test (it
# segfaulted in run B), then issue 20's prefill suite untuned (the rule default: fa3 on Hopper) forward and
# backward against every SDPA backend.
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=15 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
TAILN=4 step tma_test 120 python3 -m pytest -m gpu -q -p no:cacheprovider -rf --tb=short \
  "tests/test_gpu_gemm.py::test_tma_algorithm_through_the_dispatcher" tests/test_torch_gpu.py
TAILN=32 step attention_fwd_untuned 300 python3 benchmarks/attention_vs_torch.py --untuned --no-decode --reps 10 \
  --out $OUT/attention_fwd_untuned.json
TAILN=12 step attention_bwd_untuned 150 python3 benchmarks/attention_vs_torch.py --untuned --backward --reps 10 \
  --seqs 1024 4096 --out $OUT/attention_bwd_untuned.json
echo "done $(( $(date +%s) - T0 )) s"
