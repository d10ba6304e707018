#!/usr/bin/env bash
# H100, final run C: the GPU tests that failed in run A (after their fixes) and the library tests again after the
# row rule change; then the untuned dispatcher (the new rule) against torch, and Kernel Tuner. Sequential timing.
set -u
export PYTHONUNBUFFERED=1
B=/tmp/c; mkdir -p $B
( timeout 330 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_library.py > $B/t_lib.log 2>&1; echo "lib rc=$? $(tail -n 1 $B/t_lib.log)" ) &
( timeout 330 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_torch_gpu.py tests/test_gpu_dispatch.py tests/test_gpu_search.py > $B/t_torch.log 2>&1; echo "torch rc=$? $(tail -n 1 $B/t_torch.log)" ) &
wait
grep -hE "^(FAILED|ERROR)" $B/t_*.log | head -8
tar czf $OUT/run_c.tgz -C /tmp c
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=10 $limit "$@" > $B/$name.log 2>&1; echo "rc=$?"; grep -v "^autotune:" $B/$name.log | tail -n ${TAILN:-12}; tar czf $OUT/run_c.tgz -C /tmp c; }
TAILN=46 step untuned 150 python3 benchmarks/library_vs_torch.py --untuned --kernels softmax layernorm rmsnorm --dtype float16 bfloat16 float32 --shapes 16384x8192 4096x50257 1024x65536 8192x768 1x12288 --out $B/untuned.json
TAILN=16 step kt 170 python3 benchmarks/vs_kernel_tuner.py --budget 40 --out $B/kt
