#!/usr/bin/env bash
# One H100, s26-merge after the dynamic-shared-memory fix: the GPU tests of both backward families, the TMA
# dispatcher test and the torch layer; then the norm backward tuned (persistent only, 40 trials) at the hidden sizes
# of issue 22, bf16 and fp32, against torch's autograd backward.
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=15 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
TAILN=12 step tests 280 python3 -m pytest -m gpu -n 12 -q -p no:cacheprovider -rf --tb=line \
  tests/test_gpu_layernorm_backward.py tests/test_gpu_attention_backward.py tests/test_torch_gpu.py \
  "tests/test_gpu_gemm.py::test_tma_algorithm_through_the_dispatcher"
TAILN=20 step normbwd_tuned 280 python3 benchmarks/library_vs_torch.py --db /tmp/nbt.db --trials 40 \
  --domains '{"ALGO": ["persistent"]}' --kernels layernorm_backward rmsnorm_backward --dtype bfloat16 float32 \
  --shapes 8192x768 8192x1024 16384x2048 8192x4096 16384x8192
echo "done $(( $(date +%s) - T0 )) s"
