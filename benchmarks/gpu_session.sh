#!/usr/bin/env bash
# The GPU-machine session that produces the numbers quoted in issues. On the GPU machine:
#   source .whl/setup.sh && bash benchmarks/gpu_session.sh info tests search bench overhead replay
# Each step writes its log under $OUT; a failing step does not stop the next.
set -u
out=${OUT:-/tmp/autotune-out}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
db=/tmp/autotune-session.db

run_step() {  # name, time limit (s), command...
  local name=$1 limit=$2
  shift 2
  echo "=== $name ($(date +%T))"
  timeout --signal=INT --kill-after=20 "$limit" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  tail -n 25 "$out/$name.log"
  echo "=== $name exit $rc"
}

for step in "$@"; do
  case $step in
    info)
      nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,utilization.gpu \
        --format=csv | tee "$out/info.log"
      nvcc --version | tail -2 | tee -a "$out/info.log"
      python3 -c "import optuna, sqlalchemy, numpy, torch; print('optuna', optuna.__version__, 'sqlalchemy',
        sqlalchemy.__version__, 'numpy', numpy.__version__, 'torch', torch.__version__)" | tee -a "$out/info.log" ;;
    search)  # the main job, cold compile cache, wall time from process start to the final table
      rm -f "$db"
      run_step search 300 env AUTOTUNE_CACHE_DIR=/tmp/cold-cache bash -c \
        "time autotune search gemm --trials 200 --db $db --seed 1" ;;
    replay)
      run_step replay 240 python3 benchmarks/record_replay.py --out "$out/replay_gemm.json" ;;
    tests)
      run_step tests 420 python3 -m pytest -m gpu -q -p no:cacheprovider ;;
    bench)
      run_step bench 540 python3 benchmarks/gemm_vs_cublas.py --db "$db" --out "$out/gemm_vs_cublas.json" ;;
    torch)  # autotune.torch, the user-kernel example, deployment without nvcc (issue 13)
      run_step torchtests 420 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_torch_gpu.py \
        examples/vector_add tests/test_binaries.py
      run_step torch_overhead 240 python3 benchmarks/torch_overhead.py --out "$out/torch_overhead.json"
      run_step first_call 300 python3 benchmarks/first_call.py --out "$out/first_call.json"
      run_step gpt2_block 300 python3 examples/gpt2_block.py --record "$out/gpt2_shapes.json" ;;
    libtests)
      run_step libtests 420 python3 -m pytest -q -p no:cacheprovider tests/test_gpu_dispatch.py tests/test_gpu_library.py ;;
    libbench)
      run_step libbench "${LIBBENCH_LIMIT:-480}" python3 benchmarks/library_vs_torch.py --out "$out/library_vs_torch.json" \
        ${LIBBENCH_KERNELS:+--kernels $LIBBENCH_KERNELS} --trials "${LIBBENCH_TRIALS:-30}" ;;
    overhead)
      run_step overhead 120 python3 benchmarks/dispatch_overhead.py --out "$out/dispatch_overhead.json" ;;
    *) echo "unknown step $step" ;;
  esac
done
