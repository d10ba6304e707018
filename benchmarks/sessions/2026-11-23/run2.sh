#!/usr/bin/env bash
# GPU run 2: every GPU test group in parallel (correctness only: no timing here), then SASS of defaults, then gemm 4096^3.
set -u
export PYTHONUNBUFFERED=1
P="python3 -m pytest -q -p no:cacheprovider -rfE --tb=short -m gpu"
(timeout 380 $P tests/test_gpu_gemm.py tests/test_gpu_gemm_tf32.py tests/test_spaces_gemm_mma.py > $OUT/t_gemm.log 2>&1; echo "rc=$?" >> $OUT/t_gemm.log) &
(timeout 380 $P tests/test_gpu_attention.py tests/test_gpu_gemm_fallback.py > $OUT/t_attn.log 2>&1; echo "rc=$?" >> $OUT/t_attn.log) &
(timeout 380 $P tests/test_gpu_library.py tests/test_gpu_dispatch.py > $OUT/t_lib.log 2>&1; echo "rc=$?" >> $OUT/t_lib.log) &
(AUTOTUNE_CACHE_DIR=/tmp/c4 timeout 380 $P tests/test_torch_gpu.py tests/test_binaries.py examples/vector_add tests/test_gpu_search.py tests/test_gpu_reliability.py tests/test_multi.py > $OUT/t_rest.log 2>&1; echo "rc=$?" >> $OUT/t_rest.log) &
wait
for f in $OUT/t_*.log; do echo "=== $f"; grep -E "^(FAILED|ERROR)|passed|failed|rc=" $f | head -30; done
echo "=== gemm 4096^3 ($(date +%T))"
timeout 200 python3 benchmarks/gemm_vs_cublas.py --db /tmp/g.db --dtypes float16 bfloat16 float32 --shapes 4096x4096x4096 --trials 30 --out $OUT/gemm4096.json > $OUT/gemm4096.log 2>&1; echo "rc=$?"
tail -30 $OUT/gemm4096.log
