#!/usr/bin/env bash
# Session 2026-11-25, device call 1: the TMA + warp-specialised persistent wgmma GEMM (issue 19) on the GPU for
# the first time. SASS of three configurations, the space's tests with nvcc and cuobjdump, then hand-picked
# configurations validated and timed by the worker (through the new LaunchPlan) against cuBLAS.
set -u
out=${OUT:-/tmp/out}; mkdir -p "$out"; export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$out/info.log"
cd kernel_templates
for cfg in "-DDTYPE=2" "-DDTYPE=2 -DPINGPONG=1 -DBN=128 -DSTAGES=6" "-DDTYPE=1 -DBM=256 -DBN=128"; do
  nvcc -cubin -gencode=arch=compute_90a,code=sm_90a -O3 $cfg -o /tmp/t.cubin gemm_wgmma_tma.cu &&
  echo "$cfg: $(cuobjdump -sass /tmp/t.cubin | grep -o 'UTMALDG[.A-Z0-9]*\|HGMMA\.[0-9x]*\.F32[.A-Z0-9]*\|SYNCS[.A-Z0-9]*' | sort | uniq -c | tr '\n' ' ')"
done | tee "$out/sass.log"
cuobjdump -sass /tmp/t.cubin > "$out/sass_256x128.txt"
cd ..
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_spaces_gemm_wgmma_tma.py tests/test_launch_plan.py 2>&1 | tail -5 | tee "$out/tests.log"
timeout 300 python3 benchmarks/gemm_configs.py --algo wgmma_tma --dtypes bfloat16 --shapes 4096x4096x4096 8192x8192x8192 --reps 20 2>&1 | grep -v "^{" | tee "$out/configs.log"
timeout 60 python3 benchmarks/gemm_configs.py --algo wgmma --dtypes bfloat16 --shapes 4096x4096x4096 --reps 20 2>&1 | grep -v "^{" | tee -a "$out/configs.log"
