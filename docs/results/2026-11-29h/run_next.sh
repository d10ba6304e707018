#!/usr/bin/env bash
# For the next session's first calls (written 2026-11-29h, not yet run): what landed after this session's device time.
#   bash run_next.sh 1   the GPU tests of the late changes (~300 s): one split writing O itself (split_kv SPLITS=1,
#                        the batch 16-64 decoding rule); the combine kernel as a programmatic dependent launch
#                        (cuLaunchKernelEx, in the ctypes path and the rebuilt C++ launcher); the search's worker
#                        coming up beside the first compiles and handed from shape to shape (test_gpu_search.py);
#                        then issue 20's decoding rows untuned (~25 s: batch 1 with the dependent combine) and issue
#                        23's README job cold (~25 s: the start-up now beside the compiles; was 22.3 s)
#   bash run_next.sh 2   issue 23's range row again (benchmarks/range_search.py, ~420 s): buckets in bisection order,
#                        one GPU worker for the whole range, set up beside each bucket's first compiles, compiles
#                        asked ahead stopped at each bucket's end; against this session's call 4 (worst bucket
#                        0.825x, range wall 5.92x a bucket's own search)
#   bash run_next.sh 3   issue 19's bf16 nine shapes, 100 trials for 4096^3 and 60 for the others (~400 s), against
#                        cuBLAS in the same process: not re-measured since the skinny and one-wave rules changed
source "$(dirname "$0")/../steps.sh"
export AUTOTUNE_CACHE_DIR=/tmp/cache AUTOTUNE_DB=/tmp/none.db
TAILN=4 step build 150 python3 -c "import autotune.torch as att; from autotune.runtime import torch_native as n; print('native', n.unavailable_reason())"
case "${1:-1}" in
1)
  TAILN=12 step tests 330 python3 -m pytest -n 16 -q -p no:cacheprovider -rf --tb=short -m gpu \
    tests/test_gpu_search.py tests/test_gpu_attention_gqa.py tests/test_torch_gpu.py tests/test_gpu_dispatch.py \
    tests/test_gpu_reliability.py "tests/test_gpu_attention.py::test_dispatch_on_torch_tensors"
  TAILN=14 step untuned 110 python3 benchmarks/attention_vs_torch.py --no-prefill --dtypes bfloat16 --untuned --db /tmp/untuned.db --out $OUT/untuned.json
  rm -rf /tmp/cache-readme /tmp/readme.db
  TAILN=30 step readme_cold 60 env AUTOTUNE_CACHE_DIR=/tmp/cache-readme AUTOTUNE_DB=/tmp/readme.db python3 -m autotune search gemm --trials 200 --seed 7 --profile
  ;;
2)
  TAILN=40 step range 540 python3 benchmarks/range_search.py --work /tmp/range-bench --out $OUT/range.json
  for f in /tmp/range-bench/*/search.log; do b=$(basename $(dirname $f)); cp $f $OUT/search_$b.log; done 2>/dev/null
  ;;
3)
  TAILN=30 step nine 540 python3 benchmarks/gemm_vs_cublas.py --dtypes bfloat16 --trials 100 --trials-more 60 --db /tmp/nine.db --out $OUT/nine.json
  ;;
esac
cd $OUT && tar czf logs.tgz *.log *.json 2>/dev/null; rm -f *.log *.json
echo "done $(( $(date +%s) - T0 )) s"
