#!/usr/bin/env bash
# Call 2 (one GPU): the torch GPU tests (the tier of call 1 stopped inside them), issue 20's decoding suite
# (GQA 32/8, d128, bf16, batch 1/16/64, KV 8K/32K/128K) untuned and tuned against SDPA's backends, and the norm
# backward's FUSE tunable (i-lnfuse) tuned with FUSE=0 vs FUSE=1 at hidden 768/1024.
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "=== $name ($(date +%T))"; timeout --signal=INT --kill-after=15 $limit "$@" > $OUT/$name.log 2>&1; echo "rc=$? at $(( $(date +%s) - T0 )) s"; tail -n ${TAILN:-25} $OUT/$name.log; }
nvidia-smi -L
TAILN=6 step torch_tests 100 python3 -m pytest -m gpu -n 8 -q -p no:cacheprovider -rf --tb=short tests/test_torch_gpu.py
TAILN=16 step decode_untuned 110 python3 benchmarks/attention_vs_torch.py --no-prefill --untuned --dtypes bfloat16 \
  --reps 20 --out $OUT/decode_untuned.json
for fuse in 0 1; do
  TAILN=14 step lnfuse$fuse 90 python3 benchmarks/library_vs_torch.py --db /tmp/lnf$fuse.db --trials 16 \
    --domains "{\"ALGO\": [\"persistent\"], \"FUSE\": [$fuse]}" --kernels layernorm_backward rmsnorm_backward \
    --dtype bfloat16 float32 --shapes 8192x768 8192x1024
done
TAILN=16 step decode_tuned 160 python3 benchmarks/attention_vs_torch.py --no-prefill --trials 16 --dtypes bfloat16 \
  --reps 20 --db /tmp/dec.db --out $OUT/decode_tuned.json
echo "done $(( $(date +%s) - T0 )) s"
