#!/usr/bin/env bash
# Call 5 (one GPU): wgmma_tma's SPLIT_REDUCE (GPU tests, then split-K with a reduce launch vs summed in the kernel
# at the shapes with fewer tiles than SMs, against cuBLAS), the norm backward beside a copy of its own bytes, and
# issue 21's host-time benchmarks.
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=15 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
nvidia-smi -L
TAILN=8 step split_tests 200 python3 -m pytest -m gpu -n 8 -q -p no:cacheprovider -rf --tb=short \
  "tests/test_gpu_gemm.py::test_split_reduce_in_the_kernel_gives_the_bits_of_the_reduce_launch" \
  tests/test_spaces_gemm_wgmma_tma.py "tests/test_gpu_gemm.py::test_random_valid_configs_are_correct"
TAILN=40 step split_configs 200 python3 benchmarks/gemm_configs.py --algo wgmma_tma_split --dtypes bfloat16 \
  --shapes 127x4096x4096 1000x1000x1000 1024x1024x1024 256x256x65536
TAILN=12 step normbwd_copy 60 python3 benchmarks/library_vs_torch.py --untuned \
  --kernels layernorm_backward rmsnorm_backward --dtype bfloat16 float32 --shapes 8192x768 8192x1024 16384x2048 8192x4096
TAILN=20 step torch_overhead 60 python3 benchmarks/torch_overhead.py --out $OUT/torch_overhead.json
TAILN=20 step dispatch_overhead 60 python3 benchmarks/dispatch_overhead.py
echo "done $(( $(date +%s) - T0 )) s"
