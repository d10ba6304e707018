#!/usr/bin/env bash
# Call 6 (one GPU): SPLIT_REDUCE after its loads were batched: the bit-identity GPU test, then split-K with a reduce
# launch vs summed in the kernel against cuBLAS.
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=15 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
TAILN=3 step split_tests 150 python3 -m pytest -m gpu -n 6 -q -p no:cacheprovider -rf --tb=short \
  "tests/test_gpu_gemm.py::test_split_reduce_in_the_kernel_gives_the_bits_of_the_reduce_launch"
TAILN=100 step split_configs 200 python3 benchmarks/gemm_configs.py --algo wgmma_tma_split --dtypes bfloat16 \
  --shapes 127x4096x4096 1000x1000x1000
echo "done $(( $(date +%s) - T0 )) s"
